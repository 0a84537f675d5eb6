package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
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
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A body the ext_authz filter read the start of reaches the upstream whole, also when
// the router retries it: the filter's bytes are sent first, then the rest.
func TestFilterReadBodyReachesUpstream(t *testing.T) {
	var mu sync.Mutex
	authz, authzGot := recordingAuthz(t)
	attempts := 0
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		attempts++
		first := attempts%2 == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable) // retried
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(upstream.Close)

	route := withAction(toCluster("up", prefixMatch("/")), func(a *routev3.RouteAction) {
		a.RetryPolicy = &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(1)}
	})
	p := extAuthzBodyProxy(t, authz.Listener.Addr().String(), upstream.Listener.Addr().String(), 4, nil, route)
	for _, tc := range []struct {
		name   string
		body   io.Reader
		length int64
	}{
		{"declared length", strings.NewReader("hello world"), 11},
		{"chunked", io.MultiReader(strings.NewReader("hello"), strings.NewReader(" world")), -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://"+p.ListenerAddr("ingress_http")+"/up", io.NopCloser(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = tc.length
			res := do(t, http.DefaultClient, req)
			if res.Status != 200 || res.Body != "hello world" {
				t.Errorf("status %d, the upstream got %q, want the whole body", res.Status, res.Body)
			}
			if got := authzGot(); got[len(got)-1] != "POST hell|true" {
				t.Errorf("the authorization server got %q, want the first 4 bytes, partial", got[len(got)-1])
			}
		})
	}
}

// recordingAuthz is an HTTP authorization server allowing every request; got lists
// what it was asked: "METHOD body|x-envoy-auth-partial-body".
func recordingAuthz(t *testing.T) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+string(b)+"|"+r.Header.Get("X-Envoy-Auth-Partial-Body"))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(got) }
}

// extAuthzBodyProxy is a proxy whose ext_authz filter (an http_service at authz, with
// with_request_body of max bytes, partial allowed) guards route (nil: / to upstream);
// edit changes the HCM; authzCluster, when set, is the cluster "authz" (default: EDS,
// HTTP/1.1 in clear text).
func extAuthzBodyProxy(t *testing.T, authz, upstream string, max uint32, edit func(*hcmv3.HttpConnectionManager), route *routev3.Route, authzCluster ...*clusterv3.Cluster) *testProxy {
	t.Helper()
	l := modifyHCM(t, func(h *hcmv3.HttpConnectionManager) {
		cfg := &extauthzv3.ExtAuthz{
			Services: &extauthzv3.ExtAuthz_HttpService{HttpService: &extauthzv3.HttpService{ServerUri: &corev3.HttpUri{
				Uri: "http://authz/", HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: "authz"}, Timeout: durationpb.New(30 * time.Second),
			}}},
			TransportApiVersion: corev3.ApiVersion_V3,
			WithRequestBody:     &extauthzv3.BufferSettings{MaxRequestBytes: max, AllowPartialMessage: true},
		}
		h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "envoy.filters.http.ext_authz", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, cfg)}}}, h.HttpFilters...)
		if edit != nil {
			edit(h)
		}
	})
	if route == nil {
		route = toCluster("up", prefixMatch("/"))
	}
	authzCluster = append(authzCluster, edsCluster("authz"))
	cp := startControlPlane(t)
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{l},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", route))},
		clusters:  []*clusterv3.Cluster{edsCluster("up"), authzCluster[0]},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("up", upstream), assignment("authz", authz)},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	return p
}

