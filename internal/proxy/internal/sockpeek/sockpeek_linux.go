package sockpeek

import (
	"net"
	"syscall"
)

// Peeker looks at one connection's socket, as often as asked, without an
// allocation per look.
type Peeker struct {
	raw   syscall.RawConn
	look  func(fd uintptr) bool
	state State
	buf   [1]byte
}

// New returns a Peeker for c, or nil when c is not a socket it can look at.
func New(c net.Conn) *Peeker {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &Peeker{raw: raw}
	p.look = func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EAGAIN:
			p.state = Empty
		case err == nil && n > 0:
			p.state = Data
		default: // 0 bytes: the peer's end of input; or an error
			p.state = Closed
		}
		return true // never wait for readiness
	}
	return p
}

// Look says what waits in the socket now.
func (p *Peeker) Look() State {
	if err := p.raw.Read(p.look); err != nil {
		return Closed
	}
	return p.state
}
