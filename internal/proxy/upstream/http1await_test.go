//go:build linux

package upstream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/proxy/internal/sockpeek"
	"github.com/portico-dev/portico/internal/testutil"
)

// The exchanges on pooled clear-text connections write the request and wait
// for the response without a read first (sockpeek.LookWriteAwait). What
// arrives before that wait must still be seen: these tests hold the cases
// where it would not be.

// answeringUpstream answers each request on its connection with the
// connection's number; after the first response on the first connection, it
// calls then (nil: it goes on serving).
func answeringUpstream(t *testing.T, accepted *atomic.Int64, then func(conn net.Conn, br *bufio.Reader)) string {
	return rawUpstream(t, func(conn net.Conn, br *bufio.Reader) {
		n := accepted.Add(1)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			_, _ = fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n%d", n)
			if n == 1 && then != nil {
				then(conn, br)
				return
			}
		}
	})
}

// pooledClient is a client with a connection to addr in its pool, from a
// first request answered "1", and a context bounding the test's requests.
func pooledClient(t *testing.T, addr string) (*HTTP1Client, context.Context) {
	t.Helper()
	c := testClient(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang, not a speed limit
	t.Cleanup(cancel)
	if code, got := getWith(t, c, ctx, addr, nil, nil); code != 200 || got != "1" {
		t.Fatalf("first request: %d %q", code, got)
	}
	waitPooled(t, c, addr)
	return c, ctx
}

// getWith makes a GET of addr with c under ctx and trace, and returns the
// response's status and body.
func getWith(t *testing.T, c *HTTP1Client, ctx context.Context, addr string, header http.Header, trace *httptrace.ClientTrace) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if header != nil {
		req.Header = header
	}
	if trace != nil {
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	}
	res, got := exchange(t, c, req)
	return res.StatusCode, got
}

// An upstream that closes its side of a pooled connection (and goes on
// reading, as a server's lingering close does, so that no reset comes) after
// the connection was taken from the pool, before the request is written: the
// request goes on a new connection. The close arrives while the trace is told
// of the connection taken; a look made then, apart from the wait for the
// response, saw nothing, and the wait never ended.
func TestHTTP1ClientSeesACloseBeforeItsRequest(t *testing.T) {
	var accepted atomic.Int64
	halfClose, closed := make(chan struct{}), make(chan struct{})
	addr := answeringUpstream(t, &accepted, func(conn net.Conn, br *bufio.Reader) {
		<-halfClose
		_ = conn.(*net.TCPConn).CloseWrite()
		close(closed)
		_, _ = io.Copy(io.Discard, br)
	})
	c, ctx := pooledClient(t, addr)
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if !info.Reused {
			return
		}
		close(halfClose)
		<-closed
		p := sockpeek.New(info.Conn)
		testutil.Eventually(t, 10*time.Second, "the close to reach this end of the connection", func() bool {
			return p.Look() == sockpeek.Closed
		})
	}}
	if code, got := getWith(t, c, ctx, addr, nil, trace); code != 200 || got != "2" {
		t.Fatalf("request on the connection closed after it was taken: %d %q, want 200 \"2\" from a new connection", code, got)
	}
}

// A head larger than the write buffer leaves in pieces: an upstream that
// answers the first (a 431) and closes its side before the rest is written
// is read, not waited for.
func TestHTTP1ClientReadsAnAnswerToALargeHead(t *testing.T) {
	var accepted atomic.Int64
	addr := answeringUpstream(t, &accepted, func(conn net.Conn, br *bufio.Reader) {
		if _, err := br.ReadString('\n'); err != nil {
			return
		}
		_, _ = io.WriteString(conn, "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		_ = conn.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, br)
	})
	c, ctx := pooledClient(t, addr)
	large := http.Header{"X-Large": {strings.Repeat("a", 1<<20)}}
	if code, got := getWith(t, c, ctx, addr, large, nil); code != http.StatusRequestHeaderFieldsTooLarge || accepted.Load() != 1 {
		t.Fatalf("a 1 MiB head answered early: %d %q (%d connections), want 431 on the pooled one", code, got, accepted.Load())
	}
}
