package chaos

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Probes of upstream engines gone wrong: a voicesvc server whose
// configuration lists, beside the built-in espeak, one upstream engine per
// misbehaviour of a hostile OpenAI-compatible server the suite runs on
// 127.0.0.1 (an answer without end, endless headers, a drip, garbage, a
// declared gigabyte that stalls). Each probe speaks (WAV, buffered; raw
// s16le, streamed) and streams SSE with that engine's voice while another
// workspace speaks with espeak; the failures must be 502 upstream_error (or
// a stream that ends with it) within the engine's sentence_timeout, the
// server's memory must stay flat and the espeak workspace served.

// Bounds the upstream engines are configured with, and what the probes
// allow over them.
const (
	upTimeout         = 2 * time.Second // to the first audio byte
	upSentenceTimeout = 3 * time.Second
	upSlack           = 2 * time.Second
	upMaxRSS          = 200 << 20
	// upText is what the probes speak: 18 characters, at most 18 s of 24
	// kHz audio (max_audio_seconds_per_char 1): 864000 bytes.
	upText = "Hostile upstream."
)

// upKinds are the hostile server's behaviours, each an engine and voice of
// its own (so that one's ejection leaves the others alone).
var upKinds = []string{"endless-body", "endless-headers", "endless-line", "drip", "garbage", "huge-length"}

// hostileUpstream answers POST /v1/audio/speech by the "voice" of the
// request. It closes every connection after its answer and counts what it
// has open.
type hostileUpstream struct {
	ln   net.Listener
	stop chan struct{}
	wg   sync.WaitGroup
	open atomic.Int64 // connections open now
	sent atomic.Int64 // bytes the sockets accepted, all answers

	mu    sync.Mutex
	conns map[net.Conn]bool
}

func startHostileUpstream() (*hostileUpstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hostileUpstream{ln: ln, stop: make(chan struct{}), conns: map[net.Conn]bool{}}
	h.wg.Add(1)
	go h.accept()
	return h, nil
}

func (h *hostileUpstream) URL() string { return "http://" + h.ln.Addr().String() + "/v1" }

func (h *hostileUpstream) Close() {
	close(h.stop)
	h.ln.Close()
	h.mu.Lock()
	for c := range h.conns {
		c.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

func (h *hostileUpstream) accept() {
	defer h.wg.Done()
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		h.conns[c] = true
		h.mu.Unlock()
		h.open.Add(1)
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			defer func() {
				c.Close()
				h.mu.Lock()
				delete(h.conns, c)
				h.mu.Unlock()
				h.open.Add(-1)
			}()
			h.serve(c)
		}()
	}
}

// hostileWriter writes to the connection, counting what it accepted; each
// write gives up after a minute (a gateway that stopped reading without
// closing) or when the suite stops.
type hostileWriter struct {
	c net.Conn
	h *hostileUpstream
}

func (w *hostileWriter) Write(p []byte) (int, error) {
	select {
	case <-w.h.stop:
		return 0, net.ErrClosed
	default:
	}
	w.c.SetWriteDeadline(time.Now().Add(time.Minute))
	n, err := w.c.Write(p)
	w.h.sent.Add(int64(n))
	return n, err
}

// waitClosed waits until the gateway closes the connection, at most d.
func (w *hostileWriter) waitClosed(d time.Duration) {
	w.c.SetReadDeadline(time.Now().Add(d))
	io.Copy(io.Discard, w.c)
}

const hostilePCMHead = "HTTP/1.1 200 OK\r\nContent-Type: audio/pcm\r\nConnection: close\r\n"

