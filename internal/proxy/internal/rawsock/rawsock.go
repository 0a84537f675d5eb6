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
// socket before what others do after reading from one. Outside Linux, New
// finds no socket and callers use the connection's own calls.
package rawsock

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// Socket is a TCP connection's socket, read and written with raw system
// calls. Its Read and Write behave as the connection's own: they wait in the
// poller, honour its deadlines, and fail with the same errors.
type Socket struct {
	raw           syscall.RawConn
	local, remote net.Addr

	rmu   sync.Mutex // the read state below: one Read at a time
	rbuf  []byte
	rn    int
	rerr  error
	readf func(fd uintptr) bool

	wmu    sync.Mutex // the write state below: one Write at a time
	wbuf   []byte
	wn     int
	werr   error
	writef func(fd uintptr) bool
}

// New returns the socket of c, or nil when c is not a *net.TCPConn.
func New(c net.Conn) *Socket {
	tc, ok := c.(*net.TCPConn)
	if !ok || !supported {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	s := &Socket{raw: raw, local: tc.LocalAddr(), remote: tc.RemoteAddr()}
	s.readf = s.readFD
	s.writef = s.writeFD
	return s
}

// Read reads into p as net.Conn's Read does: some bytes, or an error (io.EOF
// once the peer ended its side).
func (s *Socket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	s.rbuf, s.rn, s.rerr = p, 0, nil
	err := s.raw.Read(s.readf)
	n, rerr := s.rn, s.rerr
	s.rbuf, s.rerr = nil, nil
	if err == nil {
		err = rerr
	}
	if err != nil && err != io.EOF {
		err = s.opError("read", err)
	}
	return n, err
}

// opError is err as the connection's own call would report it; the poller's
// errors come wrapped by RawConn already.
func (s *Socket) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: s.local, Addr: s.remote, Err: err}
}

// readFD is one attempt of Read: false asks the poller to wait for the
// socket to be readable.
func (s *Socket) readFD(fd uintptr) bool {
	for {
		n, errno := ReadFD(fd, s.rbuf)
		switch {
		case errno == syscall.EINTR:
			continue
		case errno == syscall.EAGAIN:
			return false
		case errno != 0:
			s.rerr = os.NewSyscallError("read", errno)
		case n == 0:
			s.rerr = io.EOF
		default:
			s.rn = n
		}
		return true
	}
}

// Write writes the whole of p as net.Conn's Write does, or fails.
func (s *Socket) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.wbuf, s.wn, s.werr = p, 0, nil
	err := s.raw.Write(s.writef)
	n, werr := s.wn, s.werr
	s.wbuf, s.werr = nil, nil
	if err == nil {
		err = werr
	}
	if err != nil {
		err = s.opError("write", err)
	}
	return n, err
}

// writeFD writes what is left of Write's bytes: false asks the poller to
// wait for the socket to take more.
func (s *Socket) writeFD(fd uintptr) bool {
	for s.wn < len(s.wbuf) {
		n, errno := WriteFD(fd, s.wbuf[s.wn:])
		switch {
		case errno == syscall.EINTR:
			continue
		case errno == syscall.EAGAIN:
			return false
		case errno != 0:
			s.werr = os.NewSyscallError("write", errno)
			return true
		case n <= 0 || n > len(s.wbuf)-s.wn:
			// As the poller's Write: a write that took nothing ends it.
			s.werr = io.ErrUnexpectedEOF
			return true
		}
		s.wn += n
	}
	return true
}

// Conn is a *net.TCPConn whose Read and Write are its socket's raw calls; its
// other methods are the connection's own.
type Conn struct {
	*net.TCPConn
	sock *Socket
}

// Wrap returns c with raw reads and writes when it is a *net.TCPConn, and c
// itself otherwise.
func Wrap(c net.Conn) net.Conn {
	s := New(c)
	if s == nil {
		return c
	}
	return &Conn{TCPConn: c.(*net.TCPConn), sock: s}
}

func (c *Conn) Read(p []byte) (int, error)  { return c.sock.Read(p) }
func (c *Conn) Write(p []byte) (int, error) { return c.sock.Write(p) }
