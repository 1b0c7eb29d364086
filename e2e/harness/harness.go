// Package harness starts the real voicesvc binary for end-to-end tests: built
// once per test process, listening on a free loopback port, with its own
// store, and drives the admin CLI against that store.
package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// APIPath is the API root below the base URL.
const APIPath = "/voice-svc/api/v1/public"

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary returns the path of a voicesvc binary: $VOICESVC_BIN when set (make
// test builds it first), else one built once for this test process.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("VOICESVC_BIN"); p != "" {
			binPath = p
			return
		}
		dir, err := os.MkdirTemp("", "voicesvc-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "voicesvc")
		cmd := exec.Command("go", "build", "-o", binPath, "voicesvc/cmd/voicesvc")
		cmd.Dir = moduleRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Options configure one server.
type Options struct {
	DB   string   // store URL; default a fresh SQLite file in t.TempDir()
	Args []string // extra serve flags, e.g. --engine reference
	Env  []string // extra environment, KEY=VALUE
	// Wrap is a command the server runs under, given the binary and its
	// arguments, e.g. prlimit --nofile=1024:1024. It must exec the binary,
	// so that PID is the server's.
	Wrap []string
}

// Server is one running voicesvc process.
type Server struct {
	t       testing.TB
	URL     string // http://127.0.0.1:PORT
	API     string // URL + APIPath
	Addr    string // 127.0.0.1:PORT
	DB      string
	cmd     *exec.Cmd
	logs    *LogBuffer
	exited  chan struct{}
	stopped bool
}

// Start runs `voicesvc serve` on a free port and waits until it listens.
// The process is stopped when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	if o.DB == "" {
		o.DB = "sqlite://" + filepath.Join(t.TempDir(), "voicesvc.db")
	}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", o.DB,
		"--media-dir", filepath.Join(t.TempDir(), "media")}, o.Args...)
	argv := append(append(append([]string{}, o.Wrap...), Binary(t)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), o.Env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &LogBuffer{}
	cmd.Stdout = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, DB: o.DB, cmd: cmd, logs: logs, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			logs.Write([]byte(line + "\n"))
			if a, ok := listenLine(line); ok {
				select {
				case addr <- a:
				default:
				}
			}
		}
		io.Copy(logs, stderr)
	}()
	go func() { cmd.Wait(); close(s.exited) }()
	t.Cleanup(s.Stop)
	select {
	case u := <-addr:
		s.URL = u
		s.Addr = u[strings.Index(u, "://")+3:]
		s.API = s.URL + APIPath
	case <-s.exited:
		t.Fatalf("voicesvc exited before listening:\n%s", logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("voicesvc did not listen within 60s:\n%s", logs.String())
	}
	return s
}

// listenLine recognizes the line serve prints once it listens:
// "voicesvc listening on http://ADDR" (https with --tls-cert); it returns
// the URL.
func listenLine(line string) (string, bool) {
	const marker = "voicesvc listening on "
	i := strings.Index(line, marker)
	if i < 0 {
		return "", false
	}
	rest := line[i+len(marker):]
	if j := strings.IndexAny(rest, " \t\""); j >= 0 {
		rest = rest[:j]
	}
	return rest, strings.HasPrefix(rest, "http://") || strings.HasPrefix(rest, "https://")
}

// Logs returns what the server printed so far.
func (s *Server) Logs() string { return s.logs.String() }

// PID is the server's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop ends the server with SIGTERM (graceful), then SIGKILL after 15 s.
func (s *Server) Stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	if s.t.Failed() {
		s.t.Logf("voicesvc logs (%s):\n%s", s.Addr, s.logs.String())
	}
}

// Kill ends the server with SIGKILL, as a crash would.
func (s *Server) Kill() {
	if s.stopped {
		return
	}
	s.stopped = true
	s.cmd.Process.Kill()
	<-s.exited
}

// Admin runs `voicesvc admin ARGS... --db <the server's store>` and decodes
// its JSON output.
func Admin(t testing.TB, db string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), append(append([]string{"admin"}, args...), "--db", db)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("voicesvc admin %v: %v\n%s", args, err, stderr.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("voicesvc admin %v printed %q: %v", args, out, err)
	}
	return m
}

// Workspace makes a workspace on plan with one key carrying every scope, and
// returns the workspace id and the key.
func Workspace(t testing.TB, db, plan string) (wsID, key string) {
	t.Helper()
	ws := Admin(t, db, "workspace", "create", "--name", "e2e-"+plan, "--plan", plan)
	wsID = ws["id"].(string)
	k := Admin(t, db, "key", "create", "--workspace", wsID)
	return wsID, k["key"].(string)
}

// LogBuffer collects what a process prints, safe for its stdout and
// stderr at once: the first Max bytes (4 MiB when 0), enough for failure
// messages and for grepping a log.
type LogBuffer struct {
	Max int
	mu  sync.Mutex
	b   strings.Builder
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if max := l.Max; l.b.Len() < max || max == 0 && l.b.Len() < 4<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
