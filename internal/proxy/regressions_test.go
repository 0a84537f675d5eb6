package proxy

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestReadinessWaitsForListenerBind: a listener whose address is taken keeps
// the proxy not ready, and is bound by the retry loop (without a new
// configuration) as soon as the address is free.
func TestReadinessWaitsForListenerBind(t *testing.T) {
	t.Parallel()
	blocker, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	addr := blocker.Addr().String()

	cp := controlPlaneRoutingToA(t)
	p := startProxyOn(t, cp, map[string]string{"ingress_http": addr})
	p.waitVersion(t, "v1")

	// Attempts at 0, 200ms and 600ms; the next one is due at 1.4s.
	for deadline := time.Now().Add(900 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if p.Ready() {
			t.Fatal("ready while ingress_http cannot be bound")
		}
	}
	if got := p.ListenerAddr("ingress_http"); got != "" {
		t.Fatalf("ListenerAddr = %q while unbound", got)
	}
	failures := len(p.logs.records("cannot open listener"))
	if failures < 2 || failures > 4 {
		t.Errorf("%d bind failures logged in 900ms, want 2 to 4 (retried with a 200ms doubling backoff)", failures)
	}

	blocker.Close()
	waitFor(t, "ready once the address is free", p.Ready)
	if got := p.ListenerAddr("ingress_http"); got != addr {
		t.Fatalf("ListenerAddr = %q, want %q", got, addr)
	}
	if r := get(t, noRedirectClient(), "http://"+addr+"/", "x", nil); r.Backend != "A" {
		t.Errorf("got %+v, want backend A", r)
	}
}

// TestCompressionPassesThrough: the proxy neither asks the upstream for gzip
// on the client's behalf nor decodes what the upstream sends.
func TestCompressionPassesThrough(t *testing.T) {
	t.Parallel()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(strings.Repeat("compressible ", 100)))
	_ = zw.Close()
	var mu sync.Mutex
	var seen []string // Accept-Encoding per request, "<none>" when absent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ae, ok := r.Header["Accept-Encoding"]
		mu.Lock()
		if ok {
			seen = append(seen, strings.Join(ae, ","))
		} else {
			seen = append(seen, "<none>")
		}
		mu.Unlock()
		// Gzip whatever was asked, as some upstreams do.
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("ETag", `"gz-1"`)
		w.Header().Set("Content-Length", strconv.Itoa(gz.Len()))
		_, _ = w.Write(gz.Bytes())
	}))
	t.Cleanup(srv.Close)

	p := proxyToOneBackend(t, "gz", srv.Listener.Addr().String())
	// A client that sends exactly the headers it is given and decodes nothing.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}

	for _, tc := range []struct {
		name, acceptEncoding, wantSeen string
	}{
		{name: "client without Accept-Encoding", wantSeen: "<none>"},
		{name: "client asking for gzip", acceptEncoding: "gzip", wantSeen: "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			headers := map[string]string{}
			if tc.acceptEncoding != "" {
				headers["Accept-Encoding"] = tc.acceptEncoding
			}
			r := get(t, c, p.httpURL(t, "/file"), "x", headers)
			mu.Lock()
			got := append([]string(nil), seen...)
			mu.Unlock()
			if len(got) != 1 || got[0] != tc.wantSeen {
				t.Errorf("upstream saw Accept-Encoding %q, want [%s]", got, tc.wantSeen)
			}
			if r.Status != 200 || r.Body != gz.String() {
				t.Errorf("status %d, body of %d bytes; want 200 and the upstream's %d gzip bytes untouched", r.Status, len(r.Body), gz.Len())
			}
			if ce, etag := r.Header.Get("Content-Encoding"), r.Header.Get("ETag"); ce != "gzip" || etag != `"gz-1"` {
				t.Errorf("Content-Encoding %q, ETag %q; want gzip and \"gz-1\"", ce, etag)
			}
		})
	}
}

// slowBody yields n chunks of size bytes, one every interval.
type slowBody struct {
	n, size  int
	interval time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.interval)
	b.n--
	return copy(p, bytes.Repeat([]byte("x"), min(b.size, len(p)))), nil
}

