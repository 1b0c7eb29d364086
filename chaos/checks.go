package chaos

import (
	"crypto/rand"
	"fmt"
	"strings"
	"time"
)

// mainIdleTimeout is the main server's realtime idle timeout: short, so the
// abandoned-session probe sees its sessions end within the run.
const mainIdleTimeout = 8 * time.Second

// startMain starts the shared server (espeak, SQLite) most probes attack,
// warms every path once, and takes the baseline of descriptors and
// goroutines the closing checks compare with.
func (s *Suite) startMain() error {
	srv, err := s.StartServer("main", ServerOpts{Args: []string{"--ws-idle-timeout", mainIdleTimeout.String()}})
	if err != nil {
		return err
	}
	s.Main = srv
	e, err := s.NewEnv(srv, "enterprise", "--billing", "off", "--rps", "0", "--concurrency", "5000", "--sessions", "5000")
	if err != nil {
		return err
	}
	s.MainEnv = e
	if r := e.Speak("Warm up."); r.Status != 200 {
		return fmt.Errorf("warm-up speak: %s", r.Outcome())
	}
	if evs, err := e.SSE("Warm up.", 30*time.Second); err != nil || len(evs) == 0 || evs[len(evs)-1].Type != "done" {
		return fmt.Errorf("warm-up stream: %v %v", err, evs)
	}
	c, err := e.DialWS()
	if err != nil {
		return fmt.Errorf("warm-up session: %w", err)
	}
	c.WriteJSON(map[string]any{"type": "task_start", "context_id": "w", "voice_id": e.Voice, "text": "Warm up.", "finalize": true})
	ReadWS(c, 30*time.Second, func(f WSFrame) bool { return f.Type() != "task_done" })
	c.Close()
	time.Sleep(2 * time.Second)
	s.baseFDs, s.baseGors = srv.FDs(), srv.Goroutines()
	s.logf("main server pid %d at %s: baseline %d fds, %d goroutines, %d MiB", srv.PID(), srv.Addr, s.baseFDs, s.baseGors, srv.RSS()>>20)
	return nil
}

// Slack over the baseline that is not a leak: pools that grew (HTTP
// keep-alive connections of the suite's own client, the store's pool).
const (
	fdSlack        = 16
	goroutineSlack = 30
)

// closingChecks: no server died on its own, the main server's descriptors
// and goroutines came back to the baseline, no secret in any log, no
// billing mismatch.
func (s *Suite) closingChecks() []Result {
	var out []Result
	s.mu.Lock()
	servers := append([]*Server(nil), s.servers...)
	mismatch := append([]string(nil), s.mismatch...)
	s.mu.Unlock()

	var crashed []string
	for _, srv := range servers {
		if srv.Crashed() {
			crashed = append(crashed, fmt.Sprintf("%s (pid %d)", srv.Name, srv.PID()))
		}
	}
	out = append(out, Result{Probe: "final: no crash", Expected: "no server the suite started died on its own",
		Observed: orNone(crashed, fmt.Sprintf("%d servers, none died unexpectedly", len(servers))), Pass: len(crashed) == 0})

	httpClient.CloseIdleConnections()
	if s.Main.Alive() {
		fds, gors := -1, -1
		ok := waitFor(30*time.Second, func() bool {
			fds, gors = s.Main.FDs(), s.Main.Goroutines()
			return fds <= s.baseFDs+fdSlack && gors >= 0 && gors <= s.baseGors+goroutineSlack
		})
		out = append(out,
			Result{Probe: "final: fd leak", Expected: fmt.Sprintf("main fds <= baseline %d + %d", s.baseFDs, fdSlack),
				Observed: fmt.Sprintf("%d fds", fds), Pass: ok || fds <= s.baseFDs+fdSlack},
			Result{Probe: "final: goroutine leak", Expected: fmt.Sprintf("main go_goroutines <= baseline %d + %d", s.baseGors, goroutineSlack),
				Observed: fmt.Sprintf("%d goroutines", gors), Pass: gors >= 0 && gors <= s.baseGors+goroutineSlack})
	} else {
		out = append(out, Result{Probe: "final: fd/goroutine leak", Expected: "main server alive to compare",
			Observed: "main server is gone"})
	}

	var leaked []string
	for _, srv := range servers {
		if found := s.secretsIn(srv.Logs()); len(found) > 0 {
			leaked = append(leaked, fmt.Sprintf("%s: %s", srv.Name, strings.Join(found, ",")))
		}
	}
	s.mu.Lock()
	n := len(s.secrets)
	s.mu.Unlock()
	out = append(out, Result{Probe: "final: no secret in logs", Expected: "no minted key/token in any server log",
		Observed: orNone(leaked, fmt.Sprintf("%d secrets, %d logs clean", n, len(servers))), Pass: len(leaked) == 0})
	out = append(out, Result{Probe: "final: billing", Expected: "no billing mismatch in any probe",
		Observed: orNone(mismatch, "none"), Pass: len(mismatch) == 0})
	return out
}

func orNone(list []string, none string) string {
	if len(list) == 0 {
		return none
	}
	return strings.Join(list, "; ")
}

// waitFor polls cond every 200 ms until it holds or limit passes.
func waitFor(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// fakeSecret is a well-formed key or token that exists nowhere.
func fakeSecret(prefix string) string {
	const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, 40)
	rand.Read(b)
	for i := range b {
		b[i] = base62[int(b[i])%62]
	}
	return prefix + string(b)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// rssWatch samples a process's RSS every 100 ms until stop is called and
// returns the highest value seen. over is closed once the RSS exceeds
// ceiling: a probe that has proved a leak stops feeding it, so the suite
// stays a good neighbour on a shared machine.
func rssWatch(pid int, ceiling int64) (stop func() int64, over <-chan struct{}) {
	done := make(chan struct{})
	exceeded := make(chan struct{})
	res := make(chan int64, 1)
	go func() {
		var max int64
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if r := procRSS(pid); r > max {
				max = r
				if max > ceiling && exceeded != nil {
					close(exceeded)
					exceeded = nil
				}
			}
			select {
			case <-done:
				res <- max
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 { close(done); return <-res }, exceeded
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
