package sockpeek

import (
	"net"
	"syscall"

	"github.com/portico-dev/portico/internal/proxy/internal/rawsock"
)

// Peeker looks at one connection's socket, as often as asked, without an
// allocation per look.
type Peeker struct {
	raw   syscall.RawConn
	look  func(fd uintptr) bool
	state State
	buf   [1]byte

	// LookWriteAwait's state: what is left to write, what was written, and
	// whether the whole was, so that the next call is the poller's wake-up.
	writeAwait func(fd uintptr) bool
	out        []byte
	wrote      int
	sent       bool
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
		// Raw calls: see package rawsock.
		n, err := rawsock.PeekFD(fd, p.buf[:])
		switch {
		case err == syscall.EAGAIN:
			p.state = Empty
		case err == 0 && n > 0:
			p.state = Data
		default: // 0 bytes: the peer's end of input; or an error
			p.state = Closed
		}
		return true // never wait for readiness
	}
	p.writeAwait = func(fd uintptr) bool {
		if p.sent {
			return true // woken: something arrived, or the socket ended
		}
		if p.look(fd); p.state != Empty {
			return true // nothing written: the socket is not the caller's to write on
		}
		for len(p.out) > 0 {
			n, err := rawsock.WriteFD(fd, p.out)
			if err == syscall.EINTR {
				continue
			}
			if err != 0 || n <= 0 {
				return true // full, or failing: the caller's own write takes over
			}
			p.wrote += n
			p.out = p.out[n:]
		}
		p.sent = true
		return false // wait for readiness, with no read made
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

// LookWriteAwait looks at the socket as Look does and, when nothing waits
// there, writes b, as much as the socket takes at once; when it took the
// whole, it returns only once something arrives, or the socket ends, or a
// deadline passes, without reading. A read made then finds what arrived,
// where a read made at once would find nothing, fail, and wait: a system
// call saved per exchange.
//
// The look is made inside the wait, after the poller's readiness for the
// socket was reset: the wait then ends with anything that arrives after the
// look, and what arrived before it (which the reset forgets) is what the
// look reports, with nothing written. Made apart, a peer's close arriving
// between the look and the wait would be seen by neither.
//
// It returns what the look found and how much of b was written: less than
// all when the look found something, or the socket's buffer was full, or
// the write failed. Then nothing was waited for, and the caller writes the
// rest (if the socket is still its to write on) with the connection's own
// Write, which blocks and reports errors as usual. A failed wait is not
// reported either: the read that follows meets its cause.
func (p *Peeker) LookWriteAwait(b []byte) (State, int) {
	p.out, p.wrote, p.sent = b, 0, false
	if err := p.raw.Read(p.writeAwait); err != nil && !p.sent {
		p.state = Closed // a deadline passed, or the connection was closed, before the look
	}
	p.out = nil
	return p.state, p.wrote
}
