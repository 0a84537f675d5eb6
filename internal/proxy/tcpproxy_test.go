package proxy

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/portico-dev/portico/internal/testutil"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// tlsEchoBackend terminates TLS itself (its own certificate) and echoes what
// it reads until EOF, as tcpEchoBackend; rawEOF counts the TCP half-closes it
// saw under TLS.
type tlsEchoBackend struct {
	ln     net.Listener
	rawEOF atomic.Int64
}

// eofConn counts EOFs read from a raw connection.
type eofConn struct {
	net.Conn
	eof *atomic.Int64
}

func (c *eofConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err == io.EOF {
		c.eof.Add(1)
	}
	return n, err
}

func startTLSEcho(t *testing.T, cert tls.Certificate) *tlsEchoBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &tlsEchoBackend{ln: ln}
	t.Cleanup(func() { ln.Close() })
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer raw.Close()
				_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
				c := tls.Server(&eofConn{Conn: raw, eof: &b.rawEOF}, cfg)
				got, _ := io.ReadAll(c) // until the client's close_notify
				// Then the TCP half-close that follows it.
				_, _ = c.NetConn().Read(make([]byte, 1))
				_, _ = c.Write([]byte("echo:" + string(got)))
				_ = c.Close()
			}()
		}
	}()
	return b
}

func (b *tlsEchoBackend) addr() string { return b.ln.Addr().String() }

// tlsExchange sends msg on a TLS connection, half-closes it (TLS close_notify,
// then TCP FIN) and reads the answer until EOF.
func tlsExchange(t *testing.T, c *tls.Conn, msg string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatalf("TLS CloseWrite: %v", err)
	}
	if err := c.NetConn().(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatalf("TCP CloseWrite: %v", err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(got)
}

// TestTCPProxyPassthrough: a filter chain without transport socket, matched
// by SNI on the TLS listener, passes the TLS bytes through: the client
// completes its handshake with the backend and sees its certificate; the
// listener's HTTP chains keep terminating TLS for their names; half-closes
// go through both ways.
func TestTCPProxyPassthrough(t *testing.T) {
	t.Parallel()
	proxyCA, backendCA := newTestCA(t), newTestCA(t)
	backendCert := backendCA.keyPair(t, "pass.example.com")
	be := startTLSEcho(t, backendCert)
	web := startBackend(t, "web")
	cp := startControlPlane(t)
	certPEM, keyPEM := proxyCA.issue(t, "web.example.com")
	res := resources{
		listeners: []*listenerv3.Listener{httpListener(t), tlsListenerWith(t, []string{"web.example.com"},
			passthroughChain(t, "pass.example.com", "pass"))},
		routes: []*routev3.RouteConfiguration{
			routeConfig("ingress_http", vhost("*", toCluster("web", prefixMatch("/")))),
			routeConfig("https/web.example.com", vhost("web.example.com", toCluster("web", prefixMatch("/")))),
		},
		clusters:  []*clusterv3.Cluster{edsCluster("web"), edsCluster("pass")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("web", web.addr()), assignment("pass", be.addr())},
		secrets:   []*tlsv3.Secret{tlsSecret(secretName("web.example.com"), certPEM, keyPEM)},
	}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	addr := p.ListenerAddr("ingress_https")

	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "pass.example.com", RootCAs: backendCA.pool})
	if err != nil {
		t.Fatalf("TLS through the passthrough chain: %v", err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0]; !bytes.Equal(got.Raw, backendCert.Certificate[0]) {
		t.Errorf("the client saw %q, want the backend's certificate", got.Subject)
	}
	if got := tlsExchange(t, conn, "hello"); got != "echo:hello" {
		t.Errorf("answer %q, want echo:hello", got)
	}
	if n := be.rawEOF.Load(); n != 1 {
		t.Errorf("the backend saw %d TCP half-closes, want the client's", n)
	}

	// The HTTP chain of the same listener still terminates TLS.
	if r := get(t, tlsClient(addr, proxyCA.pool), "https://web.example.com/x", "", nil); r.Status != 200 || r.Backend != "web" {
		t.Errorf("HTTPS chain: %d from %q", r.Status, r.Backend)
	}
	// A server name of neither chain gets no connection.
	if c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "other.example.com", InsecureSkipVerify: true}); err == nil {
		c.Close()
		t.Error("handshake for an unknown server name succeeded")
	}
}

