package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/portico-dev/portico/internal/testutil"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// threeBackends starts backends A, B and C with EDS clusters of the same names.
func threeBackends(t *testing.T) (res resources, backends map[string]*backend) {
	backends = map[string]*backend{}
	for _, n := range []string{"A", "B", "C"} {
		b := startBackend(t, n)
		backends[n] = b
		res.clusters = append(res.clusters, edsCluster(n))
		res.endpoints = append(res.endpoints, assignment(n, b.addr()))
	}
	return res, backends
}

func TestRouting(t *testing.T) {
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	ci := prefixMatch("/CI")
	ci.CaseSensitive = wrapperspb.Bool(false)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http",
		vhost("exact.example.com",
			toCluster("B", exactMatch("/exact")),
			toCluster("C", prefixMatch("/prefix")),
			toCluster("B", separatedMatch("/sep")),
			toCluster("C", regexMatch("/re/[0-9]+")),
			toCluster("B", ci),
			toCluster("C", withHeaders(prefixMatch("/hdr"), headerString("x-env", &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "canary"},
			}))),
			toCluster("B", prefixMatch("/order")),
			toCluster("C", prefixMatch("/order/deeper")), // shadowed: first match wins
			toCluster("A", prefixMatch("/")),
		),
		wildcardVhost("*.wild.example.com", toCluster("B", prefixMatch("/"))),
		vhost("*", toCluster("C", prefixMatch("/"))),
	)}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()

	tests := []struct {
		name    string
		host    string
		path    string
		headers map[string]string
		want    string // backend, or "404"
	}{
		{"exact path", "exact.example.com", "/exact", nil, "B"},
		{"host case and port ignored", "EXACT.Example.COM:8080", "/exact", nil, "B"},
		{"exact path is not a prefix", "exact.example.com", "/exact/", nil, "A"},
		{"query excluded from path", "exact.example.com", "/exact?x=1", nil, "B"},
		{"string prefix", "exact.example.com", "/prefixed", nil, "C"},
		{"separated prefix equal", "exact.example.com", "/sep", nil, "B"},
		{"separated prefix element", "exact.example.com", "/sep/x", nil, "B"},
		{"separated prefix not string prefix", "exact.example.com", "/separate", nil, "A"},
		{"regex full match", "exact.example.com", "/re/123", nil, "C"},
		{"regex partial is no match", "exact.example.com", "/re/12a", nil, "A"},
		{"regex anchored at start", "exact.example.com", "/x/re/1", nil, "A"},
		{"case-insensitive prefix", "exact.example.com", "/ci/x", nil, "B"},
		{"case-insensitive prefix upper", "exact.example.com", "/Ci", nil, "B"},
		{"header match", "exact.example.com", "/hdr", map[string]string{"X-Env": "canary"}, "C"},
		{"header mismatch", "exact.example.com", "/hdr", map[string]string{"X-Env": "prod"}, "A"},
		{"header absent", "exact.example.com", "/hdr", nil, "A"},
		{"first match wins", "exact.example.com", "/order/deeper", nil, "B"},
		{"dot segments removed", "exact.example.com", "/a/../exact", nil, "B"},
		{"wildcard one label", "a.wild.example.com", "/", nil, "B"},
		{"wildcard two labels: vhost matches, :authority regex does not", "a.b.wild.example.com", "/", nil, "404"},
		{"wildcard needs a label", "wild.example.com", "/", nil, "C"},
		{"catch-all", "other.example.com", "/", nil, "C"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := get(t, c, p.httpURL(t, tc.path), tc.host, tc.headers)
			got := r.Backend
			if r.Status != http.StatusOK {
				got = fmt.Sprint(r.Status)
			}
			if got != tc.want {
				t.Errorf("%s%s: got %s, want %s", tc.host, tc.path, got, tc.want)
			}
		})
	}
	// The backend receives the normalized path.
	if r := get(t, c, p.httpURL(t, "/x/./y/../exact/?q=1"), "exact.example.com", nil); r.Path != "/x/exact/?q=1" {
		t.Errorf("upstream path = %q, want /x/exact/?q=1", r.Path)
	}
}

