//go:build linux

package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A backend that writes a whole response after its response (a broken
// server's extra body, or one smuggled into it) must not have it passed on
// as the answer to the next request sent on that pooled connection, however
// soon after the first that request comes: the client gets its own answer,
// on a new connection. The second request is sent as soon as the stray
// response is in the proxy's socket, well within the 100 ms the client used to
// reuse a connection without looking at it.
func TestHTTP1ClientStrayResponseOnAPooledConnection(t *testing.T) {
	t.Parallel()
	answered := make(chan struct{})
	strayIn := make(chan struct{})
	addr, conns := rawHTTPBackend(t, func(_ int64, conn *net.TCPConn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if req.URL.Path != "/first" {
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
				continue
			}
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
			<-answered // the proxy has read the response and pooled the connection
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray")
			if err := waitAcked(conn); err != nil {
				t.Error(err)
			}
			close(strayIn)
		}
	})
	p := proxyToOneBackend(t, "a", addr)
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	getOK(t, c, p.httpURL(t, "/first"), "first")
	close(answered)
	<-strayIn
	getOK(t, c, p.httpURL(t, "/second"), "second")
	if n := conns.Load(); n != 2 {
		t.Errorf("%d upstream connections, want 2 (the one with the stray response replaced)", n)
	}
}

// waitAcked waits until the peer has acknowledged everything written on
// conn: the bytes are in its socket, where a look at it finds them.
func waitAcked(conn *net.TCPConn) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var unacked int
		var ioErr error
		if err := rc.Control(func(fd uintptr) { unacked, ioErr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil {
			return err
		}
		if ioErr != nil {
			return ioErr
		}
		if unacked == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return io.ErrNoProgress
		}
		time.Sleep(time.Millisecond)
	}
}
