package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"time"
)

// sysProcAttr makes the kernel kill the process if the test binary dies
// without stopping it (a crash, a timeout panic), so no server outlives its
// tests, and runs it as owner when set. (Go sets the parent-death signal
// after switching user, which would otherwise clear it.)
func sysProcAttr(owner *account) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if owner != nil {
		attr.Credential = &syscall.Credential{Uid: uint32(owner.uid), Gid: uint32(owner.gid), Groups: []uint32{}}
	}
	return attr
}

// The postmaster's shutdown signals (PostgreSQL's "Server Shutdown").
const (
	fastShutdown      = syscall.SIGINT  // roll back sessions, checkpoint, exit
	immediateShutdown = syscall.SIGQUIT // exit at once; crash recovery on the next start
)

// shutdown asks the postmaster pid to shut down in the given mode. A paused
// server is resumed so that it can.
func shutdown(pid int, mode syscall.Signal) error {
	if err := syscall.Kill(pid, mode); err != nil {
		return err
	}
	return resumeTree(pid)
}

// PostgreSQL's processes are the postmaster and its children: each child
// makes itself a process group leader, so they cannot be signalled as one
// group. These functions find them through /proc.

// pauseTree stops (SIGSTOP) the postmaster, then each of its children, and
// returns once all are stopped.
func pauseTree(pid int) error {
	kids, err := freeze(pid)
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := stopAndWait(k, syscall.SIGSTOP); err != nil {
			return err
		}
	}
	return nil
}

// resumeTree continues (SIGCONT) the postmaster's children and the
// postmaster. Continuing a running process does nothing.
func resumeTree(pid int) error {
	kids, err := children(pid)
	if err != nil {
		return err
	}
	return signalAll(append(kids, pid), syscall.SIGCONT)
}

// killTree kills (SIGKILL) the postmaster and all its children at once, as
// a crash would, and returns once no process of the server runs. The caller
// reaps the postmaster; the children, reparented to init, may stay zombies
// where init does not reap, which holds no resource PostgreSQL checks.
func killTree(pid int) error {
	kids, err := freeze(pid)
	if err != nil {
		return err
	}
	if err := signalAll(append(kids, pid), syscall.SIGKILL); err != nil {
		return err
	}
	for _, k := range kids {
		if err := waitState(k, "Z"); err != nil {
			return err
		}
	}
	return nil
}

// freeze stops the postmaster, so that it forks no new child and reacts to
// no child's stop or death, and returns its children.
func freeze(pid int) ([]int, error) {
	if err := stopAndWait(pid, syscall.SIGSTOP); err != nil {
		return nil, err
	}
	return children(pid)
}

// signalAll sends sig to each process, skipping those already gone.
func signalAll(pids []int, sig syscall.Signal) error {
	for _, p := range pids {
		if err := syscall.Kill(p, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	return nil
}

// stopAndWait sends sig and waits until the process is stopped (or gone).
func stopAndWait(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}
	// A signal is delivered asynchronously.
	return waitState(pid, "TtZ")
}

// waitState waits until process pid is in one of the /proc states given
// (T stopped, t traced, Z zombie) or gone.
func waitState(pid int, states string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, _, err := procStat(pid)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && bytes.IndexByte([]byte(states), st) >= 0) {
			return nil
		}
		if err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d still in state %c, not in %q", pid, st, states)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// children returns the processes whose parent is pid.
func children(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var kids []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, err := procStat(p); err == nil && ppid == pid {
			kids = append(kids, p)
		}
	}
	return kids, nil
}

// procStat reads a process's state and parent from /proc/<pid>/stat:
// "pid (comm) state ppid ...", where comm may hold spaces and parentheses.
func procStat(pid int) (state byte, ppid int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	ppid, err = strconv.Atoi(string(fields[1]))
	return fields[0][0], ppid, err
}

// lockFile takes an exclusive lock on path, shared with other processes,
// until unlock.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	// Nothing is ever written to f: closing it only releases the lock,
	// which the kernel does in any case.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}

// clockTick is the unit of the CPU times in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux architecture).
const clockTick = 10 * time.Millisecond

// treeCPU returns the CPU time of the postmaster pid and its processes:
// its own, that of its live children, and that of the children it has
// reaped (a backend or autovacuum worker that ended).
func treeCPU(pid int) (time.Duration, error) {
	self, reaped, err := procCPU(pid)
	if err != nil {
		return 0, err
	}
	total := self + reaped
	kids, err := children(pid)
	if err != nil {
		return 0, err
	}
	for _, k := range kids {
		if t, _, err := procCPU(k); err == nil {
			total += t // one that ended meanwhile is in reaped next time
		}
	}
	return total, nil
}

// procCPU reads a process's user and system CPU time, and that of its
// children it waited for, from /proc/<pid>/stat.
func procCPU(pid int) (self, reaped time.Duration, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 15 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	var ticks [4]int64 // utime, stime, cutime, cstime
	for j := range ticks {
		if ticks[j], err = strconv.ParseInt(string(fields[11+j]), 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	return time.Duration(ticks[0]+ticks[1]) * clockTick, time.Duration(ticks[2]+ticks[3]) * clockTick, nil
}
