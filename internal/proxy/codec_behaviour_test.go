package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/sorted"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"golang.org/x/net/websocket"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// What users rely on from the proxy's HTTP servers, each asserted through a real proxy
// on every path a client can take to it: HTTP/1.1 in clear text and over TLS (the codec
// issue 22 replaces) and HTTP/2 with prior knowledge and over TLS with ALPN h2 (Go's
// server, which stays). Subtests are named after the path: http1, http1-tls, http2,
// http2-tls. docs/dev/http1-behaviours.md maps each behaviour to its tests, these and
// older ones.

const codecHost = "codec.example.com"

// codecProxy is a proxy with a plain listener and a TLS listener for codecHost (ALPN
// h2 and http/1.1), both with the same virtual hosts.
type codecProxy struct {
	*testProxy
	ca *testCA
}

// startCodecProxy starts a proxy routing with vhosts to clusters (name: address). Its
// connection managers are the contract's with HTTP/1.0 accepted and
// allow_chunked_length, as the translator emits them, then changed by edit (nil: none).
func startCodecProxy(t *testing.T, clusters map[string]string, edit func(*hcmv3.HttpConnectionManager), vhosts ...*routev3.VirtualHost) *codecProxy {
	t.Helper()
	ca := newTestCA(t)
	certPEM, keyPEM := ca.issue(t, codecHost)
	var res resources
	for _, name := range sorted.Keys(clusters) {
		res.clusters = append(res.clusters, edsCluster(name))
		res.endpoints = append(res.endpoints, assignment(name, clusters[name]))
	}
	hcm := func(h *hcmv3.HttpConnectionManager) {
		h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{AcceptHttp_10: true, AllowChunkedLength: true}
		if edit != nil {
			edit(h)
		}
	}
	res.listeners = []*listenerv3.Listener{editHCMs(t, httpListener(t), hcm), editHCMs(t, httpsListener(t, codecHost), hcm)}
	secure := routeConfig("https/" + codecHost)
	for _, vh := range vhosts {
		secure.VirtualHosts = append(secure.VirtualHosts, proto.Clone(vh).(*routev3.VirtualHost))
	}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhosts...), secure}
	res.secrets = []*tlsv3.Secret{tlsSecret(secretName(codecHost), certPEM, keyPEM)}
	cp := startControlPlane(t)
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	return &codecProxy{testProxy: p, ca: ca}
}

// editHCMs changes the connection manager of every chain of l with f.
func editHCMs(t testing.TB, l *listenerv3.Listener, f func(*hcmv3.HttpConnectionManager)) *listenerv3.Listener {
	t.Helper()
	for _, fc := range l.FilterChains {
		for _, flt := range fc.Filters {
			var h hcmv3.HttpConnectionManager
			if err := flt.GetTypedConfig().UnmarshalTo(&h); err != nil {
				t.Fatal(err)
			}
			f(&h)
			flt.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, &h)}
		}
	}
	return l
}

// codecPath is one way a Go client reaches the proxy.
type codecPath struct {
	name     string // the subtest's
	proto    string // every response's Proto on this path
	base     string // scheme and authority of the URLs
	listener string // the proxy's listener it reaches
	tr       *http.Transport
	dials    *atomic.Int64 // connections tr opened
}

func (cp codecPath) client() *http.Client {
	return &http.Client{Transport: cp.tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// do sends req and reads the whole response: a body that ends early fails the test.
func (cp codecPath) do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), 2*time.Minute) // a hang, not a speed limit
	defer cancel()
	resp, err := cp.client().Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", req.Method, req.URL, err)
	}
	if resp.Proto != cp.proto {
		t.Fatalf("%s %s answered over %s, want %s", req.Method, req.URL, resp.Proto, cp.proto)
	}
	return resp, string(body)
}

func (cp codecPath) request(t *testing.T, method, path string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, cp.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// paths are the four ways a Go client reaches p, each with its own transport.
func (p *codecProxy) paths(t *testing.T) []codecPath {
	t.Helper()
	path := func(name, proto, scheme, listener string, set func(*http.Protocols)) codecPath {
		addr := p.ListenerAddr(listener)
		dials := new(atomic.Int64)
		tr := &http.Transport{
			Protocols: new(http.Protocols),
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				dials.Add(1)
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
			TLSClientConfig:       &tls.Config{RootCAs: p.ca.pool},
			DisableCompression:    true,
			ExpectContinueTimeout: time.Minute, // the client waits for 100 Continue this long
		}
		set(tr.Protocols)
		t.Cleanup(tr.CloseIdleConnections)
		return codecPath{name: name, proto: proto, base: scheme + "://" + codecHost, listener: listener, tr: tr, dials: dials}
	}
	return []codecPath{
		path("http1", "HTTP/1.1", "http", "ingress_http", func(p *http.Protocols) { p.SetHTTP1(true) }),
		path("http1-tls", "HTTP/1.1", "https", "ingress_https", func(p *http.Protocols) { p.SetHTTP1(true) }),
		path("http2", "HTTP/2.0", "http", "ingress_http", func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) }),
		path("http2-tls", "HTTP/2.0", "https", "ingress_https", func(p *http.Protocols) { p.SetHTTP2(true) }),
	}
}

// rawPath is one way to open an HTTP/1.1 connection to the proxy by hand.
type rawPath struct {
	name     string
	listener string // the proxy's listener it reaches
	dial     func(t *testing.T) (net.Conn, *bufio.Reader)
}

// rawPaths open HTTP/1.1 connections in clear text and over TLS (ALPN http/1.1).
func (p *codecProxy) rawPaths() []rawPath {
	return []rawPath{
		{"http1", "ingress_http", func(t *testing.T) (net.Conn, *bufio.Reader) { return dialProxy(t, p.testProxy) }},
		{"http1-tls", "ingress_https", p.dialTLS},
	}
}

func (p *codecProxy) dialTLS(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", p.ListenerAddr("ingress_https"),
		&tls.Config{ServerName: codecHost, RootCAs: p.ca.pool, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if got := conn.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
		t.Fatalf("ALPN chose %q, want http/1.1", got)
	}
	return conn, bufio.NewReader(conn)
}

// waitAccess waits until n access log lines satisfy match (lines are written off
// the request path) and returns them.
func waitAccess(t *testing.T, p *testProxy, what string, n int, match func(rec map[string]any) bool) []map[string]any {
	t.Helper()
	var got []map[string]any
	waitFor(t, fmt.Sprintf("%d access log lines of %s", n, what), func() bool {
		got = got[:0]
		for _, rec := range p.logs.records("access") {
			if match(rec) {
				got = append(got, rec)
			}
		}
		return len(got) >= n
	})
	return got
}

// requestLineOf waits for the access log line of the one request for path (its
// request URI) and returns it; a second line for it fails t.
func requestLineOf(t *testing.T, p *testProxy, path string) map[string]any {
	t.Helper()
	lines := waitAccess(t, p, path, 1, func(rec map[string]any) bool { return rec["path"] == path })
	if len(lines) != 1 {
		t.Errorf("%d access log lines of %s, want 1", len(lines), path)
	}
	return lines[0]
}

// ---------------------------------------------------------------------------
// The backend.

