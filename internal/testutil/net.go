package testutil

import (
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// FreeAddr returns a loopback address with a port that was free a moment ago, for
// processes that must be told their address on the command line. It never returns a
// port it returned before in this process: the kernel may give a port just released
// to the next bind, and a test that asked for an HTTP and an admin address once got
// the same port for both (a CI failure: the second listener could never bind).
func FreeAddr(t testing.TB) string {
	t.Helper()
	var held []net.Listener // ports handed out before, kept bound until a new one comes
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		handedOut.Lock()
		seen := handedOut.ports[port]
		handedOut.ports[port] = true
		handedOut.Unlock()
		if !seen {
			l.Close()
			return l.Addr().String()
		}
		held = append(held, l)
	}
}

// handedOut is the ports FreeAddr returned in this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

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

// NonLoopbackIP returns an IPv4 address of one of this host's interfaces that is
// neither loopback nor link-local, for a backend that a name may resolve to. The
// test is skipped on a host without one.
func NonLoopbackIP(t testing.TB) string {
	t.Helper()
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return n.IP.String()
			}
		}
	}
	t.Skip("this host has no IPv4 address other than loopback and link-local")
	return ""
}

// ListenPair listens on a port of firstIP, and on the same port of secondIP: a
// backend a name answers first, and the one it answers later. It fails the test
// if no port is free on both after a few tries.
func ListenPair(t testing.TB, firstIP, secondIP string) (first, second net.Listener) {
	t.Helper()
	var lastErr error
	for range 20 {
		a, err := net.Listen("tcp", net.JoinHostPort(firstIP, "0"))
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(a.Addr().String())
		b, err := net.Listen("tcp", net.JoinHostPort(secondIP, port))
		if err == nil {
			return a, b
		}
		a.Close()
		lastErr = err
	}
	t.Fatalf("no port free on both %s and %s: %v", firstIP, secondIP, lastErr)
	return nil, nil
}

// TCPPair is the two ends of a loopback TCP connection, the client's and the
// one a listener accepted, closed when the test ends.
func TCPPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}