// TestTCPProxyTermination: a tcp_proxy chain with a DownstreamTlsContext
// terminates TLS with the proxy's certificate and copies the plaintext both
// ways to a plain TCP backend, a half-close on either side passed on.
func TestTCPProxyTermination(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	echo := startTCPEcho(t, "")
	greeter := startTCPEcho(t, "welcome\n")
	cp := startControlPlane(t)
	res := resources{
		listeners: []*listenerv3.Listener{tlsListenerWith(t, nil,
			terminatingChain(t, "term.example.com", "echo"), terminatingChain(t, "greet.example.com", "greeter"))},
		clusters:  []*clusterv3.Cluster{edsCluster("echo"), edsCluster("greeter")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("echo", echo.addr()), assignment("greeter", greeter.addr())},
	}
	res.secrets = issueSecrets(t, ca, "term.example.com", "greet.example.com")
	cp.set("v1", res)
	p := startProxyOn(t, cp, map[string]string{"ingress_https": "127.0.0.1:0"})
	p.waitVersion(t, "v1")
	addr := p.ListenerAddr("ingress_https")

	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "term.example.com", RootCAs: ca.pool})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "term.example.com" {
		t.Errorf("certificate for %q, want the proxy's term.example.com", cn)
	}
	if got := tlsExchange(t, conn, "ping"); got != "echo:ping" {
		t.Errorf("answer %q, want echo:ping", got)
	}

	// Server first: the greeting arrives before the client sends anything.
	g, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "greet.example.com", RootCAs: ca.pool})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	_ = g.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, len("welcome\n"))
	if _, err := io.ReadFull(g, buf); err != nil || string(buf) != "welcome\n" {
		t.Errorf("greeting %q (%v)", buf, err)
	}
	if got := tlsExchange(t, g, "hi"); got != "echo:hi" {
		t.Errorf("answer %q, want echo:hi", got)
	}
}

// TestTCPProxyConnectAttempts: tcp_proxy makes max_connect_attempts
// connection attempts (1 by default), each to an endpoint picked again;
// connect failures feed outlier detection.
func TestTCPProxyConnectAttempts(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	echo := startTCPEcho(t, "")
	refused := testutil.RefusedAddr(t)
	cp := startControlPlane(t)
	certPEM, keyPEM := ca.issue(t, "term.example.com")
	listener := func(attempts *wrapperspb.UInt32Value) *listenerv3.Listener {
		return tlsListenerWith(t, nil, terminatingChain(t, "term.example.com", "two", func(tp *tcpproxyv3.TcpProxy) {
			tp.MaxConnectAttempts = attempts
		}))
	}
	res := resources{
		listeners: []*listenerv3.Listener{listener(nil)},
		clusters:  []*clusterv3.Cluster{edsCluster("two")},
		// Round robin: the refusing endpoint first.
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("two", refused, echo.addr())},
		secrets:   []*tlsv3.Secret{tlsSecret(secretName("term.example.com"), certPEM, keyPEM)},
	}
	cp.set("v1", res)
	p := startProxyOn(t, cp, map[string]string{"ingress_https": "127.0.0.1:0"})
	p.waitVersion(t, "v1")
	try := func() string {
		conn, err := tls.Dial("tcp", p.ListenerAddr("ingress_https"), &tls.Config{ServerName: "term.example.com", RootCAs: ca.pool})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = conn.Write([]byte("x"))
		_ = conn.CloseWrite()
		got, _ := io.ReadAll(conn)
		return string(got)
	}
	if got := try(); got != "" {
		t.Errorf("default (1 attempt) to the refusing endpoint: %q, want the connection closed", got)
	}
	if got := try(); got != "echo:x" {
		t.Errorf("next endpoint: %q, want echo:x", got)
	}
	if v, _ := gaugeValue(t, p, "portico_proxy_upstream_connect_failures_total", "two"); v != 1 {
		t.Errorf("connect failures counted: %v, want 1", v)
	}
	res.listeners = []*listenerv3.Listener{listener(wrapperspb.UInt32(2))}
	cp.set("v2", res)
	p.waitVersion(t, "v2")
	for i := range 4 {
		if got := try(); got != "echo:x" {
			t.Errorf("connection %d with 2 attempts: %q, want echo:x", i, got)
		}
	}

	// One attempt again, with outlier detection: a connect failure is a 5xx,
	// and the load balancer skips the ejected endpoint.
	res.listeners = []*listenerv3.Listener{listener(nil)}
	res.clusters = []*clusterv3.Cluster{outlierCluster("two", time.Minute, time.Minute, func(od *clusterv3.OutlierDetection) {
		od.Consecutive_5Xx = wrapperspb.UInt32(1)
	})}
	cp.set("v3", res)
	p.waitVersion(t, "v3")
	if got := try(); got != "" {
		t.Errorf("first connection (refusing endpoint): %q, want the connection closed", got)
	}
	if !ejected(p, "two", refused) {
		t.Fatal("the refusing endpoint was not ejected")
	}
	for i := range 3 {
		if got := try(); got != "echo:x" {
			t.Errorf("connection %d with the refusing endpoint ejected: %q, want echo:x", i, got)
		}
	}
}

