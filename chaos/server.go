package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"voicesvc/e2e/harness"
)

// APIPath is the API root below the base URL.
const APIPath = "/voice-svc/api/v1/public"

// ServerOpts start one voicesvc process.
type ServerOpts struct {
	DB         string   // store URL; default a fresh SQLite file in Dir
	Dir        string   // data directory (store, media); default a new one under the suite's temp dir
	MediaDir   string   // default Dir/media
	Args       []string // extra serve flags
	NoFile     int      // RLIMIT_NOFILE soft limit of the child when > 0, through prlimit
	NoFileHard int      // its hard limit (0: the same as NoFile)
}

// Server is one running voicesvc process started by the suite. Its output
// is kept (bounded) so the suite can grep it for secrets.
type Server struct {
	Name, URL, API, Addr, DB, Dir, MediaDir string

	suite    *Suite
	cmd      *exec.Cmd
	logs     *harness.LogBuffer
	exited   chan struct{}
	mu       sync.Mutex
	expected bool // the suite stopped or killed it on purpose
	exitErr  error
}

// StartServer runs `voicesvc serve` on a free loopback port and waits until
// it listens. Every server the suite starts is stopped by Suite.Close.
func (s *Suite) StartServer(name string, o ServerOpts) (*Server, error) {
	if o.Dir == "" {
		d, err := os.MkdirTemp(s.Tmp, name+"-")
		if err != nil {
			return nil, err
		}
		o.Dir = d
	}
	if o.DB == "" {
		o.DB = "sqlite://" + filepath.Join(o.Dir, "voicesvc.db")
	}
	if o.MediaDir == "" {
		o.MediaDir = filepath.Join(o.Dir, "media")
	}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", o.DB, "--media-dir", o.MediaDir}, o.Args...)
	path := s.Bin
	if o.NoFile > 0 {
		// prlimit execs the binary, so the PID we hold is the server's.
		hard := o.NoFileHard
		if hard == 0 {
			hard = o.NoFile
		}
		args = append([]string{fmt.Sprintf("--nofile=%d:%d", o.NoFile, hard), s.Bin}, args...)
		path = "prlimit"
	}
	cmd := exec.Command(path, args...)
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the suite
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	logs := &harness.LogBuffer{Max: 16 << 20} // the first 16 MiB: secrets are grepped in it
	cmd.Stdout = logs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	srv := &Server{Name: name, DB: o.DB, Dir: o.Dir, MediaDir: o.MediaDir, suite: s, cmd: cmd, logs: logs, exited: make(chan struct{})}
	s.track(srv)
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
	go func() {
		err := cmd.Wait()
		srv.mu.Lock()
		srv.exitErr = err
		srv.mu.Unlock()
		close(srv.exited)
	}()
	select {
	case a := <-addr:
		srv.Addr, srv.URL = a, "http://"+a
		srv.API = srv.URL + APIPath
		return srv, nil
	case <-srv.exited:
		srv.markExpected()
		return nil, fmt.Errorf("%s exited before listening: %s", name, tail(logs.String(), 600))
	case <-time.After(60 * time.Second):
		srv.Kill()
		return nil, fmt.Errorf("%s did not listen within 60s", name)
	}
}

func listenLine(line string) (string, bool) {
	const marker = "voicesvc listening on http://"
	i := strings.Index(line, marker)
	if i < 0 {
		return "", false
	}
	rest := line[i+len(marker):]
	if j := strings.IndexAny(rest, " \t\""); j >= 0 {
		rest = rest[:j]
	}
	return rest, rest != ""
}

// PID is the server's process id.
func (srv *Server) PID() int { return srv.cmd.Process.Pid }

// Logs is what the server printed so far (the first 16 MiB).
func (srv *Server) Logs() string { return srv.logs.String() }

// Alive reports whether the process is still running.
func (srv *Server) Alive() bool {
	select {
	case <-srv.exited:
		return false
	default:
		return true
	}
}

// Crashed reports an exit the suite did not cause.
func (srv *Server) Crashed() bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return !srv.Alive() && !srv.expected
}

func (srv *Server) markExpected() {
	srv.mu.Lock()
	srv.expected = true
	srv.mu.Unlock()
}

// Kill ends the server with SIGKILL, as a crash would.
func (srv *Server) Kill() {
	srv.markExpected()
	srv.cmd.Process.Kill()
	<-srv.exited
}

// Term sends SIGTERM and returns at once; Wait collects the exit.
func (srv *Server) Term() {
	srv.markExpected()
	srv.cmd.Process.Signal(syscall.SIGTERM)
}

// Wait waits up to limit for the process to end and returns its exit code
// (-1 when it was killed by a signal or did not end: then it is killed).
func (srv *Server) Wait(limit time.Duration) (int, bool) {
	select {
	case <-srv.exited:
	case <-time.After(limit):
		srv.Kill()
		return -1, false
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	var ee *exec.ExitError
	if errors.As(srv.exitErr, &ee) {
		return ee.ExitCode(), true
	}
	if srv.exitErr != nil {
		return -1, true
	}
	return 0, true
}

// Stop ends the server gracefully (SIGTERM, SIGKILL after 15 s).
func (srv *Server) Stop() {
	if !srv.Alive() {
		return
	}
	srv.Term()
	srv.Wait(15 * time.Second)
}

// RSS is the server's resident memory in bytes (/proc/PID/status VmRSS).
func (srv *Server) RSS() int64 { return procRSS(srv.PID()) }

func procRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// FDs is the number of the server's open descriptors.
func (srv *Server) FDs() int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", srv.PID()))
	if err != nil {
		return -1
	}
	return len(ents)
}

// Goroutines is go_goroutines from /metrics (-1 when unreadable).
func (srv *Server) Goroutines() int {
	c := &http.Client{Timeout: 10 * time.Second}
	r, err := c.Get(srv.URL + "/metrics")
	if err != nil {
		return -1
	}
	defer r.Body.Close()
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "go_goroutines ") {
			n, err := strconv.ParseFloat(strings.TrimSpace(l[len("go_goroutines "):]), 64)
			if err == nil {
				return int(n)
			}
		}
	}
	return -1
}

// Children are the PIDs whose parent is the server (its engine workers).
func (srv *Server) Children() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut after ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 {
			if pp, _ := strconv.Atoi(f[1]); pp == srv.PID() {
				out = append(out, pid)
			}
		}
	}
	return out
}

// Healthy reports whether GET /healthz answers 200 within 10 s.
func (srv *Server) Healthy() bool {
	c := &http.Client{Timeout: 10 * time.Second}
	r, err := c.Get(srv.URL + "/healthz")
	if err != nil {
		return false
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return r.StatusCode == 200
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
