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

	// WriteAwait's state: what is left to write, what was written, and
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
	p.writeAwait = func(fd uintptr) bool {
		if p.sent {
			return true // woken: something arrived, or the socket ended
		}
		for len(p.out) > 0 {
			n, err := syscall.Write(int(fd), p.out)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || n <= 0 {
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

// WriteAwait writes b on the socket, as much as it takes at once, and when
// it took the whole returns only once something arrives, or the socket ends,
// or a deadline passes, without reading. A read made then finds what
// arrived, where a read made at once would find nothing, fail, and wait: a
// system call saved per exchange.
//
// Only for an answer to b: bytes already in the socket when WriteAwait
// starts do not end the wait. The poller's readiness is reset before the
// write, so that an answer arriving at once wakes it, which forgets any
// arrival before; a server reading a client's next request could wait for
// ever on one already there (pipelined).
//
// It reports how much of b was written; less than all (the socket's buffer
// full, or the write failing) means nothing was waited for, and the caller
// writes the rest with the connection's own Write, which blocks and reports
// errors as usual. A failed wait is not reported either: the read that
// follows meets its cause.
func (p *Peeker) WriteAwait(b []byte) int {
	p.out, p.wrote, p.sent = b, 0, false
	_ = p.raw.Read(p.writeAwait)
	p.out = nil
	return p.wrote
}
