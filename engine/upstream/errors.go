package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"voicesvc/engine"
)

// BusyError is an upstream at capacity: it answered 429 or 503, refused
// the connection, or every replica is ejected. It wraps engine.ErrBusy, so
// errors.Is(err, engine.ErrBusy) holds, and carries the Retry-After the
// upstream gave (or the seconds until an ejected replica returns).
type BusyError struct {
	RetryAfter int // seconds, at least 1
	Reason     string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("%v: %s (retry after %d s)", engine.ErrBusy, e.Reason, e.RetryAfter)
}

func (e *BusyError) Unwrap() error { return engine.ErrBusy }

// RetryAfterSeconds lets a caller find the delay through errors.As with an
// interface, without importing this package.
func (e *BusyError) RetryAfterSeconds() int { return e.RetryAfter }

// class sorts the outcome of one attempt for the counters, the retry and
// the replica's health.
type class int

const (
	classOK       class = iota
	classBusy           // 429, 503, refused: ErrBusy
	classInvalid        // 400, 404, 413, 422: ErrInvalidInput
	classUpstream       // anything else: a plain error (502 upstream_error)
	classCancel         // the caller's context, or its emit, stopped it
)

// attemptError is the failure of one attempt on one replica.
type attemptError struct {
	class class
	err   error // what Synthesize returns
	// unhealthy: a connection failure, a timeout or a 5xx answer, which
	// count toward ejecting the replica.
	unhealthy bool
	// retry: another replica may do better (not for a bad request, nor
	// for a key the upstream refuses).
	retry bool
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// statusError classifies a non-2xx answer; msg is the upstream's own
// message, taken from its body.
func (e *Engine) statusError(rep *replica, resp *http.Response, msg string) *attemptError {
	code := resp.StatusCode
	switch code {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return &attemptError{class: classBusy, retry: true, unhealthy: code >= 500,
			err: &BusyError{RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now()),
				Reason: fmt.Sprintf("upstream %s (%s) answered %d: %s", e.cfg.Name, rep.display, code, msg)}}
	case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		// The one failure the client can act on: its message reaches the
		// client, so it names no URL.
		return &attemptError{class: classInvalid,
			err: fmt.Errorf("%w: upstream %s: %s", engine.ErrInvalidInput, e.cfg.Name, msg)}
	}
	return &attemptError{class: classUpstream, retry: code >= 500, unhealthy: code >= 500,
		err: fmt.Errorf("upstream %s (%s) answered %d: %s", e.cfg.Name, rep.display, code, msg)}
}

// retryAfter reads a Retry-After header (seconds or an HTTP date) as whole
// seconds, at least 1 and at most an hour.
func retryAfter(h string, now time.Time) int {
	s := 1
	if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil {
		s = n
	} else if t, err := http.ParseTime(h); err == nil {
		s = int((t.Sub(now) + time.Second - 1) / time.Second)
	}
	return min(max(s, 1), 3600)
}

// maxMessage bounds the upstream's message kept for an error.
const maxMessage = 300

// upstreamMessage finds the human message in an error body, in the shapes
// the servers answer: OpenAI {"error":{"message"}}, FastAPI {"detail":...}
// (Kokoro-FastAPI nests {"message"} in it), voicesvc's envelope
// {"error":{"message"}} and plain text. It keeps printable characters only
// and at most maxMessage bytes.
func upstreamMessage(body []byte, status int) string {
	var doc struct {
		Error   any `json:"error"`
		Detail  any `json:"detail"`
		Message any `json:"message"`
	}
	msg := ""
	if err := json.Unmarshal(body, &doc); err == nil {
		for _, v := range []any{doc.Error, doc.Detail, doc.Message} {
			if msg = messageOf(v); msg != "" {
				break
			}
		}
	} else {
		msg = string(body)
	}
	msg = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, strings.TrimSpace(msg))
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage], "") + "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return msg
}

func messageOf(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		for _, k := range []string{"message", "detail", "error"} {
			if m := messageOf(v[k]); m != "" {
				return m
			}
		}
	case []any: // FastAPI's validation errors: [{"msg": ...}]
		if len(v) > 0 {
			if m, ok := v[0].(map[string]any); ok {
				if s, ok := m["msg"].(string); ok {
					return s
				}
			}
		}
	}
	return ""
}

var errTimeout = errors.New("no audio within the timeout")

// errSentenceTimeout: the sentence waited for its upstream longer than
// its SentenceTimeout, its attempts together.
var errSentenceTimeout = errors.New("the sentence took longer than its sentence_timeout")
