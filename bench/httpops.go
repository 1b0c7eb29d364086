package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"voicesvc/loopback"
)

// target is what every scenario needs to address the server.
type target struct {
	base       string // scheme://host[:port], no trailing slash
	apiRoot    string // base + /voice-svc/api/v1/public
	key        string
	client     *http.Client
	voiceID    string // resolved id (speak, sse, ws)
	voiceRef   string // as the user gave it (alias or id), for compat
	text       string
	format     string
	sampleRate int
}

const apiPath = "/voice-svc/api/v1/public"

// newHTTPClient returns a client for many concurrent streams against one host:
// enough idle connections that closed-loop workers reuse theirs instead of
// dialling per request, no compression (audio does not compress and gzip would
// delay the first byte), no proxy and no redirects so that requests only ever
// reach the base URL.
func newHTTPClient(conns int) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         unpacedDial,
		MaxIdleConns:        conns + 16,
		MaxIdleConnsPerHost: conns + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		TLSHandshakeTimeout: 10 * time.Second,
		ReadBufferSize:      64 << 10,
		WriteBufferSize:     16 << 10,
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// unpacedDial dials like net.Dialer and keeps the host's TCP pacing off a
// loopback connection (package loopback): the bench measures the server,
// not how the host paces its requests to it.
func unpacedDial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	c, err := d.DialContext(ctx, network, addr)
	if err == nil {
		loopback.Unpace(c)
	}
	return c, err
}

// postJSON builds an authenticated JSON POST to the API root.
func (t *target) postJSON(ctx context.Context, path string, body any, bearer bool) (*http.Request, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.apiRoot+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer {
		req.Header.Set("Authorization", "Bearer "+t.key)
	} else {
		req.Header.Set("X-API-Key", t.key)
	}
	return req, nil
}

// errorCode extracts the machine code from any of the service's error bodies:
// the envelope ({"code"}), the flat billing body ({"error":"quota_exhausted"})
// and the compat shape ({"error":{"code"}}).
func errorCode(body []byte) string {
	var v struct {
		Code  string          `json:"code"`
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	if v.Code != "" {
		return v.Code
	}
	var s string
	if json.Unmarshal(v.Error, &s) == nil {
		return s
	}
	var o struct {
		Code string `json:"code"`
		Type string `json:"type"`
	}
	if json.Unmarshal(v.Error, &o) == nil {
		if o.Code != "" {
			return o.Code
		}
		return o.Type
	}
	return ""
}

// statusError turns a non-200 response into an error key, "429 rate_limited".
func statusError(resp *http.Response) string {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return statusKey(resp.StatusCode, errorCode(body))
}

func statusKey(status int, code string) string {
	if code != "" {
		return fmt.Sprintf("%d %s", status, code)
	}
	return strconv.Itoa(status)
}

// refusalBackoff is how long a client waits after a refusal that names no
// Retry-After (or, on ws, no retry_after).
const refusalBackoff = time.Second

// maxRetryAfter bounds what the bench waits whatever the server says: a
// level lasts seconds.
const maxRetryAfter = 10 * time.Second

// failStatus records a non-200 answer on s: 503 upstream_busy is a refusal
// (with the Retry-After to honour), anything else an error key.
func failStatus(s *sample, resp *http.Response) {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	code := errorCode(body)
	if resp.StatusCode == http.StatusServiceUnavailable && code == "upstream_busy" {
		s.refused, s.retryAfter = true, retryAfter(resp.Header)
		return
	}
	s.err = statusKey(resp.StatusCode, code)
}

// retryAfter reads a Retry-After of whole seconds; refusalBackoff when
// there is none.
func retryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || n <= 0 {
		return refusalBackoff
	}
	return min(time.Duration(n)*time.Second, maxRetryAfter)
}

// netError classifies a transport failure into a stable error key.
func netError(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "client:timeout"
	case errors.Is(err, context.Canceled):
		return "client:canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "client:conn_refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE):
		return "client:conn_reset"
	}
	return "client:net"
}

// bodyOp runs a request whose audio is the response body (speak, compat):
// TTFB is the first body byte, read incrementally as it arrives.
func (t *target) bodyOp(req *http.Request, kind audioKind) sample {
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
	ac := newAudioCounter(kind, resp.Header, t.sampleRate)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if s.ttfb == 0 {
				s.ttfb = time.Since(s.start)
			}
			ac.write(buf[:n])
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			s.total = time.Since(s.start)
			s.err = netError(rerr)
			return s
		}
	}
	s.total = time.Since(s.start)
	s.audio = ac.seconds()
	if s.ttfb == 0 {
		s.err = "client:empty_body"
	}
	return s
}

// speakScenario: POST /voices/{id}/speak.
type speakScenario struct{ t *target }

func (sc *speakScenario) open(context.Context, int) error { return nil }
func (sc *speakScenario) close()                          {}
func (sc *speakScenario) do(ctx context.Context, _ int) sample {
	req, err := sc.t.postJSON(ctx, "/voices/"+sc.t.voiceID+"/speak", map[string]any{
		"text": sc.t.text, "output_format": sc.t.format, "sample_rate": sc.t.sampleRate,
	}, false)
	if err != nil {
		return sample{start: time.Now(), err: "client:request"}
	}
	kind := audioKind{format: sc.t.format}
	return sc.t.bodyOp(req, kind)
}

// compatScenario: POST /compat/audio/speech with a bearer key.
type compatScenario struct{ t *target }

func (sc *compatScenario) open(context.Context, int) error { return nil }
func (sc *compatScenario) close()                          {}
func (sc *compatScenario) do(ctx context.Context, _ int) sample {
	req, err := sc.t.postJSON(ctx, "/compat/audio/speech", map[string]any{
		"model": "service-v1", "voice": sc.t.voiceRef, "input": sc.t.text, "response_format": sc.t.format,
	}, true)
	if err != nil {
		return sample{start: time.Now(), err: "client:request"}
	}
	// compat pcm is s16le mono 24 kHz by contract.
	kind := audioKind{format: sc.t.format, fixedRate: 24000}
	return sc.t.bodyOp(req, kind)
}