// codecPattern is the content of the streamed bodies, repeated.
var codecPattern = func() []byte {
	b := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(22, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

// patternBody yields n bytes of codecPattern, calling tick (if set) each time
// another tickEvery bytes have been read.
type patternBody struct {
	left, read int64
	tick       func()
}

const tickEvery = 8 << 20

func (b *patternBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	off := int(b.read % int64(len(codecPattern)))
	n := copy(p[:min(int64(len(p)), b.left)], codecPattern[off:])
	b.left -= int64(n)
	before := b.read
	b.read += int64(n)
	if b.tick != nil && before/tickEvery != b.read/tickEvery {
		b.tick()
	}
	return n, nil
}

// patternCRC is the checksum of n bytes of patternBody.
func patternCRC(n int64) uint32 {
	h := crc32.NewIEEE()
	_, _ = io.Copy(h, &patternBody{left: n})
	return h.Sum32()
}

// codecBackend answers by path, the paths under /codec/:
//
//	echo      "<method> <request URI> <body>"; ?sleep=<duration> first
//	upload    "n=<bytes> crc=<crc32>" of the body
//	download  ?n= bytes of codecPattern, of unknown length (chunked)
//	trailers  the body and the request trailer X-Req-Sum, with the response
//	          trailers X-Resp-Sum (announced) and X-Late (not announced)
//	head      1234 bytes with their Content-Length; HEAD: none
//	204, 304  no content (304 when If-None-Match is "v1")
//	103       Early Hints with a Link, then 200 "final"
func codecBackend(t *testing.T) *scriptedBackend {
	return startScripted(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		switch strings.TrimPrefix(r.URL.Path, "/codec/") {
		case "echo":
			if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
				sleepUntilCancelled(r, d)
			}
			body, _ := io.ReadAll(r.Body)
			_, _ = fmt.Fprintf(w, "%s %s %s", r.Method, r.RequestURI, body)
		case "upload":
			h := crc32.NewIEEE()
			n, err := io.Copy(h, r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			_, _ = fmt.Fprintf(w, "n=%d crc=%08x", n, h.Sum32())
		case "download":
			n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
			_, _ = io.Copy(w, &patternBody{left: n})
		case "trailers":
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Trailer", "X-Resp-Sum")
			_, _ = fmt.Fprintf(w, "body=%s trailer=%s", body, r.Trailer.Get("X-Req-Sum"))
			w.Header().Set("X-Resp-Sum", "resp-"+r.Trailer.Get("X-Req-Sum"))
			w.Header().Set(http.TrailerPrefix+"X-Late", "late")
		case "head":
			w.Header().Set("Content-Length", "1234")
			if r.Method != http.MethodHead {
				_, _ = w.Write(bytes.Repeat([]byte("h"), 1234))
			}
		case "204":
			w.WriteHeader(http.StatusNoContent)
		case "304":
			w.Header().Set("ETag", `"v1"`)
			if r.Header.Get("If-None-Match") == `"v1"` {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			_, _ = io.WriteString(w, "modified")
		case "103":
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			_, _ = io.WriteString(w, "final")
		default:
			http.NotFound(w, r)
		}
	})
}

// codecRoutes send /codec/ to the cluster "be"; anything else is not routed (404).
func codecRoutes() *routev3.VirtualHost {
	return vhost("*", toCluster("be", prefixMatch("/codec/")))
}

// ---------------------------------------------------------------------------
// Streaming bodies with bounded memory.

// heapWatch follows the live heap of the test process, which runs the proxy (and the
// client and backend, which stream).
type heapWatch struct {
	mu         sync.Mutex
	base, peak uint64
	samples    int
}

func watchHeap() *heapWatch {
	h := &heapWatch{}
	h.base = liveHeap()
	h.peak = h.base
	return h
}

// liveHeap is the heap in use after a collection: what is held, not garbage.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func (h *heapWatch) sample() {
	v := liveHeap()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.peak = max(h.peak, v)
	h.samples++
}

// check fails t unless the heap, sampled at least min times, never grew by limit.
func (h *heapWatch) check(t *testing.T, what string, limit uint64, min int) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	growth := h.peak - h.base
	t.Logf("%s: live heap %d MiB before, at most %d MiB more in %d samples", what, h.base>>20, growth>>20, h.samples)
	if h.samples < min {
		t.Errorf("%s: %d heap samples, want at least %d taken during the transfer", what, h.samples, min)
	}
	if growth > limit {
		t.Errorf("%s: the live heap grew by %d MiB during the transfer, want under %d MiB: the proxy holds the body", what, growth>>20, limit>>20)
	}
}

// A 100 MB request body and a 100 MB response body cross the proxy while its heap
// stays flat: the live heap is sampled every 8 MiB of the transfer, from the client's
// side, so a proxy that holds the body (before or while forwarding it) shows.
// Not parallel: the heap is the process's.
func TestCodecStreamingBodiesBoundedMemory(t *testing.T) {
	const size = 100 << 20
	const limit = 32 << 20
	be := codecBackend(t)
	p := startCodecProxy(t, map[string]string{"be": be.addr()}, nil, codecRoutes())
	crc := patternCRC(size)
	downloads := map[string]int{} // by listener, those run
	for _, cp := range p.paths(t) {
		t.Run(cp.name, func(t *testing.T) {
			t.Run("request body", func(t *testing.T) {
				h := watchHeap()
				req := cp.request(t, http.MethodPost, "/codec/upload", &patternBody{left: size, tick: h.sample})
				req.ContentLength = size
				resp, body := cp.do(t, req)
				if want := fmt.Sprintf("n=%d crc=%08x", size, crc); resp.StatusCode != 200 || body != want {
					t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, body, want)
				}
				h.check(t, "100 MB upload", limit, size/tickEvery-1)
			})
			t.Run("response body", func(t *testing.T) {
				h := watchHeap()
				req := cp.request(t, http.MethodGet, "/codec/download?n="+strconv.Itoa(size), nil)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang, not a speed limit
				defer cancel()
				resp, err := cp.client().Do(req.WithContext(ctx))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != 200 || resp.Proto != cp.proto {
					t.Fatalf("got %d over %s", resp.StatusCode, resp.Proto)
				}
				sum := crc32.NewIEEE()
				n, err := io.Copy(sum, &tickingReader{r: resp.Body, tick: h.sample})
				if err != nil || n != size || sum.Sum32() != crc {
					t.Fatalf("received %d bytes with crc %08x (%v), want %d with crc %08x", n, sum.Sum32(), err, size, crc)
				}
				h.check(t, "100 MB download", limit, size/tickEvery-1)
				downloads[cp.listener]++
			})
		})
	}
	// The access log counts the bytes sent of each download; the metrics count them.
	lines := waitAccess(t, p.testProxy, "the downloads", downloads["ingress_http"]+downloads["ingress_https"], func(rec map[string]any) bool {
		return strings.HasPrefix(fmt.Sprint(rec["path"]), "/codec/download")
	})
	for _, rec := range lines {
		if rec["status"] != float64(200) || rec["bytes"] != float64(size) {
			t.Errorf("access log of a download (%v): status %v bytes %v, want 200 and %d", rec["proto"], rec["status"], rec["bytes"], size)
		}
	}
	for l, n := range downloads {
		m := series(t, p.testProxy, "portico_proxy_response_size_bytes", map[string]string{"listener": l})
		if m == nil || m.GetHistogram().GetSampleSum() < float64(n*size) {
			t.Errorf("portico_proxy_response_size_bytes{listener=%q}: %v, want at least the %d downloads' bytes", l, m, n)
		}
	}
}

// tickingReader calls tick each time another tickEvery bytes have been read from r.
type tickingReader struct {
	r    io.Reader
	n    int64
	tick func()
}

func (tr *tickingReader) Read(p []byte) (int, error) {
	n, err := tr.r.Read(p)
	before := tr.n
	tr.n += int64(n)
	if before/tickEvery != tr.n/tickEvery {
		tr.tick()
	}
	return n, err
}

// ---------------------------------------------------------------------------
// Trailers.

