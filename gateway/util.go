package gateway

import (
	"context"
	"strconv"
	"time"
	"unsafe"
)

// storeTimeout bounds one store call the server makes itself (sessions,
// idempotency, the dashboard).
const storeTimeout = 10 * time.Second

func storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), storeTimeout)
}

// b2s views b as a string without copying; the string must not outlive b
// or be kept past the request b belongs to.
func b2s(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func hasSuffix(b []byte, suffix string) bool {
	return len(b) >= len(suffix) && b2s(b[len(b)-len(suffix):]) == suffix
}

// statusTexts are the status label values, made once.
var statusTexts = func() (t [600]string) {
	for i := range t {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

func statusText(code int) string {
	if code >= 0 && code < len(statusTexts) {
		return statusTexts[code]
	}
	return strconv.Itoa(code)
}

var hdrIdempotencyKey = []byte("Idempotency-Key")
