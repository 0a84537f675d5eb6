package proxy

import (
	"crypto/sha1"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/portico-dev/portico/internal/authz"
)

// BenchmarkProxyRequestExtAuthz is BenchmarkProxyRequest with and without the
// ext_authz filter, in the same run: with it, every request is checked by a
// `portico authz` server over gRPC (h2c, on loopback) before it is forwarded. The
// user's hash is SHA-1 ({SHA}), the cheapest the server accepts, so that the figure
// is the filter's and the protocol's cost rather than bcrypt's.
func BenchmarkProxyRequestExtAuthz(b *testing.B) {
	b.Run("without", func(b *testing.B) {
		benchmarkProxyRequest(b, httpListener(b), nil)
	})
	b.Run("with", func(b *testing.B) {
		sum := sha1.Sum([]byte("pw"))
		file := filepath.Join(b.TempDir(), "htpasswd")
		if err := os.WriteFile(file, []byte("bench:{SHA}"+base64.StdEncoding.EncodeToString(sum[:])+"\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		srv, err := authz.New(authz.Config{Listen: "127.0.0.1:0", HTPasswd: file})
		if err != nil {
			b.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = srv.Shutdown() })
		l := modifyHCM(b, func(h *hcmv3.HttpConnectionManager) {
			cfg := &extauthzv3.ExtAuthz{
				Services: &extauthzv3.ExtAuthz_GrpcService{GrpcService: &corev3.GrpcService{
					TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "authz"}},
				}},
				TransportApiVersion: corev3.ApiVersion_V3,
			}
			h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "envoy.filters.http.ext_authz", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(b, cfg)}}}, h.HttpFilters...)
		})
		benchmarkProxyRequestWith(b, l, srv.Addr())
	})
}

// benchmarkProxyRequestWith is benchmarkProxyRequest with the cluster "authz" at addr
// and basic credentials on every request.
func benchmarkProxyRequestWith(b *testing.B, l *listenerv3.Listener, addr string) {
	cp := startControlPlane(b)
	be := startBackend(b, "bench")
	routes := routeConfig("ingress_http",
		vhost("bench.example.com", toCluster("other", prefixMatch("/other")), toCluster("bench", prefixMatch("/"))),
		vhost("*", toCluster("bench", prefixMatch("/"))))
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{l},
		routes:    []*routev3.RouteConfiguration{routes},
		clusters:  []*clusterv3.Cluster{edsCluster("bench"), edsCluster("other"), edsCluster("authz")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("bench", be.addr()), assignment("other", be.addr()), assignment("authz", addr)},
	})
	req := benchRequest(b, cp)
	req.Host = "bench.example.com"
	req.Header.Set("User-Agent", "bench")
	req.Header.Set("Accept", "*/*")
	req.SetBasicAuth("bench", "pw")
	loopRequests(b, req)
}