// TestTCPProxyIdleTimeout: a connection without a byte either way for
// idle_timeout is closed.
func TestTCPProxyIdleTimeout(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	echo := startTCPEcho(t, "")
	cp := startControlPlane(t)
	certPEM, keyPEM := ca.issue(t, "term.example.com")
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{tlsListenerWith(t, nil, terminatingChain(t, "term.example.com", "echo", func(tp *tcpproxyv3.TcpProxy) {
			tp.IdleTimeout = durationpb.New(200 * time.Millisecond)
		}))},
		clusters:  []*clusterv3.Cluster{edsCluster("echo")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("echo", echo.addr())},
		secrets:   []*tlsv3.Secret{tlsSecret(secretName("term.example.com"), certPEM, keyPEM)},
	})
	p := startProxyOn(t, cp, map[string]string{"ingress_https": "127.0.0.1:0"})
	p.waitVersion(t, "v1")
	// Before the dial: the proxy's idle timer starts when it accepts the
	// connection, which may be well before the handshake returns here.
	start := time.Now()
	conn, err := tls.Dial("tcp", p.ListenerAddr("ingress_https"), &tls.Config{ServerName: "term.example.com", RootCAs: ca.pool})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	if err == nil || errors.Is(err, net.ErrClosed) {
		t.Fatalf("read: %v, want the proxy to close the idle connection", err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the idle connection was not closed within 10s")
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("closed after %s, before the idle timeout", d)
	}
}

