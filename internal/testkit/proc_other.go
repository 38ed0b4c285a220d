//go:build !linux

package testkit

import "os/exec"

// setProcAttr does nothing here: only Linux can tie the server's life to
// the test process; Stop and Main still stop it.
func setProcAttr(*exec.Cmd) {}
