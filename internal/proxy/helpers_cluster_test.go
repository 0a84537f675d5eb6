package proxy

import (
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Helpers for the upstream TLS and protocol, outlier detection and TCP proxy
// tests.

// protoEcho is what a protoBackend answers: how the request reached it.
type protoEcho struct {
	Backend string `json:"backend"`
	Proto   string `json:"proto"`
	TLS     bool   `json:"tls"`
	SNI     string `json:"sni"`
	ALPN    string `json:"alpn"`
}

// protoBackend is an HTTP(S) backend that reports the protocol of each
// request and counts its connections.
type protoBackend struct {
	name   string
	srv    *httptest.Server
	opened atomic.Int64 // connections accepted
	closed atomic.Int64 // connections closed
	hits   atomic.Int64
	status atomic.Int32 // answer of requests other than /healthz (default 200)
}

func (b *protoBackend) addr() string { return b.srv.Listener.Addr().String() }

// startProtoBackend starts a backend speaking protocols ("http/1.1", "h2",
// "h2c", "http/1.1 without ALPN"); with cert it serves TLS, offering by ALPN
// the TLS protocols among them.
func startProtoBackend(t *testing.T, name string, cert *tls.Certificate, protocols ...string) *protoBackend {
	t.Helper()
	b := &protoBackend{name: name}
	b.status.Store(200)
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			return
		}
		b.hits.Add(1)
		e := protoEcho{Backend: name, Proto: r.Proto, TLS: r.TLS != nil}
		if r.TLS != nil {
			e.SNI, e.ALPN = r.TLS.ServerName, r.TLS.NegotiatedProtocol
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(b.status.Load()))
		_ = json.NewEncoder(w).Encode(e)
	}))
	var p http.Protocols
	var alpn []string
	for _, proto := range protocols {
		switch proto {
		case "http/1.1":
			p.SetHTTP1(true)
			alpn = append(alpn, "http/1.1")
		case "h2":
			p.SetHTTP2(true)
			alpn = append([]string{"h2"}, alpn...)
		case "h2c":
			p.SetUnencryptedHTTP2(true)
		case "http/1.1 without ALPN":
			p.SetHTTP1(true)
			alpn = []string{} // not nil: httptest would offer http/1.1
		}
	}
	b.srv.Config.Protocols = &p
	b.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			b.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			b.closed.Add(1)
		}
	}
	if cert != nil {
		b.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: alpn}
		b.srv.StartTLS()
	} else {
		b.srv.Start()
	}
	t.Cleanup(b.srv.Close)
	return b
}

// getProto sends a GET and decodes a protoBackend's answer.
func getProto(t *testing.T, c *http.Client, url string) (result, protoEcho) {
	t.Helper()
	r := get(t, c, url, "x", nil)
	var e protoEcho
	if r.Status == 200 {
		if err := json.Unmarshal([]byte(r.Body), &e); err != nil {
			t.Fatalf("GET %s: %d %q: %v", url, r.Status, r.Body, err)
		}
	}
	return r, e
}

// keyPair issues a certificate for dnsName (and URI SANs uris) from ca.
func (ca *testCA) keyPair(t *testing.T, dnsName string, uris ...*url.URL) tls.Certificate {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, dnsName, uris...)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func (ca *testCA) pem() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// upstreamTLSSocket is a cluster transport socket with an UpstreamTlsContext.
func upstreamTLSSocket(t testing.TB, sni string, alpn []string, vc *tlsv3.CertificateValidationContext) *corev3.TransportSocket {
	utc := &tlsv3.UpstreamTlsContext{Sni: sni, CommonTlsContext: &tlsv3.CommonTlsContext{AlpnProtocols: alpn}}
	if vc != nil {
		utc.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}
	}
	return &corev3.TransportSocket{Name: xdsconv.TLSTransportSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, utc)}}
}

// validation is the translator's validation context: a CA and DNS SANs.
func validation(caPEM []byte, sans ...string) *tlsv3.CertificateValidationContext {
	vc := &tlsv3.CertificateValidationContext{TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: caPEM}}}
	for _, s := range sans {
		vc.MatchTypedSubjectAltNames = append(vc.MatchTypedSubjectAltNames, &tlsv3.SubjectAltNameMatcher{
			SanType: tlsv3.SubjectAltNameMatcher_DNS,
			Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}},
		})
	}
	return vc
}

// protocolOptions sets a cluster's HttpProtocolOptions: HTTP/2 or HTTP/1.1,
// and an idle_timeout when idle is not nil.
func protocolOptions(t testing.TB, c *clusterv3.Cluster, h2 bool, idle *durationpb.Duration) *clusterv3.Cluster {
	o := &httpv3.HttpProtocolOptions{}
	if h2 {
		o.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}},
		}}
	} else {
		o.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}},
		}}
	}
	if idle != nil {
		o.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: idle}
	}
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{upstream.HTTPProtocolOptionsKey: mustAny(t, o)}
	return c
}

// tlsListenerWith is the contract's HTTPS listener for httpNames, plus the
// given (tcp_proxy) chains.
func tlsListenerWith(t *testing.T, httpNames []string, chains ...*listenerv3.FilterChain) *listenerv3.Listener {
	l := httpsListener(t, httpNames...)
	l.FilterChains = append(l.FilterChains, chains...)
	return l
}

// tcpProxyFilter is a tcp_proxy network filter to cluster.
func tcpProxyFilter(t testing.TB, cluster string, mutate ...func(tp *tcpproxyv3.TcpProxy)) *listenerv3.Filter {
	tp := &tcpproxyv3.TcpProxy{StatPrefix: "tcp", ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster}}
	for _, m := range mutate {
		m(tp)
	}
	return &listenerv3.Filter{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, tp)}}
}

// passthroughChain passes TLS for serverName through to cluster.
func passthroughChain(t testing.TB, serverName, cluster string, mutate ...func(tp *tcpproxyv3.TcpProxy)) *listenerv3.FilterChain {
	return &listenerv3.FilterChain{
		FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{serverName}, TransportProtocol: "tls"},
		Filters:          []*listenerv3.Filter{tcpProxyFilter(t, cluster, mutate...)},
	}
}

// terminatingChain terminates TLS for serverName (secret secretName(serverName))
// and proxies the plaintext to cluster.
func terminatingChain(t *testing.T, serverName, cluster string, mutate ...func(tp *tcpproxyv3.TcpProxy)) *listenerv3.FilterChain {
	fc := httpsListener(t, serverName).FilterChains[0]
	fc.Filters = []*listenerv3.Filter{tcpProxyFilter(t, cluster, mutate...)}
	return fc
}

// tcpEchoBackend is a plain TCP server that reads until EOF (the client's
// half-close), then answers "echo:" and what it read, and closes. greeting,
// if any, is sent on accept (a server-first protocol).
type tcpEchoBackend struct {
	ln       net.Listener
	accepted atomic.Int64
	mu       sync.Mutex
	got      []string
}

func startTCPEcho(t *testing.T, greeting string) *tcpEchoBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &tcpEchoBackend{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.accepted.Add(1)
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if greeting != "" {
					_, _ = c.Write([]byte(greeting))
				}
				var buf []byte
				tmp := make([]byte, 1024)
				for {
					n, err := c.Read(tmp)
					buf = append(buf, tmp[:n]...)
					if err != nil {
						break
					}
				}
				b.mu.Lock()
				b.got = append(b.got, string(buf))
				b.mu.Unlock()
				_, _ = c.Write([]byte("echo:" + string(buf)))
			}()
		}
	}()
	return b
}

func (b *tcpEchoBackend) addr() string { return b.ln.Addr().String() }
