// Package rawsock reads and writes a TCP socket with raw system calls: the
// same non-blocking read(2) and write(2) the poller's own Read and Write make,
// waiting for readiness in the poller as they do, without telling the Go
// scheduler that a system call is under way (runtime.entersyscall).
//
// Telling it is what costs: when the process was idle, its system monitor
// thread sleeps (sysmonwait), and the first system call made after that wakes
// it with a futex call. A proxy at low concurrency goes idle between every
// request and its upstream's answer, so its reads of the client and of the
// upstream woke the monitor some twice per request: 3.6% of the embedded
// proxy's CPU time with one client connection. A read or write of a
// non-blocking socket never blocks, so there is nothing for the scheduler to
// hand over while it runs. The sockets must stay non-blocking, as the poller
// keeps them: File or Fd on a connection (or a duplicate) makes it blocking,
// and a raw read of it would then hold a thread and its P.
//
// Under the race detector and the sanitizers the calls go through package
// syscall, whose annotations order what goroutines did before writing to a
// socket before what others do after reading from one. Outside Linux, Wrap
// finds no socket and callers use the connection's own calls.
package rawsock

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// socket is a TCP connection's socket, read and written with raw system
// calls. Its Read and Write behave as the connection's own: they wait in the
// poller, honour its deadlines, and fail with the same errors.
type socket struct {
	raw           syscall.RawConn
	local, remote net.Addr
	read, write   call
}

// call is one direction's system call state: one call at a time.
type call struct {
	mu  sync.Mutex
	buf []byte
	n   int
	err error
	f   func(fd uintptr) bool // readFD or writeFD
}

// newSocket returns the socket of c, or nil when c is not a *net.TCPConn.
func newSocket(c net.Conn) *socket {
	tc, ok := c.(*net.TCPConn)
	if !ok || !supported {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	s := &socket{raw: raw, local: tc.LocalAddr(), remote: tc.RemoteAddr()}
	s.read.f = s.readFD
	s.write.f = s.writeFD
	return s
}

// Read reads into p as net.Conn's Read does: some bytes, or an error (io.EOF
// once the peer ended its side).
func (s *socket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return s.do(&s.read, p, "read")
}

// Write writes the whole of p as net.Conn's Write does, or fails.
func (s *socket) Write(p []byte) (int, error) { return s.do(&s.write, p, "write") }

// do makes c's call on p in the poller (which waits for readiness as often
// as c.f asks it to) and reports its outcome as the connection's own call
// named op would.
func (s *socket) do(c *call, p []byte, op string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf, c.n, c.err = p, 0, nil
	var err error
	if c == &s.read {
		err = s.raw.Read(c.f)
	} else {
		err = s.raw.Write(c.f)
	}
	n := c.n
	if err == nil {
		err = c.err
	}
	c.buf, c.err = nil, nil
	if err != nil && err != io.EOF {
		// The poller's errors come wrapped by RawConn already.
		if oe, ok := err.(*net.OpError); ok {
			err = oe.Err
		}
		err = &net.OpError{Op: op, Net: "tcp", Source: s.local, Addr: s.remote, Err: err}
	}
	return n, err
}

// readFD is one attempt of Read: false asks the poller to wait for the
// socket to be readable.
func (s *socket) readFD(fd uintptr) bool {
	c := &s.read
	for {
		n, errno := ReadFD(fd, c.buf)
		switch {
		case errno == syscall.EINTR:
			continue
		case errno == syscall.EAGAIN:
			return false
		case errno != 0:
			c.err = os.NewSyscallError("read", errno)
		case n == 0:
			c.err = io.EOF
		default:
			c.n = n
		}
		return true
	}
}

// writeFD writes what is left of Write's bytes: false asks the poller to
// wait for the socket to take more.
func (s *socket) writeFD(fd uintptr) bool {
	c := &s.write
	for c.n < len(c.buf) {
		n, errno := WriteFD(fd, c.buf[c.n:])
		switch {
		case errno == syscall.EINTR:
			continue
		case errno == syscall.EAGAIN:
			return false
		case errno != 0:
			c.err = os.NewSyscallError("write", errno)
			return true
		case n <= 0 || n > len(c.buf)-c.n:
			// As the poller's Write: a write that took nothing ends it.
			c.err = io.ErrUnexpectedEOF
			return true
		}
		c.n += n
	}
	return true
}

// Conn is a *net.TCPConn whose Read and Write are its socket's raw calls; its
// other methods are the connection's own.
type Conn struct {
	*net.TCPConn
	sock *socket
}

// Wrap returns c with raw reads and writes when it is a *net.TCPConn, and c
// itself otherwise.
func Wrap(c net.Conn) net.Conn {
	s := newSocket(c)
	if s == nil {
		return c
	}
	return &Conn{TCPConn: c.(*net.TCPConn), sock: s}
}

func (c *Conn) Read(p []byte) (int, error)  { return c.sock.Read(p) }
func (c *Conn) Write(p []byte) (int, error) { return c.sock.Write(p) }
