//go:build linux

package rawsock

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testutil"
)

// pair is a loopback connection whose client side reads and writes with raw
// calls (Wrap); server is the plain other end.
func pair(t *testing.T) (client *Conn, server net.Conn) {
	t.Helper()
	c, s := testutil.TCPPair(t)
	w, ok := Wrap(c).(*Conn)
	if !ok {
		t.Fatalf("Wrap(%T) did not take the socket", c)
	}
	return w, s
}

// Bytes written on either side arrive whole and in order on the other, and
// the peer's close reads as io.EOF, as with net.Conn's own calls.
func TestSocketReadsAndWritesAsTheConnection(t *testing.T) {
	c, s := pair(t)
	if n, err := c.Write([]byte("request")); n != 7 || err != nil {
		t.Fatalf("Write: %d, %v", n, err)
	}
	buf := make([]byte, 16)
	if n, err := io.ReadFull(s, buf[:7]); err != nil || string(buf[:n]) != "request" {
		t.Fatalf("the peer read %q, %v", buf[:n], err)
	}
	if _, err := s.Write([]byte("response")); err != nil {
		t.Fatal(err)
	}
	if n, err := io.ReadFull(c, buf[:8]); err != nil || string(buf[:n]) != "response" {
		t.Fatalf("Read: %q, %v", buf[:n], err)
	}
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Errorf("an empty Read: %d, %v", n, err)
	}
	s.Close()
	if n, err := c.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("Read after the peer closed: %d, %v; want 0, io.EOF", n, err)
	}
}

// A write larger than the socket's buffers waits in the poller until the
// peer reads, and sends every byte in order.
func TestSocketWriteWaitsForRoom(t *testing.T) {
	c, s := pair(t)
	want := make([]byte, 16<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(10 * time.Millisecond) // let the writer fill the buffers first
		b, _ := io.ReadAll(s)
		got <- b
	}()
	if n, err := c.Write(want); n != len(want) || err != nil {
		t.Fatalf("Write: %d of %d, %v", n, len(want), err)
	}
	c.Close()
	select {
	case b := <-got:
		if !bytes.Equal(b, want) {
			t.Fatalf("the peer read %d bytes, not the %d written", len(b), len(want))
		}
	case <-time.After(time.Minute): // a hang, not a speed limit
		t.Fatal("the peer never read the write")
	}
}

// A read with nothing to read waits in the poller and ends with the
// connection's deadline, failing as net.Conn's Read does.
func TestSocketReadHonoursTheDeadline(t *testing.T) {
	c, _ := pair(t)
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := c.Read(make([]byte, 8))
	var ne net.Error
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past the deadline: %d, %v; want a timeout", n, err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "read" {
		t.Errorf("the error %v is not a read's *net.OpError", err)
	}
	if err := c.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("late")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Write past the deadline: %v; want a timeout", err)
	}
}

// A closed connection, or a peer that reset it, fails Read and Write with
// the errors of net.Conn's calls.
func TestSocketErrorsAreTheConnections(t *testing.T) {
	c, s := pair(t)
	if tc, ok := s.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with a reset
	}
	s.Close()
	deadline := time.Now().Add(time.Minute)
	var err error
	for time.Now().Before(deadline) { // the reset arrives after the close returns
		if _, err = c.Write([]byte("x")); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var se *os.SyscallError
	if !errors.As(err, &se) || se.Syscall != "write" || !(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		t.Errorf("Write to a reset connection: %v; want write's ECONNRESET or EPIPE", err)
	}
	c.Close()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close: %v; want net.ErrClosed", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v; want net.ErrClosed", err)
	}
}

