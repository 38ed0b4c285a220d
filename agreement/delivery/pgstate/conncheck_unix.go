//go:build linux || darwin || freebsd || netbsd || openbsd

package pgstate

import (
	"errors"
	"net"
	"syscall"
)

// quiet reports whether the socket under c has nothing to read: no
// message, no end of stream, no error. The server of an idle session says
// nothing until asked; a session that ended (the server restarted,
// crashed, or an administrator ended it) has left its FATAL message, its
// end of stream or a reset on the socket, there from the moment the server
// closed it. quiet looks without blocking, reads nothing off the socket and
// sends nothing; whatever it cannot tell (a connection that is not a
// socket) is not quiet.
func quiet(c net.Conn) bool {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok { // TLS
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var peekErr error
	// Control, not Read: Read would wait for the descriptor's read lock,
	// which a reader pgx left blocked on the connection may hold; a
	// peek that does not wait needs no lock.
	err = raw.Control(func(fd uintptr) {
		var b [1]byte
		_, _, peekErr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	// Only "it would block" means nothing is there; a byte, the end of
	// the stream (no error) or an error mean the session is over or
	// not idle.
	return err == nil && (errors.Is(peekErr, syscall.EAGAIN) || errors.Is(peekErr, syscall.EWOULDBLOCK))
}
