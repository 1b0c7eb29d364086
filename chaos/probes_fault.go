package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Probes that break what the server depends on: its store, its engine
// workers, itself, its disk; and its own shutdown.

// probeDeletedPreview: a deleted voice's preview answers 404 at once.
func probeDeletedPreview(ctx context.Context, s *Suite) (string, bool) {
	e := s.MainEnv
	clip, err := s.Clip()
	if err != nil {
		return err.Error(), false
	}
	r := e.Clone("chaos-preview", clip)
	voice, job := cloneIDs(r)
	if r.Status != 202 || job == "" {
		return "clone: " + r.Outcome(), false
	}
	if st := e.WaitJob(job, 90*time.Second); st != "succeeded" {
		return "clone job: " + st, false
	}
	path, vr := e.previewPath(voice)
	if path == "" {
		return fmt.Sprintf("ready voice has no sample_audio_url: %.200s", vr.Body), false
	}
	before := Call("GET", e.Srv.URL+path, nil)
	del := Call("DELETE", e.Srv.API+"/voices/"+voice, nil, "X-API-Key", e.Key)
	after := Call("GET", e.Srv.URL+path, nil)
	return fmt.Sprintf("preview %s: %d before delete, delete %s, %d after", path, before.Status, del.Outcome(), after.Status),
		before.Status == 200 && del.Status/100 == 2 && after.Status == 404
}

// probeStoreDown: the Postgres store is stopped and started again under
// load. Requests during the outage get 503 store_unavailable with
// Retry-After: 1, never 500; the server recovers.
func probeStoreDown(ctx context.Context, s *Suite) (string, bool) {
	pg, err := s.Postgres()
	if err != nil {
		return "no Postgres: " + err.Error(), false
	}
	srv, err := s.StartServer("pg-outage", ServerOpts{DB: pg.NewDB("outage"),
		Args: []string{"--engine", "reference", "--reference-rtf", "0", "--engine-workers", "0"}})
	if err != nil {
		return err.Error(), false
	}
	defer srv.Stop()
	e, err := s.NewEnv(srv, "enterprise", "--billing", "meter", "--rps", "0", "--concurrency", "100")
	if err != nil {
		return err.Error(), false
	}
	var (
		mu      sync.Mutex
		down    bool
		during  = map[string]int{}
		badRA   int
		other   = map[string]int{}
		stopped = make(chan struct{})
		wg      sync.WaitGroup
	)
	c := &http.Client{Timeout: 10 * time.Second}
	reqs := []func() *Resp{
		func() *Resp { return e.Speak("Hi.") },
		func() *Resp { return CallWith(c, "GET", srv.API+"/voices/"+e.Voice, nil, "X-API-Key", e.Key) },
		func() *Resp {
			return CallWith(c, "POST", srv.API+"/tokens", map[string]any{"ttl_seconds": 60}, "X-API-Key", e.Key)
		},
		func() *Resp { return CallWith(c, "GET", srv.API+"/voices?page_size=5", nil, "X-API-Key", e.Key) },
	}
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stopped:
					return
				default:
				}
				r := reqs[(w+i)%len(reqs)]()
				mu.Lock()
				if down {
					during[r.Outcome()]++
					if r.Status == 503 && r.Header.Get("Retry-After") != "1" {
						badRA++
					}
				} else if r.Status >= 500 || r.Status == 0 {
					other[r.Outcome()]++
				}
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}(w)
	}
	time.Sleep(2 * time.Second)
	mu.Lock()
	down = true
	mu.Unlock()
	stopErr := pg.Stop()
	time.Sleep(5 * time.Second)
	startErr := pg.Start()
	// The outage lasts until the server answers again: reconnecting is part
	// of it.
	recovered := waitFor(30*time.Second, func() bool { return e.Speak("Back.").Status == 200 })
	mu.Lock()
	down = false
	mu.Unlock()
	close(stopped)
	wg.Wait()
	if stopErr != nil || startErr != nil {
		return fmt.Sprintf("cluster control failed: %v %v", stopErr, startErr), false
	}
	ok := recovered && srv.Alive() && badRA == 0 && during["503 store_unavailable"] > 0 && len(other) == 0
	for k := range during {
		if !strings.HasPrefix(k, "2") && k != "503 store_unavailable" {
			ok = false
		}
	}
	return fmt.Sprintf("during outage %s (Retry-After != 1: %d); 5xx or dropped outside it %s; recovered=%v",
		counts(during), badRA, counts(other), recovered), ok
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "{}"
	}
	var ks []string
	for k, v := range m {
		ks = append(ks, fmt.Sprintf("%s x%d", k, v))
	}
	sort.Strings(ks)
	return "{" + strings.Join(ks, ", ") + "}"
}

