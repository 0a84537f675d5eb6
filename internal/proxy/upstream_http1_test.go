package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"github.com/portico-dev/portico/internal/testutil"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The shared HTTP/1.1 client (upstream/http1.go): what http.Transport did for
// the proxy, it must still do.

// countingBackend is an httptest server that counts the connections it
// accepted and closed.
type countingBackend struct {
	srv           *httptest.Server
	conns, closed atomic.Int64
}

func startCounting(t *testing.T, h http.HandlerFunc) *countingBackend {
	t.Helper()
	b := &countingBackend{srv: httptest.NewUnstartedServer(h)}
	b.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			b.conns.Add(1)
		case http.StateClosed:
			b.closed.Add(1)
		}
	}
	b.srv.Start()
	t.Cleanup(b.srv.Close)
	return b
}

func (b *countingBackend) addr() string { return b.srv.Listener.Addr().String() }

// rawHTTPBackend serves each accepted connection with serve, given the
// 1-based number of the connection and a reader of what the proxy sends.
func rawHTTPBackend(t *testing.T, serve func(n int64, conn *net.TCPConn, br *bufio.Reader)) (addr string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int64)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			n := conns.Add(1)
			go func() {
				defer conn.Close()
				serve(n, conn.(*net.TCPConn), bufio.NewReader(conn))
			}()
		}
	}()
	return ln.Addr().String(), conns
}

// fetch makes a request through the proxy and reads the whole response; a
// body that ends early is reported in the result's error, not as a failure.
func fetch(t *testing.T, c *http.Client, method, url string, body io.Reader) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// getOK fails the test unless a GET of url answers 200 with body want.
func getOK(t *testing.T, c *http.Client, url, want string) {
	t.Helper()
	if resp, body, err := fetch(t, c, http.MethodGet, url, nil); err != nil || resp.StatusCode != 200 || body != want {
		t.Fatalf("GET %s: %d %q %v, want 200 %q", url, resp.StatusCode, body, err, want)
	}
}

func TestHTTP1ClientReusesConnections(t *testing.T) {
	be := startCounting(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/head":
			w.Header().Set("Content-Length", "1234")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/body":
			b, _ := io.ReadAll(r.Body)
			_, _ = io.WriteString(w, "got "+string(b))
		default:
			_, _ = io.WriteString(w, "hello")
		}
	})
	p := proxyToOneBackend(t, "a", be.addr())
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()

	for range 5 {
		getOK(t, c, p.httpURL(t, "/"), "hello")
	}
	resp, body, err := fetch(t, c, http.MethodHead, p.httpURL(t, "/head"), nil)
	if err != nil || resp.StatusCode != 200 || body != "" || resp.ContentLength != 1234 {
		t.Errorf("HEAD: %d, Content-Length %d, body %q, %v; want 200, 1234, no body", resp.StatusCode, resp.ContentLength, body, err)
	}
	if resp, body, err := fetch(t, c, http.MethodGet, p.httpURL(t, "/empty"), nil); err != nil || resp.StatusCode != 204 || body != "" {
		t.Errorf("204: %d %q %v", resp.StatusCode, body, err)
	}
	if resp, body, err := fetch(t, c, http.MethodPost, p.httpURL(t, "/body"), strings.NewReader("a body")); err != nil || resp.StatusCode != 200 || body != "got a body" {
		t.Errorf("POST with a body: %d %q %v", resp.StatusCode, body, err)
	}
	// A body of unknown length: chunked both ways.
	chunked := io.MultiReader(strings.NewReader("in "), strings.NewReader("chunks"))
	if resp, body, err := fetch(t, c, http.MethodPut, p.httpURL(t, "/body"), chunked); err != nil || resp.StatusCode != 200 || body != "got in chunks" {
		t.Errorf("PUT with a chunked body: %d %q %v", resp.StatusCode, body, err)
	}
	getOK(t, c, p.httpURL(t, "/"), "hello")
	// Requests in sequence need one connection: HEAD and 204 leave it reusable,
	// and so do requests with a body, which the client writes itself.
	if n := be.conns.Load(); n != 1 {
		t.Errorf("the backend accepted %d connections for requests in sequence, want 1", n)
	}
}

