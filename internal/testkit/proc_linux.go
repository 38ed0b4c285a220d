package testkit

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the server if the test process dies
// without stopping it (a crash, a timeout panic), so no server outlives its
// test binary.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
