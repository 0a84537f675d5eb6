package proxy

import (
	"net/url"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/sorted"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestUpstreamTLS: a cluster's UpstreamTlsContext encrypts the connection
// and sends its sni; without a validation_context any certificate is
// accepted (Envoy's behaviour), with one the chain must verify against
// trusted_ca and a SAN must match, or the request fails as a connect failure.
func TestUpstreamTLS(t *testing.T) {
	t.Parallel()
	ca, other := newTestCA(t), newTestCA(t)
	cert := ca.keyPair(t, "backend.internal")
	be := startProtoBackend(t, "tls", &cert, "http/1.1")
	cp := startControlPlane(t)

	clusters := map[string]*clusterv3.Cluster{
		"unverified": edsCluster("unverified"),
		"verified":   edsCluster("verified"),
		"wrong-ca":   edsCluster("wrong-ca"),
		"wrong-san":  edsCluster("wrong-san"),
		"ca-only":    edsCluster("ca-only"),
		"with-hc":    edsCluster("with-hc"),
	}
	clusters["unverified"].TransportSocket = upstreamTLSSocket(t, "backend.internal", nil, nil)
	clusters["verified"].TransportSocket = upstreamTLSSocket(t, "backend.internal", []string{"http/1.1"}, validation(ca.pem(), "other.internal", "BACKEND.internal"))
	clusters["wrong-ca"].TransportSocket = upstreamTLSSocket(t, "backend.internal", nil, validation(other.pem(), "backend.internal"))
	clusters["wrong-san"].TransportSocket = upstreamTLSSocket(t, "backend.internal", nil, validation(ca.pem(), "other.internal"))
	// Envoy never compares the sni with the certificate: only SAN matchers do.
	clusters["ca-only"].TransportSocket = upstreamTLSSocket(t, "unrelated.example", nil, validation(ca.pem()))
	clusters["with-hc"].TransportSocket = upstreamTLSSocket(t, "backend.internal", nil, validation(ca.pem(), "backend.internal"))
	clusters["with-hc"].HealthChecks = []*corev3.HealthCheck{httpHealthCheck("/healthz", "backend.internal", 50*time.Millisecond, 1, 1)}
	res := resources{listeners: []*listenerv3.Listener{httpListener(t)}}
	vh := vhost("*")
	for _, name := range sorted.Keys(clusters) {
		res.clusters = append(res.clusters, clusters[name])
		res.endpoints = append(res.endpoints, assignment(name, be.addr()))
		vh.Routes = append(vh.Routes, toCluster(name, separatedMatch("/"+name)))
	}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vh)}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()

	for _, name := range []string{"unverified", "verified", "ca-only"} {
		r, e := getProto(t, c, p.httpURL(t, "/"+name))
		if r.Status != 200 || !e.TLS || e.Proto != "HTTP/1.1" {
			t.Errorf("%s: %d %+v, want 200 over TLS with HTTP/1.1", name, r.Status, e)
		}
		if want := map[bool]string{true: "unrelated.example", false: "backend.internal"}[name == "ca-only"]; e.SNI != want {
			t.Errorf("%s: the backend saw SNI %q, want %q", name, e.SNI, want)
		}
	}
	if _, e := getProto(t, c, p.httpURL(t, "/verified")); e.ALPN != "http/1.1" {
		t.Errorf("verified: negotiated ALPN %q, want http/1.1 (alpn_protocols)", e.ALPN)
	}
	if _, e := getProto(t, c, p.httpURL(t, "/unverified")); e.ALPN != "" {
		t.Errorf("unverified: negotiated ALPN %q, want none (no alpn_protocols)", e.ALPN)
	}

	hits := be.hits.Load()
	for _, name := range []string{"wrong-ca", "wrong-san"} {
		r := get(t, c, p.httpURL(t, "/"+name), "x", nil)
		if r.Status != 502 || !strings.Contains(r.Body, "upstream connect error") || !strings.Contains(r.Body, "certificate verify failed") {
			t.Errorf("%s: %d %q, want the contract's connect failure (502 upstream connect error ... certificate verify failed)", name, r.Status, r.Body)
		}
		if v, _ := gaugeValue(t, p, "portico_proxy_upstream_connect_failures_total", name); v != 1 {
			t.Errorf("%s: connect failures counted %v, want 1", name, v)
		}
	}
	if n := be.hits.Load() - hits; n != 0 {
		t.Errorf("the backend served %d requests over connections that failed verification", n)
	}

	t.Run("health checks go over TLS", func(t *testing.T) {
		waitFor(t, "TLS endpoint healthy", func() bool { return endpointHealthy(p, "with-hc", be.addr()) })
		if r, e := getProto(t, c, p.httpURL(t, "/with-hc")); r.Status != 200 || !e.TLS {
			t.Errorf("got %d %+v", r.Status, e)
		}
	})
}