// probeSIGTERM: SIGTERM with a 2 s grace while an SSE stream and a
// realtime context run (reference engine in real time, so both outlast the
// grace). Streams end cleanly with shutting_down, new requests get 503,
// the process exits 0.
func probeSIGTERM(ctx context.Context, s *Suite) (string, bool) {
	srv, err := s.StartServer("sigterm", ServerOpts{Args: []string{"--engine", "reference", "--reference-rtf", "1",
		"--engine-workers", "0", "--shutdown-grace", "2s"}})
	if err != nil {
		return err.Error(), false
	}
	defer srv.Stop()
	e, err := s.NewEnv(srv, "enterprise", "--billing", "off", "--rps", "0")
	if err != nil {
		return err.Error(), false
	}
	long := strings.Repeat("This sentence keeps the stream busy for a while. ", 60)
	sseStarted, wsStarted := make(chan struct{}), make(chan struct{})
	var sseLast SSEEvent
	var sseErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		var once sync.Once
		sseErr = e.SSEEach(long, 60*time.Second, func(ev SSEEvent) bool {
			if ev.Type == "chunk" {
				once.Do(func() { close(sseStarted) })
			}
			sseLast = ev
			return true
		})
		once.Do(func() { close(sseStarted) })
	}()
	var wsFatal string
	var wsEnd WSFrame
	go func() {
		defer wg.Done()
		var once sync.Once
		defer once.Do(func() { close(wsStarted) })
		c, err := e.DialWS()
		if err != nil {
			wsEnd.Err = err
			return
		}
		defer c.Close()
		c.WriteJSON(map[string]any{"type": "task_start", "context_id": "t", "voice_id": e.Voice, "text": long, "finalize": true})
		wsEnd = ReadWS(c, 60*time.Second, func(f WSFrame) bool {
			if f.Type() == "audio_chunk" {
				once.Do(func() { close(wsStarted) })
			}
			if f.Type() == "error" && f.JSON["fatal"] == true {
				wsFatal, _ = f.JSON["code"].(string)
			}
			return true
		})
	}()
	<-sseStarted
	<-wsStarted
	srv.Term()
	// A request that reaches the server before the signal has been handled
	// is served like any other: the new requests start once the drain has
	// surely begun.
	time.Sleep(100 * time.Millisecond)
	fresh := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	newReqs := map[string]int{}
	for i := 0; i < 10; i++ {
		r := CallWith(fresh, "GET", srv.API+"/voices?page_size=1", nil, "X-API-Key", e.Key)
		o := r.Outcome()
		if r.Status == 0 {
			o = "transport error"
		}
		newReqs[o]++
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	code, exited := srv.Wait(30 * time.Second)
	ok := sseLast.Type == "error" && sseLast.Code() == "shutting_down" && wsFatal == "shutting_down" &&
		wsEnd.CloseCode == 1001 && exited && code == 0 && newReqs["503"]+countPrefix(newReqs, "503 ") > 0 &&
		countPrefix(newReqs, "2") == 0
	return fmt.Sprintf("SSE last event %s %q (err %v); WS fatal %q close %d; new requests %s; exit code %d",
		sseLast.Type, sseLast.Code(), sseErr, wsFatal, wsEnd.CloseCode, counts(newReqs), code), ok
}

func countPrefix(m map[string]int, p string) int {
	n := 0
	for k, v := range m {
		if strings.HasPrefix(k, p) {
			n += v
		}
	}
	return n
}

// probeWorkerKill: every engine worker is killed (SIGKILL) while an SSE
// stream has audio out. The server survives, the stream ends with an
// error event (not cut), later requests succeed.
func probeWorkerKill(ctx context.Context, s *Suite) (string, bool) {
	srv, err := s.StartServer("workerkill", ServerOpts{Args: []string{"--engine-workers", "2"}})
	if err != nil {
		return err.Error(), false
	}
	defer srv.Stop()
	e, err := s.NewEnv(srv, "enterprise", "--billing", "off", "--rps", "0")
	if err != nil {
		return err.Error(), false
	}
	long := strings.Repeat("The engine worker renders this sentence while it is being killed. ", 120)
	killed := 0
	var workers []int
	evs := 0
	var last SSEEvent
	err = e.SSEEach(long, 90*time.Second, func(ev SSEEvent) bool {
		evs++
		last = ev
		if ev.Type == "chunk" && killed == 0 {
			workers = srv.Children()
			for _, pid := range workers {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed++
				}
			}
			if killed == 0 {
				killed = -1
			}
		}
		return true
	})
	later := ""
	served := waitFor(30*time.Second, func() bool {
		r := e.Speak("After the crash.")
		later = r.Outcome()
		return r.Status == 200
	})
	// The pool restarts a killed worker and gives a sentence that had not
	// reached the client to the new one, so the stream may well finish
	// (done); what must not happen is a stream that stops without its
	// terminal event.
	clean := last.Type == "error" || last.Type == "done"
	return fmt.Sprintf("killed %d of workers %v; stream: %d events, last %s %q (err %v); later speak %s; alive=%v",
			killed, workers, evs, last.Type, last.Code(), err, later, srv.Alive()),
		killed > 0 && clean && served && srv.Alive()
}

