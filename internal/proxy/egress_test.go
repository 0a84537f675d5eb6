package proxy

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/portico-dev/portico/internal/proxy/accesslog"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"github.com/portico-dev/portico/internal/testutil"
)

const (
	refusedMetric = "portico_proxy_upstream_destinations_refused_total"
	refusedMsg    = "upstream connection refused: the destination is not allowed"
)

// unitDialer is an endpointDialer for tests without a proxy around it: no
// protected addresses, the system's resolver.
func unitDialer(cluster string, timeout time.Duration) upstream.EndpointDialer {
	log := slog.New(slog.DiscardHandler)
	return upstream.EndpointDialer{Guard: upstream.NewEgressGuard(nil, upstream.NewMetrics(nil, log).DestinationsRefused, log), Cluster: cluster, Timeout: timeout, Network: "tcp"}
}

// listenOn listens on addr, skipping the test where this host cannot (no IPv6).
func listenOn(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s here: %v", addr, err)
	}
	return ln
}

func portOf(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		panic(err)
	}
	return port
}

// egressRoutes routes /<name> to cluster ns/<name>/80 for each name.
func egressRoutes(names ...string) []*routev3.RouteConfiguration {
	var routes []*routev3.Route
	for _, n := range names {
		routes = append(routes, toCluster("ns/"+n+"/80", prefixMatch("/"+n)))
	}
	return []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", routes...))}
}

// wantRefused checks that a request was answered 502 by the proxy itself for
// reason, and reached no backend.
func wantRefused(t *testing.T, r result, what, reason string) {
	t.Helper()
	if r.Status != http.StatusBadGateway || r.Backend != "" || !strings.Contains(r.Body, "destination refused ("+reason+")") {
		t.Errorf("%s: %d from backend %q with body %q, want 502 'destination refused (%s)' from the proxy", what, r.Status, r.Backend, r.Body, reason)
	}
}

// waitRefusalLogged waits for the refusal log record of a cluster and address
// (the log is written in batches, after the response) and returns it.
func waitRefusalLogged(t *testing.T, p *testProxy, cluster, addr string) map[string]any {
	t.Helper()
	var rec map[string]any
	waitFor(t, "a refusal logged for "+cluster+" at "+addr, func() bool {
		rec = refusalLogged(p, cluster, addr)
		return rec != nil
	})
	return rec
}

// refusalLogged returns the refusal log record of a cluster and address, or nil.
func refusalLogged(p *testProxy, cluster, addr string) map[string]any {
	for _, rec := range p.logs.records(refusedMsg) {
		if rec["cluster"] == cluster && rec["address"] == addr {
			return rec
		}
	}
	return nil
}