func TestStatusCodesAndActions(t *testing.T) {
	cp := startControlPlane(t)
	res, backends := threeBackends(t)
	slowConnect := edsCluster("slow-connect")
	slowConnect.ConnectTimeout = durationpb.New(time.Nanosecond) // expires before the dial completes
	res.clusters = append(res.clusters, edsCluster("empty"), edsCluster("refused"), edsCluster("garbage"), edsCluster("reset"), slowConnect)
	res.endpoints = append(res.endpoints, assignment("empty"), assignment("refused", testutil.RefusedAddr(t)),
		assignment("garbage", rawBackend(t, "HELLO\r\n\r\n")), assignment("reset", rawBackend(t, "")),
		assignment("slow-connect", backends["A"].addr()))
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http",
		vhost("status.example.com",
			toCluster("empty", prefixMatch("/empty")),
			toCluster("refused", prefixMatch("/refused")),
			toCluster("garbage", prefixMatch("/garbage")),
			toCluster("reset", prefixMatch("/reset")),
			toCluster("slow-connect", prefixMatch("/connect-timeout")),
			withAction(toCluster("A", prefixMatch("/slow")), func(a *routev3.RouteAction) {
				a.Timeout = durationpb.New(100 * time.Millisecond)
			}),
			withAction(toCluster("A", prefixMatch("/untimed")), func(a *routev3.RouteAction) {
				a.Timeout = durationpb.New(0)
			}),
			withAction(toCluster("A", prefixMatch("/api")), func(a *routev3.RouteAction) { a.PrefixRewrite = "/v2" }),
			&routev3.Route{Match: prefixMatch("/secure"), Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{
				SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true},
			}}},
			&routev3.Route{Match: prefixMatch("/moved"), Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{
				HostRedirect:         "new.example.com",
				PathRewriteSpecifier: &routev3.RedirectAction_PathRedirect{PathRedirect: "/landing"},
				ResponseCode:         routev3.RedirectAction_FOUND,
			}}},
			&routev3.Route{Match: exactMatch("/teapot"), Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
				Status: 418,
			}}},
		),
	)}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()

	tests := []struct {
		name         string
		host, path   string
		headers      map[string]string
		wantStatus   int
		wantBody     string // substring
		wantLocation string
		wantPath     string // upstream path
	}{
		{name: "unknown host", host: "nope.example.com", path: "/", wantStatus: 404},
		{name: "no route", host: "status.example.com", path: "/nothing", wantStatus: 404},
		{name: "no endpoints", host: "status.example.com", path: "/empty", wantStatus: 503, wantBody: "no healthy upstream"},
		{name: "connection refused", host: "status.example.com", path: "/refused", wantStatus: 502},
		{name: "malformed response", host: "status.example.com", path: "/garbage", wantStatus: 502},
		{name: "connection reset", host: "status.example.com", path: "/reset", wantStatus: 502},
		{name: "connect timeout", host: "status.example.com", path: "/connect-timeout", wantStatus: 502, wantBody: "connection timeout"},
		{name: "upgrade not configured", host: "status.example.com", path: "/api", wantStatus: 403,
			headers: map[string]string{"Connection": "Upgrade", "Upgrade": "websocket"}},
		{name: "h2c upgrade offer ignored", host: "status.example.com", path: "/api", wantStatus: 200, wantPath: "/v2",
			headers: map[string]string{"Connection": "Upgrade, HTTP2-Settings", "Upgrade": "h2c", "HTTP2-Settings": "AAMAAABkAARAAAAAAAIAAAAA"}},
		{name: "route timeout", host: "status.example.com", path: "/slow?sleep=3s", wantStatus: 504},
		{name: "within timeout", host: "status.example.com", path: "/slow?sleep=1ms", wantStatus: 200},
		{name: "timeout 0 disables it", host: "status.example.com", path: "/untimed?sleep=150ms", wantStatus: 200},
		{name: "prefix rewrite", host: "status.example.com", path: "/api/users?x=1", wantStatus: 200, wantPath: "/v2/users?x=1"},
		{name: "https redirect", host: "status.example.com:8080", path: "/secure/a?b=c", wantStatus: 301,
			wantLocation: "https://status.example.com/secure/a?b=c"},
		{name: "host and path redirect", host: "status.example.com", path: "/moved?q=1", wantStatus: 302,
			wantLocation: "http://new.example.com/landing?q=1"},
		{name: "direct response", host: "status.example.com", path: "/teapot", wantStatus: 418},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := get(t, c, p.httpURL(t, tc.path), tc.host, tc.headers)
			if r.Status != tc.wantStatus {
				t.Fatalf("status = %d, want %d (body %q)", r.Status, tc.wantStatus, r.Body)
			}
			if !strings.Contains(r.Body, tc.wantBody) {
				t.Errorf("body = %q, want it to contain %q", r.Body, tc.wantBody)
			}
			if got := r.Header.Get("Location"); got != tc.wantLocation {
				t.Errorf("Location = %q, want %q", got, tc.wantLocation)
			}
			if tc.wantPath != "" && r.Path != tc.wantPath {
				t.Errorf("upstream path = %q, want %q", r.Path, tc.wantPath)
			}
			if got := r.Header.Get("Server"); got != "portico" {
				t.Errorf("Server = %q, want portico (local replies too)", got)
			}
		})
	}
}