func TestConvertTCPProxyChains(t *testing.T) {
	l := tlsListenerWith(t, []string{"web.example.com"}, passthroughChain(t, "pass.example.com", "pass"),
		terminatingChain(t, "term.example.com", "term", func(tp *tcpproxyv3.TcpProxy) {
			tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpproxyv3.TcpProxy_WeightedCluster{
				Clusters: []*tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{{Name: "a", Weight: 1}, {Name: "b", Weight: 3}}}}
			tp.IdleTimeout = durationpb.New(0)
		}))
	l.ListenerFiltersTimeout = durationpb.New(time.Second)
	ls, err := convertListener(l)
	if err != nil {
		t.Fatal(err)
	}
	if !ls.tls || !ls.tlsInspector || ls.filtersTimeout != time.Second || len(ls.chains) != 3 {
		t.Fatalf("listener: %+v", ls)
	}
	pass, term := ls.chains[1], ls.chains[2]
	if pass.tls != nil || pass.hcm != nil || pass.tcp == nil || pass.tcp.Clusters[0].Name != "pass" ||
		pass.tcp.IdleTimeout != time.Hour || pass.tcp.MaxConnectAttempts != 1 {
		t.Errorf("passthrough chain: %+v %+v", pass, pass.tcp)
	}
	if term.tls == nil || term.tcp == nil || term.tcp.Total != 4 || term.tcp.IdleTimeout != 0 {
		t.Errorf("terminating chain: %+v %+v", term, term.tcp)
	}

	rejects := []struct {
		name string
		l    func(t *testing.T) *listenerv3.Listener
		want string
	}{
		{"tcp_proxy on a plaintext listener", func(t *testing.T) *listenerv3.Listener {
			l := httpListener(t)
			l.FilterChains = []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{tcpProxyFilter(t, "c")}}}
			return l
		}, "needs the envoy.filters.listener.tls_inspector"},
		{"without tls_inspector", func(t *testing.T) *listenerv3.Listener {
			l := tlsListenerWith(t, []string{"web.example.com"}, passthroughChain(t, "pass.example.com", "pass"))
			l.ListenerFilters = nil
			return l
		}, "needs the envoy.filters.listener.tls_inspector"},
		{"plaintext HTTP chain beside passthrough", func(t *testing.T) *listenerv3.Listener {
			return tlsListenerWith(t, nil, passthroughChain(t, "pass.example.com", "pass"), httpListener(t).FilterChains[0])
		}, "mixing TLS and plaintext filter chains"},
		{"same name twice", func(t *testing.T) *listenerv3.Listener {
			return tlsListenerWith(t, []string{"pass.example.com"}, passthroughChain(t, "pass.example.com", "pass"))
		}, `server name "pass.example.com" is matched by more than one filter chain`},
		{"raw_buffer passthrough", func(t *testing.T) *listenerv3.Listener {
			fc := passthroughChain(t, "pass.example.com", "pass")
			fc.FilterChainMatch.TransportProtocol = "raw_buffer"
			return tlsListenerWith(t, nil, fc)
		}, `transport_protocol "raw_buffer"`},
		{"hash policy", func(t *testing.T) *listenerv3.Listener {
			return tlsListenerWith(t, nil, passthroughChain(t, "pass.example.com", "pass", func(tp *tcpproxyv3.TcpProxy) {
				tp.HashPolicy = []*typev3.HashPolicy{{PolicySpecifier: &typev3.HashPolicy_SourceIp_{SourceIp: &typev3.HashPolicy_SourceIp{}}}}
			}))
		}, "tcp_proxy: hash_policy is not supported"},
		{"access log with a filter", func(t *testing.T) *listenerv3.Listener {
			return tlsListenerWith(t, nil, passthroughChain(t, "pass.example.com", "pass", func(tp *tcpproxyv3.TcpProxy) {
				tp.AccessLog = []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.stdout",
					Filter:     &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_NotHealthCheckFilter{NotHealthCheckFilter: &accesslogv3.NotHealthCheckFilter{}}},
					ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &streamv3.StdoutAccessLog{})}}}
			}))
		}, "tcp_proxy: access_log \"envoy.access_loggers.stdout\": filter is not supported"},
		{"access log to a file", func(t *testing.T) *listenerv3.Listener {
			return tlsListenerWith(t, nil, passthroughChain(t, "pass.example.com", "pass", func(tp *tcpproxyv3.TcpProxy) {
				tp.AccessLog = []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file",
					ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &filev3.FileAccessLog{Path: "/tmp/x"})}}}
			}))
		}, "access_log \"envoy.access_loggers.file\" is not supported"},
		{"tunneling", func(t *testing.T) *listenerv3.Listener {
			return tlsListenerWith(t, nil, passthroughChain(t, "pass.example.com", "pass", func(tp *tcpproxyv3.TcpProxy) {
				tp.TunnelingConfig = &tcpproxyv3.TcpProxy_TunnelingConfig{Hostname: "x"}
			}))
		}, "tcp_proxy: tunneling_config is not supported"},
		{"backoff", func(t *testing.T) *listenerv3.Listener {
			return tlsListenerWith(t, nil, passthroughChain(t, "pass.example.com", "pass", func(tp *tcpproxyv3.TcpProxy) {
				tp.MaxConnectAttempts = wrapperspb.UInt32(3)
				tp.BackoffOptions = &corev3.BackoffStrategy{BaseInterval: durationpb.New(time.Second)}
			}))
		}, "tcp_proxy: backoff_options is not supported"},
	}
	for _, tc := range rejects {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.l(t)
			if err := l.ValidateAll(); err != nil {
				t.Fatalf("invalid listener: %v", err)
			}
			_, err := convertListener(l)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestTCPProxyClientHelloTimeout: a connection that sends no ClientHello
// within listener_filters_timeout is closed; with
// continue_on_listener_filters_timeout it goes to the default chain.
func TestTCPProxyClientHelloTimeout(t *testing.T) {
	t.Parallel()
	greeter := startTCPEcho(t, "welcome\n")
	cp := startControlPlane(t)
	listener := func(continueOnTimeout bool) *listenerv3.Listener {
		def := passthroughChain(t, "x", "greeter")
		def.FilterChainMatch = nil // the default chain
		l := tlsListenerWith(t, nil, passthroughChain(t, "pass.example.com", "greeter"), def)
		l.ListenerFiltersTimeout = durationpb.New(100 * time.Millisecond)
		l.ContinueOnListenerFiltersTimeout = continueOnTimeout
		return l
	}
	res := resources{
		listeners: []*listenerv3.Listener{listener(false)},
		clusters:  []*clusterv3.Cluster{edsCluster("greeter")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("greeter", greeter.addr())},
	}
	cp.set("v1", res)
	p := startProxyOn(t, cp, map[string]string{"ingress_https": "127.0.0.1:0"})
	p.waitVersion(t, "v1")
	silent := func() string {
		conn, err := net.Dial("tcp", p.ListenerAddr("ingress_https"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 8)
		n, _ := io.ReadFull(conn, buf)
		return string(buf[:n])
	}
	if got := silent(); got != "" {
		t.Errorf("silent client: got %q, want the connection closed after listener_filters_timeout", got)
	}
	if n := greeter.accepted.Load(); n != 0 {
		t.Errorf("%d upstream connections for a client that never sent a ClientHello", n)
	}
	res.listeners = []*listenerv3.Listener{listener(true)}
	cp.set("v2", res)
	p.waitVersion(t, "v2")
	if got := silent(); got != "welcome\n" {
		t.Errorf("silent client, continue_on_listener_filters_timeout: got %q, want the default chain's upstream", got)
	}
}

// issueSecrets issues a certificate of ca for each server name, as the
// secret its terminating chain names.
func issueSecrets(t *testing.T, ca *testCA, names ...string) []*tlsv3.Secret {
	var out []*tlsv3.Secret
	for _, n := range names {
		certPEM, keyPEM := ca.issue(t, n)
		out = append(out, tlsSecret(secretName(n), certPEM, keyPEM))
	}
	return out
}

// stdoutAccessLog is the access_log the translator puts on tcp_proxy and HCM
// filters.
func stdoutAccessLog(t *testing.T) []*accesslogv3.AccessLog {
	return []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.stdout",
		ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &streamv3.StdoutAccessLog{})}}}
}

