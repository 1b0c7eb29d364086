package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// The bare server runs in a process of its own (`voicesvc bench bare`), as
// voicesvc does: in the bench's process it shared the client's scheduler
// and threads, which neither favours it nor burdens it the way a server of
// its own is. It takes the voicesvc server's nice value, so that both sides
// meet the client on the same terms.

// bareCommand starts the bare server: this program's `bench bare`. Tests
// replace it (their binary is not voicesvc).
var bareCommand = func() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return []string{exe, "bench", "bare"}, nil
}

// bareListening is the line the bare process prints once it serves.
const bareListening = "bare listening on "

// bareMain is `voicesvc bench bare --recording FILE`: it replays the
// recording until its standard input closes (its parent's end of a pipe:
// a bench that exits or dies takes its bare server with it).
func bareMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench bare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("recording", "", "the recorded answers (JSON, written by bench baseline)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	b, err := os.ReadFile(*file)
	if err != nil {
		fmt.Fprintln(stderr, "bench bare:", err)
		return 1
	}
	var rec recording
	if err := json.Unmarshal(b, &rec); err != nil {
		fmt.Fprintln(stderr, "bench bare:", err)
		return 1
	}
	srv, err := startBare(&rec)
	if err != nil {
		fmt.Fprintln(stderr, "bench bare:", err)
		return 1
	}
	defer srv.close()
	fmt.Fprintln(stdout, bareListening+srv.url)
	_, _ = io.Copy(io.Discard, stdin)
	return 0
}

// bareProc is a running bare server process.
type bareProc struct {
	cmd   *exec.Cmd
	stdin io.Closer
	url   string
	file  string
}

// spawnBare writes rec to a temporary file and starts the bare server on
// it, at the nice value of the process serverPID (when there is one).
func spawnBare(ctx context.Context, rec *recording, serverPID int) (*bareProc, error) {
	argv, err := bareCommand()
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "voicesvc-bare-*.json")
	if err != nil {
		return nil, err
	}
	p := &bareProc{file: f.Name()}
	err = json.NewEncoder(f).Encode(rec)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(p.file)
		return nil, err
	}
	p.cmd = exec.Command(argv[0], append(argv[1:], "--recording", p.file)...)
	p.cmd.Stderr = os.Stderr
	stdin, err := p.cmd.StdinPipe()
	if err == nil {
		p.stdin = stdin
		var out io.ReadCloser
		if out, err = p.cmd.StdoutPipe(); err == nil {
			if err = p.cmd.Start(); err == nil {
				err = p.await(ctx, out)
			}
		}
	}
	if err != nil {
		p.close()
		return nil, fmt.Errorf("bare server: %w", err)
	}
	if serverPID > 0 {
		// getpriority(2) answers 20 - nice on Linux.
		if prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, serverPID); err == nil {
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, p.cmd.Process.Pid, 20-prio)
		}
	}
	return p, nil
}

// await reads the process's listening line.
func (p *bareProc) await(ctx context.Context, out io.Reader) error {
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), bareListening); ok {
				line <- u
				break
			}
		}
		close(line)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case u, ok := <-line:
		if !ok {
			return errors.New("exited before serving")
		}
		p.url = u
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("did not start within 10s")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *bareProc) pid() int { return p.cmd.Process.Pid }

// close ends the process (its standard input closes) and removes the file.
func (p *bareProc) close() {
	if p.stdin != nil {
		p.stdin.Close()
	}
	if p.cmd != nil && p.cmd.Process != nil {
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	}
	os.Remove(p.file)
}
