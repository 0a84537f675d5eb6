package proxy

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
	"github.com/portico-dev/portico/internal/proxy/upstream"
)

// TestDownstreamCipherSuites: a listener's tls_params.cipher_suites are the only TLS
// 1.2 suites a client may use; an equal-preference group "[A|B]" allows each of its
// suites. TLS 1.3 is not limited by them (its suites are not configurable).
func TestDownstreamCipherSuites(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	cp := startControlPlane(t)
	l := httpsListener(t, "a.example.com")
	setDownstreamCiphers(t, l.FilterChains[0], "ECDHE-ECDSA-AES256-GCM-SHA384", "[ECDHE-ECDSA-AES128-SHA|ECDHE-RSA-AES128-SHA]")
	certPEM, keyPEM := ca.issue(t, "a.example.com")
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{l},
		routes:    []*routev3.RouteConfiguration{routeConfig("https/a.example.com", vhost("a.example.com"))},
		secrets:   []*tlsv3.Secret{tlsSecret(secretName("a.example.com"), certPEM, keyPEM)},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")

	for _, c := range []struct {
		name    string
		version uint16
		suite   uint16
		ok      bool
	}{
		{"listed", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, true},
		{"in a group", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, true},
		{"not listed", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, false},
		{"not listed either", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, false},
		{"TLS 1.3", tls.VersionTLS13, 0, true},
	} {
		cfg := &tls.Config{ServerName: "a.example.com", RootCAs: ca.pool, MaxVersion: c.version}
		if c.suite != 0 {
			cfg.CipherSuites = []uint16{c.suite}
		}
		conn, err := tls.Dial("tcp", p.ListenerAddr("ingress_https"), cfg)
		if err != nil {
			if c.ok {
				t.Errorf("%s: handshake failed: %v", c.name, err)
			}
			continue
		}
		suite := conn.ConnectionState().CipherSuite
		conn.Close()
		if !c.ok {
			t.Errorf("%s: handshake succeeded with %s, want it refused", c.name, tls.CipherSuiteName(suite))
		}
	}
}

// setDownstreamCiphers sets the cipher_suites of a chain's DownstreamTlsContext.
func setDownstreamCiphers(t *testing.T, fc *listenerv3.FilterChain, suites ...string) {
	t.Helper()
	var dtc tlsv3.DownstreamTlsContext
	if err := fc.TransportSocket.GetTypedConfig().UnmarshalTo(&dtc); err != nil {
		t.Fatal(err)
	}
	dtc.CommonTlsContext.TlsParams.CipherSuites = suites
	fc.TransportSocket.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, &dtc)}
}

// TestUpstreamCipherSuites: a cluster's tls_params.cipher_suites are the only TLS 1.2
// suites offered to the backend: a backend that accepts only one of them answers, one
// that accepts none cannot be connected to (the contract's connect failure, 502).
func TestUpstreamCipherSuites(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	cert := ca.keyPair(t, "backend.internal")
	// The backend speaks TLS 1.2 with one suite only.
	be := startTLSBackend(t, &tls.Config{Certificates: []tls.Certificate{cert}, MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA}})
	cp := startControlPlane(t)
	clusters := map[string][]string{
		"listed":   {"ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-AES256-SHA"},
		"grouped":  {"[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-AES256-SHA]"},
		"unlisted": {"ECDHE-ECDSA-AES256-GCM-SHA384", "[ECDHE-ECDSA-AES128-SHA|ECDHE-RSA-AES256-SHA]"},
	}
	res := resources{listeners: []*listenerv3.Listener{httpListener(t)}}
	vh := vhost("*")
	for _, name := range []string{"grouped", "listed", "unlisted"} {
		c := edsCluster(name)
		c.TransportSocket = upstreamTLSSocketWith(t, &tlsv3.UpstreamTlsContext{Sni: "backend.internal", CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams: &tlsv3.TlsParameters{CipherSuites: clusters[name]},
		}})
		res.clusters = append(res.clusters, c)
		res.endpoints = append(res.endpoints, assignment(name, be))
		vh.Routes = append(vh.Routes, toCluster(name, separatedMatch("/"+name)))
	}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vh)}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	for name, want := range map[string]int{"listed": 200, "grouped": 200, "unlisted": 502} {
		if r := get(t, c, p.httpURL(t, "/"+name), "x", nil); r.Status != want || (want == 502 && !strings.Contains(r.Body, "upstream connect error")) {
			t.Errorf("%s: %d %q, want %d", name, r.Status, r.Body, want)
		}
	}
}

// TestCipherSuiteNACK: a cipher suite Go does not implement is refused by name, where
// the configuration arrives, rather than silently allowed or dropped.
func TestCipherSuiteNACK(t *testing.T) {
	t.Parallel()
	cl := edsCluster("web")
	cl.TransportSocket = upstreamTLSSocketWith(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsParams: &tlsv3.TlsParameters{CipherSuites: []string{"ECDHE-RSA-AES128-GCM-SHA256", "[AES128-SHA|DES-CBC3-SHA]"}},
	}})
	_, err := upstream.ConvertCluster(cl)
	if err == nil || !strings.Contains(err.Error(), `cipher suite "DES-CBC3-SHA" is not supported`) {
		t.Errorf("got %v, want DES-CBC3-SHA refused by name", err)
	}
	for _, name := range xdsconv.CipherSuiteNames() {
		if _, err := xdsconv.CipherSuites([]string{name}); err != nil {
			t.Error(err)
		}
	}
}

// startTLSBackend serves HTTP over TLS with cfg, answering 200 "ok"; it returns the
// address.
func startTLSBackend(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	srv.TLS = cfg
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// upstreamTLSSocketWith is a cluster transport socket with utc.
func upstreamTLSSocketWith(t testing.TB, utc *tlsv3.UpstreamTlsContext) *corev3.TransportSocket {
	return &corev3.TransportSocket{Name: xdsconv.TLSTransportSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, utc)}}
}
