package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A client that sends requests over TCP and never reads the answers holds
// neither the proxy's goroutine nor its connection beyond the stream idle
// timeout (stream_idle_timeout 1s here): the codec's write to it fails once it
// has made no progress for that long, and the connection closes. That holds
// for a response being forwarded from the upstream (which the connection
// manager's idle timer cut before the codec bounded its writes) and for the
// proxy's own answers (direct responses, pipelined here: there the idle timer
// does not run, and the connection used to be held for ever).
//
// Not parallel: the proxy's goroutines blocked writing to a client are counted
// in the whole process.
func TestCodecClientThatStopsReadingIsCut(t *testing.T) {
	be := codecBackend(t)
	const direct = 64 << 10
	body := strings.Repeat("d", direct)
	cp := startControlPlane(t)
	var res resources
	res.clusters = append(res.clusters, edsCluster("be"))
	res.endpoints = append(res.endpoints, assignment("be", be.addr()))
	res.listeners = []*listenerv3.Listener{modifyHCM(t, func(h *hcmv3.HttpConnectionManager) {
		h.StreamIdleTimeout = durationpb.New(time.Second)
	})}
	rc := routeConfig("ingress_http", vhost("*",
		toCluster("be", prefixMatch("/codec/")),
		&routev3.Route{Match: exactMatch("/direct"), Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
			Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}}}}},
	))
	rc.MaxDirectResponseBodySizeBytes = wrapperspb.UInt32(direct)
	res.routes = []*routev3.RouteConfiguration{rc}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")

	const whole = 16 << 20 // bytes asked for: more than the sockets' buffers hold
	for _, tc := range []struct{ name, requests string }{
		{"a large response from the upstream", "GET /codec/download?n=16777216 HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"pipelined direct responses", strings.Repeat("GET /direct HTTP/1.1\r\nHost: x\r\n\r\n", whole/direct)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := stuckWriters()
			conn, err := slowReaderDialer().Dial("tcp", p.ListenerAddr("ingress_http"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			go func() { _, _ = io.WriteString(conn, tc.requests) }()
			expectCut(t, conn, whole, stuckWriters, before)
		})
	}
}

// The same over HTTP/2 (Go's server), h2c with prior knowledge and TLS with
// ALPN h2: a client that grants every window and then stops reading at the
// TCP level holds the connection no longer than the stream idle timeout. The
// connection manager's idle timer ends the stream, but the frames Go's server
// queued for it stay blocked in a write to the socket; without the bound, for
// ever.
func TestH2ClientThatStopsReadingIsCut(t *testing.T) {
	be := codecBackend(t)
	p := startCodecProxy(t, map[string]string{"be": be.addr()}, func(h *hcmv3.HttpConnectionManager) {
		h.StreamIdleTimeout = durationpb.New(time.Second)
	}, vhost("*", toCluster("be", prefixMatch("/codec/"))))
	const whole = 16 << 20 // more than the sockets' buffers hold
	onH2(t, p, func(t *testing.T, dial func() (net.Conn, *http2.Framer)) {
		before := stuckH2Writers()
		conn, fr := dial()
		h2Download(t, conn, fr, whole)
		expectCut(t, conn, whole, stuckH2Writers, before)
	})
}

// A route whose idle_timeout is longer than the connection manager's
// stream_idle_timeout lets a client pause reading that long, on HTTP/1.1 (the
// codec takes the route's timeout) and on HTTP/2, whose streams share the
// socket: there the route's timeout loosens the connection's bound, rather
// than the whole connection being cut after the connection manager's.
func TestRouteIdleTimeoutLetsAClientPauseReading(t *testing.T) {
	be := codecBackend(t)
	p := startCodecProxy(t, map[string]string{"be": be.addr()}, func(h *hcmv3.HttpConnectionManager) {
		h.StreamIdleTimeout = durationpb.New(time.Second)
	}, vhost("*", withAction(toCluster("be", prefixMatch("/codec/")), func(a *routev3.RouteAction) {
		a.IdleTimeout = durationpb.New(time.Hour)
	})))
	const whole = 16 << 20 // more than the sockets' buffers hold
	const pause = 4 * time.Second
	t.Run("HTTP/1.1", func(t *testing.T) {
		conn, br := dialProxy(t, p.testProxy)
		fmt.Fprintf(conn, "GET /codec/download?n=%d HTTP/1.1\r\nHost: %s\r\n\r\n", whole, codecHost)
		time.Sleep(pause)
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, res.Body); n != whole {
			t.Errorf("read %d of %d bytes (%v)", n, whole, err)
		}
	})
	onH2(t, p, func(t *testing.T, dial func() (net.Conn, *http2.Framer)) {
		conn, fr := dial()
		h2Download(t, conn, fr, whole)
		time.Sleep(pause)
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		for n := 0; ; {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("connection cut after %d of %d bytes: %v", n, whole, err)
			}
			switch f := f.(type) {
			case *http2.DataFrame:
				n += len(f.Data())
				if f.StreamEnded() {
					if n != whole {
						t.Errorf("read %d of %d bytes", n, whole)
					}
					return
				}
			case *http2.RSTStreamFrame:
				t.Fatalf("stream reset after %d bytes: %v", n, f.ErrCode)
			}
		}
	})
}