// TestRouteTimeoutStartsAfterRequestBody: as in Envoy, the route timeout
// runs from the end of the downstream request, so a slow upload to a fast
// upstream succeeds while a slow upstream still gets 504.
func TestRouteTimeoutStartsAfterRequestBody(t *testing.T) {
	t.Parallel()
	// The upstream reads the whole body, then sleeps for ?sleep, then answers
	// with the number of bytes received.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprintf(w, "received %d", n)
	}))
	t.Cleanup(srv.Close)

	cp := startControlPlane(t)
	var res resources
	res.clusters = append(res.clusters, edsCluster("upload"))
	res.endpoints = append(res.endpoints, assignment("upload", srv.Listener.Addr().String()))
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
		withAction(toCluster("upload", prefixMatch("/")), func(a *routev3.RouteAction) {
			a.Timeout = durationpb.New(time.Second)
		}),
	))}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	// One client per request: a connection dialed for a request that then
	// went to another connection would stay "new" and hold up the drain.
	http1 := func() *http.Client { return noRedirectClient() }
	h2c := func() *http.Client {
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}

	tests := []struct {
		name          string
		client        func() *http.Client
		path          string
		body          func() io.Reader // nil: no body
		contentLength int64
		wantStatus    int
		wantBody      string
	}{
		{name: "slow chunked upload, fast upstream", client: http1, path: "/up",
			body: func() io.Reader { return &slowBody{n: 10, size: 100, interval: 300 * time.Millisecond} }, contentLength: -1,
			wantStatus: 200, wantBody: "received 1000"},
		{name: "slow upload with Content-Length, fast upstream", client: http1, path: "/up",
			body: func() io.Reader { return &slowBody{n: 10, size: 100, interval: 300 * time.Millisecond} }, contentLength: 1000,
			wantStatus: 200, wantBody: "received 1000"},
		{name: "slow HTTP/2 upload, fast upstream", client: h2c, path: "/up",
			body: func() io.Reader { return &slowBody{n: 10, size: 100, interval: 300 * time.Millisecond} }, contentLength: -1,
			wantStatus: 200, wantBody: "received 1000"},
		{name: "body complete, slow upstream", client: http1, path: "/up?sleep=3s",
			body: func() io.Reader { return strings.NewReader("small") }, contentLength: 5,
			wantStatus: 504},
		{name: "slow upload, then slow upstream", client: http1, path: "/up?sleep=3s",
			body: func() io.Reader { return &slowBody{n: 3, size: 10, interval: 300 * time.Millisecond} }, contentLength: -1,
			wantStatus: 504},
		{name: "no body, slow upstream", client: http1, path: "/up?sleep=3s", wantStatus: 504},
	}
	// The requests run concurrently (not as parallel subtests, which
	// -parallel may serialise) to keep the test at the length of the slowest.
	base := p.httpURL(t, "")
	var wg sync.WaitGroup
	for _, tc := range tests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body io.Reader
			method := http.MethodGet
			if tc.body != nil {
				body, method = tc.body(), http.MethodPost
			}
			req, err := http.NewRequest(method, base+tc.path, body)
			if err != nil {
				t.Error(err)
				return
			}
			req.Host = "upload.example.com"
			if tc.body != nil {
				req.ContentLength = tc.contentLength
			}
			c := tc.client()
			defer c.CloseIdleConnections()
			start := time.Now()
			resp, err := c.Do(req)
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				return
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != tc.wantStatus || !strings.Contains(string(got), tc.wantBody) {
				t.Errorf("%s: got %d %q (%v) after %v, want %d %q", tc.name, resp.StatusCode, got, err,
					time.Since(start).Round(time.Millisecond), tc.wantStatus, tc.wantBody)
			}
		}()
	}
	wg.Wait()
}