// A name (an ExternalName Service's cluster) that resolves to a loopback,
// link-local or unspecified address, in any of their forms, is never connected
// to: the request gets 502, the proxy logs a WARN line naming the Service, the
// name and the address, and counts the refusal; the backend listening there
// never sees the request. Without the check, the secret backends answer.
func TestEgressRefusesNamesResolvingToThisHost(t *testing.T) {
	dns := testutil.StartDNS(t)
	secret := startBackend(t, "secret") // 127.0.0.1
	secret6 := startBackendOn(t, "secret6", listenOn(t, "[::1]:0"))
	p4, p6 := portOf(secret.addr()), portOf(secret6.addr())
	dns.Set("loop4.test", "127.0.0.1")
	dns.Set("loopnet.test", "127.9.8.7")
	dns.Set("loop6.test", "::1")
	dns.Set("mapped.test", "::ffff:127.0.0.1")
	dns.Set("zero.test", "0.0.0.0") // Linux connects it to 127.0.0.1
	dns.Set("linklocal4.test", "169.254.77.1")
	dns.Set("linklocal6.test", "fe80::1")
	cases := []struct {
		name, endpoint, address, reason string
	}{
		{"loop4", "loop4.test:" + p4, "127.0.0.1:" + p4, "loopback"},
		{"loopnet", "loopnet.test:" + p4, "127.9.8.7:" + p4, "loopback"},
		{"loop6", "loop6.test:" + p6, "[::1]:" + p6, "loopback"},
		{"mapped", "mapped.test:" + p4, "127.0.0.1:" + p4, "loopback"}, // Go dials a mapped answer as IPv4
		{"zero", "zero.test:" + p4, "0.0.0.0:" + p4, "unspecified"},
		{"linklocal4", "linklocal4.test:9", "169.254.77.1:9", "link_local"}, // as the cloud metadata address
		{"linklocal6", "linklocal6.test:9", "[fe80::1]:9", "link_local"},
		// An ExternalName Service whose name is an IP literal is still a name's cluster.
		{"literal", "127.0.0.1:" + p4, "127.0.0.1:" + p4, "loopback"},
	}
	cp := startControlPlane(t)
	res := resources{listeners: []*listenerv3.Listener{httpListener(t)}}
	var names []string
	for _, c := range cases {
		names = append(names, c.name)
		res.clusters = append(res.clusters, dnsCluster("ns/"+c.name+"/80", c.endpoint))
	}
	res.routes = egressRoutes(names...)
	cp.set("v1", res)
	p := startProxyConfig(t, cp, map[string]string{"ingress_http": "127.0.0.1:0"}, nil, accesslog.Queue,
		func(c *Config) { c.Resolver = dns.Resolver() })
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	for _, tc := range cases {
		wantRefused(t, get(t, c, p.httpURL(t, "/"+tc.name), "x", nil), tc.name, tc.reason)
	}
	for _, tc := range cases {
		rec := waitRefusalLogged(t, p, "ns/"+tc.name+"/80", tc.address)
		switch {
		case rec["level"] != "WARN" || rec["service"] != "ns/"+tc.name || rec["endpoint"] != tc.endpoint || !strings.Contains(fmt.Sprint(rec["reason"]), strings.ReplaceAll(tc.reason, "_", "-")):
			t.Errorf("%s: logged %v, want WARN naming service ns/%s, endpoint %s and the reason (%s)", tc.name, rec, tc.name, tc.endpoint, tc.reason)
		}
	}
	for reason, n := range map[string]float64{"loopback": 5, "unspecified": 1, "link_local": 2} {
		if v, _ := metricValue(t, p, refusedMetric, map[string]string{"reason": reason}); v < n {
			t.Errorf("%s{reason=%q} = %v, want at least %v", refusedMetric, reason, v, n)
		}
	}
	if v, _ := metricValue(t, p, "portico_proxy_upstream_connect_failures_total", map[string]string{"service_name": "ns/loop4/80"}); v != 1 {
		t.Errorf("connect failures of ns/loop4/80: %v, want 1", v)
	}
}

// A name that answers a working backend first and this host's loopback later
// (DNS rebinding): the first request is answered, every request after the
// change that needs a new connection is refused, and the backend on loopback
// is never reached. The answer coming back makes the route work again.
func TestEgressNameTurningToLoopback(t *testing.T) {
	ip := testutil.NonLoopbackIP(t)
	dns := testutil.StartDNS(t)
	goodLn, secretLn := testutil.ListenPair(t, ip, "127.0.0.1")
	good := startBackendOn(t, "good", goodLn)
	startBackendOn(t, "secret", secretLn)
	port := portOf(good.addr())
	dns.Set("flip.test", ip)
	cp := startControlPlane(t)
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes:    egressRoutes("flip"),
		clusters:  []*clusterv3.Cluster{dnsCluster("ns/flip/80", "flip.test:"+port)},
	})
	p := startProxyConfig(t, cp, map[string]string{"ingress_http": "127.0.0.1:0"}, nil, accesslog.Queue,
		func(c *Config) { c.Resolver = dns.Resolver() })
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	if r := get(t, c, p.httpURL(t, "/flip"), "x", nil); r.Status != 200 || r.Backend != "good" {
		t.Fatalf("before the change: %d from %q, want 200 from good", r.Status, r.Backend)
	}
	dns.Set("flip.test", "127.0.0.1")
	// The backend ends its connections, as servers do: the next requests connect again.
	good.srv.CloseClientConnections()
	for i := range 5 {
		wantRefused(t, get(t, c, p.httpURL(t, "/flip"), "x", nil), fmt.Sprintf("request %d after the change", i+2), "loopback")
	}
	waitRefusalLogged(t, p, "ns/flip/80", "127.0.0.1:"+port)
	dns.Set("flip.test", ip)
	waitFor(t, "the route to work again", func() bool {
		r := get(t, c, p.httpURL(t, "/flip"), "x", nil)
		return r.Status == 200 && r.Backend == "good"
	})
}

