package worker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"voicesvc/engine"
	"voicesvc/engine/reference"
	"voicesvc/engine/worker"
)

// helperEnv makes the test binary a worker child (the helper-process
// trick): its value is the reference engine's real-time factor.
const helperEnv = "VOICESVC_TEST_ENGINE_WORKER"

func TestMain(m *testing.M) {
	if v, ok := os.LookupEnv(helperEnv); ok {
		rtf, _ := strconv.ParseFloat(v, 64)
		if err := worker.Serve(os.Stdin, os.Stdout, reference.New(reference.Options{RTF: rtf})); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startChild starts this test binary as a worker child.
func startChild(t testing.TB, rtf float64) *worker.Client {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+strconv.FormatFloat(rtf, 'g', -1, 64))
	c, err := worker.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func subprocessPool(t testing.TB, workers int, rtf float64, clients chan<- *worker.Client) *engine.Pool {
	t.Helper()
	p, err := engine.NewPool(engine.PoolOptions{
		Engine:      reference.New(),
		Workers:     workers,
		WorkerDepth: worker.Depth,
		NewWorker: func(int) (engine.Worker, error) {
			c := startChild(t, rtf)
			if clients != nil {
				clients <- c
			}
			return c, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func collect(ctx context.Context, e interface {
	Synthesize(context.Context, engine.Request, func(engine.Chunk) error) error
}, req engine.Request) ([]engine.Chunk, error) {
	var out []engine.Chunk
	err := e.Synthesize(ctx, req, func(c engine.Chunk) error {
		out = append(out, c)
		return nil
	})
	return out, err
}

func TestClient(t *testing.T) {
	c := startChild(t, 0)
	defer c.Close()
	tests := []struct {
		name string
		req  engine.Request
		err  error
	}{
		{"two sentences", engine.Request{Text: "Hello there. How are you?", Params: engine.Params{Pitch: 2}}, nil},
		{"hindi", engine.Request{Text: "नमस्ते दुनिया।", Language: "hi"}, nil},
		{"invalid", engine.Request{Text: "   "}, engine.ErrInvalidInput},
		{"language", engine.Request{Text: "Hola.", Language: "es"}, engine.ErrInvalidInput},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := collect(context.Background(), c, tc.req)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			want, _ := collect(context.Background(), reference.New(), tc.req)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("chunks through the pipe differ from the engine's")
			}
		})
	}
}

// TestSubprocessPool32: 32 requests at once through two worker processes
// get exactly what the engine renders for each alone.
func TestSubprocessPool32(t *testing.T) {
	p := subprocessPool(t, 2, 0, nil)
	ref := reference.New()
	var wg sync.WaitGroup
	for i := range 32 {
		req := engine.Request{
			Text:    fmt.Sprintf("Request %d is here. It says %d things!", i, i*7),
			Profile: ref.Catalog()[i%3].Profile,
			Params:  engine.Params{Speed: 1 + float64(i%4)/8},
		}
		wg.Go(func() {
			got, err := collect(context.Background(), p, req)
			want, _ := collect(context.Background(), ref, req)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("request %d: err %v or audio differs", i, err)
			}
		})
	}
	wg.Wait()
}

// TestKillWorker: a child killed mid-sentence fails the request cleanly
// (its audio had started); a child found dead before a sentence starts
// is replaced and the sentence retried; the pool recovers either way.
func TestKillWorker(t *testing.T) {
	clients := make(chan *worker.Client, 8)
	p := subprocessPool(t, 1, 1, clients)
	child := <-clients
	err := p.Synthesize(context.Background(), engine.Request{Text: "This sentence is long enough to be killed in. Never reached."},
		func(c engine.Chunk) error {
			if child != nil {
				syscall.Kill(child.Pid(), syscall.SIGKILL)
				child = nil
			}
			return nil
		})
	if !errors.Is(err, engine.ErrWorkerDied) {
		t.Fatalf("killed mid-sentence: %v, want ErrWorkerDied", err)
	}
	// The next request starts a replacement. Killed while idle, it is
	// found dead before the sentence's first audio: the sentence is
	// retried on a third child.
	if _, err := collect(context.Background(), p, engine.Request{Text: "Hi."}); err != nil {
		t.Fatalf("after the first restart: %v", err)
	}
	child = <-clients
	syscall.Kill(child.Pid(), syscall.SIGKILL)
	for {
		// Wait until the client has noticed.
		err := child.Synthesize(context.Background(), engine.Request{Text: "x."}, func(engine.Chunk) error { return nil })
		if errors.Is(err, engine.ErrWorkerDied) {
			break
		}
	}
	got, err := collect(context.Background(), p, engine.Request{Text: "Hi again."})
	if err != nil || len(got) == 0 {
		t.Fatalf("after the second restart: %v, %d chunks", err, len(got))
	}
	if s := p.Stats(); s.Restarts != 2 || s.Workers != 1 || s.Failed != 1 || s.Completed != 2 {
		t.Errorf("stats %+v", s)
	}
}

// TestCancelSubprocess: cancelling stops the child within the sentence.
func TestCancelSubprocess(t *testing.T) {
	p := subprocessPool(t, 1, 1, nil)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := p.Synthesize(ctx, engine.Request{Text: "A sentence of some seconds at real time. Another one."}, func(c engine.Chunk) error {
		if n++; n == 3 {
			cancel()
		}
		if c.Sentence != 0 {
			t.Errorf("chunk of sentence %d after cancel", c.Sentence)
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if got, err := collect(context.Background(), p, engine.Request{Text: "Next."}); err != nil || len(got) == 0 {
		t.Fatalf("after cancel: %v", err)
	}
}

// TestWorkerNice: a worker runs five nice steps below the process
// that started it in the scheduler, whatever that process's own nice is,
// so that the gateway never waits for a core behind the renderers. The
// start runs on a thread of its own made three steps nicer (Linux keeps
// nice per thread, and a child inherits its forking thread's), which is
// then thrown away.
func TestWorkerNice(t *testing.T) {
	type result struct {
		own, child int
		err        error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		var r result
		defer func() { done <- r }()
		p, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0) // getpriority(2) answers 20 - nice
		if err != nil {
			r.err = err
			return
		}
		r.own = min(20-p+3, 19)
		if r.err = syscall.Setpriority(syscall.PRIO_PROCESS, 0, r.own); r.err != nil {
			return
		}
		c := startChild(t, 0)
		defer c.Close()
		if p, r.err = syscall.Getpriority(syscall.PRIO_PROCESS, c.Pid()); r.err == nil {
			r.child = 20 - p
		}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := min(r.own+5, 19); r.child != want {
		t.Fatalf("worker nice %d under a starter at nice %d, want %d", r.child, r.own, want)
	}
}