// TestMisdirectedRequest: the translator ends every https/<name> route
// configuration with a catch-all virtual host answering 421, so that an
// HTTP/2 connection reused for a host its certificate does not serve is
// told to retry on a new connection.
func TestMisdirectedRequest(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	ca := newTestCA(t)
	res, _ := threeBackends(t)
	misdirected := func(body string) *routev3.VirtualHost {
		dr := &routev3.DirectResponseAction{Status: http.StatusMisdirectedRequest}
		if body != "" {
			dr.Body = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}}
		}
		return &routev3.VirtualHost{Name: "misdirected", Domains: []string{"*"}, Routes: []*routev3.Route{{
			Match: prefixMatch("/"), Action: &routev3.Route_DirectResponse{DirectResponse: dr},
		}}}
	}
	names := []string{"a.example.com", "b.example.com"}
	res.listeners = []*listenerv3.Listener{httpsListener(t, names...)}
	res.routes = []*routev3.RouteConfiguration{
		routeConfig("https/a.example.com", vhost("a.example.com", toCluster("A", prefixMatch("/"))), misdirected("")),
		routeConfig("https/b.example.com", vhost("b.example.com", toCluster("B", prefixMatch("/"))), misdirected("Misdirected Request")),
	}
	for _, n := range names {
		certPEM, keyPEM := ca.issue(t, n)
		res.secrets = append(res.secrets, tlsSecret(secretName(n), certPEM, keyPEM))
	}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := tlsClient(p.ListenerAddr("ingress_https"), ca.pool)
	t.Cleanup(c.CloseIdleConnections) // before the proxy drains: no GOAWAY wait

	tests := []struct {
		url, host   string
		wantStatus  int
		wantBackend string
		wantBody    string
	}{
		{url: "https://a.example.com/x", wantStatus: 200, wantBackend: "A"},
		// The same HTTP/2 connection (SNI a.example.com) reused for b.example.com.
		{url: "https://a.example.com/x", host: "b.example.com", wantStatus: 421},
		{url: "https://a.example.com/x", host: "c.example.com:443", wantStatus: 421},
		{url: "https://b.example.com/x", wantStatus: 200, wantBackend: "B"},
		{url: "https://b.example.com/x", host: "a.example.com", wantStatus: 421, wantBody: "Misdirected Request"},
	}
	for _, tc := range tests {
		t.Run(tc.url+" host "+tc.host, func(t *testing.T) {
			r := get(t, c, tc.url, tc.host, nil)
			if r.Status != tc.wantStatus || r.Backend != tc.wantBackend {
				t.Fatalf("got %d from %q (body %q), want %d from %q", r.Status, r.Backend, r.Body, tc.wantStatus, tc.wantBackend)
			}
			if r.Proto != "HTTP/2.0" {
				t.Errorf("proto = %s, want HTTP/2.0", r.Proto)
			}
			if tc.wantStatus == 421 {
				if r.Body != tc.wantBody {
					t.Errorf("body = %q, want %q", r.Body, tc.wantBody)
				}
				if got := r.Header.Get("Server"); got != "portico" {
					t.Errorf("Server = %q, want portico", got)
				}
			}
		})
	}
}

// TestInvertedAuthorityRegex: a route that catches the hosts a "*.foo.com"
// rule must not serve (more than one label) with an inverted,
// case-insensitive safe_regex on :authority.
func TestInvertedAuthorityRegex(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	deep := withHeaders(prefixMatch("/"), &routev3.HeaderMatcher{
		Name: ":authority",
		HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: `(?i)^[^.]+\.foo\.com$`}},
		}},
		InvertMatch: true,
	})
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http",
		&routev3.VirtualHost{Name: "*.foo.com", Domains: []string{"*.foo.com"}, Routes: []*routev3.Route{
			toCluster("B", deep),
			toCluster("A", prefixMatch("/")),
		}},
	)}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	for host, want := range map[string]string{
		"x.foo.com":        "A",
		"X.Foo.COM":        "A",
		"x.foo.com:8080":   "A",
		"a.b.foo.com":      "B",
		"A.B.FOO.COM:8080": "B",
	} {
		if r := get(t, c, p.httpURL(t, "/"), host, nil); r.Backend != want {
			t.Errorf("Host %s: got %d from %q, want backend %s", host, r.Status, r.Backend, want)
		}
	}
}