// TestUpstreamTLSURISANs: match_typed_subject_alt_names of san_type URI (a
// BackendTLSPolicy's SPIFFE IDs) accept a certificate carrying that URI SAN,
// compared exactly as written in the certificate, as Envoy's exact matcher
// does; with DNS matchers too, any one matching a SAN of its own type accepts
// it. A certificate no matcher accepts fails like a DNS mismatch: a connect
// failure, the backend never sees the request.
func TestUpstreamTLSURISANs(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	spiffe := &url.URL{Scheme: "spiffe", Host: "abc.example.com", Path: "/test-identity"}
	upper := &url.URL{Scheme: "SPIFFE", Host: "Upper.example.com", Path: "/id"} // Go's x509 would show the scheme lowercased
	cert := ca.keyPair(t, "backend.internal", spiffe, upper)
	be := startProtoBackend(t, "tls", &cert, "http/1.1")
	cp := startControlPlane(t)

	dns := func(v string) *tlsv3.SubjectAltNameMatcher {
		return &tlsv3.SubjectAltNameMatcher{SanType: tlsv3.SubjectAltNameMatcher_DNS, Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}}}
	}
	uri := func(v string) *tlsv3.SubjectAltNameMatcher {
		return &tlsv3.SubjectAltNameMatcher{SanType: tlsv3.SubjectAltNameMatcher_URI, Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}}}
	}
	cases := []struct {
		cluster  string
		matchers []*tlsv3.SubjectAltNameMatcher
		accepted bool
	}{
		{"uri", []*tlsv3.SubjectAltNameMatcher{uri("spiffe://abc.example.com/test-identity")}, true},
		{"uri-wrong", []*tlsv3.SubjectAltNameMatcher{uri("spiffe://def.example.com/test-identity")}, false},
		{"uri-prefix", []*tlsv3.SubjectAltNameMatcher{uri("spiffe://abc.example.com/test")}, false},
		{"uri-as-written", []*tlsv3.SubjectAltNameMatcher{uri("SPIFFE://Upper.example.com/id")}, true},
		{"uri-other-case", []*tlsv3.SubjectAltNameMatcher{uri("spiffe://Upper.example.com/id")}, false},
		{"mixed-uri-matches", []*tlsv3.SubjectAltNameMatcher{uri("spiffe://abc.example.com/test-identity"), dns("other.internal")}, true},
		{"mixed-dns-matches", []*tlsv3.SubjectAltNameMatcher{uri("spiffe://def.example.com/test-identity"), dns("backend.internal")}, true},
		{"mixed-none", []*tlsv3.SubjectAltNameMatcher{uri("spiffe://def.example.com/test-identity"), dns("other.internal")}, false},
		// A matcher only looks at SANs of its own type.
		{"uri-names-the-dns-san", []*tlsv3.SubjectAltNameMatcher{uri("backend.internal")}, false},
		{"dns-names-the-uri-san", []*tlsv3.SubjectAltNameMatcher{dns("spiffe://abc.example.com/test-identity")}, false},
	}
	res := resources{listeners: []*listenerv3.Listener{httpListener(t)}}
	vh := vhost("*")
	for _, tc := range cases {
		c := edsCluster(tc.cluster)
		vc := validation(ca.pem())
		vc.MatchTypedSubjectAltNames = tc.matchers
		c.TransportSocket = upstreamTLSSocket(t, "abc.example.com", []string{"http/1.1"}, vc)
		res.clusters = append(res.clusters, c)
		res.endpoints = append(res.endpoints, assignment(tc.cluster, be.addr()))
		vh.Routes = append(vh.Routes, toCluster(tc.cluster, separatedMatch("/"+tc.cluster)))
	}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vh)}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()

	for _, tc := range cases {
		hits := be.hits.Load()
		r, e := getProto(t, c, p.httpURL(t, "/"+tc.cluster))
		switch {
		case tc.accepted && (r.Status != 200 || !e.TLS || e.SNI != "abc.example.com"):
			t.Errorf("%s: %d %q %+v, want 200 over TLS with SNI abc.example.com", tc.cluster, r.Status, r.Body, e)
		case !tc.accepted && (r.Status != 502 || !strings.Contains(r.Body, "upstream connect error") || !strings.Contains(r.Body, "certificate verify failed")):
			t.Errorf("%s: %d %q, want the contract's connect failure (502 upstream connect error ... certificate verify failed)", tc.cluster, r.Status, r.Body)
		case !tc.accepted && be.hits.Load() != hits:
			t.Errorf("%s: the backend served a request over a connection that failed verification", tc.cluster)
		}
	}
}