// Closing the connection, or moving its deadline into the past (how the
// upstream client stops an exchange), ends a Read and a Write that wait in
// the poller, with the connection's errors.
func TestSocketWaitEndsWithCloseOrDeadline(t *testing.T) {
	c, _ := pair(t) // the peer reads nothing: a large write fills the buffers
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		read <- err
	}()
	time.Sleep(10 * time.Millisecond) // let it wait
	if err := c.SetDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, read); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a Read waiting when the deadline moved into the past: %v", err)
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(make([]byte, 64<<20)) // more than the peer's and our buffers hold
		wrote <- err
	}()
	go func() {
		_, err := c.Read(make([]byte, 8))
		read <- err
	}()
	time.Sleep(10 * time.Millisecond)
	c.Close()
	if err := waitErr(t, wrote); !errors.Is(err, net.ErrClosed) {
		t.Errorf("a Write waiting when the connection closed: %v", err)
	}
	if err := waitErr(t, read); !errors.Is(err, net.ErrClosed) {
		t.Errorf("a Read waiting when the connection closed: %v", err)
	}
}

// waitErr is what ch gives, within a minute (a hang, not a speed limit).
func waitErr(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(time.Minute):
		t.Fatal("a call never returned")
		return nil
	}
}

// The errors read as the connection's own calls' would.
func TestSocketErrorsReadAsTheConnections(t *testing.T) {
	c, _ := pair(t)
	plain, _ := testutil.TCPPair(t)
	for _, conn := range []net.Conn{c, plain} {
		if err := conn.SetReadDeadline(time.Unix(1, 0)); err != nil {
			t.Fatal(err)
		}
	}
	_, got := c.Read(make([]byte, 1))
	_, want := plain.Read(make([]byte, 1))
	norm := func(err error) string { // the addresses differ
		oe, ok := err.(*net.OpError)
		if !ok {
			return fmt.Sprintf("%T %v", err, err)
		}
		return fmt.Sprintf("%s %s %T %v", oe.Op, oe.Net, oe.Err, oe.Err)
	}
	if norm(got) != norm(want) {
		t.Errorf("a Read past its deadline failed with %q, the connection's own with %q", norm(got), norm(want))
	}
}

// A wrapped connection keeps the TCP connection's other methods, and Wrap
// leaves other connections as they are.
func TestWrapKeepsTheConnection(t *testing.T) {
	c, s := pair(t)
	if _, ok := net.Conn(c).(interface{ CloseWrite() error }); !ok {
		t.Error("the wrapped connection lost CloseWrite")
	}
	if _, ok := net.Conn(c).(syscall.Conn); !ok {
		t.Error("the wrapped connection lost SyscallConn")
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("the peer read %d, %v after CloseWrite; want io.EOF", n, err)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Wrap(a) != a {
		t.Error("Wrap changed a connection that is not TCP")
	}
}

// The raw calls themselves (which the race detector's builds do not make
// through ReadFD and WriteFD) read, write and peek a socket.
func TestRawCalls(t *testing.T) {
	c, s := testutil.TCPPair(t)
	// on runs f with the descriptor of conn, which Control leaves
	// non-blocking (File would not).
	on := func(conn net.Conn, f func(fd uintptr)) {
		t.Helper()
		raw, err := conn.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.Control(f); err != nil {
			t.Fatal(err)
		}
	}
	on(c, func(fd uintptr) {
		if n, errno := rawWrite(fd, []byte("ping")); n != 4 || errno != 0 {
			t.Fatalf("rawWrite: %d, %v", n, errno)
		}
	})
	buf := make([]byte, 8)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		var n int
		on(s, func(fd uintptr) { n, _ = rawPeek(fd, buf) })
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the write never arrived")
		}
	}
	on(s, func(fd uintptr) {
		if n, errno := rawPeek(fd, buf); n != 4 || errno != 0 || string(buf[:n]) != "ping" {
			t.Fatalf("rawPeek: %q, %v", buf[:n], errno)
		}
		if n, errno := rawRead(fd, buf); n != 4 || errno != 0 || string(buf[:n]) != "ping" {
			t.Fatalf("rawRead after the peek: %q, %v", buf[:n], errno)
		}
		if _, errno := rawPeek(fd, buf); errno != syscall.EAGAIN {
			t.Errorf("rawPeek of an empty socket: %v, want EAGAIN", errno)
		}
		if _, errno := rawRead(fd, buf); errno != syscall.EAGAIN {
			t.Errorf("rawRead of an empty socket: %v, want EAGAIN", errno)
		}
	})
}
