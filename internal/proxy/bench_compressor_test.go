package proxy

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	brotliv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/brotli/compressor/v3"
	gzipv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/gzip/compressor/v3"
	zstdv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/zstd/compressor/v3"
	compressorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/compressor/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
)

// textBody is n bytes of English-like text from a fixed seed: words drawn
// from a small vocabulary compress about as much as a real page's text.
func textBody(n int) string {
	words := strings.Fields("the proxy routes each request to a backend service and returns its answer with headers " +
		"compression saves bandwidth for clients on slow links while costing some CPU per response in user space " +
		"gateway route listener cluster endpoint health check timeout retry policy header value prefix match")
	rng := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

// BenchmarkProxyRequestCompression is the cost of compressing a 4 KiB text
// response (Portico's default filter, as Contour's) against sending it as
// the backend wrote it: "identity" is a client that asks for no encoding, which
// "no-filter" serves without the filter in the chain.
func BenchmarkProxyRequestCompression(b *testing.B) {
	body := textBody(4096)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, body)
	}))
	b.Cleanup(be.Close)
	for _, c := range []struct {
		name, accept, library string
		config                proto.Message
	}{
		{"no-filter", "", "", nil},
		{"identity", "", "gzip", &gzipv3.Gzip{}},
		{"gzip", "gzip", "gzip", &gzipv3.Gzip{}},
		{"br", "br", "brotli", &brotliv3.Brotli{}},
		{"zstd", "zstd", "zstd", &zstdv3.Zstd{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			l := modifyHCM(b, func(h *hcmv3.HttpConnectionManager) {
				if c.config == nil {
					return
				}
				h.HttpFilters = append([]*hcmv3.HttpFilter{{
					Name: "envoy.filters.http.compressor",
					ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(b, &compressorv3.Compressor{
						CompressorLibrary: &corev3.TypedExtensionConfig{Name: c.library, TypedConfig: mustAny(b, c.config)},
					})},
				}}, h.HttpFilters...)
			})
			cp := startControlPlane(b)
			cp.set("v1", resources{
				listeners: []*listenerv3.Listener{l},
				routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("bench", prefixMatch("/"))))},
				clusters:  []*clusterv3.Cluster{edsCluster("bench")},
				endpoints: []*endpointv3.ClusterLoadAssignment{assignment("bench", be.Listener.Addr().String())},
			})
			req := benchRequest(b, cp)
			if c.accept != "" {
				req.Header.Set("Accept-Encoding", c.accept)
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
			defer client.CloseIdleConnections()
			b.ReportAllocs()
			var sent int64
			for b.Loop() {
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				sent += n
				if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != c.accept {
					b.Fatalf("status %d, Content-Encoding %q, want %q", resp.StatusCode, resp.Header.Get("Content-Encoding"), c.accept)
				}
			}
			b.ReportMetric(float64(sent)/float64(b.N), "B-sent/op")
		})
	}
}
