package upstream

import (
	"net"
	"syscall"
)

// peeker looks, without blocking or consuming anything, whether an idle
// connection has become readable: the server closed it (or reset it), or sent
// bytes no request asked for. Either way it must not carry a request.
type peeker struct {
	raw      syscall.RawConn
	check    func(fd uintptr) bool
	readable bool
	buf      [1]byte
}

func newPeeker(conn net.Conn) *peeker {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &peeker{raw: raw}
	p.check = func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		p.readable = err != syscall.EAGAIN
		return true // never wait for readiness
	}
	return p
}

// peerClosed reports whether the connection became readable while idle.
func (p *peeker) peerClosed() bool {
	if p == nil {
		return false
	}
	if err := p.raw.Read(p.check); err != nil {
		return true
	}
	return p.readable
}