// No endpoint, IP literals of EDS clusters included, reaches the proxy's own
// listeners or Config.ProtectedAddrs, in whichever form: the exact address,
// IPv4-mapped, 0.0.0.0, and for a server bound on 0.0.0.0 any address of this
// host. Other loopback endpoints are the operator's choice and work.
func TestEgressProtectsOwnAddresses(t *testing.T) {
	admin := startBackend(t, "admin")                           // bound on 127.0.0.1
	wild := startBackendOn(t, "wild", listenOn(t, "0.0.0.0:0")) // bound on every address
	dev := startBackend(t, "dev")                               // a local development server
	ap, wp := portOf(admin.addr()), portOf(wild.addr())
	cp := startControlPlane(t)
	cases := []struct{ name, endpoint string }{
		{"admin", admin.addr()},
		{"admin-mapped", "[::ffff:127.0.0.1]:" + ap},
		{"admin-zero", "0.0.0.0:" + ap},
		{"wild-loopback", "127.0.0.1:" + wp},
		{"wild-loopnet", "127.3.2.1:" + wp},
		{"xds", cp.addr}, // the xDS server: protected without being listed
	}
	if ip := nonLoopbackIPOrEmpty(); ip != "" {
		cases = append(cases, struct{ name, endpoint string }{"wild-interface", net.JoinHostPort(ip, wp)})
	}
	res := resources{listeners: []*listenerv3.Listener{httpListener(t)}}
	names := []string{"dev"}
	res.clusters = append(res.clusters, edsCluster("ns/dev/80"))
	res.endpoints = append(res.endpoints, assignment("ns/dev/80", dev.addr()))
	for _, c := range cases {
		names = append(names, c.name)
		res.clusters = append(res.clusters, edsCluster("ns/"+c.name+"/80"))
		res.endpoints = append(res.endpoints, assignment("ns/"+c.name+"/80", c.endpoint))
	}
	res.routes = egressRoutes(names...)
	cp.set("v1", res)
	p := startProxyConfig(t, cp, map[string]string{"ingress_http": "127.0.0.1:0"}, nil, accesslog.Queue,
		func(c *Config) {
			c.ProtectedAddrs = func() []string { return []string{admin.addr(), "0.0.0.0:" + wp} }
		})
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	if r := get(t, c, p.httpURL(t, "/dev"), "x", nil); r.Status != 200 || r.Backend != "dev" {
		t.Errorf("a loopback endpoint that is not Portico's: %d from %q, want 200 from dev", r.Status, r.Backend)
	}
	for _, tc := range cases {
		wantRefused(t, get(t, c, p.httpURL(t, "/"+tc.name), "x", nil), tc.name+" ("+tc.endpoint+")", "own_address")
	}

	// The proxy's own listener, known once bound.
	self := p.ListenerAddr("ingress_http")
	res.clusters = append(res.clusters, edsCluster("ns/self/80"))
	res.endpoints = append(res.endpoints, assignment("ns/self/80", self))
	res.routes = egressRoutes(append(names, "self")...)
	cp.set("v2", res)
	p.waitVersion(t, "v2")
	wantRefused(t, get(t, c, p.httpURL(t, "/self"), "x", nil), "the proxy's own listener "+self, "own_address")
	if rec := waitRefusalLogged(t, p, "ns/self/80", self); rec["service"] != "ns/self" {
		t.Errorf("refusal of the proxy's own listener logged as %v, want a line naming service ns/self", rec)
	}
	if v, _ := metricValue(t, p, refusedMetric, map[string]string{"reason": "own_address"}); v != float64(len(cases)+1) {
		t.Errorf("%s{reason=own_address} = %v, want %d", refusedMetric, v, len(cases)+1)
	}
}

