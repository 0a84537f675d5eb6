package proxy

import (
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
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
		srv := benchAuthz(b, authz.Config{Listen: "127.0.0.1:0"})
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

// BenchmarkProxyRequestExtAuthzHTTP is BenchmarkProxyRequest without ext_authz, with an
// http_service check (a `portico authz --http-listen` server on loopback), and with the
// same check carrying the request body (with_request_body, a 1 KiB POST), in the same
// run. The figures are the filter's, the HTTP round trip's and the body buffering's.
func BenchmarkProxyRequestExtAuthzHTTP(b *testing.B) {
	b.Run("without", func(b *testing.B) {
		benchmarkProxyRequest(b, httpListener(b), nil)
	})
	for _, withBody := range []bool{false, true} {
		name := "http"
		if withBody {
			name = "http+body"
		}
		b.Run(name, func(b *testing.B) {
			srv := benchAuthz(b, authz.Config{Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0"})
			l := modifyHCM(b, func(h *hcmv3.HttpConnectionManager) {
				cfg := &extauthzv3.ExtAuthz{
					Services: &extauthzv3.ExtAuthz_HttpService{HttpService: &extauthzv3.HttpService{ServerUri: &corev3.HttpUri{
						Uri: "http://authz/", HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: "authz"}, Timeout: durationpb.New(10 * time.Second),
					}}},
					TransportApiVersion: corev3.ApiVersion_V3,
				}
				if withBody {
					cfg.WithRequestBody = &extauthzv3.BufferSettings{MaxRequestBytes: 4096}
				}
				h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "envoy.filters.http.ext_authz", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(b, cfg)}}}, h.HttpFilters...)
			})
			if !withBody {
				benchmarkProxyRequestWith(b, l, srv.HTTPAddr())
				return
			}
			benchmarkProxyPostWith(b, l, srv.HTTPAddr(), bytes.Repeat([]byte("x"), 1024))
		})
	}
}

// benchAuthz starts a `portico authz` server whose one user's hash is SHA-1 ({SHA}),
// the cheapest it accepts.
func benchAuthz(b *testing.B, cfg authz.Config) *authz.Server {
	sum := sha1.Sum([]byte("pw"))
	cfg.HTPasswd = filepath.Join(b.TempDir(), "htpasswd")
	if err := os.WriteFile(cfg.HTPasswd, []byte("bench:{SHA}"+base64.StdEncoding.EncodeToString(sum[:])+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	srv, err := authz.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Shutdown() })
	return srv
}

// benchmarkProxyPostWith is benchmarkProxyRequestWith sending POSTs of body.
func benchmarkProxyPostWith(b *testing.B, l *listenerv3.Listener, addr string, body []byte) {
	cp := startControlPlane(b)
	be := startBackend(b, "bench")
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{l},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("bench", prefixMatch("/"))))},
		clusters:  []*clusterv3.Cluster{edsCluster("bench"), edsCluster("authz")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("bench", be.addr()), assignment("authz", addr)},
	})
	p := startProxy(b, cp)
	p.waitVersion(b, "v1")
	url := "http://" + p.ListenerAddr("ingress_http") + "/bench"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Host = "bench.example.com"
		req.SetBasicAuth("bench", "pw")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