func (h *hostileUpstream) serve(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(time.Minute))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	var body struct{ Voice string }
	json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&body)
	c.SetReadDeadline(time.Time{})
	w := &hostileWriter{c: c, h: h}
	// A hostile answer still ends some day: a gateway without bounds reads
	// gigabytes first.
	const most = 4 << 30
	switch body.Voice {
	case "endless-body": // 200 audio/pcm, no Content-Length, pcm for ever
		if _, err := io.WriteString(w, hostilePCMHead+"\r\n"); err != nil {
			return
		}
		buf := make([]byte, 32<<10)
		for i := range buf {
			buf[i] = byte(i * 37)
		}
		for n := 0; n < most; n += len(buf) {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	case "endless-headers": // header lines without end
		if _, err := io.WriteString(w, hostilePCMHead); err != nil {
			return
		}
		line := []byte("X-Pad: " + strings.Repeat("p", 120) + "\r\n")
		buf := []byte(strings.Repeat(string(line), 256))
		for n := 0; n < most; n += len(buf) {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	case "endless-line": // one header line without end
		if _, err := io.WriteString(w, hostilePCMHead+"X-Long: "); err != nil {
			return
		}
		buf := []byte(strings.Repeat("l", 32<<10))
		for n := 0; n < most; n += len(buf) {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	case "drip": // a byte a second
		if _, err := io.WriteString(w, hostilePCMHead+"\r\n"); err != nil {
			return
		}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for range 600 {
			if _, err := w.Write([]byte{0x11}); err != nil {
				return
			}
			select {
			case <-t.C:
			case <-h.stop:
				return
			}
		}
	case "garbage": // random bytes of an odd length, as pcm or untyped
		n, _ := rand.Int(rand.Reader, big.NewInt(64<<10))
		b := make([]byte, 2*int(n.Int64())+1)
		rand.Read(b)
		head := hostilePCMHead
		if b[0]&1 == 0 {
			head = "HTTP/1.1 200 OK\r\nConnection: close\r\n"
		}
		io.WriteString(w, head+"\r\n")
		w.Write(b)
	case "huge-length": // declares a gigabyte, sends a little, stalls
		if _, err := io.WriteString(w, hostilePCMHead+"Content-Length: 1000000000\r\n\r\n"+strings.Repeat("\x00", 4096)); err != nil {
			return
		}
		w.waitClosed(time.Minute)
	default:
		io.WriteString(w, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	}
}

// upRig is the server the upstream probes share: its espeak workspace and
// the id of each hostile kind's voice.
type upRig struct {
	up     *hostileUpstream
	srv    *Server
	espeak *Env              // a workspace speaking with espeak
	env    *Env              // the workspace the hostile voices speak in
	voices map[string]string // kind -> voice id
}

// upstreamRig starts the hostile upstream and a voicesvc in front of it,
// once per suite.
func (s *Suite) upstreamRig() (*upRig, error) {
	s.upOnce.Do(func() { s.up, s.upErr = s.startUpstreamRig() })
	return s.up, s.upErr
}

func (s *Suite) startUpstreamRig() (*upRig, error) {
	up, err := startHostileUpstream()
	if err != nil {
		return nil, err
	}
	s.OnClose(up.Close)
	dir, err := os.MkdirTemp(s.Tmp, "upstream-")
	if err != nil {
		return nil, err
	}
	cfg, err := writeUpstreamConfig(dir, up.URL())
	if err != nil {
		return nil, err
	}
	srv, err := s.StartServer("upstream-faults", ServerOpts{Dir: dir, Args: []string{"--engine-workers", "1", "--config", cfg}})
	if err != nil {
		return nil, err
	}
	r := &upRig{up: up, srv: srv}
	if r.espeak, err = s.NewEnv(srv, "enterprise", "--billing", "off", "--rps", "0", "--concurrency", "100"); err != nil {
		return nil, err
	}
	if r.env, err = s.NewEnv(srv, "enterprise", "--billing", "meter", "--rps", "0", "--concurrency", "100"); err != nil {
		return nil, err
	}
	if r.voices, err = upstreamVoices(r.env); err != nil {
		return nil, err
	}
	if sr := r.espeak.Speak("Warm up."); sr.Status != 200 {
		return nil, fmt.Errorf("espeak warm-up: %s", sr.Outcome())
	}
	return r, nil
}

// writeUpstreamConfig writes, in dir, a voicesvc configuration listing
// one upstream engine per hostile kind at url (engine u-KIND, voice alias
// u-KIND) and returns its path, for --config.
func writeUpstreamConfig(dir, url string) (string, error) {
	var y strings.Builder
	y.WriteString("engines:\n")
	for _, k := range upKinds {
		// Language la: NewEnv's workspaces pick an English espeak voice.
		fmt.Fprintf(&y, `  - name: u-%s
    type: openai
    urls: [%s]
    model: hostile
    timeout: %s
    sentence_timeout: %s
    max_audio_seconds_per_char: 1
    max_sentence_bytes: 16777216
    voices:
      - {alias: u-%s, voice: %s, language: la}
`, k, url, upTimeout, upSentenceTimeout, k, k)
	}
	cfg := filepath.Join(dir, "voicesvc.yaml")
	return cfg, os.WriteFile(cfg, []byte(y.String()), 0o600)
}

// upstreamVoices finds the voice id of each hostile kind in the catalog
// as e's workspace sees it.
func upstreamVoices(e *Env) (map[string]string, error) {
	lr := Call("GET", e.Srv.API+"/voices?visibility=public&language=la&page_size=100", nil, "X-API-Key", e.Key)
	if lr.Status != 200 {
		return nil, fmt.Errorf("GET /voices: %s", lr.Outcome())
	}
	voices := map[string]string{}
	for _, v := range lr.Data()["voices"].([]any) {
		m, _ := v.(map[string]any)
		if a, _ := m["alias"].(string); strings.HasPrefix(a, "u-") {
			voices[strings.TrimPrefix(a, "u-")], _ = m["id"].(string)
		}
	}
	for _, k := range upKinds {
		if voices[k] == "" {
			return nil, fmt.Errorf("no voice u-%s in the catalog: %.300s", k, lr.Body)
		}
	}
	return voices, nil
}

// upOutcome is one request against a hostile voice.
type upOutcome struct {
	what    string // "wav", "s16le", "sse"
	outcome string // "502 upstream_error", "200 cut", "sse error upstream_error", ...
	took    time.Duration
	bytes   int // audio bytes received
}

// upClient gives up far past the bounds the server should keep.
var upClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// upSpeak sends a speak in format and reads its answer whole.
func upSpeak(e *Env, voice, format string) upOutcome {
	o := upOutcome{what: format}
	start := time.Now()
	defer func() { o.took = time.Since(start) }()
	body, _ := json.Marshal(map[string]any{"text": upText, "output_format": format})
	req, _ := http.NewRequest("POST", e.Srv.API+"/voices/"+voice+"/speak", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", e.Key)
	hr, err := upClient.Do(req)
	if err != nil {
		o.outcome = "transport error: " + err.Error()
		o.took = time.Since(start)
		return o
	}
	defer hr.Body.Close()
	b, rerr := io.ReadAll(io.LimitReader(hr.Body, 256<<20))
	o.took = time.Since(start)
	r := &Resp{Status: hr.StatusCode, Header: hr.Header, Body: b}
	switch {
	case hr.StatusCode != 200:
		o.outcome = r.Outcome()
	case rerr != nil:
		o.outcome, o.bytes = "200 cut", len(b)
	default:
		o.outcome, o.bytes = "200", len(b)
	}
	return o
}

// upSSE streams SSE and reports its status or its last event.
func upSSE(e *Env, voice string) upOutcome {
	o := upOutcome{what: "sse"}
	start := time.Now()
	body, _ := json.Marshal(map[string]any{"text": upText, "output_format": "s16le"})
	req, _ := http.NewRequest("POST", e.Srv.API+"/voices/"+voice+"/stream", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", e.Key)
	hr, err := upClient.Do(req)
	if err != nil {
		o.outcome, o.took = "transport error: "+err.Error(), time.Since(start)
		return o
	}
	defer hr.Body.Close()
	if hr.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(hr.Body, 1<<20))
		o.outcome, o.took = (&Resp{Status: hr.StatusCode, Body: b}).Outcome(), time.Since(start)
		return o
	}
	sc := bufio.NewScanner(hr.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	last, code := "", ""
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "data:") {
			continue
		}
		d := strings.TrimSpace(l[len("data:"):])
		var m map[string]any
		if strings.Contains(d, `"audio_b64"`) || strings.Contains(d, `"type":"chunk"`) {
			last = "chunk"
			o.bytes += len(d)
			continue
		}
		if json.Unmarshal([]byte(d), &m) == nil {
			last, _ = m["type"].(string)
			code, _ = m["code"].(string)
		}
	}
	o.took = time.Since(start)
	switch {
	case sc.Err() != nil:
		o.outcome = "sse cut: " + sc.Err().Error()
	case last == "error":
		o.outcome = "sse error " + code
	default:
		o.outcome = "sse ended with " + strconv.Quote(last)
	}
	return o
}

// upFailed: what the contract allows for a sentence the upstream spoiled.
func upFailed(o upOutcome) bool {
	switch o.outcome {
	case "502 upstream_error", "sse error upstream_error":
		return true
	case "200 cut": // a raw stream whose audio had started: the body is cut
		return o.what == "s16le"
	}
	return false
}

// probeUpstream runs the requests against kind's voice, three at once,
// while the espeak workspace speaks, and checks them, the server's memory
// and its upstream slots.
func probeUpstream(kind string) func(ctx context.Context, s *Suite) (string, bool) {
	return func(ctx context.Context, s *Suite) (string, bool) {
		r, err := s.upstreamRig()
		if err != nil {
			return err.Error(), false
		}
		srv := r.srv
		voice := r.voices[kind]
		sentBefore := r.up.sent.Load()
		usedBefore, _, _ := s.Balance(srv.DB, r.env.WS)

		// Memory, sampled while the probe runs.
		var peak atomic.Int64
		stopSampling := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				if rss := srv.RSS(); rss > peak.Load() {
					peak.Store(rss)
				}
				select {
				case <-stopSampling:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
		// The espeak workspace meanwhile.
		var espeakOK, espeakBad atomic.Int64
		var espeakLast atomic.Value
		stopEspeak := make(chan struct{})
		espeakDone := make(chan struct{})
		go func() {
			defer close(espeakDone)
			for {
				sr := r.espeak.Speak("Still served.")
				if sr.Status == 200 && len(sr.Body) > 0 {
					espeakOK.Add(1)
				} else {
					espeakBad.Add(1)
					espeakLast.Store(sr.Outcome())
				}
				select {
				case <-stopEspeak:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()

		outs := make([]upOutcome, 3)
		var wg sync.WaitGroup
		for i, f := range []func() upOutcome{
			func() upOutcome { return upSpeak(r.env, voice, "wav") },
			func() upOutcome { return upSpeak(r.env, voice, "s16le") },
			func() upOutcome { return upSSE(r.env, voice) },
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i] = f()
			}()
		}
		wg.Wait()
		// And the espeak workspace is still served after.
		if sr := r.espeak.Speak("Served after."); sr.Status == 200 {
			espeakOK.Add(1)
		} else {
			espeakBad.Add(1)
			espeakLast.Store(sr.Outcome())
		}
		// The upstream connections are closed and the slots back.
		closed := waitFor(5*time.Second, func() bool { return r.up.open.Load() == 0 })
		outstanding := upstreamOutstanding(srv, "u-"+kind)
		close(stopEspeak)
		<-espeakDone
		close(stopSampling)
		<-sampled
		usedAfter, _, _ := s.Balance(srv.DB, r.env.WS)

		ok := srv.Alive() && closed && outstanding == 0 && peak.Load() < upMaxRSS &&
			espeakOK.Load() > 0 && espeakBad.Load() == 0
		var parts []string
		for _, o := range outs {
			good := o.took <= upSentenceTimeout+upSlack
			if kind == "garbage" {
				// Noise is audio: it may well be spoken.
				good = good && (o.outcome == "200" || o.outcome == "sse ended with \"done\"" || upFailed(o))
			} else {
				good = good && upFailed(o)
			}
			ok = ok && good
			mark := ""
			if !good {
				mark = "!"
			}
			parts = append(parts, fmt.Sprintf("%s%s %s in %s (%d B)", mark, o.what, o.outcome, o.took.Round(10*time.Millisecond), o.bytes))
		}
		// Billing (reported, not judged here): a failure before any audio
		// reached the client is refunded. A buffered WAV answered 502
		// after the engine had produced some audio stays billed today
		// (gateway: Admission.Done gets the samples produced, not those
		// delivered).
		delivered := 0
		for _, o := range outs {
			if o.bytes > 0 {
				delivered++
			}
		}
		billNote := ""
		if billed := usedAfter - usedBefore; billed > int64(delivered*len(upText)) {
			billNote = fmt.Sprintf(" (NOTE: %d of them for requests that delivered no audio)", billed-int64(delivered*len(upText)))
		}
		espeakNote := ""
		if v, _ := espeakLast.Load().(string); v != "" {
			espeakNote = " last bad " + v
		}
		return fmt.Sprintf("%s; upstream sent %d KiB, conns closed=%v, outstanding %d; peak RSS %d MiB; espeak %d ok %d bad%s; billed %d chars%s",
			strings.Join(parts, ", "), (r.up.sent.Load()-sentBefore)>>10, closed, outstanding, peak.Load()>>20,
			espeakOK.Load(), espeakBad.Load(), espeakNote, usedAfter-usedBefore, billNote), ok
	}
}

// upstreamOutstanding reads voicesvc_upstream_outstanding for engine from
// /metrics, summed over its replicas (-1 when unreadable).
func upstreamOutstanding(srv *Server, engine string) int {
	r := Call("GET", srv.URL+"/metrics", nil)
	if r.Status != 200 {
		return -1
	}
	n, found := 0, false
	for _, l := range strings.Split(string(r.Body), "\n") {
		if !strings.HasPrefix(l, "voicesvc_upstream_outstanding{") || !strings.Contains(l, `engine="`+engine+`"`) {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return -1
		}
		n += int(v)
		found = true
	}
	if !found {
		return -1
	}
	return n
}