// probeServerKillMidClone: the server is killed (SIGKILL) while a clone
// job is in flight and restarted on the same store; the job is taken up
// again and succeeds.
func probeServerKillMidClone(ctx context.Context, s *Suite) (string, bool) {
	clip, err := s.Clip()
	if err != nil {
		return err.Error(), false
	}
	dir, _ := os.MkdirTemp(s.Tmp, "killclone-")
	srv, err := s.StartServer("killclone-a", ServerOpts{Dir: dir})
	if err != nil {
		return err.Error(), false
	}
	e, err := s.NewEnv(srv, "pro", "--billing", "off", "--rps", "0")
	if err != nil {
		srv.Kill()
		return err.Error(), false
	}
	r := e.Clone("chaos-kill", clip)
	_, job := cloneIDs(r)
	if r.Status != 202 {
		srv.Kill()
		return "clone: " + r.Outcome(), false
	}
	// Kill it while the job runs (or as soon as the job is past pending, if
	// it finishes within one poll).
	var st any
	waitFor(10*time.Second, func() bool {
		st = Call("GET", srv.API+"/jobs/"+job, nil, "X-API-Key", e.Key).Data()["status"]
		return st != "pending"
	})
	srv.Kill()
	srv2, err := s.StartServer("killclone-b", ServerOpts{Dir: dir})
	if err != nil {
		return err.Error(), false
	}
	defer srv2.Stop()
	e.Srv = srv2
	final := e.WaitJob(job, 120*time.Second)
	return fmt.Sprintf("job %v when killed; after restart: %s", st, final), final == "succeeded"
}

// probeFullDisk: the media directory and the SQLite store each on a small
// tmpfs. First only the media disk is full: a clone is accepted and its
// job's preview write fails cleanly (a failed job, or a voice without
// preview). Then the store's disk is full too: clone and speak get an
// answer (an error envelope), not a dropped connection. No *.tmp file is
// left behind and the server stays up and recovers once space is freed.
func probeFullDisk(ctx context.Context, s *Suite) (string, bool) {
	clip, err := s.Clip()
	if err != nil {
		return err.Error(), false
	}
	media, store := filepath.Join(s.Tmp, "full-media"), filepath.Join(s.Tmp, "full-store")
	for _, m := range []struct{ dir, size string }{{media, "2m"}, {store, "24m"}} {
		os.MkdirAll(m.dir, 0o755)
		if err := syscall.Mount("tmpfs", m.dir, "tmpfs", 0, "size="+m.size); err != nil {
			return "cannot mount a tmpfs here (" + err.Error() + "): not run", false
		}
		defer syscall.Unmount(m.dir, syscall.MNT_DETACH)
	}
	srv, err := s.StartServer("fulldisk", ServerOpts{Dir: store, MediaDir: media, Args: []string{"--engine-workers", "1"}})
	if err != nil {
		return err.Error(), false
	}
	defer srv.Stop()
	e, err := s.NewEnv(srv, "pro", "--billing", "meter", "--rps", "0")
	if err != nil {
		return err.Error(), false
	}
	clean := true
	try := func(name string) string {
		r := e.Clone(name, clip)
		o := r.Outcome()
		if r.Status == 202 {
			voice, job := cloneIDs(r)
			o += " then job " + e.WaitJob(job, 60*time.Second)
			if p, _ := e.previewPath(voice); p != "" {
				o += ", preview " + fmt.Sprint(Call("GET", srv.URL+p, nil).Status)
			}
		}
		// A full store is the store's trouble, not the request's: 503
		// store_unavailable (retry later), never a 500.
		if r.Status == 0 || r.Status >= 500 && r.Code() != "store_unavailable" {
			clean = false
		}
		return o
	}
	mediaFiller, storeFiller := filepath.Join(media, "filler"), filepath.Join(store, "filler")
	fill(mediaFiller)
	mediaFull := try("chaos-full-media")
	fill(storeFiller)
	bothFull := try("chaos-full-both")
	sp := e.Speak("The disk is full.")
	if sp.Status == 0 || sp.Status >= 500 && sp.Code() != "store_unavailable" {
		clean = false
	}
	var tmps []string
	for _, dir := range []string{media, store} {
		filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && strings.HasSuffix(p, ".tmp") {
				tmps = append(tmps, filepath.Base(p))
			}
			return nil
		})
	}
	healthy := srv.Healthy()
	os.Remove(mediaFiller)
	os.Remove(storeFiller)
	after := e.Speak("Space again.")
	return fmt.Sprintf("media full: clone %s; both full: clone %s, speak %s; *.tmp left: %v; healthz ok=%v; freed: speak %s",
			mediaFull, bothFull, sp.Outcome(), tmps, healthy, after.Outcome()),
		clean && len(tmps) == 0 && healthy && srv.Alive() && after.Status == 200
}

// fill writes path until the file system is full.
func fill(path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	small := make([]byte, 512)
	for {
		if _, err := f.Write(small); err != nil {
			return
		}
	}
}