// Request trailers reach the backend and response trailers the client, announced or
// not: chunked on HTTP/1.1, a trailing HEADERS frame on HTTP/2. (Envoy drops HTTP/1
// trailers unless http_protocol_options.enable_trailers; Portico always forwards them,
// and refuses enable_trailers.)
func TestCodecTrailers(t *testing.T) {
	t.Parallel()
	be := codecBackend(t)
	p := startCodecProxy(t, map[string]string{"be": be.addr()}, nil, codecRoutes())
	for _, cp := range p.paths(t) {
		t.Run(cp.name, func(t *testing.T) {
			req := cp.request(t, http.MethodPost, "/codec/trailers", io.NopCloser(strings.NewReader("payload")))
			req.ContentLength = -1 // chunked on HTTP/1.1: trailers follow the body
			req.Trailer = http.Header{"X-Req-Sum": {"sum-" + cp.name}}
			resp, body := cp.do(t, req)
			if want := "body=payload trailer=sum-" + cp.name; resp.StatusCode != 200 || body != want {
				t.Errorf("got %d %q, want 200 %q: the request trailer must reach the backend", resp.StatusCode, body, want)
			}
			if got := resp.Trailer.Get("X-Resp-Sum"); got != "resp-sum-"+cp.name {
				t.Errorf("response trailer X-Resp-Sum %q, want %q (trailers %v)", got, "resp-sum-"+cp.name, resp.Trailer)
			}
			if got := resp.Trailer.Get("X-Late"); got != "late" {
				t.Errorf("unannounced response trailer X-Late %q, want late (trailers %v)", got, resp.Trailer)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Expect: 100-continue.

// gatedBody is a request body that records whether the client had its 100 Continue
// when the transport first read it; with hold set, it gives nothing until hold is
// done (the transport waits for its body before it gives up on a request).
type gatedBody struct {
	got100    *atomic.Bool
	before100 atomic.Bool // read before the 100 came
	data      io.Reader
	hold      context.Context // nil: no hold
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if !b.got100.Load() {
		b.before100.Store(true)
	}
	if b.hold != nil {
		<-b.hold.Done()
		return 0, errors.New("released: the request was answered or timed out")
	}
	return b.data.Read(p)
}

// A client that sends Expect: 100-continue gets 100 Continue before it sends its body;
// a request refused before its body (no route: 404; a body over ext_authz's
// max_request_bytes: 413) is answered without the body. On HTTP/1.1 a connection
// whose body was never sent is either closed or still framed right: the body, when
// the client sends it after all, is read as a body, never as the next request.
func TestCodecExpectContinue(t *testing.T) {
	t.Parallel()
	be := codecBackend(t)
	var checks atomic.Int64
	authz := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { checks.Add(1) }))
	t.Cleanup(authz.Close)
	clusters := map[string]string{"be": be.addr(), "authz": authz.Listener.Addr().String()}
	p := startCodecProxy(t, clusters, nil, codecRoutes())
	// The same routes behind an authorization check of the first 1 KiB of bodies.
	guarded := startCodecProxy(t, clusters, func(h *hcmv3.HttpConnectionManager) {
		cfg := &extauthzv3.ExtAuthz{
			Services: &extauthzv3.ExtAuthz_HttpService{HttpService: &extauthzv3.HttpService{ServerUri: &corev3.HttpUri{
				Uri: "http://authz/", HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: "authz"}, Timeout: durationpb.New(30 * time.Second),
			}}},
			TransportApiVersion: corev3.ApiVersion_V3,
			WithRequestBody:     &extauthzv3.BufferSettings{MaxRequestBytes: 1024},
		}
		h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "envoy.filters.http.ext_authz", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, cfg)}}}, h.HttpFilters...)
	}, codecRoutes())

	expecting := func(cp codecPath, t *testing.T, path string, body *gatedBody, length int64) *http.Request {
		req := cp.request(t, http.MethodPost, path, body)
		req.ContentLength = length
		req.Header.Set("Expect", "100-continue")
		trace := &httptrace.ClientTrace{Got100Continue: func() { body.got100.Store(true) }}
		return req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	}
	guardedPaths := guarded.paths(t)
	for i, cp := range p.paths(t) {
		t.Run(cp.name, func(t *testing.T) {
			t.Run("100 Continue before the body", func(t *testing.T) {
				body := &gatedBody{got100: new(atomic.Bool), data: strings.NewReader("hello")}
				resp, got := cp.do(t, expecting(cp, t, "/codec/echo", body, 5))
				if resp.StatusCode != 200 || got != "POST /codec/echo hello" {
					t.Errorf("got %d %q, want the backend's 200 with the body", resp.StatusCode, got)
				}
				if !body.got100.Load() || body.before100.Load() {
					t.Errorf("100 Continue received: %v; body read before it: %v; want the 100 first", body.got100.Load(), body.before100.Load())
				}
			})
			for _, tc := range []struct {
				name   string
				p      *testProxy
				cp     codecPath
				path   string
				status int
			}{
				{"no route: 404 without the body", p.testProxy, cp, "/nowhere?" + cp.name, http.StatusNotFound},
				{"ext_authz max_request_bytes: 413 without the body", guarded.testProxy, guardedPaths[i], "/codec/echo?" + cp.name, http.StatusRequestEntityTooLarge},
			} {
				t.Run(tc.name, func(t *testing.T) {
					hits, before := be.hits.Load(), checks.Load()
					// The body never comes: the answer must not wait for it.
					hold, release := context.WithTimeout(context.Background(), 2*time.Minute) // a hang, not a speed limit
					defer release()
					body := &gatedBody{got100: new(atomic.Bool), hold: hold}
					resp, _ := tc.cp.do(t, expecting(tc.cp, t, tc.path, body, 4096))
					if resp.StatusCode != tc.status {
						t.Errorf("got %d, want %d", resp.StatusCode, tc.status)
					}
					if n, c := be.hits.Load()-hits, checks.Load()-before; n != 0 || c != 0 {
						t.Errorf("the backend got %d requests and the authorization server %d checks, want none", n, c)
					}
					if rec := requestLineOf(t, tc.p, tc.path); rec["status"] != float64(tc.status) {
						t.Errorf("access log status %v, want %d", rec["status"], tc.status)
					}
				})
			}
		})
	}
	for _, rp := range p.rawPaths() {
		t.Run(rp.name+"/the connection after a refusal", func(t *testing.T) {
			conn, br := rp.dial(t)
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			// The body the client holds back looks like a request: read as one, it would
			// reach the backend.
			hidden := "GET /codec/echo?smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
			fmt.Fprintf(conn, "POST /nowhere?raw-%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", rp.name, len(hidden))
			resp := readFinal(t, br, nil)
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("got %d, want 404", resp.StatusCode)
			}
			if rec := requestLineOf(t, p.testProxy, "/nowhere?raw-"+rp.name); rec["status"] != float64(404) {
				t.Errorf("access log status %v, want 404", rec["status"])
			}
			if resp.Close {
				// The client may send the body after all (it may have before the answer):
				// the connection then ends without the body ever served as a request.
				// (RFC 9112 section 9.6 wants the close started at once; net/http instead
				// reads the body it never asked for, then closes.)
				_, _ = io.WriteString(conn, hidden)
				waitClosed(t, conn, br)
				return
			}
			// Kept open: the body must be read as the body.
			next, body := rawRequest(t, conn, br, hidden+"GET /codec/echo?next HTTP/1.1\r\nHost: x\r\n\r\n")
			if next.StatusCode != 200 || body != "GET /codec/echo?next " {
				t.Errorf("after the body, got %d %q, want the answer to /codec/echo?next", next.StatusCode, body)
			}
		})
		t.Run(rp.name+"/100 Continue, then the same connection serves on", func(t *testing.T) {
			conn, br := rp.dial(t)
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			_, _ = io.WriteString(conn, "POST /codec/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
			// Nothing is sent until the 100: without it, both sides wait until the deadline.
			interim, err := http.ReadResponse(br, nil)
			if err != nil || interim.StatusCode != http.StatusContinue {
				t.Fatalf("got %v (%v), want 100 Continue before the body", interim, err)
			}
			_, _ = io.WriteString(conn, "hello")
			if resp := readFinal(t, br, nil); resp.StatusCode != 200 || readBody(t, resp) != "POST /codec/echo hello" {
				t.Fatalf("got %d, want the backend's 200", resp.StatusCode)
			}
			if resp, body := rawRequest(t, conn, br, "GET /codec/echo?again HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != 200 || body != "GET /codec/echo?again " {
				t.Errorf("next request: %d %q", resp.StatusCode, body)
			}
		})
	}
}

// readFinal reads responses from br until a final one (1xx are skipped).
func readFinal(t *testing.T, br *bufio.Reader, req *http.Request) *http.Response {
	t.Helper()
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("no response: %v", err)
		}
		if resp.StatusCode >= 200 {
			return resp
		}
	}
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	return string(b)
}

// ---------------------------------------------------------------------------
// Upgrades and WebSockets.

// wsFrame is one WebSocket message with its payload type (text or binary).
type wsFrame struct {
	data []byte
	typ  byte
}

// wsFrames sends and receives messages keeping their payload type.
var wsFrames = websocket.Codec{
	Marshal: func(v any) ([]byte, byte, error) {
		f := v.(wsFrame)
		return f.data, f.typ, nil
	},
	Unmarshal: func(data []byte, typ byte, v any) error {
		*v.(*wsFrame) = wsFrame{data: data, typ: typ}
		return nil
	},
}

