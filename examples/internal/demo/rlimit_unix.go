//go:build unix

package demo

import "syscall"

// maxConnsForDescriptors is a quarter of the process's descriptor limit:
// the most connections a server may hold so the program's own files always
// find descriptors.
func maxConnsForDescriptors() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 64
	}
	return int(max(min(rl.Cur/4, 1<<20), 16))
}