// accessLineOf waits for the TCP access log line of the connection the
// client made from local, and returns it.
func accessLineOf(t *testing.T, p *testProxy, local net.Addr) map[string]any {
	t.Helper()
	var line map[string]any
	waitFor(t, "the access log line of "+local.String(), func() bool {
		for _, rec := range p.logs.records("access") {
			if rec["proto"] == "tcp" && rec["downstream_remote_address"] == local.String() {
				line = rec
				return true
			}
		}
		return false
	})
	return line
}

// TestTCPProxyAccessLogAndMetrics: with access_log on its tcp_proxy, a
// chain writes a line per connection (passthrough or terminated TLS, made
// or refused, ended normally or idle), and every connection is counted by
// the Service port of its cluster (alt_stat_name): connections made, open
// now, bytes each way.
func TestTCPProxyAccessLogAndMetrics(t *testing.T) {
	t.Parallel()
	proxyCA, backendCA := newTestCA(t), newTestCA(t)
	be := startTLSEcho(t, backendCA.keyPair(t, "pass.example.com"))
	echo := startTCPEcho(t, "")
	cp := startControlPlane(t)
	withLog := func(tp *tcpproxyv3.TcpProxy) {
		tp.AccessLog = stdoutAccessLog(t)
		tp.StatPrefix = "tcp_" + strings.ReplaceAll(tp.GetCluster(), "/", "_")
	}
	port := func(name, alt string) *clusterv3.Cluster {
		c := edsCluster(name)
		c.AltStatName = alt
		return c
	}
	res := resources{
		listeners: []*listenerv3.Listener{tlsListenerWith(t, nil,
			passthroughChain(t, "pass.example.com", "team-a/pass/443", withLog),
			terminatingChain(t, "term.example.com", "team-a/echo/7", withLog),
			terminatingChain(t, "idle.example.com", "team-a/echo/7/0badcafe", withLog, func(tp *tcpproxyv3.TcpProxy) {
				tp.IdleTimeout = durationpb.New(200 * time.Millisecond)
			}),
			terminatingChain(t, "down.example.com", "team-a/down/7", withLog))},
		clusters: []*clusterv3.Cluster{port("team-a/pass/443", "team-a_pass_443"), port("team-a/echo/7", "team-a_echo_7"),
			port("team-a/echo/7/0badcafe", "team-a_echo_7"), port("team-a/down/7", "team-a_down_7")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("team-a/pass/443", be.addr()), assignment("team-a/echo/7", echo.addr()),
			assignment("team-a/echo/7/0badcafe", echo.addr()), assignment("team-a/down/7", testutil.RefusedAddr(t))},
	}
	res.secrets = issueSecrets(t, proxyCA, "term.example.com", "idle.example.com", "down.example.com")
	cp.set("v1", res)
	p := startProxyOn(t, cp, map[string]string{"ingress_https": "127.0.0.1:0"})
	p.waitVersion(t, "v1")
	addr := p.ListenerAddr("ingress_https")
	dial := func(sni string, roots *x509.CertPool) *tls.Conn {
		c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: sni, RootCAs: roots})
		if err != nil {
			t.Fatalf("%s: %v", sni, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	service := func(name string) map[string]string {
		return map[string]string{"service_namespace": "team-a", "service_name": name, "service_port": "7"}
	}
	if got := seriesOf(t, p, "portico_proxy_tcp_connections_total", "service_name", "echo"); len(got) != 0 {
		t.Fatalf("TCP series before any connection: %v", got)
	}

	// Passthrough: the client's TLS session is with the backend.
	pass := dial("pass.example.com", backendCA.pool)
	if got := tlsExchange(t, pass, "hello"); got != "echo:hello" {
		t.Fatalf("passthrough answer %q", got)
	}
	line := accessLineOf(t, p, pass.LocalAddr())
	for k, want := range map[string]any{"listener": "ingress_https", "server_name": "pass.example.com", "tls": "passthrough",
		"stat_prefix": "tcp_team-a_pass_443", "upstream_cluster": "team-a/pass/443", "upstream_service": "team-a/pass/443",
		"upstream_host": be.addr(), "termination": "downstream_closed"} {
		if line[k] != want {
			t.Errorf("passthrough line: %s = %v, want %v (line %v)", k, line[k], want, line)
		}
	}
	// The TLS records both ways are more than the plaintext.
	received, sent := line["bytes_received"].(float64), line["bytes_sent"].(float64)
	if received <= float64(len("hello")) || sent <= float64(len("echo:hello")) {
		t.Errorf("passthrough line: %v bytes received, %v sent, want the TLS records", received, sent)
	}
	if _, err := time.Parse(time.RFC3339Nano, line["start_time"].(string)); err != nil {
		t.Errorf("start_time %v: %v", line["start_time"], err)
	}
	passPort := map[string]string{"service_name": "pass", "service_port": "443"}
	waitMetric(t, p, "portico_proxy_tcp_connections_total", passPort, 1)
	waitMetric(t, p, "portico_proxy_tcp_sent_bytes_total", passPort, received)
	waitMetric(t, p, "portico_proxy_tcp_received_bytes_total", passPort, sent)
	waitMetric(t, p, "portico_proxy_tcp_active_connections", passPort, 0)

	// Terminated TLS: plaintext counted; a connection open now is active.
	term := dial("term.example.com", proxyCA.pool)
	_ = term.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := term.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, p, "portico_proxy_tcp_active_connections", service("echo"), 1)
	waitMetric(t, p, "portico_proxy_tcp_sent_bytes_total", service("echo"), 4) // counted as they go
	if err := term.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(term); string(got) != "echo:ping" {
		t.Fatalf("terminated answer %q", got)
	}
	line = accessLineOf(t, p, term.LocalAddr())
	for k, want := range map[string]any{"server_name": "term.example.com", "tls": "terminated", "upstream_service": "team-a/echo/7",
		"bytes_received": float64(4), "bytes_sent": float64(len("echo:ping")), "termination": "downstream_closed"} {
		if line[k] != want {
			t.Errorf("terminated line: %s = %v, want %v (line %v)", k, line[k], want, line)
		}
	}
	waitMetric(t, p, "portico_proxy_tcp_active_connections", service("echo"), 0)

	// A cluster of the same Service port with its own policy (here: the
	// idle timeout) counts in the same series; the idle connection's line
	// says how it ended.
	idle := dial("idle.example.com", proxyCA.pool)
	_ = idle.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err == nil {
		t.Fatal("the idle connection was not closed")
	}
	line = accessLineOf(t, p, idle.LocalAddr())
	if line["termination"] != "idle_timeout" || line["upstream_cluster"] != "team-a/echo/7/0badcafe" || line["upstream_service"] != "team-a/echo/7" {
		t.Errorf("idle line: %v", line)
	}
	waitMetric(t, p, "portico_proxy_tcp_connections_total", service("echo"), 2)
	waitMetric(t, p, "portico_proxy_tcp_active_connections", service("echo"), 0)

	// No upstream connection: a line saying so, a connect failure, and no
	// connection counted.
	down := dial("down.example.com", proxyCA.pool)
	_ = down.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.ReadAll(down)
	line = accessLineOf(t, p, down.LocalAddr())
	if line["termination"] != "upstream_connect_failure" || line["upstream_error"] == nil || line["upstream_service"] != "team-a/down/7" {
		t.Errorf("refused line: %v", line)
	}
	waitMetric(t, p, "portico_proxy_upstream_connect_failures_total", service("down"), 1)
	if got := seriesOf(t, p, "portico_proxy_tcp_connections_total", "service_name", "down"); len(got) != 0 {
		t.Errorf("a connection that was never made was counted: %v", got)
	}

	// A failed handshake of a terminating chain is a line too.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	bad := tls.Client(raw, &tls.Config{ServerName: "term.example.com", RootCAs: backendCA.pool})
	if err := bad.Handshake(); err == nil {
		t.Fatal("handshake with an untrusted certificate succeeded")
	}
	raw.Close()
	line = accessLineOf(t, p, raw.LocalAddr())
	if line["termination"] != "tls_handshake_failure" || line["downstream_error"] == nil {
		t.Errorf("handshake failure line: %v", line)
	}

	// Without access_log on the tcp_proxy, no line.
	res.listeners = []*listenerv3.Listener{tlsListenerWith(t, nil, terminatingChain(t, "term.example.com", "team-a/echo/7"))}
	cp.set("v2", res)
	p.waitVersion(t, "v2")
	quiet := dial("term.example.com", proxyCA.pool)
	if got := tlsExchange(t, quiet, "x"); got != "echo:x" {
		t.Fatalf("answer %q", got)
	}
	waitMetric(t, p, "portico_proxy_tcp_connections_total", service("echo"), 3)
	for _, rec := range p.logs.records("access") {
		if rec["downstream_remote_address"] == quiet.LocalAddr().String() {
			t.Errorf("a chain without access_log wrote a line: %v", rec)
		}
	}
}