// A real WebSocket session (golang.org/x/net/websocket at both ends: the handshake
// with its Sec-WebSocket-Accept check, masked frames, text and binary messages, one of
// 256 KiB) crosses the proxy on a route whose upgrade_configs allow it; on a route
// without them the upgrade is refused with 403 and the backend never sees it.
// WebSockets over HTTP/2 (RFC 8441's extended CONNECT) need
// http2_protocol_options.allow_connect, which the proxy refuses, as Envoy does without it.
func TestCodecWebSocket(t *testing.T) {
	t.Parallel()
	var handshakes atomic.Int64
	var seen sync.Map // what the backend saw of the handshake: path and Host
	ws := httptest.NewServer(websocket.Handler(func(c *websocket.Conn) {
		handshakes.Add(1)
		seen.Store("request", c.Request().URL.Path+" "+c.Request().Host)
		for {
			var f wsFrame
			if err := wsFrames.Receive(c, &f); err != nil {
				return
			}
			if err := wsFrames.Send(c, f); err != nil {
				return
			}
		}
	}))
	t.Cleanup(ws.Close)
	p := startCodecProxy(t, map[string]string{"ws": ws.Listener.Addr().String()}, nil, vhost("*",
		withAction(toCluster("ws", prefixMatch("/ws/")), func(a *routev3.RouteAction) {
			a.UpgradeConfigs = []*routev3.RouteAction_UpgradeConfig{{UpgradeType: "websocket"}}
		}),
		toCluster("ws", prefixMatch("/plain/")),
	))
	big := bytes.Repeat([]byte("0123456789abcdef"), 16<<10)
	for _, rp := range p.rawPaths() {
		t.Run(rp.name, func(t *testing.T) {
			t.Run("echo", func(t *testing.T) {
				conn, _ := rp.dial(t)
				_ = conn.SetDeadline(time.Now().Add(time.Minute))
				cfg, err := websocket.NewConfig("ws://"+codecHost+"/ws/echo?"+rp.name, "http://"+codecHost)
				if err != nil {
					t.Fatal(err)
				}
				c, err := websocket.NewClient(cfg, conn)
				if err != nil {
					t.Fatalf("handshake through the proxy: %v", err)
				}
				defer c.Close()
				for i, f := range []wsFrame{
					{[]byte("hello"), websocket.TextFrame},
					{[]byte{0, 1, 2, 255}, websocket.BinaryFrame},
					{big, websocket.BinaryFrame},
					{[]byte("bye"), websocket.TextFrame},
				} {
					if err := wsFrames.Send(c, f); err != nil {
						t.Fatalf("message %d: %v", i, err)
					}
					var got wsFrame
					if err := wsFrames.Receive(c, &got); err != nil {
						t.Fatalf("message %d: %v", i, err)
					}
					if got.typ != f.typ || !bytes.Equal(got.data, f.data) {
						t.Fatalf("message %d: echoed %d bytes of type %d, want %d bytes of type %d", i, len(got.data), got.typ, len(f.data), f.typ)
					}
				}
				if v, _ := seen.Load("request"); v != "/ws/echo "+codecHost {
					t.Errorf("the backend's handshake: %v, want /ws/echo %s", v, codecHost)
				}
				c.Close()
				if rec := requestLineOf(t, p.testProxy, "/ws/echo?"+rp.name); rec["status"] != float64(101) {
					t.Errorf("access log status %v, want 101", rec["status"])
				}
			})
			t.Run("not allowed on the route: 403", func(t *testing.T) {
				before := handshakes.Load()
				conn, br := rp.dial(t)
				_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
				resp, _ := rawRequest(t, conn, br, "GET /plain/echo HTTP/1.1\r\nHost: "+codecHost+"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
					"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://"+codecHost+"\r\n\r\n")
				if resp.StatusCode != http.StatusForbidden {
					t.Errorf("got %d, want 403", resp.StatusCode)
				}
				if n := handshakes.Load() - before; n != 0 {
					t.Errorf("the backend upgraded %d connections", n)
				}
			})
		})
	}
}

// ---------------------------------------------------------------------------
// Pipelining, and HTTP/2's streams on one connection.

