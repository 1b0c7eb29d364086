package e2e

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"voicesvc/codec"
	"voicesvc/e2e/harness"
)

// synReply is one answer of the synthesis routes.
type synReply struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

// synPost sends a JSON body (a string is sent as is) with the key.
func synPost(t testing.TB, url, key string, body any) *synReply {
	t.Helper()
	resp := synOpen(t, url, key, body)
	defer resp.Body.Close()
	r := &synReply{status: resp.StatusCode, header: resp.Header}
	var err error
	if r.body, err = io.ReadAll(resp.Body); err != nil {
		t.Fatalf("POST %s: reading the body: %v", url, err)
	}
	if len(r.body) > 0 && r.body[0] == '{' {
		json.Unmarshal(r.body, &r.json)
	}
	return r
}

// synOpen sends the request and returns the response unread.
func synOpen(t testing.TB, url, key string, body any) *http.Response {
	t.Helper()
	b, ok := body.(string)
	if !ok {
		j, _ := json.Marshal(body)
		b = string(j)
	}
	req, _ := http.NewRequest("POST", url, strings.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp
}

// fail checks an error envelope with code.
func (r *synReply) fail(t testing.TB, status int, code string) {
	t.Helper()
	if r.status != status || r.json == nil || r.json["error"] != true || r.json["code"] != code ||
		r.json["request_id"] != r.header.Get("X-Request-Id") {
		t.Fatalf("want %d %s, got %d %s", status, code, r.status, r.body)
	}
}

// synVoices returns the id of the first public catalog voice per language.
func synVoices(t testing.TB, srv *harness.Server, key string) map[string]string {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.API+"/voices?visibility=public&page_size=100", nil)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Data struct {
			Voices []struct {
				ID       string `json:"id"`
				Language string `json:"primary_language"`
			} `json:"voices"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, v := range m.Data.Voices {
		lang, _, _ := strings.Cut(v.Language, "-")
		if out[lang] == "" {
			out[lang] = v.ID
		}
	}
	return out
}

// synWAV checks a canonical 16-bit mono WAV with true sizes and returns
// its rate and samples.
func synWAV(t testing.TB, b []byte) (int, []float32) {
	t.Helper()
	le := binary.LittleEndian
	if len(b) < 44 || string(b[:4]) != "RIFF" || string(b[8:16]) != "WAVEfmt " || string(b[36:40]) != "data" {
		t.Fatalf("not a canonical WAV: % x", b[:min(len(b), 44)])
	}
	rate := int(le.Uint32(b[24:]))
	if int(le.Uint32(b[4:])) != len(b)-8 || int(le.Uint32(b[40:])) != len(b)-44 || le.Uint16(b[20:]) != 1 ||
		le.Uint16(b[22:]) != 1 || le.Uint16(b[34:]) != 16 || int(le.Uint32(b[28:])) != 2*rate || le.Uint16(b[32:]) != 2 {
		t.Fatalf("WAV header % x for %d bytes", b[:44], len(b))
	}
	s, err := codec.DecodePCM(codec.S16LE, b[44:])
	if err != nil {
		t.Fatal(err)
	}
	return rate, s
}

func synRMS(s []float32) float64 {
	var sum float64
	for _, x := range s {
		sum += float64(x) * float64(x)
	}
	return math.Sqrt(sum / float64(max(len(s), 1)))
}

type synEvent struct {
	name string
	data map[string]any
}

// synSSE reads every event of a stream body.
func synSSE(t testing.TB, body []byte) []synEvent {
	t.Helper()
	var out []synEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var ev synEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &ev.data); err != nil {
				t.Fatalf("event data %q: %v", line, err)
			}
		case line == "":
			out = append(out, ev)
			ev = synEvent{}
		}
	}
	return out
}

// synCheckSSE checks start, contiguous chunks of whole samples and done
// (duration within 1% of the decoded samples); it returns the samples.
func synCheckSSE(t testing.TB, evs []synEvent, rate int, f codec.Format) []float32 {
	t.Helper()
	if len(evs) < 3 || evs[0].name != "start" || evs[len(evs)-1].name != "done" {
		t.Fatalf("want start, chunks, done: %d events", len(evs))
	}
	if s := evs[0].data; s["type"] != "start" || s["sample_rate"] != float64(rate) || s["audio_format"] != string(f) {
		t.Fatalf("start %v", s)
	}
	var samples []float32
	for i, ev := range evs[1 : len(evs)-1] {
		if ev.name != "chunk" || ev.data["type"] != "chunk" || ev.data["index"] != float64(i) {
			t.Fatalf("event %d: %s %v", i+1, ev.name, ev.data["index"])
		}
		pcm, err := base64.StdEncoding.DecodeString(ev.data["audio_b64"].(string))
		if err != nil || len(pcm) == 0 || len(pcm)%f.BytesPerSample() != 0 {
			t.Fatalf("chunk %d: %d bytes of width %d: %v", i, len(pcm), f.BytesPerSample(), err)
		}
		s, _ := codec.DecodePCM(f, pcm)
		samples = append(samples, s...)
	}
	done := evs[len(evs)-1].data
	d, _ := done["audio_duration_s"].(float64)
	want := float64(len(samples)) / float64(rate)
	if done["type"] != "done" || want == 0 || math.Abs(d-want) > 0.01*want {
		t.Fatalf("done %v; decoded %.4f s", done, want)
	}
	return samples
}
