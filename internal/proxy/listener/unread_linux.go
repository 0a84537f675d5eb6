package listener

import (
	"net"
	"syscall"
)

// unreadInput reports whether bytes the client sent wait unread in c's socket,
// which closing it would answer with a reset. It tells without a read that
// blocks or consumes; true when it cannot tell.
func unreadInput(c net.Conn) bool {
	if pc, ok := c.(*proxyConn); ok {
		c = pc.Conn // bytes the PROXY protocol reader holds cause no reset
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	unread := true
	var b [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing (EAGAIN), or the client's end of input (0): nothing to reset.
		unread = n > 0 || err != nil && err != syscall.EAGAIN
		return true // never wait for readiness
	})
	return err != nil || unread
}