// Requests written at once on one connection, the first slow and two with bodies (one
// of known length, one chunked) and a HEAD among them, are each answered, in order.
// On HTTP/2, concurrent streams on one connection each get their own answer.
func TestCodecPipelining(t *testing.T) {
	t.Parallel()
	be := codecBackend(t)
	p := startCodecProxy(t, map[string]string{"be": be.addr()}, nil, codecRoutes())
	for _, rp := range p.rawPaths() {
		t.Run(rp.name, func(t *testing.T) {
			conn, br := rp.dial(t)
			_ = conn.SetDeadline(time.Now().Add(time.Minute))
			tag := rp.name
			_, err := io.WriteString(conn, ""+
				"GET /codec/echo?i=1&sleep=200ms&"+tag+" HTTP/1.1\r\nHost: x\r\n\r\n"+
				"POST /codec/echo?i=2&"+tag+" HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\ntwo"+
				"GET /codec/echo?i=3&"+tag+" HTTP/1.1\r\nHost: x\r\n\r\n"+
				"POST /codec/echo?i=4&"+tag+" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nfo\r\n2\r\nur\r\n0\r\n\r\n"+
				"HEAD /codec/head?i=5&"+tag+" HTTP/1.1\r\nHost: x\r\n\r\n"+
				"GET /codec/echo?i=6&"+tag+" HTTP/1.1\r\nHost: x\r\n\r\n")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []struct{ method, body string }{
				{"GET", "GET /codec/echo?i=1&sleep=200ms&" + tag + " "},
				{"POST", "POST /codec/echo?i=2&" + tag + " two"},
				{"GET", "GET /codec/echo?i=3&" + tag + " "},
				{"POST", "POST /codec/echo?i=4&" + tag + " four"},
				{"HEAD", ""},
				{"GET", "GET /codec/echo?i=6&" + tag + " "},
			} {
				resp, err := http.ReadResponse(br, &http.Request{Method: want.method})
				if err != nil {
					t.Fatalf("waiting for the answer %q: %v", want.body, err)
				}
				body := readBody(t, resp)
				if resp.StatusCode != 200 || body != want.body || resp.Close {
					t.Fatalf("got %d %q (close %v), want 200 %q on an open connection", resp.StatusCode, body, resp.Close, want.body)
				}
				if want.method == "HEAD" && resp.ContentLength != 1234 {
					t.Errorf("HEAD: Content-Length %d, want 1234", resp.ContentLength)
				}
			}
			lines := waitAccess(t, p.testProxy, "the pipelined requests", 6, func(rec map[string]any) bool {
				return strings.HasSuffix(fmt.Sprint(rec["path"]), "&"+tag)
			})
			if len(lines) != 6 {
				t.Errorf("%d access log lines for 6 pipelined requests", len(lines))
			}
		})
	}
	for _, cp := range p.paths(t)[2:] {
		t.Run(cp.name+"/concurrent streams", func(t *testing.T) {
			// The connection each request went on, by its local address.
			var mu sync.Mutex
			used := map[int]string{}
			traced := func(req *http.Request, i int) *http.Request {
				return req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
					GotConn: func(g httptrace.GotConnInfo) {
						mu.Lock()
						used[i] = g.Conn.LocalAddr().String()
						mu.Unlock()
					},
				}))
			}
			cp.do(t, traced(cp.request(t, http.MethodGet, "/codec/echo?warm", nil), 0)) // the connection
			var wg sync.WaitGroup
			errs := make(chan string, 6)
			for i := 1; i <= 6; i++ {
				wg.Go(func() {
					path := fmt.Sprintf("/codec/echo?i=%d", i)
					if i == 1 {
						path += "&sleep=200ms"
					}
					req, _ := http.NewRequest(http.MethodPost, cp.base+path, strings.NewReader(strconv.Itoa(i)))
					resp, err := cp.client().Do(traced(req, i))
					if err != nil {
						errs <- err.Error()
						return
					}
					defer resp.Body.Close()
					body, _ := io.ReadAll(resp.Body)
					if want := "POST " + path + " " + strconv.Itoa(i); string(body) != want || resp.Proto != "HTTP/2.0" {
						errs <- fmt.Sprintf("%s over %s: got %q, want %q", path, resp.Proto, body, want)
					}
				})
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
			for i := 1; i <= 6; i++ {
				if used[i] != used[0] {
					t.Errorf("request %d went on connection %s, not the first one (%s)", i, used[i], used[0])
				}
			}
			// Over h2c, Go's client may also dial connections it does not use:
			// net/http's Transport hands a new HTTP/2 connection to the request
			// that dialled it before adding it to its idle pool (dialConnFor), so
			// requests made in between find no connection, dial, and then take
			// the first one when it reaches the pool. Over TLS the HTTP/2
			// transport's own pool has the connection before that request does.
			if n := cp.dials.Load(); n != 1 && cp.name != "http2" {
				t.Errorf("%d connections, want the one", n)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Keep-alive.

// Many requests share one connection; "Connection: close" from the client closes it
// after the response; an HTTP/1.0 client that asks for keep-alive keeps its
// connection (and is told so), one that does not gets it closed, and a response of
// unknown length to HTTP/1.0 is delimited by its length or by the close.
func TestCodecKeepAlive(t *testing.T) {
	t.Parallel()
	be := codecBackend(t)
	p := startCodecProxy(t, map[string]string{"be": be.addr()}, nil, codecRoutes())
	for _, cp := range p.paths(t) {
		t.Run(cp.name+"/100 requests on one connection", func(t *testing.T) {
			for i := range 100 {
				var body io.Reader
				method := http.MethodGet
				if i%2 == 1 {
					method, body = http.MethodPost, strings.NewReader("b"+strconv.Itoa(i))
				}
				resp, got := cp.do(t, cp.request(t, method, "/codec/echo?i="+strconv.Itoa(i), body))
				want := fmt.Sprintf("%s /codec/echo?i=%d ", method, i)
				if body != nil {
					want += "b" + strconv.Itoa(i)
				}
				if resp.StatusCode != 200 || got != want {
					t.Fatalf("request %d: got %d %q, want %q", i, resp.StatusCode, got, want)
				}
			}
			if n := cp.dials.Load(); n != 1 {
				t.Errorf("%d connections for 100 requests, want 1", n)
			}
		})
	}
	for _, rp := range p.rawPaths() {
		t.Run(rp.name+"/Connection: close", func(t *testing.T) {
			conn, br := rp.dial(t)
			if resp, _ := rawRequest(t, conn, br, keepAliveGET); resp.Close {
				t.Fatal("a keep-alive request's response closes the connection")
			}
			resp, body := rawRequest(t, conn, br, "GET /codec/echo?last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			if resp.StatusCode != 200 || body != "GET /codec/echo?last " || !resp.Close {
				t.Errorf("got %d %q, Connection: close %v; want 200 announcing the close", resp.StatusCode, body, resp.Close)
			}
			waitClosed(t, conn, br)
		})
		t.Run(rp.name+"/HTTP/1.0 keep-alive", func(t *testing.T) {
			conn, br := rp.dial(t)
			for i := range 3 {
				resp, body := rawRequest(t, conn, br, fmt.Sprintf("GET /codec/echo?ka=%d HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", i))
				if resp.StatusCode != 200 || body != fmt.Sprintf("GET /codec/echo?ka=%d ", i) {
					t.Fatalf("request %d: got %d %q", i, resp.StatusCode, body)
				}
				// An HTTP/1.0 client closes unless told the connection persists.
				if resp.Close || !strings.EqualFold(resp.Header.Get("Connection"), "keep-alive") {
					t.Fatalf("request %d: Connection %q (close %v), want keep-alive", i, resp.Header.Get("Connection"), resp.Close)
				}
			}
		})
		t.Run(rp.name+"/HTTP/1.0 without keep-alive", func(t *testing.T) {
			conn, br := rp.dial(t)
			resp, body := rawRequest(t, conn, br, "GET /codec/echo?once HTTP/1.0\r\nHost: x\r\n\r\n")
			if resp.StatusCode != 200 || body != "GET /codec/echo?once " {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
			waitClosed(t, conn, br)
		})
		t.Run(rp.name+"/HTTP/1.0 keep-alive, response of unknown length", func(t *testing.T) {
			conn, br := rp.dial(t)
			const n = 300 << 10
			resp, body := rawRequest(t, conn, br, fmt.Sprintf("GET /codec/download?n=%d HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", n))
			if resp.StatusCode != 200 || len(body) != n || crc32.ChecksumIEEE([]byte(body)) != patternCRC(n) {
				t.Fatalf("got %d with %d bytes, want the %d bytes", resp.StatusCode, len(body), n)
			}
			if len(resp.TransferEncoding) > 0 {
				t.Errorf("Transfer-Encoding %v in a response to HTTP/1.0", resp.TransferEncoding)
			}
			// Without a Content-Length the close delimits the body; with one, the
			// connection may serve on.
			if resp.ContentLength < 0 || resp.Close {
				waitClosed(t, conn, br)
				return
			}
			if resp, body := rawRequest(t, conn, br, "GET /codec/echo?after HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"); resp.StatusCode != 200 || body != "GET /codec/echo?after " {
				t.Errorf("next request: %d %q", resp.StatusCode, body)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Idle and header-read timeouts.

// h2Conn is a raw HTTP/2 connection with prior knowledge, its preface and SETTINGS
// sent and the proxy's SETTINGS acknowledged.
func h2Conn(t *testing.T, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	return h2Dial(t, &net.Dialer{Timeout: 10 * time.Second}, addr)
}

// h2Dial is h2Conn through the dialer d.
func h2Dial(t *testing.T, d *net.Dialer, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return h2Start(t, conn)
}

// h2TLSConn is h2Dial over TLS (ALPN h2) to the codec proxy's TLS listener.
func h2TLSConn(t *testing.T, d *net.Dialer, p *codecProxy) (net.Conn, *http2.Framer) {
	t.Helper()
	conn, err := tls.DialWithDialer(d, "tcp", p.ListenerAddr("ingress_https"),
		&tls.Config{ServerName: codecHost, RootCAs: p.ca.pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := conn.ConnectionState().NegotiatedProtocol; got != "h2" {
		t.Fatalf("ALPN chose %q, want h2", got)
	}
	return h2Start(t, conn)
}

// h2Start sends the preface and SETTINGS on conn and acknowledges the proxy's.
func h2Start(t *testing.T, conn net.Conn) (net.Conn, *http2.Framer) {
	t.Helper()
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no SETTINGS from the proxy: %v", err)
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			if err := fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetDeadline(time.Time{})
			return conn, fr
		}
	}
}

// h2Headers is a HEADERS frame of a request on stream 1 for path with method, its
// header block padded by a header of pad bytes; endHeaders false leaves it open
// (a CONTINUATION frame would follow).
func h2Headers(t *testing.T, method, path string, pad int, endHeaders bool) []byte {
	t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: method}, {Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: codecHost}, {Name: ":path", Value: path},
	} {
		_ = enc.WriteField(f)
	}
	if pad > 0 {
		_ = enc.WriteField(hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("p", pad)})
	}
	var frame bytes.Buffer
	if err := http2.NewFramer(&frame, nil).WriteHeaders(http2.HeadersFrameParam{
		StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: endHeaders,
	}); err != nil {
		t.Fatal(err)
	}
	return frame.Bytes()
}

// h2WaitClosed reads frames until the proxy closes conn, and fails if a stream is
// answered with anything but 408 or if the connection is still open after deadline.
func h2WaitClosed(t *testing.T, conn net.Conn, fr *http2.Framer, deadline time.Duration) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(deadline))
	for {
		f, err := fr.ReadFrame()
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			t.Fatalf("the connection is still open after %v", deadline)
		case err != nil:
			return // closed (EOF, reset, or a frame cut short by the close)
		}
		if h, ok := f.(*http2.MetaHeadersFrame); ok && h.PseudoValue("status") != "408" {
			t.Fatalf("stream %d answered %s, want no answer (or 408)", h.StreamID, h.PseudoValue("status"))
		}
	}
}

// h2Response reads frames until stream's response ends and returns its status and body.
func h2Response(t *testing.T, fr *http2.Framer, stream uint32) (status, body string) {
	t.Helper()
	var b strings.Builder
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("stream %d: no response: %v", stream, err)
		}
		if f.Header().StreamID != stream {
			continue
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if status == "" {
				status = f.PseudoValue("status")
			}
		case *http2.DataFrame:
			b.Write(f.Data())
		case *http2.RSTStreamFrame:
			return "reset " + f.ErrCode.String(), b.String()
		}
		if f.Header().Flags.Has(http2.FlagDataEndStream) {
			return status, b.String()
		}
	}
}

// dribble writes data one byte every gap until it is all sent, the connection fails,
// or stop is closed.
func dribble(conn net.Conn, data []byte, gap time.Duration, stop <-chan struct{}) {
	for _, b := range data {
		select {
		case <-stop:
			return
		case <-time.After(gap):
		}
		if _, err := conn.Write([]byte{b}); err != nil {
			return
		}
	}
}

// A connection with nothing in progress is closed at the connection manager's idle
// timeout; a client whose request head stops midway, or arrives a byte at a time
// (slowloris), is cut off by the configured timeouts (idle_timeout 300ms, and
// stream_idle_timeout 300ms, which Envoy also applies while it waits for the head),
// and nothing reaches the backend. The close is awaited for 20s: well over the
// configured timeouts, under the server's fixed 30s header-read timeout, so that this
// one is not what cuts.
func TestCodecSlowClientsAreCut(t *testing.T) {
	t.Parallel()
	be := codecBackend(t)
	p := startCodecProxy(t, map[string]string{"be": be.addr()}, func(h *hcmv3.HttpConnectionManager) {
		h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(300 * time.Millisecond)}
		h.StreamIdleTimeout = durationpb.New(300 * time.Millisecond)
	}, codecRoutes())
	const deadline = 20 * time.Second
	addr := p.ListenerAddr("ingress_http")
	closedWithin := func(t *testing.T, conn net.Conn, br *bufio.Reader) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(deadline))
		resp, err := http.ReadResponse(br, nil)
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			t.Fatalf("the connection is still open after %v", deadline)
		case err != nil:
			return // closed without an answer
		case resp.StatusCode != http.StatusRequestTimeout:
			t.Fatalf("answered %d, want the connection cut (or 408)", resp.StatusCode)
		}
		_ = readBody(t, resp)
		waitClosed(t, conn, br)
	}
	hits := be.hits.Load()
	t.Run("http1/idle connection", func(t *testing.T) {
		conn, br := dialProxy(t, p.testProxy)
		closedWithin(t, conn, br)
	})
	t.Run("http1/head stops midway", func(t *testing.T) {
		conn, br := dialProxy(t, p.testProxy)
		_, _ = io.WriteString(conn, "GET /codec/echo HTTP/1.1\r\nHost: x\r\nX-Half: ")
		closedWithin(t, conn, br)
	})
	t.Run("http1/head a byte at a time", func(t *testing.T) {
		conn, br := dialProxy(t, p.testProxy)
		stop := make(chan struct{})
		defer close(stop)
		// 4 KiB at a byte every 50ms would take over 3 minutes.
		go dribble(conn, []byte("GET /codec/echo HTTP/1.1\r\nHost: x\r\nX-Slow: "+strings.Repeat("s", 4096)+"\r\n\r\n"), 50*time.Millisecond, stop)
		closedWithin(t, conn, br)
	})
	t.Run("http2/idle connection", func(t *testing.T) {
		conn, fr := h2Conn(t, addr)
		h2WaitClosed(t, conn, fr, deadline)
	})
	t.Run("http2/headers stop midway", func(t *testing.T) {
		conn, fr := h2Conn(t, addr)
		if _, err := conn.Write(h2Headers(t, "GET", "/codec/echo", 0, false)); err != nil {
			t.Fatal(err)
		}
		h2WaitClosed(t, conn, fr, deadline)
	})
	t.Run("http2/headers a byte at a time", func(t *testing.T) {
		conn, fr := h2Conn(t, addr)
		stop := make(chan struct{})
		defer close(stop)
		go dribble(conn, h2Headers(t, "GET", "/codec/echo", 4096, true), 50*time.Millisecond, stop)
		h2WaitClosed(t, conn, fr, deadline)
	})
	if n := be.hits.Load() - hits; n != 0 {
		t.Errorf("the backend got %d requests from clients that never finished their heads", n)
	}
	// The timeouts cut the slow, not the rest.
	for _, cp := range p.paths(t) {
		t.Run(cp.name+"/a prompt request is served", func(t *testing.T) {
			if resp, body := cp.do(t, cp.request(t, http.MethodGet, "/codec/echo?prompt", nil)); resp.StatusCode != 200 || body != "GET /codec/echo?prompt " {
				t.Errorf("got %d %q", resp.StatusCode, body)
			}
		})
	}
}