// A client that declares a body and stalls: the filter's wait for the body is bounded
// by the stream idle timeout (408, as the router's own reads are), never forever.
func TestFilterBodyReadBoundedByStreamIdleTimeout(t *testing.T) {
	var checks atomic.Int32
	authz := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { checks.Add(1) }))
	t.Cleanup(authz.Close)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(w, r.Body) }))
	t.Cleanup(upstream.Close)
	p := extAuthzBodyProxy(t, authz.Listener.Addr().String(), upstream.Listener.Addr().String(), 1024, func(h *hcmv3.HttpConnectionManager) {
		h.StreamIdleTimeout = durationpb.New(300 * time.Millisecond)
	}, nil)
	for _, tc := range []struct{ name, framing, sent string }{
		{"declared length, part sent", "Content-Length: 100\r\n", "abc"},
		{"declared length, nothing sent", "Content-Length: 100\r\n", ""},
		{"chunked, one chunk then nothing", "Transfer-Encoding: chunked\r\n", "3\r\nabc\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", p.ListenerAddr("ingress_http"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// Generous: without the bound the proxy waits for the body forever.
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.WriteString(conn, "POST /up HTTP/1.1\r\nHost: a.example.com\r\n"+tc.framing+"\r\n"+tc.sent); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer to a stalled body: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout || string(body) != "stream timeout" {
				t.Errorf("got %d %q, want 408 \"stream timeout\"", resp.StatusCode, body)
			}
		})
	}
	t.Run("HTTP/2, part sent", func(t *testing.T) {
		pr, pw := io.Pipe()
		defer pw.Close()
		go func() { _, _ = io.WriteString(pw, "abc") }() // then nothing, until the test ends
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.ListenerAddr("ingress_http")+"/up", pr)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // generous, as above
		defer cancel()
		if res := do(t, h2cClient(), req.WithContext(ctx)); res.Status != http.StatusRequestTimeout || res.Body != "stream timeout" {
			t.Errorf("got %d %q, want 408 \"stream timeout\"", res.Status, res.Body)
		}
	})
	if n := checks.Load(); n != 0 {
		t.Errorf("the authorization server was asked %d times about bodies that never came", n)
	}
}

// Requests with bodies an authorization check reads, each a real request through the
// proxy: the server gets the start of the body, the upstream all of it, whatever the
// framing or protocol; a client waiting for 100 Continue gets it; a client gone
// mid-body is never checked nor forwarded, and the proxy serves the next one.
func TestFilterBodyRequests(t *testing.T) {
	authz, authzGot := recordingAuthz(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Body", string(b)) // seen on HEAD too
		_, _ = io.WriteString(w, r.Proto+" "+string(b))
	}))
	t.Cleanup(upstream.Close)
	p := extAuthzBodyProxy(t, authz.Listener.Addr().String(), upstream.Listener.Addr().String(), 4, nil, nil)
	addr := p.ListenerAddr("ingress_http")
	lastCheck := func() string {
		got := authzGot()
		if len(got) == 0 {
			return ""
		}
		return got[len(got)-1]
	}
	checks := func() int { return len(authzGot()) }

	t.Run("GET with a body, over HTTP/1.1 and HTTP/2", func(t *testing.T) {
		for _, c := range []*http.Client{http.DefaultClient, h2cClient()} {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/up", strings.NewReader("hello world"))
			res := do(t, c, req)
			if res.Status != 200 || !strings.HasSuffix(res.Body, " hello world") {
				t.Errorf("status %d, the upstream got %q, want the whole body", res.Status, res.Body)
			}
			if got := lastCheck(); got != "GET hell|true" {
				t.Errorf("the authorization server got %q, want GET with the first 4 bytes, partial", got)
			}
		}
	})
	t.Run("HEAD with a body", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodHead, "http://"+addr+"/up", strings.NewReader("hello world"))
		res := do(t, http.DefaultClient, req)
		if res.Status != 200 || res.Header.Get("X-Body") != "hello world" {
			t.Errorf("status %d, the upstream got %q, want the whole body", res.Status, res.Header.Get("X-Body"))
		}
		if got := lastCheck(); got != "HEAD hell|true" {
			t.Errorf("the authorization server got %q, want HEAD with the first 4 bytes, partial", got)
		}
	})
	t.Run("HTTP/2 POST without a declared length", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			for _, part := range []string{"he", "llo", " world"} {
				_, _ = io.WriteString(pw, part)
			}
			pw.Close()
		}()
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/up", pr)
		res := do(t, h2cClient(), req)
		if res.Status != 200 || res.Body != "HTTP/1.1 hello world" {
			t.Errorf("status %d, the upstream got %q, want the whole body", res.Status, res.Body)
		}
		if got := lastCheck(); got != "POST hell|true" {
			t.Errorf("the authorization server got %q", got)
		}
	})
	t.Run("Expect: 100-continue", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(conn)
		_, _ = io.WriteString(conn, "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
		// The client sends nothing until told to: the filter's read of the body
		// must make the proxy say 100 Continue, or both wait forever.
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
			t.Fatalf("got %q (%v), want 100 Continue", line, err)
		}
		if _, err := br.ReadString('\n'); err != nil { // the blank line ending the 100
			t.Fatal(err)
		}
		_, _ = io.WriteString(conn, "abc")
		var resp *http.Response
		for resp == nil || resp.StatusCode < 200 { // more 1xx may come (the upstream's)
			if resp, err = http.ReadResponse(br, nil); err != nil {
				t.Fatal(err)
			}
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "HTTP/1.1 abc" || lastCheck() != "POST abc|false" {
			t.Errorf("status %d, upstream got %q, check %q", resp.StatusCode, body, lastCheck())
		}
	})
	t.Run("client gone mid-body", func(t *testing.T) {
		before := checks()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(conn, "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nab")
		conn.Close()
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/up", strings.NewReader("next"))
		if res := do(t, http.DefaultClient, req); res.Status != 200 || res.Body != "HTTP/1.1 next" {
			t.Errorf("next request: status %d, body %q", res.Status, res.Body)
		}
		if n := checks() - before; n != 1 {
			t.Errorf("%d checks, want 1: the abandoned body must not be checked", n)
		}
	})
}