func nonLoopbackIPOrEmpty() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// TCP proxying (TLS passthrough to an ExternalName Service) follows the same
// rules: the connection to a name resolving to loopback is not made.
func TestEgressTCPProxyRefusesLoopbackName(t *testing.T) {
	dns := testutil.StartDNS(t)
	secret := startTCPEcho(t, "secret greeting")
	dns.Set("pass.test", "127.0.0.1")
	cp := startControlPlane(t)
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{tlsListenerWith(t, nil, passthroughChain(t, "pass.example.com", "ns/pass/443"))},
		clusters:  []*clusterv3.Cluster{dnsCluster("ns/pass/443", "pass.test:"+portOf(secret.addr()))},
	})
	p := startProxyConfig(t, cp, map[string]string{"ingress_https": "127.0.0.1:0"}, nil, accesslog.Queue,
		func(c *Config) { c.Resolver = dns.Resolver() })
	p.waitVersion(t, "v1")
	conn, err := net.Dial("tcp", p.ListenerAddr("ingress_https"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A ClientHello for the passthrough chain; whatever comes back must not be the backend's.
	go func() {
		c := tls.Client(conn, &tls.Config{ServerName: "pass.example.com", InsecureSkipVerify: true})
		_ = c.Handshake()
	}()
	waitRefusalLogged(t, p, "ns/pass/443", secret.addr())
	if n := secret.accepted.Load(); n != 0 {
		t.Errorf("the backend on loopback accepted %d connections, want none", n)
	}
}

// A destination refused under load is logged once per cluster and address per
// interval, not once per request; the metric counts every refusal.
func TestEgressRefusalLogIsRateLimited(t *testing.T) {
	dns := testutil.StartDNS(t)
	dns.Set("a.test", "127.0.0.1")
	dns.Set("b.test", "127.0.0.1")
	cp := startControlPlane(t)
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes:    egressRoutes("a", "b"),
		clusters:  []*clusterv3.Cluster{dnsCluster("ns/a/80", "a.test:9"), dnsCluster("ns/b/80", "b.test:9")},
	})
	p := startProxyConfig(t, cp, map[string]string{"ingress_http": "127.0.0.1:0"}, nil, accesslog.Queue,
		func(c *Config) { c.Resolver = dns.Resolver() })
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	const n = 50
	start := time.Now()
	for range n {
		wantRefused(t, get(t, c, p.httpURL(t, "/a"), "x", nil), "a", "loopback")
	}
	wantRefused(t, get(t, c, p.httpURL(t, "/b"), "x", nil), "b", "loopback")
	elapsed := time.Since(start)
	// The lines are written in order: once b's is there, every line of a's is.
	waitRefusalLogged(t, p, "ns/b/80", "127.0.0.1:9")
	lines := map[string]int{}
	for _, rec := range p.logs.records(refusedMsg) {
		lines[fmt.Sprint(rec["cluster"])]++
	}
	// One line per interval begun: the requests' own pace never decides the outcome.
	if allowed := 1 + int(elapsed/upstream.RefusalLogEvery); lines["ns/a/80"] < 1 || lines["ns/a/80"] > allowed {
		t.Errorf("%d refusals of ns/a/80 in %s logged %d lines, want 1 to %d", n, elapsed, lines["ns/a/80"], allowed)
	}
	if lines["ns/b/80"] != 1 {
		t.Errorf("the refusal of another cluster logged %d lines, want its own 1", lines["ns/b/80"])
	}
	if v, _ := metricValue(t, p, refusedMetric, map[string]string{"reason": "loopback"}); v != n+1 {
		t.Errorf("%s{reason=loopback} = %v, want %d", refusedMetric, v, n+1)
	}
}

// check, on its own: which destinations each kind of endpoint may reach.

// serviceOfCluster reads the contract's cluster names.

// The check costs a dial next to nothing: an EDS endpoint's literal address
// against a set with a wildcard-bound port and exact addresses.