// TestUpstreamProtocols: explicit_http_config selects HTTP/2 (h2 by ALPN
// over TLS, h2c with prior knowledge in clear text) or HTTP/1.1; without it
// the proxy speaks HTTP/1.1, as Envoy does.
func TestUpstreamProtocols(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	cert := ca.keyPair(t, "backend.internal")
	h2c := startProtoBackend(t, "h2c", nil, "http/1.1", "h2c")
	h2only := startProtoBackend(t, "h2only", &cert, "h2")
	h1tls := startProtoBackend(t, "h1tls", &cert, "http/1.1")
	noALPN := startProtoBackend(t, "noalpn", &cert, "http/1.1 without ALPN")
	cp := startControlPlane(t)

	tlsCluster := func(name string, alpn ...string) *clusterv3.Cluster {
		c := edsCluster(name)
		c.TransportSocket = upstreamTLSSocket(t, "backend.internal", alpn, validation(ca.pem(), "backend.internal"))
		return c
	}
	clusters := []*clusterv3.Cluster{
		edsCluster("default"),
		protocolOptions(t, edsCluster("h2c"), true, nil),
		protocolOptions(t, edsCluster("h1"), false, nil),
		protocolOptions(t, tlsCluster("h2tls", "h2"), true, nil),
		protocolOptions(t, tlsCluster("h1tls", "http/1.1"), false, nil),
		protocolOptions(t, tlsCluster("h2-to-h1", "h2"), true, nil),
		protocolOptions(t, tlsCluster("h2-no-alpn", "h2"), true, nil),
	}
	addrs := map[string]string{"default": h2c.addr(), "h2c": h2c.addr(), "h1": h2c.addr(),
		"h2tls": h2only.addr(), "h1tls": h1tls.addr(), "h2-to-h1": h1tls.addr(), "h2-no-alpn": noALPN.addr()}
	res := resources{listeners: []*listenerv3.Listener{httpListener(t)}, clusters: clusters}
	vh := vhost("*")
	for _, c := range clusters {
		res.endpoints = append(res.endpoints, assignment(c.Name, addrs[c.Name]))
		vh.Routes = append(vh.Routes, toCluster(c.Name, separatedMatch("/"+c.Name)))
	}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vh)}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()

	for _, tc := range []struct {
		cluster, backend, proto string
		tls                     bool
	}{
		{"default", "h2c", "HTTP/1.1", false},
		{"h1", "h2c", "HTTP/1.1", false},
		{"h2c", "h2c", "HTTP/2.0", false},
		{"h2tls", "h2only", "HTTP/2.0", true},
		{"h1tls", "h1tls", "HTTP/1.1", true},
	} {
		r, e := getProto(t, c, p.httpURL(t, "/"+tc.cluster))
		if r.Status != 200 || e.Backend != tc.backend || e.Proto != tc.proto || e.TLS != tc.tls {
			t.Errorf("%s: %d %+v, want %s over TLS %v at %s", tc.cluster, r.Status, e, tc.proto, tc.tls, tc.backend)
		}
	}
	// An HTTP/2 cluster whose upstream does not negotiate h2 fails to connect
	// (this upstream refuses the handshake: no common application protocol).
	if r := get(t, c, p.httpURL(t, "/h2-to-h1"), "x", nil); r.Status != 502 || !strings.Contains(r.Body, "connection failure, transport failure reason: TLS error") {
		t.Errorf("h2 cluster to an HTTP/1.1-only upstream: %d %q, want 502", r.Status, r.Body)
	}
	// (this one completes the handshake without ALPN: the proxy refuses to
	// speak HTTP/1.1 where the cluster says HTTP/2).
	if r := get(t, c, p.httpURL(t, "/h2-no-alpn"), "x", nil); r.Status != 502 || !strings.Contains(r.Body, "did not negotiate h2") {
		t.Errorf("h2 cluster to an upstream without ALPN: %d %q, want 502", r.Status, r.Body)
	}
	if n := noALPN.hits.Load(); n != 0 {
		t.Errorf("the upstream without ALPN served %d requests", n)
	}

	t.Run("HTTP/2 multiplexes one connection", func(t *testing.T) {
		opened := h2only.opened.Load()
		for range 5 {
			if r, _ := getProto(t, c, p.httpURL(t, "/h2tls")); r.Status != 200 {
				t.Fatalf("status %d", r.Status)
			}
		}
		if n := h2only.opened.Load() - opened; n != 0 {
			t.Errorf("%d new connections for 5 requests, want the pooled HTTP/2 connection reused", n)
		}
	})
}

