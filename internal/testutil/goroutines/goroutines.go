// Package goroutines is a test helper: it counts the goroutines that are
// running some code, from the runtime's goroutine profile. Tests use it to
// show that a part of the server holds no goroutine while idle (an idle
// realtime session), which runtime.NumGoroutine cannot tell apart from the
// test's own. Being internal, it is not part of the module's API.
package goroutines

import (
	"bytes"
	"runtime/pprof"
	"strings"
)

// In counts the goroutines with a function whose name contains fn on their
// stack (fn "voicesvc/sessions." for any code of that package) and returns
// their stacks, grouped as the profile groups identical ones.
func In(fn string) (int, string) {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	_, profile, _ := strings.Cut(b.String(), "\n") // "goroutine profile: total N"
	n := 0
	var stacks []string
	for _, g := range strings.Split(profile, "\n\n") {
		if !strings.Contains(g, fn) {
			continue
		}
		// "N @ 0x..." heads each group of identical stacks.
		k := 0
		for _, c := range g {
			if c < '0' || c > '9' {
				break
			}
			k = k*10 + int(c-'0')
		}
		n += k
		stacks = append(stacks, g)
	}
	return n, strings.Join(stacks, "\n\n")
}