func TestLoadBalancing(t *testing.T) {
	cp := startControlPlane(t)
	a1, a2, b := startBackend(t, "a1"), startBackend(t, "a2"), startBackend(t, "b")
	res := resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		clusters:  []*clusterv3.Cluster{edsCluster("two"), edsCluster("one")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("two", a1.addr(), a2.addr()), assignment("one", b.addr())},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			toCluster("two", prefixMatch("/rr")),
			weighted(prefixMatch("/weighted"), map[string]uint32{"two": 80, "one": 20}),
		))},
	}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()

	t.Run("round robin", func(t *testing.T) {
		var seq []string
		for range 6 {
			seq = append(seq, get(t, c, p.httpURL(t, "/rr"), "x", nil).Backend)
		}
		for i := 2; i < len(seq); i++ {
			if seq[i] != seq[i-2] || seq[i] == seq[i-1] {
				t.Fatalf("not round robin: %v", seq)
			}
		}
	})
	t.Run("weighted clusters", func(t *testing.T) {
		const n = 400
		counts := map[string]int{}
		for range n {
			r := get(t, c, p.httpURL(t, "/weighted"), "x", nil)
			if r.Backend == "b" {
				counts["one"]++
			} else {
				counts["two"]++
			}
		}
		// 20% of 400 = 80; allow a generous ±40 (> 4 standard deviations).
		if counts["one"] < 40 || counts["one"] > 120 {
			t.Errorf("cluster one got %d of %d requests, want about 80", counts["one"], n)
		}
	})
	// Hostnames resolving to a routable address: TestEgressNameTurningToLoopback.
	t.Run("STRICT_DNS cluster resolves hostnames, never to loopback", func(t *testing.T) {
		_, port := splitHostPort(b.addr())
		res := res
		res.clusters = append(append([]*clusterv3.Cluster(nil), res.clusters...), dnsCluster("dns", fmt.Sprintf("localhost:%d", port)))
		res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("dns", prefixMatch("/"))))}
		cp.set("v2", res)
		p.waitVersion(t, "v2")
		wantRefused(t, get(t, c, p.httpURL(t, "/"), "x", nil), "localhost", "loopback")
	})
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestEdgeHeadersAndAccessLog(t *testing.T) {
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("A", prefixMatch("/"))))}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")

	r := get(t, noRedirectClient(), p.httpURL(t, "/hello?x=y"), "h.example.com", map[string]string{
		"X-Forwarded-For":         "203.0.113.7",
		"X-Forwarded-Proto":       "https",
		"X-Request-Id":            "client-supplied",
		"X-Forwarded-Client-Cert": "forged",
		"Connection":              "keep-alive, X-Hop",
		"X-Hop":                   "must not be forwarded",
	})
	up := r.Echo.Header
	got := map[string]string{
		"X-Forwarded-For":         up.Get("X-Forwarded-For"),
		"X-Forwarded-Proto":       up.Get("X-Forwarded-Proto"),
		"X-Forwarded-Client-Cert": up.Get("X-Forwarded-Client-Cert"),
		"X-Hop":                   up.Get("X-Hop"),
		"Host":                    r.Echo.Host,
		"Server (response)":       r.Header.Get("Server"),
	}
	want := map[string]string{
		"X-Forwarded-For":         "203.0.113.7, 127.0.0.1",
		"X-Forwarded-Proto":       "http",
		"X-Forwarded-Client-Cert": "",
		"X-Hop":                   "",
		"Host":                    "h.example.com",
		"Server (response)":       "portico",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	id := up.Get("X-Request-Id")
	if !uuidV4.MatchString(id) {
		t.Errorf("upstream X-Request-Id = %q, want a generated UUIDv4", id)
	}
	if r.Header.Get("X-Request-Id") != id {
		t.Errorf("response X-Request-Id = %q, want the one sent upstream %q", r.Header.Get("X-Request-Id"), id)
	}

	var access map[string]any
	waitFor(t, "access log line", func() bool {
		recs := p.logs.records("access")
		if len(recs) == 0 {
			return false
		}
		access = recs[len(recs)-1]
		return true
	})
	for k, v := range map[string]any{
		"method": "GET", "authority": "h.example.com", "path": "/hello?x=y", "proto": "HTTP/1.1",
		"status": float64(200), "upstream_cluster": "A", "request_id": id, "vhost": "*", "route": "to-A",
		"listener": "ingress_http",
	} {
		if access[k] != v {
			t.Errorf("access log %s = %v, want %v", k, access[k], v)
		}
	}
	for _, k := range []string{"duration_ms", "bytes", "upstream_host"} {
		if _, ok := access[k]; !ok {
			t.Errorf("access log lacks %s: %v", k, access)
		}
	}

	mfs, err := p.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"portico_proxy_requests_total", "portico_proxy_request_duration_seconds", "portico_proxy_xds_updates_total"} {
		if !names[n] {
			t.Errorf("metric %s not registered (have %v)", n, names)
		}
	}
}