// request_headers_timeout bounds an HTTP/1.1 head from its first byte to its last,
// per connection manager: a head that stops midway is cut well before the 30 s the
// proxy otherwise allows, and nothing reaches the backend; a connection that sends
// nothing for longer than the timeout, then a whole head, is served (the timer starts
// at the head's first byte, as in Envoy; the idle timeout covers the wait).
func TestCodecRequestHeadersTimeout(t *testing.T) {
	t.Parallel()
	be := codecBackend(t)
	p := startCodecProxy(t, map[string]string{"be": be.addr()}, func(h *hcmv3.HttpConnectionManager) {
		h.RequestHeadersTimeout = durationpb.New(time.Second)
	}, codecRoutes())
	// Far under the proxy's default of 30 s, and far over the second configured.
	const deadline = 20 * time.Second
	hits := be.hits.Load()
	t.Run("clients", func(t *testing.T) { // both paths at once, and done before what follows
		for _, rp := range p.rawPaths() {
			t.Run(rp.name+"/head stops midway", func(t *testing.T) {
				t.Parallel()
				conn, br := rp.dial(t)
				if _, err := io.WriteString(conn, "GET /codec/echo HTTP/1.1\r\nHost: x\r\nX-Half: "); err != nil {
					t.Fatal(err)
				}
				_ = conn.SetReadDeadline(time.Now().Add(deadline))
				switch _, err := br.ReadByte(); {
				case errors.Is(err, os.ErrDeadlineExceeded):
					t.Fatalf("the connection is still open after %v", deadline)
				case err == nil:
					t.Fatal("the proxy answered a head that never ended")
				}
			})
			t.Run(rp.name+"/quiet before the head", func(t *testing.T) {
				t.Parallel()
				conn, br := rp.dial(t)
				time.Sleep(2500 * time.Millisecond) // longer than the timeout, before any byte
				if resp, body := rawRequest(t, conn, br, "GET /codec/echo?quiet HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != 200 || body != "GET /codec/echo?quiet " {
					t.Errorf("got %d %q", resp.StatusCode, body)
				}
			})
		}
	})
	if n := be.hits.Load() - hits; n != int64(len(p.rawPaths())) {
		t.Errorf("the backend got %d requests, want only the %d whole heads", n, len(p.rawPaths()))
	}
	for _, cp := range p.paths(t) {
		t.Run(cp.name+"/a prompt request is served", func(t *testing.T) {
			if resp, body := cp.do(t, cp.request(t, http.MethodGet, "/codec/echo?prompt", nil)); resp.StatusCode != 200 || body != "GET /codec/echo?prompt " {
				t.Errorf("got %d %q", resp.StatusCode, body)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Request targets.

// The absolute-form routes by its authority, which replaces Host (RFC 9112 section
// 3.2.2, as Envoy does with allow_absolute_url, its default), and the backend gets
// the origin-form. OPTIONS * is never forwarded and leaves the connection serving:
// Envoy answers 404 (a path that is not relative, response details absolute_path);
// net/http answers 200 itself, before the connection manager sees the request, so it
// is neither logged nor counted (see docs/dev/http1-behaviours.md).
func TestCodecRequestTargets(t *testing.T) {
	t.Parallel()
	a, b := startBackend(t, "A"), startBackend(t, "B")
	p := startCodecProxy(t, map[string]string{"A": a.addr(), "B": b.addr()}, nil,
		vhost("a.example.com", toCluster("A", prefixMatch("/"))),
		vhost("b.example.com", toCluster("B", prefixMatch("/"))),
	)
	for _, rp := range p.rawPaths() {
		t.Run(rp.name, func(t *testing.T) {
			conn, br := rp.dial(t)
			for i, authority := range []string{"http://a.example.com", "http://a.example.com:8080", "HTTP://A.EXAMPLE.COM"} {
				path := fmt.Sprintf("/t?%s-%d", rp.name, i)
				_, body := rawRequest(t, conn, br, "GET "+authority+path+" HTTP/1.1\r\nHost: b.example.com\r\n\r\n")
				var e echo
				if err := json.Unmarshal([]byte(body), &e); err != nil || e.Backend != "A" || e.Path != path || !strings.HasPrefix(strings.ToLower(e.Host), "a.example.com") {
					t.Errorf("%s%s with Host b.example.com: backend %q path %q host %q, want A with %s for a.example.com", authority, path, e.Backend, e.Path, e.Host, path)
				}
				rec := requestLineOf(t, p.testProxy, path)
				if rec["upstream_cluster"] != "A" || !strings.HasPrefix(strings.ToLower(fmt.Sprint(rec["authority"])), "a.example.com") {
					t.Errorf("access log of %s%s: cluster %v authority %v, want A and a.example.com", authority, path, rec["upstream_cluster"], rec["authority"])
				}
			}
			resp, body := rawRequest(t, conn, br, "OPTIONS * HTTP/1.1\r\nHost: a.example.com\r\n\r\n")
			t.Logf("OPTIONS *: %d %q", resp.StatusCode, body)
			if resp.StatusCode != 404 {
				t.Errorf("OPTIONS *: %d, want Envoy's 404", resp.StatusCode)
			}
			if strings.Contains(body, `"backend"`) || resp.Close {
				t.Errorf("OPTIONS *: %q (close %v): forwarded, or the connection closed", body, resp.Close)
			}
			if resp, body := rawRequest(t, conn, br, "GET /after HTTP/1.1\r\nHost: b.example.com\r\n\r\n"); resp.StatusCode != 200 || !strings.Contains(body, `"backend":"B"`) {
				t.Errorf("after OPTIONS *: %d %q", resp.StatusCode, body)
			}
		})
	}
	t.Run("http2/OPTIONS *", func(t *testing.T) {
		conn, fr := h2Conn(t, p.ListenerAddr("ingress_http"))
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := conn.Write(h2Headers(t, "OPTIONS", "*", 0, true)); err != nil {
			t.Fatal(err)
		}
		status, body := h2Response(t, fr, 1)
		t.Logf("OPTIONS *: %s %q", status, body)
		if status != "404" {
			t.Errorf("OPTIONS *: %s, want Envoy's 404 (Go's HTTP/2 server answered 200 itself before)", status)
		}
		if strings.Contains(body, `"backend"`) {
			t.Errorf("OPTIONS * was forwarded: %q", body)
		}
	})
}

// ---------------------------------------------------------------------------
// Connection and hop-by-hop headers.

// hopBackend answers every request on a kept-alive connection with a chunked
// "hello" and hop-by-hop headers: Connection naming X-Resp-Hop, Keep-Alive,
// Proxy-Connection and Upgrade, besides the end-to-end X-Resp-E2E. A request
// for a path with ?close is answered with Connection: close naming X-Resp-Hop
// too, and the connection closed after it. A 100 Continue answers an Expect.
func hopBackend(t *testing.T) string {
	addr, _ := rawHTTPBackend(t, func(_ int64, conn *net.TCPConn, br *bufio.Reader) { serveHop(conn, br) })
	return addr
}

// hopBackendTLS is hopBackend over TLS, with a certificate for
// backend.internal from ca.
func hopBackendTLS(t *testing.T, ca *testCA) string {
	cert := ca.keyPair(t, "backend.internal")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				serveHop(conn, bufio.NewReader(conn))
			}()
		}
	}()
	return ln.Addr().String()
}

func serveHop(conn io.Writer, br *bufio.Reader) {
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if req.Header.Get("Expect") == "100-continue" {
			if _, err := io.WriteString(conn, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				return
			}
		}
		_, _ = io.Copy(io.Discard, req.Body)
		if req.URL.Query().Has("hints") {
			if _, err := io.WriteString(conn, "HTTP/1.1 103 Early Hints\r\nConnection: X-Hint-Hop\r\nX-Hint-Hop: 1\r\nLink: </a.css>; rel=preload\r\n\r\n"); err != nil {
				return
			}
		}
		connection := "X-Resp-Hop, keep-alive"
		if req.URL.Query().Has("close") {
			connection = "close, X-Resp-Hop"
		}
		if _, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\nConnection: "+connection+"\r\nX-Resp-Hop: 1\r\n"+
			"Keep-Alive: timeout=9\r\nProxy-Connection: keep-alive\r\nUpgrade: foo\r\nX-Resp-E2E: kept\r\n"+
			"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"); err != nil || req.URL.Query().Has("close") {
			return
		}
	}
}