// A server closes idle keep-alive connections whenever it likes: the next
// request must not fail for it.
func TestHTTP1ClientServerClosesIdleConnections(t *testing.T) {
	be := startCounting(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	p := proxyToOneBackend(t, "a", be.addr())
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	for range 3 {
		getOK(t, c, p.httpURL(t, "/"), "ok")
		be.srv.CloseClientConnections()
	}
	// A request that is never retried (a POST) is safe as well: its connection
	// is checked before it is reused.
	if resp, body, err := fetch(t, c, http.MethodPost, p.httpURL(t, "/"), nil); err != nil || resp.StatusCode != 200 || body != "ok" {
		t.Errorf("POST after the server closed the idle connection: %d %q %v, want 200", resp.StatusCode, body, err)
	}
}

// A server may close a reused connection just as the request is sent (its
// keep-alive timeout against the proxy's reuse): Transport retries such a
// request on a new connection when it is idempotent, and so must the client.
func TestHTTP1ClientRetriesAStaleConnection(t *testing.T) {
	// Each connection answers its first request and closes on its second,
	// without a byte of answer.
	addr, conns := rawHTTPBackend(t, func(_ int64, conn *net.TCPConn, br *bufio.Reader) {
		for i := 0; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil || i == 1 {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	p := proxyToOneBackend(t, "a", addr)
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	for range 3 {
		getOK(t, c, p.httpURL(t, "/"), "ok")
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (the first, then one per retried request)", n)
	}
	// A POST may have been acted upon: it is not retried, the client gets 502.
	if resp, _, _ := fetch(t, c, http.MethodPost, p.httpURL(t, "/"), nil); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("POST on a connection closed under it: %d, want 502", resp.StatusCode)
	}
}

// A server that sends bytes on a connection after its response (a body after a 204)
// leaves the connection unusable: the next request must not take those bytes for its
// response, and gets its answer on a new connection.
func TestHTTP1ClientStrayBytesOnAPooledConnection(t *testing.T) {
	strayWritten := make(chan struct{}, 1)
	addr, conns := rawHTTPBackend(t, func(n int64, conn *net.TCPConn, br *bufio.Reader) {
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			if n > 1 {
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				continue
			}
			_, _ = io.WriteString(conn, "HTTP/1.1 204 No Content\r\n\r\n")
			// After the proxy has pooled the connection again.
			time.Sleep(20 * time.Millisecond)
			_, _ = io.WriteString(conn, "a body a 204 cannot have\r\n\r\n")
			strayWritten <- struct{}{}
		}
	})
	p := proxyToOneBackend(t, "a", addr)
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	if resp, _, err := fetch(t, c, http.MethodGet, p.httpURL(t, "/"), nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("first GET: %v %v, want 204", resp.StatusCode, err)
	}
	<-strayWritten
	getOK(t, c, p.httpURL(t, "/"), "ok")
	if n := conns.Load(); n != 2 {
		t.Errorf("%d upstream connections, want 2 (the one with stray bytes replaced)", n)
	}
}

func TestHTTP1ClientResponseBodies(t *testing.T) {
	chunked := startCounting(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		_, _ = io.WriteString(w, "part one, ")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "part two")
		w.Header().Set("X-Checksum", "abc123")
	})
	closeDelimited, cdConns := rawHTTPBackend(t, func(_ int64, conn *net.TCPConn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err == nil {
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the connection closes")
		}
	})
	truncated, trConns := rawHTTPBackend(t, func(_ int64, conn *net.TCPConn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err == nil {
			// More than the proxy buffers, so that the client gets the head.
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("x", 20000))
			_ = conn.SetLinger(0) // RST instead of FIN
		}
	})
	cp := startControlPlane(t)
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			toCluster("chunked", prefixMatch("/chunked")),
			toCluster("close", prefixMatch("/close")),
			toCluster("truncated", prefixMatch("/truncated"))))},
		clusters: []*clusterv3.Cluster{edsCluster("chunked"), edsCluster("close"), edsCluster("truncated")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("chunked", chunked.addr()),
			assignment("close", closeDelimited), assignment("truncated", truncated)},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()

	t.Run("chunked with trailers", func(t *testing.T) {
		for range 2 {
			resp, body, err := fetch(t, c, http.MethodGet, p.httpURL(t, "/chunked"), nil)
			if err != nil || body != "part one, part two" || resp.Trailer.Get("X-Checksum") != "abc123" {
				t.Errorf("body %q, trailer %q, %v; want both parts and X-Checksum abc123", body, resp.Trailer.Get("X-Checksum"), err)
			}
		}
		if n := chunked.conns.Load(); n != 1 {
			t.Errorf("%d connections, want 1: a chunked body read to its end leaves the connection reusable", n)
		}
	})
	t.Run("delimited by the connection's close", func(t *testing.T) {
		for i := range 2 {
			resp, body, err := fetch(t, c, http.MethodGet, p.httpURL(t, "/close"), nil)
			if err != nil || resp.StatusCode != 200 || body != "until the connection closes" {
				t.Errorf("GET %d: %d %q %v", i, resp.StatusCode, body, err)
			}
		}
		if n := cdConns.Load(); n != 2 {
			t.Errorf("%d connections, want 2: a close-delimited response uses up its connection", n)
		}
	})
	t.Run("reset in the middle of the body", func(t *testing.T) {
		for i := range 2 {
			resp, body, err := fetch(t, c, http.MethodGet, p.httpURL(t, "/truncated"), nil)
			if resp.StatusCode != 200 || err == nil || len(body) >= 100000 {
				t.Errorf("GET %d: %d, %d bytes, error %v; want 200 and a body cut short", i, resp.StatusCode, len(body), err)
			}
		}
		if n := trConns.Load(); n != 2 {
			t.Errorf("%d connections, want 2: a reset connection is not reused", n)
		}
	})
}

