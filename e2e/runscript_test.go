package e2e

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// runScript starts scripts/run.sh (make run) in dir against addr, in its own
// process group, and returns it with its stdout; it is stopped when the
// test ends.
func runScript(t *testing.T, dir, addr string) (*exec.Cmd, *bufio.Scanner, *bytes.Buffer) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "run.sh")
	cmd := exec.Command("bash", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BIN="+harness.Binary(t), "ADDR="+addr, "DB=sqlite://./data/voicesvc.db")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	return cmd, bufio.NewScanner(out), &stderr
}

// make run with ADDR taken by a server that answers everything (its health
// check included) says which address is taken and how to pick another,
// and prints no key or curl line.
func TestRunScriptPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"status":"ok"}`))
	})}
	go other.Serve(ln)
	defer other.Close()

	cmd, out, stderr := runScript(t, t.TempDir(), ln.Addr().String())
	var stdout strings.Builder
	done := make(chan error, 1)
	go func() {
		for out.Scan() {
			stdout.WriteString(out.Text() + "\n")
		}
		done <- cmd.Wait()
	}()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("run.sh still running after 60s; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	if err == nil {
		t.Fatalf("run.sh exited 0 with its port taken")
	}
	all := stdout.String() + stderr.String()
	for _, want := range []string{ln.Addr().String() + " is already in use", "ADDR="} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %q:\n%s", want, all)
		}
	}
	for _, not := range []string{"API key", "curl", "bind:"} {
		if strings.Contains(all, not) {
			t.Errorf("output has %q:\n%s", not, all)
		}
	}
}

var speakLine = regexp.MustCompile(`/voices/([0-9a-f]{24})/speak`)

// banner reads make run's output up to the end of its speak command and
// returns the lines after "Speak (WAV):" joined into one command.
func banner(t *testing.T, out *bufio.Scanner, stderr *bytes.Buffer) (all, speak string) {
	t.Helper()
	lines := make(chan string)
	go func() {
		for out.Scan() {
			lines <- out.Text()
		}
		close(lines)
	}()
	var b strings.Builder
	inSpeak := false
	deadline := time.After(90 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("run.sh ended before its banner:\n%s\nstderr:\n%s", b.String(), stderr.String())
			}
			b.WriteString(l + "\n")
			if strings.Contains(l, "Speak (WAV):") {
				inSpeak = true
				continue
			}
			if inSpeak {
				speak += strings.TrimSuffix(strings.TrimSpace(l), "\\") + " "
				if !strings.HasSuffix(l, "\\") {
					go func() {
						for range lines {
						}
					}()
					return b.String(), speak
				}
			}
		case <-deadline:
			t.Fatalf("no banner within 90s:\n%s\nstderr:\n%s", b.String(), stderr.String())
		}
	}
}

// The banner's curl lines fail on an HTTP error (--fail-with-body), and the
// speak line names a ready catalog voice even when the workspace's first
// voice is a draft: pasted as printed, it writes a WAV file.
func TestRunScriptSpeakLine(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	cmd, out, stderr := runScript(t, dir, addr)
	first, _ := banner(t, out, stderr)
	key := regexp.MustCompile(`API key: (vsk_[0-9A-Za-z]+)`).FindStringSubmatch(first)
	if key == nil {
		t.Fatalf("no API key in the banner:\n%s", first)
	}
	// A draft voice of the workspace: listed before the catalog.
	req, _ := http.NewRequest("POST", "http://"+addr+harness.APIPath+"/voices",
		strings.NewReader(`{"consent":true,"name":"draft","primary_language":"en"}`))
	req.Header.Set("X-API-Key", key[1])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("create draft voice: %d", resp.StatusCode)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	cmd.Wait()

	_, out, stderr = runScript(t, dir, addr)
	text, speak := banner(t, out, stderr)
	if n := strings.Count(text, "curl -sS --fail-with-body "); n != 2 {
		t.Errorf("%d curl lines with --fail-with-body, want 2:\n%s", n, text)
	}
	if speakLine.FindStringSubmatch(speak) == nil {
		t.Fatalf("no voice id in the speak line %q", speak)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", speak)
	c.Dir = dir
	if b, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", speak, err, b)
	}
	wav, err := os.ReadFile(filepath.Join(dir, "hello.wav"))
	if err != nil || !bytes.HasPrefix(wav, []byte("RIFF")) {
		t.Fatalf("hello.wav is not a WAV file (%v): %.200q", err, wav)
	}
}
