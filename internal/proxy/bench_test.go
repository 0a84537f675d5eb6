package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/internal/proxy/internal/xdstest"
)

// BenchmarkProxyRequest measures the whole request path of the embedded
// proxy: a keep-alive client, one route, one upstream, a small response. The
// figure that matters is the ratio between two runs on one machine (and
// allocs/op), not the absolute time, which is dominated by loopback I/O.
func BenchmarkProxyRequest(b *testing.B) {
	benchmarkProxyRequest(b, httpListener(b), nil)
}

// BenchmarkProxyRequestServerHeader compares the two ways of writing the Server
// header: by the connection manager (server_name, OVERWRITE), or by the route
// configuration, as Portico's translator does, so that routes can change it
// (PASS_THROUGH, then one response header change for every route).
func BenchmarkProxyRequestServerHeader(b *testing.B) {
	b.Run("connection-manager", func(b *testing.B) {
		benchmarkProxyRequest(b, httpListener(b), nil)
	})
	b.Run("route-configuration", func(b *testing.B) {
		l := modifyHCM(b, func(h *hcmv3.HttpConnectionManager) {
			h.ServerName, h.ServerHeaderTransformation = "", hcmv3.HttpConnectionManager_PASS_THROUGH
		})
		benchmarkProxyRequest(b, l, func(rc *routev3.RouteConfiguration) {
			rc.ResponseHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("server", "portico")}
			rc.MostSpecificHeaderMutationsWins = true
		})
	})
}

// BenchmarkProxyRequestHostPort is BenchmarkProxyRequest with a port in the
// Host, on the shared listeners' configuration (strip_any_host_port) and on a
// Gateway's (the port kept, ignored by virtual host matching).
func BenchmarkProxyRequestHostPort(b *testing.B) {
	b.Run("strip", func(b *testing.B) {
		benchmarkProxyRequestHost(b, httpListener(b), nil, "bench.example.com:8080")
	})
	b.Run("ignore-in-matching", func(b *testing.B) {
		l := modifyHCM(b, func(h *hcmv3.HttpConnectionManager) { h.StripPortMode = nil })
		benchmarkProxyRequestHost(b, l, func(rc *routev3.RouteConfiguration) { rc.IgnorePortInHostMatching = true }, "bench.example.com:8080")
	})
}

// benchmarkProxyRequest is BenchmarkProxyRequest on listener l, its route
// configuration changed by rc (when not nil).
func benchmarkProxyRequest(b *testing.B, l *listenerv3.Listener, rc func(*routev3.RouteConfiguration)) {
	benchmarkProxyRequestHost(b, l, rc, "bench.example.com")
}

// BenchmarkProxyRequestOwnTransport is BenchmarkProxyRequest to a cluster with
// an HTTP/1.1 transport of its own (an idle_timeout), which http.Transport
// serves rather than the codec's client.
func BenchmarkProxyRequestOwnTransport(b *testing.B) {
	cp := startControlPlane(b)
	be := startBackend(b, "bench")
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(b)},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("bench", prefixMatch("/"))))},
		clusters:  []*clusterv3.Cluster{protocolOptions(b, edsCluster("bench"), false, durationpb.New(time.Minute))},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("bench", be.addr())},
	})
	req := benchRequest(b, cp)
	req.Header.Set("User-Agent", "bench")
	loopRequests(b, req)
}

// benchmarkProxyRequestHost is benchmarkProxyRequest with the Host host.
func benchmarkProxyRequestHost(b *testing.B, l *listenerv3.Listener, rc func(*routev3.RouteConfiguration), host string) {
	cp := startControlPlane(b)
	be := startBackend(b, "bench")
	routes := routeConfig("ingress_http",
		vhost("bench.example.com", toCluster("other", prefixMatch("/other")), toCluster("bench", prefixMatch("/"))),
		vhost("*", toCluster("bench", prefixMatch("/"))))
	if rc != nil {
		rc(routes)
	}
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{l},
		routes:    []*routev3.RouteConfiguration{routes},
		clusters:  []*clusterv3.Cluster{edsCluster("bench"), edsCluster("other")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("bench", be.addr()), assignment("other", be.addr())},
	})
	req := benchRequest(b, cp)
	req.Host = host
	req.Header.Set("User-Agent", "bench")
	req.Header.Set("Accept", "*/*")
	loopRequests(b, req)
}

// benchRequest starts a proxy on cp's version v1 and returns a GET of /bench
// on its HTTP listener.
func benchRequest(b *testing.B, cp *controlPlane) *http.Request {
	p := startProxy(b, cp)
	p.waitVersion(b, "v1")
	req, err := http.NewRequest(http.MethodGet, "http://"+p.ListenerAddr("ingress_http")+"/bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	return req
}

// loopRequests sends req over keep-alive connections once per iteration of b;
// each must be answered 200.
func loopRequests(b *testing.B, req *http.Request) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Server") != "portico" {
			b.Fatalf("status %d, Server %q", resp.StatusCode, resp.Header.Get("Server"))
		}
	}
}

// BenchmarkProxyRequestNewConnection is BenchmarkProxyRequest with an upstream
// that closes every connection after its response: each request dials, which
// is where upstream addresses are checked (upstream/egress.go).
func BenchmarkProxyRequestNewConnection(b *testing.B) {
	cp := startControlPlane(b)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "ok")
	}))
	b.Cleanup(be.Close)
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(b)},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("bench", prefixMatch("/"))))},
		clusters:  []*clusterv3.Cluster{edsCluster("bench")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("bench", be.Listener.Addr().String())},
	})
	loopRequests(b, benchRequest(b, cp))
}

// BenchmarkHandlerDirectResponse measures the proxy's own work on a request
// (header checks, virtual host and route selection, metrics)
// without sockets: a direct_response route served to an in-memory writer.
func BenchmarkHandlerDirectResponse(b *testing.B) {
	cp := startControlPlane(b)
	direct := &routev3.Route{Name: "direct", Match: prefixMatch("/"), Action: &routev3.Route_DirectResponse{
		DirectResponse: &routev3.DirectResponseAction{Status: 200},
	}}
	// Without an access log: writing it (to the test's log buffer) would
	// dominate, and vary with the buffer's size.
	l := modifyHCM(b, func(h *hcmv3.HttpConnectionManager) { h.AccessLog = nil })
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{l},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http",
			vhost("other.example.com", toCluster("bench", prefixMatch("/"))),
			vhost("bench.example.com", toCluster("bench", exactMatch("/other")), direct))},
		clusters:  []*clusterv3.Cluster{edsCluster("bench")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("bench", "127.0.0.1:1")},
	})
	p := startProxy(b, cp)
	p.waitVersion(b, "v1")
	h := p.listeners.HTTPHandler("ingress_http")
	req := httptest.NewRequest(http.MethodGet, "http://bench.example.com/bench?q=1", nil)
	for _, k := range []string{"User-Agent", "Accept", "Accept-Language", "Accept-Encoding", "Cookie", "Referer", "X-Forwarded-For", "Cache-Control"} {
		req.Header.Set(k, "some value of a typical length")
	}
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
}