func TestH2C(t *testing.T) {
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("B", prefixMatch("/"))))}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")

	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	r := get(t, &http.Client{Transport: tr, Timeout: 10 * time.Second}, p.httpURL(t, "/h2c"), "x", nil)
	if r.Proto != "HTTP/2.0" || r.Backend != "B" || r.Echo.Header.Get("X-Forwarded-Proto") != "http" {
		t.Errorf("got proto %s backend %q XFP %q, want HTTP/2.0 from B with XFP http", r.Proto, r.Backend, r.Echo.Header.Get("X-Forwarded-Proto"))
	}
}

func TestTLSBySNI(t *testing.T) {
	cp := startControlPlane(t)
	ca := newTestCA(t)
	res, _ := threeBackends(t)
	names := []string{"a.example.com", "b.example.com", "*.wild.example.com"}
	res.listeners = []*listenerv3.Listener{httpListener(t), httpsListener(t, names...)}
	res.routes = []*routev3.RouteConfiguration{
		routeConfig("ingress_http", vhost("*", toCluster("C", prefixMatch("/")))),
		routeConfig("https/a.example.com", vhost("a.example.com", toCluster("A", prefixMatch("/")))),
		routeConfig("https/b.example.com", vhost("b.example.com", toCluster("B", prefixMatch("/")))),
		routeConfig("https/*.wild.example.com", wildcardVhost("*.wild.example.com", toCluster("C", prefixMatch("/")))),
	}
	for _, n := range names {
		certPEM, keyPEM := ca.issue(t, n)
		res.secrets = append(res.secrets, tlsSecret(secretName(n), certPEM, keyPEM))
	}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := tlsClient(p.ListenerAddr("ingress_https"), ca.pool)

	tests := []struct {
		url, host   string
		wantBackend string
		wantStatus  int
	}{
		{url: "https://a.example.com/x", wantBackend: "A", wantStatus: 200},
		{url: "https://b.example.com/x", wantBackend: "B", wantStatus: 200},
		{url: "https://one.wild.example.com/x", wantBackend: "C", wantStatus: 200},
		// SNI a.example.com can only reach a.example.com's routes.
		{url: "https://a.example.com/x", host: "b.example.com", wantStatus: 404},
	}
	for _, tc := range tests {
		t.Run(tc.url+" host "+tc.host, func(t *testing.T) {
			r := get(t, c, tc.url, tc.host, nil)
			if r.Status != tc.wantStatus || r.Backend != tc.wantBackend {
				t.Fatalf("got %d from %q, want %d from %q", r.Status, r.Backend, tc.wantStatus, tc.wantBackend)
			}
			if r.Proto != "HTTP/2.0" {
				t.Errorf("proto = %s, want HTTP/2.0 through ALPN", r.Proto)
			}
			if tc.wantStatus == 200 && r.Echo.Header.Get("X-Forwarded-Proto") != "https" {
				t.Errorf("X-Forwarded-Proto = %q, want https", r.Echo.Header.Get("X-Forwarded-Proto"))
			}
		})
	}

	t.Run("certificate per SNI", func(t *testing.T) {
		for _, sni := range []string{"a.example.com", "b.example.com", "x.wild.example.com"} {
			conn, err := tls.Dial("tcp", p.ListenerAddr("ingress_https"), &tls.Config{ServerName: sni, RootCAs: ca.pool, NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatalf("%s: %v", sni, err)
			}
			st := conn.ConnectionState()
			conn.Close()
			if err := st.PeerCertificates[0].VerifyHostname(sni); err != nil {
				t.Errorf("SNI %s got certificate for %v", sni, st.PeerCertificates[0].DNSNames)
			}
			if st.NegotiatedProtocol != "http/1.1" {
				t.Errorf("ALPN = %q, want http/1.1 when the client offers only that", st.NegotiatedProtocol)
			}
		}
	})
	t.Run("unknown SNI fails the handshake", func(t *testing.T) {
		for _, sni := range []string{"c.example.com", ""} {
			conn, err := tls.Dial("tcp", p.ListenerAddr("ingress_https"), &tls.Config{ServerName: sni, InsecureSkipVerify: true})
			if err == nil {
				conn.Close()
				t.Errorf("handshake with SNI %q succeeded", sni)
			}
		}
	})
}

// TestConfigSwapUnderLoad pushes 20 snapshots while 200 requests are in
// flight at any time; every request must succeed.
func TestConfigSwapUnderLoad(t *testing.T) {
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	build := func(i int) resources {
		r := res
		r.listeners = []*listenerv3.Listener{httpListener(t)}
		target := []string{"A", "B"}[i%2]
		r.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			toCluster(target, prefixMatch("/")),
		))}
		return r
	}
	cp.set("v0", build(0))
	p := startProxy(t, cp)
	p.waitVersion(t, "v0")
	addr := p.ListenerAddr("ingress_http")

	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
	var (
		stop      atomic.Bool
		wg        sync.WaitGroup
		ok, fails atomic.Int64
		firstErr  atomic.Value
	)
	const workers = 200
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				resp, err := c.Get("http://" + addr + "/load?sleep=20ms")
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					fails.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				ok.Add(1)
			}
		}()
	}
	for i := 1; i <= 20; i++ {
		time.Sleep(25 * time.Millisecond)
		cp.set(fmt.Sprintf("v%d", i), build(i))
	}
	p.waitVersion(t, "v20")
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	wg.Wait()

	if fails.Load() != 0 {
		t.Errorf("%d of %d requests failed during swaps; first: %v", fails.Load(), fails.Load()+ok.Load(), firstErr.Load())
	}
	if ok.Load() < workers {
		t.Errorf("only %d requests completed", ok.Load())
	}
	if got := p.ListenerAddr("ingress_http"); got != addr {
		t.Errorf("listener rebound across swaps: %s -> %s", addr, got)
	}
	if r := get(t, c, "http://"+addr+"/", "x", nil); r.Backend != "A" {
		t.Errorf("after v20 got backend %q, want A", r.Backend)
	}
}

