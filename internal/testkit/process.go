package testkit

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Process is a throwaway server a test harness started (a Vault dev
// server, PostgreSQL, Prometheus): it is reaped when it exits, waited for
// until it is ready, and killed once. On Linux the kernel kills it too if
// the test binary dies without stopping it.
type Process struct {
	// Cmd is the started command; Cmd.Process.Pid is the server's pid.
	Cmd    *exec.Cmd
	exited chan struct{} // closed once it has exited and been reaped
	kill   sync.Once
}

// StartProcess starts cmd and reaps it when it exits. A cmd without
// SysProcAttr of its own is tied to the test binary's life where the OS
// can.
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		setProcAttr(cmd)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	p := &Process{Cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Exited is closed once the process has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// WaitReady calls ready every tick until it returns nil; it fails when the
// process exits first, or when timeout or ctx ends, with ready's last
// error.
func (p *Process) WaitReady(ctx context.Context, timeout, tick time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	var last error
	for {
		select {
		case <-p.exited:
			return errors.New("the server process exited")
		case <-ctx.Done():
			return fmt.Errorf("%w (last check: %v)", ctx.Err(), last)
		case <-ticker.C:
		}
		if last = ready(ctx); last == nil {
			return nil
		}
	}
}

// Kill kills the process (SIGKILL) and waits up to 30 s for it to exit.
// Only the first call does anything.
func (p *Process) Kill() {
	p.kill.Do(func() {
		_ = p.Cmd.Process.Kill()
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
		}
	})
}

// ErrPortTaken is what a start returns when another process took the port
// chosen for the server before the server could bind it.
var ErrPortTaken = errors.New("port taken")

// NotReady is the error of a server that did not become ready with err:
// it matches ErrPortTaken when the server's output says its port was
// taken (then RetryPortTaken starts another), and it carries the output.
func NotReady(server string, err error, output string) error {
	if strings.Contains(output, "address already in use") || strings.Contains(output, "could not bind") {
		return fmt.Errorf("%s could not listen (%w): %w\n--- server output ---\n%s", server, ErrPortTaken, err, output)
	}
	return fmt.Errorf("%s did not become ready: %w\n--- server output ---\n%s", server, err, output)
}

// RetryPortTaken calls start up to three times, again while it fails with
// an error matching ErrPortTaken, and returns its last result.
func RetryPortTaken[T any](start func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range 3 {
		if v, err = start(); !errors.Is(err, ErrPortTaken) {
			break
		}
	}
	return v, err
}