// A mirrored request's copy loses the headers the request's Connection field names,
// as the request itself does.
func TestMirrorDropsHopByHopHeaders(t *testing.T) {
	t.Parallel()
	shadowed := make(chan http.Header, 1)
	shadow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case shadowed <- r.Header.Clone():
		default:
		}
	}))
	t.Cleanup(shadow.Close)
	primary := startBackend(t, "main")
	p := startCodecProxy(t, map[string]string{"main": primary.addr(), "shadow": shadow.Listener.Addr().String()}, nil, vhost("*",
		withAction(toCluster("main", prefixMatch("/")), func(a *routev3.RouteAction) {
			a.RequestMirrorPolicies = []*routev3.RouteAction_RequestMirrorPolicy{{Cluster: "shadow"}}
		})))
	conn, br := dialProxy(t, p.testProxy)
	resp, body := rawRequest(t, conn, br, "GET /m HTTP/1.1\r\nHost: x\r\nConnection: X-Hop-M\r\nX-Hop-M: 1\r\nX-E2E: kept\r\n\r\n")
	var e echo
	if err := json.Unmarshal([]byte(body), &e); resp.StatusCode != 200 || err != nil || e.Header.Get("X-Hop-M") != "" {
		t.Fatalf("the request: %d %q", resp.StatusCode, body)
	}
	select {
	case h := <-shadowed:
		if _, ok := h["X-Hop-M"]; ok || h.Get("X-E2E") != "kept" {
			t.Errorf("the mirror's copy carried %v, want X-E2E and not X-Hop-M", h)
		}
	case <-time.After(time.Minute): // a hang, not a speed limit
		t.Fatal("no mirrored request")
	}
}

// An interim (1xx) response's hop-by-hop headers stop at the proxy as a final
// one's do: a 103's Link reaches the client, what its Connection names does not.
func TestCodecHopByHopHeadersOfInterimResponses(t *testing.T) {
	t.Parallel()
	p := startCodecProxy(t, map[string]string{"hop": hopBackend(t)}, nil, vhost("*", toCluster("hop", prefixMatch("/hop"))))
	for _, cp := range p.paths(t) {
		t.Run(cp.name, func(t *testing.T) {
			var mu sync.Mutex
			var hints []textproto.MIMEHeader
			req := cp.request(t, http.MethodGet, "/hop?hints", nil)
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					mu.Lock()
					defer mu.Unlock()
					if code == http.StatusEarlyHints {
						hints = append(hints, h)
					}
					return nil
				},
			}))
			if resp, body := cp.do(t, req); resp.StatusCode != 200 || body != "hello" {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(hints) != 1 || hints[0].Get("Link") == "" {
				t.Fatalf("103s received: %v, want one with its Link", hints)
			}
			for _, h := range []string{"X-Hint-Hop", "Connection"} {
				if v, ok := hints[0][h]; ok {
					t.Errorf("the 103 carried %s: %q", h, v)
				}
			}
		})
	}
}

// The headers a backend's Connection field names stop at the proxy also on the
// clusters with an HTTP/1.1 transport of their own (a codec client of their
// own): over TLS, and in clear text with an idle_timeout; with Connection:
// close too.
func TestHopByHopHeadersFromOwnTransports(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	tlsCluster, idleCluster := edsCluster("hop-tls"), edsCluster("hop-idle")
	tlsCluster.TransportSocket = upstreamTLSSocket(t, "backend.internal", nil, validation(ca.pem(), "backend.internal"))
	protocolOptions(t, idleCluster, false, durationpb.New(time.Minute))
	cp := startControlPlane(t)
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		clusters:  []*clusterv3.Cluster{tlsCluster, idleCluster},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("hop-tls", hopBackendTLS(t, ca)), assignment("hop-idle", hopBackend(t))},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			toCluster("hop-tls", prefixMatch("/tls")), toCluster("hop-idle", prefixMatch("/idle"))))},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	for _, path := range []string{"/tls", "/tls?close", "/idle", "/idle?close"} {
		for i := range 2 { // the second on a reused or a new upstream connection
			r := get(t, c, p.httpURL(t, path), "x", nil)
			if r.Status != 200 || r.Body != "hello" || r.Header.Get("X-Resp-E2E") != "kept" {
				t.Fatalf("%s, response %d: %d %q with X-Resp-E2E %q", path, i, r.Status, r.Body, r.Header.Get("X-Resp-E2E"))
			}
			for _, h := range []string{"X-Resp-Hop", "Keep-Alive", "Proxy-Connection", "Upgrade"} {
				if v, ok := r.Header[h]; ok {
					t.Errorf("%s, response %d: the client received %s: %q", path, i, h, v)
				}
			}
		}
	}
}