// Informational responses reach the client before the final one, from every
// kind of upstream client: the codec's (shared, and a cluster's own) hands
// them to the request's target, Go's HTTP/2 transport through a client trace.
func TestHTTP1ClientForwards1xx(t *testing.T) {
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		_, _ = io.WriteString(w, "final "+r.Proto)
	}))
	be.Config.Protocols = new(http.Protocols)
	be.Config.Protocols.SetHTTP1(true)
	be.Config.Protocols.SetUnencryptedHTTP2(true)
	be.Start()
	t.Cleanup(be.Close)
	clusters := []*clusterv3.Cluster{
		edsCluster("shared"),
		protocolOptions(t, edsCluster("own"), false, durationpb.New(time.Minute)),
		protocolOptions(t, edsCluster("h2c"), true, nil),
	}
	res := resources{listeners: []*listenerv3.Listener{httpListener(t)}, clusters: clusters}
	vh := vhost("*")
	for _, c := range clusters {
		res.endpoints = append(res.endpoints, assignment(c.Name, be.Listener.Addr().String()))
		vh.Routes = append(vh.Routes, toCluster(c.Name, separatedMatch("/"+c.Name)))
	}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vh)}
	cp := startControlPlane(t)
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	for _, tc := range []struct{ cluster, proto string }{{"shared", "HTTP/1.1"}, {"own", "HTTP/1.1"}, {"h2c", "HTTP/2.0"}} {
		var mu sync.Mutex // the trace runs on the client's connection goroutine
		var got []int
		var link string
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			mu.Lock()
			defer mu.Unlock()
			got, link = append(got, code), h.Get("Link")
			return nil
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, p.httpURL(t, "/"+tc.cluster), nil)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.cluster, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		if want := "final " + tc.proto; resp.StatusCode != 200 || string(b) != want || len(got) != 1 || got[0] != http.StatusEarlyHints || link != "</style.css>; rel=preload" {
			t.Errorf("%s: %d %q, 1xx %v (Link %q); want 200 %q after a 103 with its Link", tc.cluster, resp.StatusCode, b, got, link, want)
		}
	}
}