// TestTCPProxyDrainedConnectionIsLogged: a connection still open when its
// listener leaves the configuration is closed when the drain time runs out,
// and its access log line says so.
func TestTCPProxyDrainedConnectionIsLogged(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	echo := startTCPEcho(t, "")
	web := startBackend(t, "web")
	cp := startControlPlane(t)
	certPEM, keyPEM := ca.issue(t, "term.example.com")
	res := resources{
		listeners: []*listenerv3.Listener{httpListener(t), tlsListenerWith(t, nil, terminatingChain(t, "term.example.com", "echo", func(tp *tcpproxyv3.TcpProxy) {
			tp.AccessLog = stdoutAccessLog(t)
		}))},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("web", prefixMatch("/"))))},
		clusters:  []*clusterv3.Cluster{edsCluster("echo"), edsCluster("web")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("echo", echo.addr()), assignment("web", web.addr())},
		secrets:   []*tlsv3.Secret{tlsSecret(secretName("term.example.com"), certPEM, keyPEM)},
	}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	conn, err := tls.Dial("tcp", p.ListenerAddr("ingress_https"), &tls.Config{ServerName: "term.example.com", RootCAs: ca.pool})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("still talking")); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, p, "portico_proxy_tcp_active_connections", map[string]string{"service_name": "echo"}, 1)
	res.listeners = res.listeners[:1]
	cp.set("v2", res)
	p.waitVersion(t, "v2")
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(conn); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the drain did not close the connection within 30s")
		}
	}
	if line := accessLineOf(t, p, conn.LocalAddr()); line["termination"] != "drained" {
		t.Errorf("termination %v, want drained (line %v)", line["termination"], line)
	}
	waitMetric(t, p, "portico_proxy_tcp_active_connections", map[string]string{"service_name": "echo"}, 0)
}