// Hop-by-hop headers (RFC 9110 section 7.6.1) stop at the proxy both ways: Connection
// and the headers it names, Keep-Alive, Proxy-Connection, TE (but "trailers"),
// Transfer-Encoding (the backend gets its own framing) and Upgrade (without
// "Connection: upgrade", not an upgrade request) never reach the backend, and
// Connection and the headers it names, Keep-Alive, Proxy-Connection and Upgrade from
// the backend never reach the client; end-to-end headers pass. (HTTP/2 requests cannot
// carry them: Go's client will not send them, and the server refuses them.)
func TestCodecHopByHopHeaders(t *testing.T) {
	t.Parallel()
	echoes := startBackend(t, "echo")
	p := startCodecProxy(t, map[string]string{"echo": echoes.addr(), "hop": hopBackend(t)}, nil, vhost("*",
		toCluster("echo", prefixMatch("/echo")),
		toCluster("hop", prefixMatch("/hop")),
	))
	// With Expect too: the codec's client sends the head first and the body
	// after the backend's 100.
	for _, rp := range p.rawPaths() {
		for _, expect := range []string{"", "Expect: 100-continue\r\n"} {
			name := "/request"
			if expect != "" {
				name = "/request_with_expect"
			}
			t.Run(rp.name+name, func(t *testing.T) {
				conn, br := rp.dial(t)
				if _, err := io.WriteString(conn, "POST /echo HTTP/1.1\r\nHost: x\r\n"+expect+
					"Connection: keep-alive, X-Hop-A, x-hop-b\r\nX-Hop-A: 1\r\nX-Hop-B: 2\r\n"+
					"Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nTE: gzip, trailers\r\n"+
					"Upgrade: foo\r\nX-E2E: kept\r\nTransfer-Encoding: chunked\r\n\r\n"+
					"5\r\nhello\r\n0\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				resp := readFinal(t, br, nil)
				body := readBody(t, resp)
				var e echo
				if err := json.Unmarshal([]byte(body), &e); resp.StatusCode != 200 || err != nil {
					t.Fatalf("got %d %q", resp.StatusCode, body)
				}
				for _, h := range []string{"X-Hop-A", "X-Hop-B", "Keep-Alive", "Proxy-Connection", "Upgrade", "Transfer-Encoding"} {
					if v, ok := e.Header[h]; ok {
						t.Errorf("the backend received %s: %q", h, v)
					}
				}
				if c := strings.ToLower(strings.Join(e.Header["Connection"], ",")); strings.Contains(c, "hop") {
					t.Errorf("the backend received Connection %q", c)
				}
				if te := e.Header.Values("Te"); len(te) > 1 || (len(te) == 1 && !strings.EqualFold(te[0], "trailers")) {
					t.Errorf("the backend received TE %q, want none or trailers", te)
				}
				if e.Header.Get("X-E2E") != "kept" {
					t.Errorf("the end-to-end X-E2E did not reach the backend: %v", e.Header)
				}
				if expect != "" && e.Header.Get("Expect") != "100-continue" {
					t.Errorf("the backend received no Expect: %v", e.Header)
				}
			})
		}
	}
	for _, rp := range p.rawPaths() {
		// An h2c upgrade offer is ignored, but what its Connection names is not forwarded.
		t.Run(rp.name+"/request_with_an_h2c_offer", func(t *testing.T) {
			conn, br := rp.dial(t)
			resp, body := rawRequest(t, conn, br, "GET /echo HTTP/1.1\r\nHost: x\r\n"+
				"Connection: Upgrade, HTTP2-Settings, X-Hop-C\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n"+
				"X-Hop-C: 3\r\nX-E2E: kept\r\n\r\n")
			var e echo
			if err := json.Unmarshal([]byte(body), &e); resp.StatusCode != 200 || err != nil {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
			for _, h := range []string{"X-Hop-C", "Connection", "Upgrade", "Http2-Settings"} {
				if v, ok := e.Header[h]; ok {
					t.Errorf("the backend received %s: %q", h, v)
				}
			}
			if e.Header.Get("X-E2E") != "kept" {
				t.Errorf("the end-to-end X-E2E did not reach the backend: %v", e.Header)
			}
		})
	}
	// Each response twice, the second on a reused connection both sides (closed
	// and opened again upstream after a close); with Expect too.
	responses := []struct{ name, query, expect string }{
		{"response", "", ""},
		{"response_with_close", "?close", ""},
		{"response_to_expect", "", "100-continue"},
		{"response_with_close_to_expect", "?close", "100-continue"},
	}
	for _, cp := range p.paths(t) {
		for _, r := range responses {
			t.Run(cp.name+"/"+r.name, func(t *testing.T) {
				for i := range 2 {
					req := cp.request(t, http.MethodGet, "/hop"+r.query, nil)
					if r.expect != "" {
						req = cp.request(t, http.MethodPost, "/hop"+r.query, strings.NewReader("body"))
						req.Header.Set("Expect", r.expect)
					}
					resp, body := cp.do(t, req)
					if resp.StatusCode != 200 || body != "hello" || resp.Header.Get("X-Resp-E2E") != "kept" {
						t.Fatalf("response %d: got %d %q with X-Resp-E2E %q", i, resp.StatusCode, body, resp.Header.Get("X-Resp-E2E"))
					}
					for _, h := range []string{"X-Resp-Hop", "Keep-Alive", "Proxy-Connection", "Upgrade"} {
						if v, ok := resp.Header[h]; ok {
							t.Errorf("response %d: the client received %s: %q", i, h, v)
						}
					}
					if c := strings.ToLower(resp.Header.Get("Connection")); strings.Contains(c, "hop") {
						t.Errorf("response %d: the client received Connection %q", i, c)
					}
				}
			})
		}
	}
}

// ---------------------------------------------------------------------------
// HEAD, 1xx, 204 and 304.

// A HEAD response carries the Content-Length the GET would have and no body; 204
// and 304 have no body; a 103 Early Hints from the backend reaches the client, with its
// Link, before the final response. On HTTP/1.1 the requests share one connection
// written at once, so a stray body byte would break the next response.
func TestCodecBodilessResponses(t *testing.T) {
	t.Parallel()
	be := codecBackend(t)
	p := startCodecProxy(t, map[string]string{"be": be.addr()}, nil, codecRoutes())
	notModified := map[string]int{} // 304s sent, by listener
	// logged checks the access log line of the request for path: its status, and
	// that it counts no body bytes.
	logged := func(t *testing.T, path string, status int) {
		t.Helper()
		rec := requestLineOf(t, p.testProxy, path)
		if rec["status"] != float64(status) || (status != 200 && rec["bytes"] != float64(0)) {
			t.Errorf("access log of %s: status %v, %v bytes; want %d with no body", path, rec["status"], rec["bytes"], status)
		}
	}
	for _, cp := range p.paths(t) {
		t.Run(cp.name, func(t *testing.T) {
			q := "?" + cp.name
			resp, body := cp.do(t, cp.request(t, http.MethodHead, "/codec/head"+q, nil))
			if resp.StatusCode != 200 || resp.ContentLength != 1234 || body != "" {
				t.Errorf("HEAD: %d, Content-Length %d, %d bytes of body; want 200, 1234, none", resp.StatusCode, resp.ContentLength, len(body))
			}
			if rec := requestLineOf(t, p.testProxy, "/codec/head"+q); rec["method"] != "HEAD" || rec["bytes"] != float64(0) {
				t.Errorf("access log of the HEAD: %v with %v bytes, want HEAD with none", rec["method"], rec["bytes"])
			}
			if resp, body := cp.do(t, cp.request(t, http.MethodGet, "/codec/head", nil)); resp.ContentLength != 1234 || len(body) != 1234 {
				t.Errorf("GET: Content-Length %d, %d bytes; want 1234", resp.ContentLength, len(body))
			}
			if resp, body := cp.do(t, cp.request(t, http.MethodGet, "/codec/204"+q, nil)); resp.StatusCode != 204 || body != "" {
				t.Errorf("204: %d %q", resp.StatusCode, body)
			}
			logged(t, "/codec/204"+q, 204)
			req := cp.request(t, http.MethodGet, "/codec/304"+q, nil)
			req.Header.Set("If-None-Match", `"v1"`)
			if resp, body := cp.do(t, req); resp.StatusCode != 304 || body != "" || resp.Header.Get("ETag") != `"v1"` {
				t.Errorf("304: %d %q, ETag %q", resp.StatusCode, body, resp.Header.Get("ETag"))
			}
			logged(t, "/codec/304"+q, 304)
			notModified[cp.listener]++
			var hints []string
			trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				hints = append(hints, fmt.Sprintf("%d %s", code, h.Get("Link")))
				return nil
			}}
			req = cp.request(t, http.MethodGet, "/codec/103"+q, nil)
			resp, body = cp.do(t, req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
			if resp.StatusCode != 200 || body != "final" || len(hints) != 1 || hints[0] != "103 </style.css>; rel=preload" {
				t.Errorf("103: final %d %q after %q, want 200 \"final\" after one 103 with its Link", resp.StatusCode, body, hints)
			}
			logged(t, "/codec/103"+q, 200)
		})
	}
	for _, rp := range p.rawPaths() {
		t.Run(rp.name+"/one connection", func(t *testing.T) {
			conn, br := rp.dial(t)
			_ = conn.SetDeadline(time.Now().Add(time.Minute))
			q := "?raw-" + rp.name
			_, _ = io.WriteString(conn, "HEAD /codec/head"+q+" HTTP/1.1\r\nHost: x\r\n\r\n"+
				"GET /codec/204"+q+" HTTP/1.1\r\nHost: x\r\n\r\n"+
				"GET /codec/304"+q+" HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"v1\"\r\n\r\n"+
				"GET /codec/103"+q+" HTTP/1.1\r\nHost: x\r\n\r\n"+
				"GET /codec/echo?after HTTP/1.1\r\nHost: x\r\n\r\n")
			for _, want := range []struct {
				method string
				status int
				body   string
			}{
				{"HEAD", 200, ""}, {"GET", 204, ""}, {"GET", 304, ""},
				{"GET", 103, ""}, {"GET", 200, "final"}, {"GET", 200, "GET /codec/echo?after "},
			} {
				resp, err := http.ReadResponse(br, &http.Request{Method: want.method})
				if err != nil {
					t.Fatalf("waiting for %d %q: %v", want.status, want.body, err)
				}
				if body := readBody(t, resp); resp.StatusCode != want.status || body != want.body {
					t.Fatalf("got %d %q, want %d %q", resp.StatusCode, body, want.status, want.body)
				}
			}
			logged(t, "/codec/204"+q, 204)
			logged(t, "/codec/304"+q, 304)
			notModified[rp.listener]++
		})
	}
	for l, n := range notModified {
		waitMetric(t, p.testProxy, "portico_proxy_requests_total", map[string]string{"listener": l, "code_class": "3xx"}, float64(n))
	}
}