// Timeouts and failures while waiting for the response head keep their
// statuses and counters; a client that goes away frees the upstream request.
func TestHTTP1ClientFailuresBeforeTheHead(t *testing.T) {
	var cancelled atomic.Int64
	slow := startCounting(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
			cancelled.Add(1)
		}
	})
	perTry := &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(1), PerTryTimeout: durationpb.New(100 * time.Millisecond)}
	cp := startControlPlane(t)
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			retryRoute("slow", "/per-try", perTry),
			withAction(toCluster("slow", prefixMatch("/route")), func(a *routev3.RouteAction) {
				a.Timeout = durationpb.New(100 * time.Millisecond)
			}),
			toCluster("slow", prefixMatch("/untimed")),
			toCluster("refused", prefixMatch("/refused"))))},
		clusters:  []*clusterv3.Cluster{edsCluster("slow"), edsCluster("refused")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("slow", slow.addr()), assignment("refused", testutil.RefusedAddr(t))},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()

	if resp, _, _ := fetch(t, c, http.MethodGet, p.httpURL(t, "/per-try"), nil); resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("per-try timeout: %d, want 504", resp.StatusCode)
	}
	if v, _ := gaugeValue(t, p, "portico_proxy_upstream_per_try_timeouts_total", "slow"); v != 2 {
		t.Errorf("per-try timeouts counted: %v, want 2 (the attempt and its retry)", v)
	}
	if resp, _, _ := fetch(t, c, http.MethodGet, p.httpURL(t, "/route"), nil); resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("route timeout: %d, want 504", resp.StatusCode)
	}
	if resp, body, _ := fetch(t, c, http.MethodGet, p.httpURL(t, "/refused"), nil); resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "connection failure") {
		t.Errorf("connection refused: %d %q, want 502 naming a connection failure", resp.StatusCode, body)
	}
	if v, _ := gaugeValue(t, p, "portico_proxy_upstream_connect_failures_total", "refused"); v != 1 {
		t.Errorf("connect failures counted: %v, want 1", v)
	}
	waitFor(t, "the timed-out upstream requests to be cancelled", func() bool { return cancelled.Load() == 3 })

	impatient := &http.Client{Timeout: 100 * time.Millisecond}
	if _, err := impatient.Get(p.httpURL(t, "/untimed")); err == nil {
		t.Fatal("the impatient client got a response")
	}
	waitFor(t, "the upstream request of the client gone to be cancelled", func() bool { return cancelled.Load() == 4 })
}

// A response awaited on a pooled connection (the client writes the request
// and waits for the socket to have something to read, with no read first) is
// given up as one read for: the route timeout and the client going away
// each cut it, and the upstream sees its connection closed.
func TestHTTP1ClientCutsAnAwaitedResponse(t *testing.T) {
	var cancelled atomic.Int64
	be := startCounting(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/slow") {
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
				cancelled.Add(1)
				return
			}
		}
		_, _ = io.WriteString(w, "ok")
	})
	cp := startControlPlane(t)
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			withAction(toCluster("be", prefixMatch("/timed")), func(a *routev3.RouteAction) {
				a.Timeout = durationpb.New(100 * time.Millisecond)
			}),
			toCluster("be", prefixMatch("/"))))},
		clusters:  []*clusterv3.Cluster{edsCluster("be")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("be", be.addr())},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()

	getOK(t, c, p.httpURL(t, "/timed/fast"), "ok") // the connection is pooled
	if resp, _, _ := fetch(t, c, http.MethodGet, p.httpURL(t, "/timed/slow"), nil); resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("route timeout on a pooled connection: %d, want 504", resp.StatusCode)
	}
	waitFor(t, "the timed-out upstream request to be cancelled", func() bool { return cancelled.Load() == 1 })
	if n := be.conns.Load(); n != 1 {
		t.Fatalf("the upstream took %d connections, want 1: the timed-out request was not on the pooled one", n)
	}

	getOK(t, c, p.httpURL(t, "/fast"), "ok") // a new connection, pooled
	impatient := &http.Client{Timeout: 100 * time.Millisecond}
	if _, err := impatient.Get(p.httpURL(t, "/slow")); err == nil {
		t.Fatal("the impatient client got a response")
	}
	impatient.CloseIdleConnections()
	waitFor(t, "the upstream request of the client gone to be cancelled", func() bool { return cancelled.Load() == 2 })
	if n := be.conns.Load(); n != 2 {
		t.Fatalf("the upstream took %d connections, want 2: the abandoned request was not on a pooled one", n)
	}
	getOK(t, c, p.httpURL(t, "/fast"), "ok") // and the proxy serves on
}