func TestNACKKeepsPreviousConfig(t *testing.T) {
	base := func(t *testing.T) resources {
		res, _ := threeBackends(t)
		res.listeners = []*listenerv3.Listener{httpListener(t)}
		res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("A", prefixMatch("/"))))}
		return res
	}
	tests := []struct {
		name     string
		typeURL  string
		mutate   func(t *testing.T, r *resources)
		wantText string
	}{
		{
			name:    "unknown http filter",
			typeURL: resourcev3.ListenerType,
			mutate: func(t *testing.T, r *resources) {
				l := httpListener(t)
				h := hcmFilter(t, "ingress_http")
				var hcm hcmv3.HttpConnectionManager
				if err := h.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
					t.Fatal(err)
				}
				hcm.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "envoy.filters.http.cors"}}, hcm.HttpFilters...)
				h.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, &hcm)}
				l.FilterChains[0].Filters = []*listenerv3.Filter{h}
				r.listeners = []*listenerv3.Listener{l}
			},
			wantText: `Listener "ingress_http"`,
		},
		{
			name:    "unknown path specifier",
			typeURL: resourcev3.RouteType,
			mutate: func(t *testing.T, r *resources) {
				r.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
					toCluster("A", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_ConnectMatcher_{ConnectMatcher: &routev3.RouteMatch_ConnectMatcher{}}}),
				))}
			},
			wantText: "path specifier",
		},
		{
			name:    "unsupported cluster type",
			typeURL: resourcev3.ClusterType,
			mutate: func(t *testing.T, r *resources) {
				bad := edsCluster("A")
				bad.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST}
				bad.EdsClusterConfig = nil
				bad.LbPolicy = clusterv3.Cluster_CLUSTER_PROVIDED
				r.clusters = []*clusterv3.Cluster{bad}
			},
			wantText: `Cluster "A"`,
		},
		{
			name:    "invalid certificate",
			typeURL: resourcev3.SecretType,
			mutate: func(t *testing.T, r *resources) {
				r.secrets = append(r.secrets, tlsSecret("default/broken", []byte("not a cert"), []byte("not a key")))
			},
			wantText: `Secret "default/broken": invalid key pair`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cp := startControlPlane(t)
			good := base(t)
			cp.set("v1", good)
			p := startProxy(t, cp)
			p.waitVersion(t, "v1")
			// Wait for that type's v1 ACK (a type with no resources, such as Secret
			// here, may be answered after the configuration is applied), so that the
			// NACK below is of v2.
			waitFor(t, "the v1 ACK of "+tc.typeURL, func() bool { return cp.acked(tc.typeURL, "v1") })

			bad := good
			tc.mutate(t, &bad)
			cp.set("v2", bad)
			cp.expectNACK(t, tc.typeURL, "v2", tc.wantText)
			if r := get(t, noRedirectClient(), p.httpURL(t, "/"), "x", nil); r.Backend != "A" {
				t.Errorf("after NACK got %+v, want the previous config (backend A)", r)
			}
			if v := p.AppliedVersion(); v != "v1" {
				t.Errorf("AppliedVersion = %q, want v1", v)
			}
			// A delta server does not answer a NACK with the rejected response again:
			// it waits for a new version.
			time.Sleep(600 * time.Millisecond)
			count := 0
			for _, n := range cp.nacks() {
				if n.GetTypeUrl() == tc.typeURL {
					count++
				}
			}
			if count != 1 {
				t.Errorf("%d NACKs of one response, want 1", count)
			}

			fixed := good
			fixed.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("B", prefixMatch("/"))))}
			cp.set("v3", fixed)
			p.waitVersion(t, "v3")
			if r := get(t, noRedirectClient(), p.httpURL(t, "/"), "x", nil); r.Backend != "B" {
				t.Errorf("after the fix got %+v, want backend B", r)
			}
		})
	}
}

