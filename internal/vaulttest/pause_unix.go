//go:build unix

package vaulttest

import "syscall"

// Pause freezes the server process (SIGSTOP): it keeps its port and
// accepts connections but answers nothing, as a hung server would. Resume
// undoes it; Stop works on a paused server too.
func (s *Server) Pause() error { return s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }
