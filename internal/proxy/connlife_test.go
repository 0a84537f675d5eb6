package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// startConnLimitsProxy serves a backend that waits ?sleep before answering
// (and reads uploads whole) behind a proxy whose connection manager f sets.
func startConnLimitsProxy(t *testing.T, f func(h *hcmv3.HttpConnectionManager)) *testProxy {
	t.Helper()
	b := startScripted(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
			sleepUntilCancelled(r, d)
		}
		n, _ := io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok "+strings.Repeat("x", int(n%10)))
	})
	cp := startControlPlane(t)
	var res resources
	res.clusters = append(res.clusters, edsCluster("life"))
	res.endpoints = append(res.endpoints, assignment("life", b.addr()))
	res.listeners = []*listenerv3.Listener{modifyHCM(t, f)}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("life", prefixMatch("/"))))}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	return p
}

// rawRequest sends one HTTP/1.1 request on conn and reads its response.
func rawRequest(t *testing.T, conn net.Conn, br *bufio.Reader, text string) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(conn, text); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	return resp, string(body)
}

// waitClosed waits up to 30s for the proxy to close conn (EOF or reset), and
// fails if it sends anything else.
func waitClosed(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := br.ReadByte()
	var ne net.Error
	switch {
	case err == nil:
		t.Fatalf("read %q, want the connection closed", b)
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatal("the connection is still open after 30s")
	}
}

func dialProxy(t *testing.T, p *testProxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", p.ListenerAddr("ingress_http"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

const keepAliveGET = "GET /x HTTP/1.1\r\nHost: x\r\n\r\n"

// common_http_protocol_options.idle_timeout closes a connection that has had no
// request in progress for it, and never one with a request in progress.
func TestConnectionIdleTimeout(t *testing.T) {
	t.Parallel()
	p := startConnLimitsProxy(t, func(h *hcmv3.HttpConnectionManager) {
		h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(200 * time.Millisecond)}
	})
	t.Run("idle connection closed", func(t *testing.T) {
		t.Parallel()
		conn, br := dialProxy(t, p)
		if resp, _ := rawRequest(t, conn, br, keepAliveGET); resp.StatusCode != 200 || resp.Close {
			t.Fatalf("status %d, close %v", resp.StatusCode, resp.Close)
		}
		waitClosed(t, conn, br)
	})
	t.Run("busy connection kept", func(t *testing.T) {
		t.Parallel()
		conn, br := dialProxy(t, p)
		// The backend takes 5 times the idle timeout: the request is in progress
		// all along, and both answers come on the one connection.
		for range 2 {
			if resp, body := rawRequest(t, conn, br, "GET /x?sleep=1s HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != 200 || body != "ok " {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
		}
	})
}

// max_connection_duration closes a connection once that old: at once when idle,
// after the response in progress when busy (which it does not cut).
func TestMaxConnectionDuration(t *testing.T) {
	t.Parallel()
	p := startConnLimitsProxy(t, func(h *hcmv3.HttpConnectionManager) {
		h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{
			IdleTimeout:           durationpb.New(0), // off: only the duration closes
			MaxConnectionDuration: durationpb.New(300 * time.Millisecond),
		}
	})
	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		conn, br := dialProxy(t, p)
		if resp, _ := rawRequest(t, conn, br, keepAliveGET); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		waitClosed(t, conn, br)
	})
	t.Run("busy", func(t *testing.T) {
		t.Parallel()
		conn, br := dialProxy(t, p)
		if resp, body := rawRequest(t, conn, br, "GET /x?sleep=1s HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != 200 || body != "ok " {
			t.Fatalf("got %d %q: a response in progress must be completed", resp.StatusCode, body)
		}
		waitClosed(t, conn, br)
	})
	t.Run("without it, connections stay", func(t *testing.T) {
		t.Parallel()
		q := startConnLimitsProxy(t, func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(0)}
		})
		conn, br := dialProxy(t, q)
		for range 2 {
			if resp, _ := rawRequest(t, conn, br, "GET /x?sleep=500ms HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != 200 || resp.Close {
				t.Fatalf("status %d, close %v", resp.StatusCode, resp.Close)
			}
		}
	})
}

// request_timeout answers 408 to a request whose body stalls, and leaves a
// request whose body arrived alone however slow its response.
func TestRequestTimeout(t *testing.T) {
	t.Parallel()
	p := startConnLimitsProxy(t, func(h *hcmv3.HttpConnectionManager) {
		h.RequestTimeout = durationpb.New(200 * time.Millisecond)
		h.StreamIdleTimeout = durationpb.New(0) // off: only the request timeout may fire
	})
	t.Run("stalled upload", func(t *testing.T) {
		t.Parallel()
		conn, br := dialProxy(t, p)
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		resp, body := rawRequest(t, conn, br, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
		if resp.StatusCode != 408 || body != "request timeout" {
			t.Errorf("got %d %q, want 408 request timeout", resp.StatusCode, body)
		}
	})
	t.Run("complete upload, slow response", func(t *testing.T) {
		t.Parallel()
		conn, br := dialProxy(t, p)
		resp, body := rawRequest(t, conn, br, "POST /x?sleep=1s HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
		if resp.StatusCode != 200 || body != "ok xxx" {
			t.Errorf("got %d %q, want the backend's answer", resp.StatusCode, body)
		}
	})
}

// startDelayedCloseProxy serves /codec/ from a backend answering "ok", with a
// delayed close longer than any test: a connection still in it reads and drops
// what its client sends instead of answering it with a reset.
func startDelayedCloseProxy(t *testing.T) *codecProxy {
	t.Helper()
	be := startScripted(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	return startCodecProxy(t, map[string]string{"be": be.addr()}, func(h *hcmv3.HttpConnectionManager) {
		h.DelayedCloseTimeout = durationpb.New(time.Hour)
	}, codecRoutes())
}

// readToClose reads a response of status want that closes the connection,
// then the proxy's end of the connection.
func readToClose(t *testing.T, br *bufio.Reader, want int) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = readBody(t, resp)
	if resp.StatusCode != want || !resp.Close {
		t.Fatalf("got %d (close %v), want %d closing the connection", resp.StatusCode, resp.Close, want)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the response: %v, want the proxy's end of the connection", err)
	}
}

// resetWithin writes to conn, whose peer has ended its side, until a write
// fails (the peer's socket is closed and answered with a reset) or n writes
// went through (the peer still reads: a delayed close).
func resetWithin(conn net.Conn, n int) bool {
	for range n {
		if _, err := io.WriteString(conn, "more"); err != nil {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// A client that asks for the connection to close with its request is to send
// nothing after it (RFC 9112, section 9.6): its connection is closed at once
// after the response, without the delayed close's half-close and the reading
// that waits for the client to close first, which cost a new connection per
// request a system call, a read and a goroutine. Bytes it sends anyway are
// answered with a reset, where a delayed close would read them.
func TestClientAskedCloseIsClosedAtOnce(t *testing.T) {
	t.Parallel()
	p := startDelayedCloseProxy(t)
	conn, br := dialProxy(t, p.testProxy)
	_ = conn.SetDeadline(time.Now().Add(time.Minute)) // a hang, not a speed limit
	if _, err := io.WriteString(conn, "GET /codec/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	readToClose(t, br, http.StatusOK)
	if !resetWithin(conn, 500) {
		t.Fatal("the connection still read the client's bytes after the response: it was in the delayed close")
	}
}

// A connection the proxy closes without its client asking, or whose client
// sent more after asking, or over TLS, keeps the delayed close: what the
// client sends meanwhile is read and dropped, so that it reads the last
// response whole instead of losing it to a reset.
func TestDelayedCloseReadsWhatTheClientStillSends(t *testing.T) {
	t.Parallel()
	p := startDelayedCloseProxy(t)
	for _, tc := range []struct {
		name, requests string
		status         int
		dial           func(*testing.T) (net.Conn, *bufio.Reader)
	}{
		{"closed by the proxy", "GET /codec/a HTTP/1.1\r\nHost: x\r\nExpect: something\r\n\r\n",
			http.StatusExpectationFailed, nil},
		{"asked, then sent more", "GET /codec/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" +
			"GET /codec/b HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusOK, nil},
		{"asked, over TLS", "GET /codec/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			http.StatusOK, p.dialTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dial := tc.dial
			if dial == nil {
				dial = func(t *testing.T) (net.Conn, *bufio.Reader) { return dialProxy(t, p.testProxy) }
			}
			conn, br := dial(t)
			_ = conn.SetDeadline(time.Now().Add(time.Minute)) // a hang, not a speed limit
			if _, err := io.WriteString(conn, tc.requests); err != nil {
				t.Fatal(err)
			}
			readToClose(t, br, tc.status)
			if resetWithin(conn, 20) {
				t.Fatal("the client's bytes after the response were answered with a reset: no delayed close")
			}
		})
	}
}
