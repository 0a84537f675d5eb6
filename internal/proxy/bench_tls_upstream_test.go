package proxy

import (
	"net/http/httptest"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// BenchmarkProxyRequestTLSUpstream is BenchmarkProxyRequest with an upstream
// over TLS (an HTTP/1.1 cluster with an UpstreamTlsContext offering
// http/1.1): pooled connections, so the figure is the per-request cost of
// the TLS records on top of the clear-text path, not handshakes.
func BenchmarkProxyRequestTLSUpstream(b *testing.B) {
	cp := startControlPlane(b)
	srv := httptest.NewUnstartedServer(backendHandler("bench"))
	srv.StartTLS()
	b.Cleanup(srv.Close)
	cluster := edsCluster("bench")
	cluster.TransportSocket = upstreamTLSSocket(b, "bench.internal", []string{"http/1.1"}, nil)
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(b)},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("bench", prefixMatch("/"))))},
		clusters:  []*clusterv3.Cluster{cluster},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("bench", srv.Listener.Addr().String())},
	})
	req := benchRequest(b, cp)
	req.Host = "bench.example.com"
	req.Header.Set("User-Agent", "bench")
	req.Header.Set("Accept", "*/*")
	loopRequests(b, req)
}
