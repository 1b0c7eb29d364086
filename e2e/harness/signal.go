package harness

import (
	"syscall"
	"time"
)

// Terminate sends SIGTERM, as an orchestrator stopping the server does, and
// waits up to limit for the process to exit. It returns the exit code (-1
// when a signal ended it) and whether it exited in time; a server still
// running is left to Stop.
func (s *Server) Terminate(limit time.Duration) (code int, exited bool) {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(limit):
		return 0, false
	}
	s.stopped = true
	return s.cmd.ProcessState.ExitCode(), true
}