// TestUpstreamIdleTimeout: common_http_protocol_options.idle_timeout closes
// pooled upstream connections that stay idle that long.
func TestUpstreamIdleTimeout(t *testing.T) {
	t.Parallel()
	short := startProtoBackend(t, "short", nil, "http/1.1")
	shortH2 := startProtoBackend(t, "short-h2c", nil, "h2c")
	long := startProtoBackend(t, "long", nil, "http/1.1")
	cp := startControlPlane(t)
	res := resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		clusters: []*clusterv3.Cluster{
			protocolOptions(t, edsCluster("short"), false, durationpb.New(100*time.Millisecond)),
			protocolOptions(t, edsCluster("short-h2c"), true, durationpb.New(100*time.Millisecond)),
			protocolOptions(t, edsCluster("long"), false, durationpb.New(time.Hour)),
		},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("short", short.addr()),
			assignment("short-h2c", shortH2.addr()), assignment("long", long.addr())},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			toCluster("short", separatedMatch("/short")), toCluster("short-h2c", separatedMatch("/short-h2c")),
			toCluster("long", separatedMatch("/long"))))},
	}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	for _, path := range []string{"/short", "/short-h2c", "/long"} {
		if r, _ := getProto(t, c, p.httpURL(t, path)); r.Status != 200 {
			t.Fatalf("%s: status %d", path, r.Status)
		}
	}
	waitFor(t, "the idle connections closed after 100ms", func() bool { return short.closed.Load() == 1 && shortH2.closed.Load() == 1 })
	if n := long.closed.Load(); n != 0 {
		t.Errorf("%d connections of the cluster with a 1h idle_timeout closed", n)
	}
	// A new request opens a new connection.
	if r, _ := getProto(t, c, p.httpURL(t, "/short")); r.Status != 200 || short.opened.Load() != 2 {
		t.Errorf("after the idle timeout: %d, %d connections opened, want 200 on a second one", r.Status, short.opened.Load())
	}
}