// The pool keeps at most its bound of idle connections per endpoint, and
// closes those idle for the idle timeout.
func TestHTTP1ClientIdlePool(t *testing.T) {
	t.Run("bounded per endpoint", func(t *testing.T) {
		var inFlight atomic.Int64
		release := make(chan struct{})
		be := startCounting(t, func(w http.ResponseWriter, r *http.Request) {
			inFlight.Add(1)
			<-release
			_, _ = io.WriteString(w, "ok")
		})
		// An idle timeout no run of the test reaches: the bound alone is checked.
		client := upstream.NewHTTP1Client(&http.Transport{DialContext: (&net.Dialer{}).DialContext, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Hour})
		defer client.CloseIdleConnections()
		c := &http.Client{Transport: client, Timeout: 10 * time.Second}
		errs := make(chan error, 3)
		for range 3 {
			go func() { errs <- getBody(c, be.srv.URL, "ok") }()
		}
		waitFor(t, "three requests in flight", func() bool { return inFlight.Load() == 3 })
		close(release)
		for range 3 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		client.Mu.Lock()
		idle := len(client.Idle[be.addr()])
		client.Mu.Unlock()
		if idle != 2 {
			t.Errorf("%d idle connections after 3 concurrent requests, want the bound, 2", idle)
		}
		waitFor(t, "the connection over the bound to be closed", func() bool { return be.closed.Load() == 1 })
		if n := be.closed.Load(); n != 1 {
			t.Errorf("%d connections closed, want 1 (the one over the bound)", n)
		}
	})
	t.Run("closed after the idle timeout", func(t *testing.T) {
		be := startCounting(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
		client := upstream.NewHTTP1Client(&http.Transport{DialContext: (&net.Dialer{}).DialContext, MaxIdleConnsPerHost: 2, IdleConnTimeout: 50 * time.Millisecond})
		defer client.CloseIdleConnections()
		c := &http.Client{Transport: client, Timeout: 10 * time.Second}
		if err := getBody(c, be.srv.URL, "ok"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the idle connection to be closed", func() bool {
			client.Mu.Lock()
			defer client.Mu.Unlock()
			return len(client.Idle) == 0 && be.closed.Load() == 1
		})
	})
}

// getBody GETs url and says what is wrong unless it answers 200 with body want;
// unlike fetch, it may run outside the test's goroutine.
func getBody(c *http.Client, url, want string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || string(b) != want {
		return fmt.Errorf("GET %s: %d %q %v, want 200 %q", url, resp.StatusCode, b, err, want)
	}
	return nil
}

// A server that closes idle connections after a few milliseconds, under
// concurrent requests, meets the pool's connections at every point of their
// life: a GET never fails for it (a connection found closed before any
// response byte is replaced).
func TestHTTP1ClientGETsSurviveEagerIdleCloses(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch rand.IntN(10) {
		case 0:
			w.Header().Set("Connection", "close")
		case 1:
			w.Header().Set("Trailer", "X-T")
			_, _ = io.WriteString(w, "o")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "k")
			w.Header().Set("X-T", "v")
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.IdleTimeout = 3 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	p := proxyToOneBackend(t, "a", srv.Listener.Addr().String())
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer c.CloseIdleConnections()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 40 {
				resp, err := c.Get(p.httpURL(t, "/"))
				if err != nil {
					t.Error(err)
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(b) != "ok" {
					t.Errorf("GET: %d %q %v", resp.StatusCode, b, err)
				}
				time.Sleep(time.Duration(rand.IntN(5000)) * time.Microsecond)
			}
		})
	}
	wg.Wait()
}
