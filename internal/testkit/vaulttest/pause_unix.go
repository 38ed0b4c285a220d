//go:build unix

package vaulttest

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Pause freezes the server process (SIGSTOP): it keeps its port and the
// kernel still accepts connections, but nothing answers, as with a hung
// server. It returns once the process is stopped. Resume undoes it; Stop
// works on a paused server too.
func (s *Server) Pause() error {
	if err := s.proc.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	// A signal is delivered asynchronously: wait until the process state
	// is "stopped" where /proc tells it, or a moment elsewhere.
	stat := fmt.Sprintf("/proc/%d/stat", s.proc.Cmd.Process.Pid)
	if _, err := os.Stat(stat); err != nil {
		time.Sleep(200 * time.Millisecond)
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(stat)
		if err != nil {
			return err
		}
		// The state follows the parenthesised command name: "pid (comm) T ...".
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("vault server pid %d did not stop", s.proc.Cmd.Process.Pid)
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.proc.Cmd.Process.Signal(syscall.SIGCONT) }
