package bench

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// sseScenario: POST /voices/{id}/stream, events per docs/api.md#sse-events.
type sseScenario struct{ t *target }

func (sc *sseScenario) open(context.Context, int) error { return nil }
func (sc *sseScenario) close()                          {}

// sseData is the union of the JSON payloads of SSE events.
type sseData struct {
	Type        string  `json:"type"`
	SampleRate  int     `json:"sample_rate"`
	AudioFormat string  `json:"audio_format"`
	Index       int     `json:"index"`
	AudioB64    string  `json:"audio_b64"`
	Duration    float64 `json:"audio_duration_s"`
	Code        string  `json:"code"`
}

func (sc *sseScenario) do(ctx context.Context, _ int) sample {
	t := sc.t
	req, err := t.postJSON(ctx, "/voices/"+t.voiceID+"/stream", map[string]any{
		"text": t.text, "output_format": t.format, "sample_rate": t.sampleRate,
	}, false)
	if err != nil {
		return sample{start: time.Now(), err: "client:request"}
	}
	req.Header.Set("Accept", "text/event-stream")
	s := sample{start: time.Now()}
	resp, err := t.client.Do(req)
	if err != nil {
		s.total = time.Since(s.start)
		s.err = netError(err)
		return s
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		failStatus(&s, resp)
		s.total = time.Since(s.start)
		return s
	}
	st := sseStream{bps: bytesPerSample(t.format), rate: t.sampleRate}
	s.err = st.consume(newSSEReader(resp.Body), s.start)
	s.total = time.Since(s.start)
	s.ttfb, s.gaps, s.audio = st.ttfb, st.gaps, st.audioSeconds()
	// Read what is left so the connection goes back to the pool.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return s
}

// sseStream folds SSE events into timings; separated from HTTP so that it can
// be tested on crafted streams.
type sseStream struct {
	bps, rate int
	ttfb      time.Duration
	gaps      []float64
	last      time.Time
	chunks    int
	bytes     int64
	duration  float64 // from done; preferred over counted bytes
	done      bool
}

// consume reads events until done, error or the end of the stream and returns
// the error key ("" on success).
func (st *sseStream) consume(rd *sseReader, start time.Time) string {
	for {
		ok := false
		ev, err := rd.Next()
		now := time.Now()
		if err == io.EOF {
			return "sse:incomplete"
		}
		if err != nil {
			return netError(err)
		}
		var d sseData
		typ := ev.Event
		if typ == "chunk" {
			d.Index, d.AudioB64, ok = fastChunk(ev.Data)
		}
		if !ok || typ != "chunk" {
			if json.Unmarshal([]byte(ev.Data), &d) != nil {
				return "sse:bad_event"
			}
		}
		if typ == "" {
			typ = d.Type
		}
		switch typ {
		case "start":
			if b := bytesPerSample(d.AudioFormat); b > 0 {
				st.bps = b
			}
			if d.SampleRate > 0 {
				st.rate = d.SampleRate
			}
		case "chunk":
			if st.done {
				return "sse:chunk_after_done"
			}
			if d.Index != st.chunks {
				return "sse:chunk_order"
			}
			if st.chunks == 0 {
				st.ttfb = now.Sub(start)
			} else {
				st.gaps = append(st.gaps, Ms(now.Sub(st.last)))
			}
			st.last = now
			st.chunks++
			st.bytes += b64Len(d.AudioB64)
		case "done":
			st.done = true
			st.duration = d.Duration
			if st.chunks == 0 {
				return "sse:no_audio"
			}
			return ""
		case "error":
			if d.Code == "" {
				d.Code = "unknown"
			}
			return "sse:" + d.Code
		}
		// Unknown event types are ignored, as clients must.
	}
}

func (st *sseStream) audioSeconds() float64 {
	if st.duration > 0 {
		return st.duration
	}
	return pcmSeconds(st.bytes, st.bps, st.rate)
}

// b64Len is the decoded length of standard padded base64 without decoding:
// the bench needs the audio length, not the audio.
func b64Len(s string) int64 {
	n := len(s)
	if n == 0 {
		return 0
	}
	pad := 0
	for i := n - 1; i >= 0 && s[i] == '=' && pad < 2; i-- {
		pad++
	}
	return int64(n/4*3 - pad + (n%4)*3/4)
}

// fastChunk reads index and audio_b64 of a chunk event without a JSON decode:
// the base64 payload is most of the event and encoding/json would scan and
// copy it for every chunk of every stream, on the cores the server shares.
// Base64 has no quotes or escapes, so the payload ends at the next quote.
// ok=false (anything unexpected) falls back to encoding/json.
func fastChunk(data string) (index int, b64 string, ok bool) {
	const key = `"audio_b64":"`
	i := strings.Index(data, key)
	if i < 0 {
		return 0, "", false
	}
	rest := data[i+len(key):]
	j := strings.IndexByte(rest, '"')
	if j < 0 || strings.IndexByte(rest[:j], '\\') >= 0 {
		return 0, "", false
	}
	b64 = rest[:j]
	const ikey = `"index":`
	k := strings.Index(data, ikey)
	if k < 0 {
		return 0, "", false
	}
	num := strings.TrimLeft(data[k+len(ikey):], " ")
	end := strings.IndexAny(num, ",} ")
	if end <= 0 {
		return 0, "", false
	}
	index, err := strconv.Atoi(num[:end])
	if err != nil {
		return 0, "", false
	}
	return index, b64, true
}