// onH2 runs check as subtests on the codec proxy's two HTTP/2 paths, h2c with
// prior knowledge and TLS with ALPN h2; dial opens a connection for the subtest.
func onH2(t *testing.T, p *codecProxy, check func(t *testing.T, dial func() (net.Conn, *http2.Framer))) {
	d := slowReaderDialer()
	t.Run("h2c", func(t *testing.T) {
		check(t, func() (net.Conn, *http2.Framer) { return h2Dial(t, d, p.ListenerAddr("ingress_http")) })
	})
	t.Run("TLS h2", func(t *testing.T) {
		check(t, func() (net.Conn, *http2.Framer) { return h2TLSConn(t, d, p) })
	})
}

// slowReaderDialer dials with the receive buffer fixed at 64 KiB, which also
// turns off the kernel's growing of it: a client that stops reading then
// blocks the proxy's writes after a few MB whatever the machine's tcp_rmem
// allows (32 MB on the CI machine, where a whole 16 MB answer once fitted in
// the sockets and nothing was left to cut).
func slowReaderDialer() *net.Dialer {
	return &net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
		})
		return errors.Join(err, serr)
	}}
}

// h2Download grants the proxy every flow-control window on conn, then asks
// for n bytes from the codec backend on stream 1.
func h2Download(t *testing.T, conn net.Conn, fr *http2.Framer, n int) {
	t.Helper()
	const maxWindow = 1<<31 - 1
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: maxWindow}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteWindowUpdate(0, maxWindow-65535); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(h2Headers(t, "GET", fmt.Sprintf("/codec/download?n=%d", n), 0, true)); err != nil {
		t.Fatal(err)
	}
}

// expectCut waits for the proxy to block writing to conn's client (stuck
// counts the blocked writers, before of them other tests'), then to give up,
// and checks that conn is then closed before the whole answer of whole bytes
// arrived.
func expectCut(t *testing.T, conn net.Conn, whole int64, stuck func() int, before int) {
	t.Helper()
	waitLong(t, "the proxy to block writing to the client", func() bool { return stuck() > before })
	waitLong(t, "the proxy to give up on the client", func() bool { return stuck() <= before })
	// The connection is closed: what the sockets held, then the end.
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection is still open after the proxy's write gave up (%d bytes read)", n)
	}
	if n >= whole {
		t.Errorf("read %d bytes, the whole answer: want it cut", n)
	}
}

// stuckH2Writers counts the goroutines of Go's HTTP/2 server, and the
// flushers of its connections' write batches, blocked in a write to a client.
func stuckH2Writers() int {
	stuck := 0
	for g := range strings.SplitSeq(allStacks(), "\n\n") {
		h2 := strings.Contains(g, "http2") || strings.Contains(g, "listener.(*writeBatch)")
		if h2 && strings.Contains(g, "waitWrite") && !strings.Contains(g, "http1.(*conn)") {
			stuck++
		}
	}
	return stuck
}

// allStacks is every goroutine's stack.
func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// stuckWriters counts the goroutines of the HTTP/1.1 codec blocked in a write
// to a client.
func stuckWriters() int {
	stuck := 0
	for g := range strings.SplitSeq(allStacks(), "\n\n") {
		if strings.Contains(g, "http1.(*conn).serve") && strings.Contains(g, "waitWrite") {
			stuck++
		}
	}
	return stuck
}

// waitLong waits a minute for cond: far beyond the timeouts the test
// configures, so that only a proxy that never acts fails it.
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