// An HTTP authorization server is reached with the protocol and TLS of its cluster, as
// Envoy's HTTP client does: HTTP/1.1, HTTP/2 in clear text (h2c), HTTP/2 over TLS and
// HTTP/1.1 over TLS. The server denies, telling the client what it was asked over.
func TestExtAuthzHTTPServerProtocols(t *testing.T) {
	ca := newTestCA(t)
	cert := ca.keyPair(t, "authz.example.com")
	upstream := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(upstream.Close)
	for _, tc := range []struct {
		name   string
		server []string // its protocols
		tls    bool
		h2     bool // the cluster's protocol
		want   string
	}{
		{"HTTP/1.1", []string{"http/1.1"}, false, false, "HTTP/1.1 tls=false"},
		{"h2c", []string{"h2c"}, false, true, "HTTP/2.0 tls=false"},
		{"h2 over TLS", []string{"h2"}, true, true, "HTTP/2.0 tls=true"},
		{"HTTP/1.1 over TLS", []string{"http/1.1"}, true, false, "HTTP/1.1 tls=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = fmt.Fprintf(w, "%s tls=%t", r.Proto, r.TLS != nil)
			}))
			var protocols http.Protocols
			for _, p := range tc.server {
				switch p {
				case "http/1.1":
					protocols.SetHTTP1(true)
				case "h2":
					protocols.SetHTTP2(true)
				case "h2c":
					protocols.SetUnencryptedHTTP2(true)
				}
			}
			srv.Config.Protocols = &protocols
			cluster := protocolOptions(t, edsCluster("authz"), tc.h2, nil)
			if tc.tls {
				alpn := []string{"http/1.1"}
				if tc.h2 {
					alpn = []string{"h2"}
				}
				srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: alpn}
				srv.StartTLS()
				cluster.TransportSocket = upstreamTLSSocket(t, "authz.example.com", alpn, validation(ca.pem(), "authz.example.com"))
			} else {
				srv.Start()
			}
			t.Cleanup(srv.Close)
			p := extAuthzBodyProxy(t, srv.Listener.Addr().String(), upstream.Listener.Addr().String(), 16, nil, nil, cluster)
			req, _ := http.NewRequest(http.MethodPost, "http://"+p.ListenerAddr("ingress_http")+"/up", strings.NewReader("body"))
			if res := do(t, http.DefaultClient, req); res.Status != http.StatusUnauthorized || res.Body != tc.want {
				t.Errorf("got %d %q, want the server's 401 %q", res.Status, res.Body, tc.want)
			}
		})
	}
}

// An upgrade (WebSocket) on an authorized route is checked on its headers alone (what
// follows them is another protocol, never read as a body) and then upgraded.
func TestFilterBodyUpgrade(t *testing.T) {
	authz, authzGot := recordingAuthz(t)
	ws := upgradeBackend(t)
	route := withAction(toCluster("up", prefixMatch("/")), func(a *routev3.RouteAction) {
		a.UpgradeConfigs = []*routev3.RouteAction_UpgradeConfig{{UpgradeType: "websocket"}}
	})
	p := extAuthzBodyProxy(t, authz.Listener.Addr().String(), ws.Listener.Addr().String(), 4, nil, route)
	res, echoed := upgrade(t, p.ListenerAddr("ingress_http"), "/ws")
	if res.StatusCode != http.StatusSwitchingProtocols || echoed != "PING" {
		t.Errorf("status %d, echoed %q, want 101 and PING", res.StatusCode, echoed)
	}
	if got := authzGot(); len(got) != 1 || got[0] != "GET |" {
		t.Errorf("checks %q, want one GET without a body", got)
	}
}