func TestReadiness(t *testing.T) {
	cp := startControlPlane(t)
	ca := newTestCA(t)
	res, _ := threeBackends(t)
	p := startProxy(t, cp)

	time.Sleep(100 * time.Millisecond)
	if p.Ready() || p.AppliedVersion() != "" {
		t.Fatal("ready before any configuration")
	}

	// Listeners whose route configuration and secret are missing.
	partial := res
	partial.listeners = []*listenerv3.Listener{httpListener(t), httpsListener(t, "a.example.com")}
	partial.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("A", prefixMatch("/"))))}
	cp.set("v1", partial)
	waitFor(t, "v1 delivered", func() bool { return strings.Contains(p.logs.String(), "keeping the previous configuration") })
	time.Sleep(100 * time.Millisecond)
	if p.Ready() || p.ListenerAddr("ingress_http") != "" {
		t.Fatal("ready (or listening) with an incomplete configuration")
	}

	// Route configuration present, secret still missing.
	partial.routes = append(partial.routes, routeConfig("https/a.example.com", vhost("a.example.com", toCluster("A", prefixMatch("/")))))
	cp.set("v2", partial)
	time.Sleep(200 * time.Millisecond)
	if p.Ready() {
		t.Fatal("ready without the referenced secret")
	}

	complete := partial
	certPEM, keyPEM := ca.issue(t, "a.example.com")
	complete.secrets = []*tlsv3.Secret{tlsSecret(secretName("a.example.com"), certPEM, keyPEM)}
	cp.set("v3", complete)
	p.waitVersion(t, "v3")
	if !p.Ready() {
		t.Fatal("not ready after a complete configuration")
	}
	if r := get(t, tlsClient(p.ListenerAddr("ingress_https"), ca.pool), "https://a.example.com/", "", nil); r.Backend != "A" {
		t.Errorf("https got %+v", r)
	}

	// Removing the HTTPS listener closes it; HTTP keeps serving.
	httpsAddr := p.ListenerAddr("ingress_https")
	only := complete
	only.listeners = []*listenerv3.Listener{httpListener(t)}
	cp.set("v4", only)
	p.waitVersion(t, "v4")
	if p.ListenerAddr("ingress_https") != "" {
		t.Error("removed listener still bound")
	}
	waitFor(t, "https socket closed", func() bool {
		conn, err := net.DialTimeout("tcp", httpsAddr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
}

func TestXDSServerGoesAwayAndComesBack(t *testing.T) {
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("A", prefixMatch("/"))))}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()

	cp.stop()
	waitFor(t, "stream loss noticed", func() bool { return strings.Contains(p.logs.String(), "reconnecting") })
	for range 5 {
		if r := get(t, c, p.httpURL(t, "/"), "x", nil); r.Backend != "A" {
			t.Fatalf("without xDS server got %+v, want backend A", r)
		}
	}

	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("C", prefixMatch("/"))))}
	cp.set("v2", res)
	cp.restart()
	p.waitVersion(t, "v2")
	if r := get(t, c, p.httpURL(t, "/"), "x", nil); r.Backend != "C" {
		t.Errorf("after reconnect got %+v, want backend C", r)
	}
}

func TestGracefulShutdownDrainsInFlight(t *testing.T) {
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("A", prefixMatch("/"))))}
	cp.set("v1", res)

	p := New(Config{XDSAddress: cp.addr, NodeID: testNode, ListenerAddrs: map[string]string{"ingress_http": "127.0.0.1:0"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitFor(t, "ready", p.Ready)
	url := "http://" + p.ListenerAddr("ingress_http") + "/?sleep=300ms"

	got := make(chan error, 1)
	go func() {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-got; err != nil {
		t.Errorf("in-flight request during shutdown: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(6 * time.Second):
		t.Fatal("Run did not return")
	}
	// Nothing answers any more.
	if resp, err := http.Get(url); err == nil {
		resp.Body.Close()
		t.Error("listener still serving after Run returned")
	}
}
