package testutil

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// FreeAddr returns a loopback address with a port that was free a moment ago, for
// processes that must be told their address on the command line.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// RefusedAddr is a loopback address whose connections are refused until the test
// ends. Its port stays bound without listening: a port merely released again can be
// handed to the next listener, and when that listener was the proxy under test, a
// route to the "refused" endpoint sent the proxy's requests to itself until the
// client gave up (a CI failure). The socket is bound without SO_REUSEADDR, so no
// other socket shares the port, and Linux answers a connection to a bound port that
// does not listen with a reset.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}