func TestConvertClusterUpstream(t *testing.T) {
	ca := newTestCA(t)
	c := protocolOptions(t, edsCluster("c"), true, durationpb.New(90*time.Second))
	c.TransportSocket = upstreamTLSSocket(t, "svc.internal", []string{"h2"}, validation(ca.pem(), "svc.internal"))
	spec, err := upstream.ConvertCluster(c)
	if err != nil {
		t.Fatal(err)
	}
	if spec.TLS.SNI != "svc.internal" || spec.TLS.Roots == nil || len(spec.TLS.SANs) != 1 || spec.TLS.MinVersion != 0x0303 || spec.TLS.MaxVersion != 0x0303 {
		t.Errorf("TLS: %+v (TLS 1.2 to 1.2 is Envoy's client default)", spec.TLS)
	}
	if spec.Protocol != (upstream.ProtocolSpec{Protocol: upstream.ProtoHTTP2, IdleTimeout: 90 * time.Second, HasIdleTimeout: true}) {
		t.Errorf("protocol: %+v", spec.Protocol)
	}

	tlsWith := func(f func(utc *tlsv3.UpstreamTlsContext)) func(c *clusterv3.Cluster) {
		return func(c *clusterv3.Cluster) {
			utc := &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{}}
			f(utc)
			c.TransportSocket = &corev3.TransportSocket{Name: xdsconv.TLSTransportSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, utc)}}
		}
	}
	vcWith := func(f func(vc *tlsv3.CertificateValidationContext)) func(c *clusterv3.Cluster) {
		return tlsWith(func(utc *tlsv3.UpstreamTlsContext) {
			vc := validation(ca.pem(), "svc.internal")
			f(vc)
			utc.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}
		})
	}
	options := func(o *httpv3.HttpProtocolOptions) func(c *clusterv3.Cluster) {
		if o.UpstreamProtocolOptions == nil {
			o.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}}}}
		}
		return func(c *clusterv3.Cluster) {
			c.TypedExtensionProtocolOptions = map[string]*anypb.Any{upstream.HTTPProtocolOptionsKey: mustAny(t, o)}
		}
	}
	rejects := []struct {
		name   string
		mutate func(c *clusterv3.Cluster)
		want   string
	}{
		{"raw buffer socket", func(c *clusterv3.Cluster) {
			c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.raw_buffer"}
		}, `transport_socket: transport socket "envoy.transport_sockets.raw_buffer" is not supported`},
		{"validation over SDS", tlsWith(func(utc *tlsv3.UpstreamTlsContext) {
			utc.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: "ca", SdsConfig: adsSource()}}
		}), "validation_context_sds_secret_config is not supported"},
		{"two client certificates", tlsWith(func(utc *tlsv3.UpstreamTlsContext) {
			utc.CommonTlsContext.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{{Name: "c", SdsConfig: adsSource()}, {Name: "d", SdsConfig: adsSource()}}
		}), "2 client certificates, an upstream context takes one"},
		{"static client certificate secret", tlsWith(func(utc *tlsv3.UpstreamTlsContext) {
			utc.CommonTlsContext.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{{Name: "c"}}
		}), `secret "c": static secrets are not supported`},
		{"inline client certificate", tlsWith(func(utc *tlsv3.UpstreamTlsContext) {
			utc.CommonTlsContext.TlsCertificates = []*tlsv3.TlsCertificate{{}}
		}), "tls_certificates (inline client certificates; use tls_certificate_sds_secret_configs) is not supported"},
		{"auto_host_sni", tlsWith(func(utc *tlsv3.UpstreamTlsContext) { utc.AutoHostSni = true }), "auto_host_sni"},
		{"ALPN h3", tlsWith(func(utc *tlsv3.UpstreamTlsContext) { utc.CommonTlsContext.AlpnProtocols = []string{"h3"} }), `ALPN protocol "h3"`},
		{"SAN without CA", vcWith(func(vc *tlsv3.CertificateValidationContext) { vc.TrustedCa = nil }), "match_typed_subject_alt_names needs trusted_ca"},
		{"IP address SAN", vcWith(func(vc *tlsv3.CertificateValidationContext) {
			vc.MatchTypedSubjectAltNames[0].SanType = tlsv3.SubjectAltNameMatcher_IP_ADDRESS
		}), "san_type IP_ADDRESS is not supported (only DNS and URI)"},
		{"prefix URI SAN", vcWith(func(vc *tlsv3.CertificateValidationContext) {
			vc.MatchTypedSubjectAltNames[0].SanType = tlsv3.SubjectAltNameMatcher_URI
			vc.MatchTypedSubjectAltNames[0].Matcher = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "spiffe://"}}
		}), "match_typed_subject_alt_names #0: only a non-empty exact matcher"},
		{"prefix SAN", vcWith(func(vc *tlsv3.CertificateValidationContext) {
			vc.MatchTypedSubjectAltNames[0].Matcher = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "svc"}}
		}), "only a non-empty exact matcher"},
		{"CA from a file", vcWith(func(vc *tlsv3.CertificateValidationContext) {
			vc.TrustedCa = &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/etc/ca.pem"}}
		}), "trusted_ca: data source"},
		{"CA not PEM", vcWith(func(vc *tlsv3.CertificateValidationContext) {
			vc.TrustedCa = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "nope"}}
		}), "trusted_ca: no PEM certificate"},
		{"SPKI pinning", vcWith(func(vc *tlsv3.CertificateValidationContext) { vc.VerifyCertificateSpki = []string{"x"} }), "verify_certificate_spki"},
		{"accept untrusted", vcWith(func(vc *tlsv3.CertificateValidationContext) {
			vc.TrustChainVerification = tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED
		}), "trust_chain_verification ACCEPT_UNTRUSTED"},
		{"HTTP/2 over TLS without ALPN h2", func(c *clusterv3.Cluster) {
			protocolOptions(t, c, true, nil)
			c.TransportSocket = upstreamTLSSocket(t, "", nil, nil)
		}, `HTTP/2 over TLS needs alpn_protocols ["h2"]`},
		{"HTTP/1.1 offering h2", func(c *clusterv3.Cluster) {
			c.TransportSocket = upstreamTLSSocket(t, "", []string{"h2", "http/1.1"}, nil)
		}, `an HTTP/1.1 cluster cannot offer ALPN "h2"`},
		{"other extension protocol options", func(c *clusterv3.Cluster) {
			c.TypedExtensionProtocolOptions = map[string]*anypb.Any{"envoy.filters.network.http_connection_manager": mustAny(t, &httpv3.HttpProtocolOptions{})}
		}, `typed_extension_protocol_options "envoy.filters.network.http_connection_manager" is not supported`},
		{"auto config", options(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_AutoConfig{
			AutoConfig: &httpv3.HttpProtocolOptions_AutoHttpConfig{}}}), "auto_config is not supported"},
		{"downstream protocol", options(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{
			UseDownstreamProtocolConfig: &httpv3.HttpProtocolOptions_UseDownstreamHttpConfig{}}}), "use_downstream_protocol_config is not supported"},
		{"HTTP/2 settings", options(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
				Http2ProtocolOptions: &corev3.Http2ProtocolOptions{MaxConcurrentStreams: wrapperspb.UInt32(10)}}}}}),
			"only an empty Http2ProtocolOptions"},
		{"max requests per connection", options(&httpv3.HttpProtocolOptions{CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{
			MaxRequestsPerConnection: wrapperspb.UInt32(10)}}), "common_http_protocol_options.max_requests_per_connection"},
		{"upstream_http_protocol_options", options(&httpv3.HttpProtocolOptions{UpstreamHttpProtocolOptions: &corev3.UpstreamHttpProtocolOptions{AutoSni: true}}),
			"upstream_http_protocol_options is not supported"},
	}
	for _, tc := range rejects {
		t.Run(tc.name, func(t *testing.T) {
			c := edsCluster("c")
			tc.mutate(c)
			_, err := upstream.ConvertCluster(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
