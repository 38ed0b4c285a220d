//go:build !linux

package promtest

import "os/exec"

// setProcAttr does nothing where the kernel has no parent-death signal:
// Stop, from the test's cleanup, kills the server.
func setProcAttr(*exec.Cmd) {}
