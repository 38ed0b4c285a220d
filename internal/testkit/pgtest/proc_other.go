//go:build !linux

package pgtest

import (
	"errors"
	"syscall"
	"time"
)

// Elsewhere than Linux, locate reports PostgreSQL unavailable before any of
// these is called; they exist so the package builds everywhere.

var errNotLinux = errors.New("pgtest: Linux only")

func sysProcAttr(*account) *syscall.SysProcAttr { return nil }

const (
	fastShutdown      = syscall.SIGINT
	immediateShutdown = syscall.SIGKILL
)

func shutdown(int, syscall.Signal) error { return errNotLinux }
func pauseTree(int) error                { return errNotLinux }
func resumeTree(int) error               { return errNotLinux }
func killTree(int) error                 { return errNotLinux }
func treeCPU(int) (time.Duration, error) { return 0, errNotLinux }
func lockFile(string) (func(), error)    { return nil, errNotLinux }
