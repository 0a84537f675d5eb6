package proxy

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/portico-dev/portico/internal/proxy/hcm"
	"github.com/portico-dev/portico/internal/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// ---------------------------------------------------------------------------
// Request header limits (HCM max_request_headers_kb, max_headers_count).

// limitedListener is httpListener with explicit header limits (0: unset).
func limitedListener(t *testing.T, kb, count uint32) *listenerv3.Listener {
	l := httpListener(t)
	f := l.FilterChains[0].Filters[0]
	var h hcmv3.HttpConnectionManager
	if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
		t.Fatal(err)
	}
	if kb != 0 {
		h.MaxRequestHeadersKb = wrapperspb.UInt32(kb)
	}
	if count != 0 {
		h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxHeadersCount: wrapperspb.UInt32(count)}
	}
	f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, &h)}
	return l
}

// rawGet sends one HTTP/1.1 GET with exactly the given header lines (Host
// first, then headers) and returns the status.
func rawGet(t *testing.T, addr, host string, headers []string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var b strings.Builder
	b.WriteString("GET /limits HTTP/1.1\r\nHost: " + host + "\r\n")
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// numbered returns n header lines "X-H-<i>: v".
func numbered(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("X-H-%d: v", i)
	}
	return out
}

// sized returns one header line "X-Big: xxx..." whose name and value add up
// to n bytes.
func sized(n int) []string { return []string{"X-Big: " + strings.Repeat("x", n-len("X-Big"))} }

func h2cClient() *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols), DisableCompression: true}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// h2Get sends GET over h2c with the given extra headers (and no User-Agent
// or Accept-Encoding) and returns the status.
func h2Get(t *testing.T, url, host string, headers []string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	req.Header["User-Agent"] = []string{""} // not sent
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Add(name, value)
	}
	return do(t, h2cClient(), req).Status
}

func TestRequestHeaderLimits(t *testing.T) {
	t.Parallel()
	const kib = 1024
	// The headers of the requests below, besides the listed ones: Host (and
	// the request line, as :method, :path and :authority, about 40 bytes).
	for _, tc := range []struct {
		name      string
		kb, count uint32 // 0: unset, Envoy's defaults (60 KiB, 100 headers)
		// header sizes and counts that pass and that get 431
		sizeOK, sizeTooLarge, countOK, countTooMany int
	}{
		{"envoy defaults", 0, 0, 59 * kib, 61 * kib, 100, 101},
		{"explicit defaults", 60, 100, 59 * kib, 61 * kib, 100, 101},
		{"custom", 4, 10, 3 * kib, 5 * kib, 10, 11},
		{"above net/http's own 1 MiB", 2048, 100, 1500 * kib, 2049 * kib, 100, 101},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cp := startControlPlane(t)
			be := &scriptedBackend{}
			// The backend reads heads of any size the proxy forwards.
			be.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				be.hits.Add(1)
				_, _ = io.WriteString(w, "backend")
			}))
			be.srv.Config.MaxHeaderBytes = 8 << 20
			be.srv.Start()
			t.Cleanup(be.srv.Close)
			cp.set("v1", resources{
				listeners: []*listenerv3.Listener{limitedListener(t, tc.kb, tc.count)},
				routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("be", prefixMatch("/"))))},
				clusters:  []*clusterv3.Cluster{edsCluster("be")},
				endpoints: []*endpointv3.ClusterLoadAssignment{assignment("be", be.addr())},
			})
			p := startProxy(t, cp)
			p.waitVersion(t, "v1")
			addr := p.ListenerAddr("ingress_http")
			url := p.httpURL(t, "/limits")

			// Host counts as one header: Host plus count-1 others is count headers.
			for _, c := range []struct {
				what    string
				headers []string
				want    int
			}{
				{fmt.Sprintf("%d bytes of headers", tc.sizeOK), sized(tc.sizeOK), 200},
				{fmt.Sprintf("%d bytes of headers", tc.sizeTooLarge), sized(tc.sizeTooLarge), 431},
				{fmt.Sprintf("%d headers", tc.countOK), numbered(tc.countOK - 1), 200},
				{fmt.Sprintf("%d headers", tc.countTooMany), numbered(tc.countTooMany - 1), 431},
			} {
				before := be.hits.Load()
				if got := rawGet(t, addr, "limits.test", c.headers); got != c.want {
					t.Errorf("HTTP/1.1, %s: status %d, want %d", c.what, got, c.want)
				}
				if got := h2Get(t, url, "limits.test", c.headers); got != c.want {
					t.Errorf("HTTP/2, %s: status %d, want %d", c.what, got, c.want)
				}
				reached := be.hits.Load() - before
				if c.want == 431 && reached != 0 {
					t.Errorf("%s: the backend received %d refused requests", c.what, reached)
				}
				if c.want == 200 && reached != 2 {
					t.Errorf("%s: the backend received %d requests, want 2", c.what, reached)
				}
			}
			for reason, want := range map[string]float64{"size": 2, "count": 2} {
				if v, _ := metricValue(t, p, "portico_proxy_request_headers_refused_total", map[string]string{"reason": reason}); v != want {
					t.Errorf("portico_proxy_request_headers_refused_total{reason=%q} = %v, want %v", reason, v, want)
				}
			}
			var refused []map[string]any
			waitFor(t, "access log lines of the refused requests", func() bool {
				refused = nil
				for _, r := range p.logs.records("access") {
					if r["status"] == float64(431) {
						refused = append(refused, r)
					}
				}
				return len(refused) == 4
			})
			details := map[any]int{}
			for _, r := range refused {
				details[r["response_code_details"]]++
				if r["upstream_cluster"] != "" || r["route"] != hcm.UnmatchedLabel {
					t.Errorf("refused request's access log: cluster %q route %q, want none", r["upstream_cluster"], r["route"])
				}
			}
			if details["request_headers_too_large"] != 2 || details["too_many_request_headers"] != 2 {
				t.Errorf("response_code_details of the refused requests: %v", details)
			}
		})
	}
}

func TestCommonHTTPProtocolOptionsBeyondMaxHeadersCountAreRefused(t *testing.T) {
	for _, o := range []*corev3.HttpProtocolOptions{
		{MaxStreamDuration: durationpb.New(time.Minute)},
		{MaxRequestsPerConnection: wrapperspb.UInt32(5)},
		{HeadersWithUnderscoresAction: corev3.HttpProtocolOptions_REJECT_REQUEST},
	} {
		_, err := hcm.Convert(&hcmv3.HttpConnectionManager{
			CommonHttpProtocolOptions: o,
			RouteSpecifier:            &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{ConfigSource: adsSource(), RouteConfigName: "r"}},
		}, httpFilters)
		if err == nil || !strings.Contains(err.Error(), "common_http_protocol_options") {
			t.Errorf("%v: error %v, want a NACK naming common_http_protocol_options", o, err)
		}
	}
}

// ---------------------------------------------------------------------------
// Metrics.

// series returns the metric of the proxy's registry with exactly the given
// labels (others may exist), or nil.
func series(t *testing.T, p *testProxy, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := p.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// metricValue is a counter's or gauge's value, or a histogram's sample count.
func metricValue(t *testing.T, p *testProxy, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	m := series(t, p, name, labels)
	switch {
	case m == nil:
		return 0, false
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount()), true
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), true
	}
	return m.GetCounter().GetValue(), true
}

// seriesOf returns the label sets of a metric's series that have label=value.
func seriesOf(t *testing.T, p *testProxy, name, label, value string) []string {
	t.Helper()
	mfs, err := p.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					out = append(out, m.String())
				}
			}
		}
	}
	return out
}

// waitMetric waits until a metric reaches want: the access log and metrics
// are written after the response was sent.
func waitMetric(t *testing.T, p *testProxy, name string, labels map[string]string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, _ := metricValue(t, p, name, labels)
		if v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v, want %v", name, labels, v, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRequestMetricsByVirtualHostAndRoute(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	a, b := startBackend(t, "A"), startBackend(t, "B")
	unnamed := toCluster("B", prefixMatch("/unnamed"))
	unnamed.Name = ""
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http",
			vhost("a.test", toCluster("A", exactMatch("/a")), unnamed),
			vhost("b.test", toCluster("B", prefixMatch("/"))))},
		clusters:  []*clusterv3.Cluster{edsCluster("A"), edsCluster("B")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("A", a.addr()), assignment("B", b.addr())},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	var bytesA int
	for range 3 {
		r := get(t, c, p.httpURL(t, "/a"), "a.test", nil)
		bytesA += len(r.Body)
	}
	get(t, c, p.httpURL(t, "/unnamed"), "a.test", nil)
	get(t, c, p.httpURL(t, "/x"), "b.test", nil)
	get(t, c, p.httpURL(t, "/x"), "b.test", map[string]string{"X-Unused": "1"})
	if r := get(t, c, p.httpURL(t, "/nothing"), "a.test", nil); r.Status != 404 {
		t.Fatalf("unmatched route: status %d", r.Status)
	}
	if r := get(t, c, p.httpURL(t, "/"), "unknown.test", nil); r.Status != 404 {
		t.Fatalf("unmatched virtual host: status %d", r.Status)
	}

	req := func(vh, route, path, class string) map[string]string {
		return map[string]string{"listener": "ingress_http", "vhost": vh, "route": route, "path": path, "code_class": class}
	}
	if got := seriesOf(t, p, "portico_proxy_requests_total", "vhost", "unknown.test"); len(got) != 0 {
		t.Errorf("a Host that matched no virtual host got series of its own: %v", got)
	}
	for _, c := range []struct {
		labels map[string]string
		want   float64
	}{
		{req("a.test", "to-A", "/a", "2xx"), 3},
		{req("a.test", "#1", "/unnamed", "2xx"), 1}, // an unnamed route is labelled by its position
		{req("b.test", "to-B", "/", "2xx"), 2},
		{req("a.test", "(none)", "(none)", "4xx"), 1},
		{req("(none)", "(none)", "(none)", "4xx"), 1},
	} {
		waitMetric(t, p, "portico_proxy_requests_total", c.labels, c.want)
	}
	// Only what happened has a series: no 4xx of a route that answered 2xx.
	if m := series(t, p, "portico_proxy_requests_total", req("a.test", "to-A", "/a", "4xx")); m != nil {
		t.Errorf("a code class without a request has a series: %v", m)
	}
	route := map[string]string{"listener": "ingress_http", "vhost": "a.test", "route": "to-A", "path": "/a"}
	waitMetric(t, p, "portico_proxy_request_duration_seconds", route, 3)
	waitMetric(t, p, "portico_proxy_response_size_bytes", route, 3)
	size := series(t, p, "portico_proxy_response_size_bytes", route)
	if size == nil || size.GetHistogram().GetSampleCount() != 3 || size.GetHistogram().GetSampleSum() != float64(bytesA) {
		t.Errorf("portico_proxy_response_size_bytes%v = %v, want 3 responses of %d bytes in all", route, size, bytesA)
	}
	// The latency buckets reach 10 minutes, beyond any usual route timeout.
	d := series(t, p, "portico_proxy_request_duration_seconds", route).GetHistogram()
	if last := d.GetBucket()[len(d.GetBucket())-1].GetUpperBound(); last != 600 {
		t.Errorf("largest latency bucket %vs, want 600s", last)
	}
	// Clusters without alt_stat_name are labelled by their name.
	waitMetric(t, p, "portico_proxy_upstream_requests_total", map[string]string{"service_name": "A", "code_class": "2xx"}, 3)
	waitMetric(t, p, "portico_proxy_upstream_requests_total", map[string]string{"service_name": "B", "code_class": "2xx"}, 3)

	// The access log names the same route and virtual host, and the route's
	// path condition and xDS name.
	waitFor(t, "8 access log lines", func() bool { return len(p.logs.records("access")) == 8 })
	for _, rec := range p.logs.records("access") {
		want := map[string][4]string{
			"/a":       {"a.test", "to-A", "/a", "to-A"},
			"/unnamed": {"a.test", "#1", "/unnamed", ""},
			"/x":       {"b.test", "to-B", "/", "to-B"},
			"/nothing": {"a.test", "(none)", "(none)", ""},
			"/":        {"(none)", "(none)", "(none)", ""},
		}[rec["path"].(string)]
		if got := [4]any{rec["vhost"], rec["route"], rec["route_path"], rec["route_name"]}; got != [4]any{want[0], want[1], want[2], want[3]} {
			t.Errorf("access log of %v: vhost, route, route_path, route_name %q, want %q", rec["path"], got, want)
		}
	}
}

// Portico's names fold: routes of one object and path that differ only in
// their header conditions (their names' hashes) are one series labelled
// with the object, and clusters of one Service port that differ only in
// policy are one series labelled with the Service port (alt_stat_name).
func TestMetricLabelsFoldPolicyVariants(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	a := startBackend(t, "A")
	port := func(name string, policy clusterv3.Cluster_LbPolicy) *clusterv3.Cluster {
		c := lbCluster(name, policy)
		c.AltStatName = "team-a_api_80"
		return c
	}
	ios := toCluster("team-a/api/80/1a2b3c4d", withHeaders(prefixMatch("/app"), headerString("x-client", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "ios"}})))
	ios.Name = "httpproxy/team-a/app:prefix:/app?h=0f0f0f0f"
	other := toCluster("team-a/api/80", prefixMatch("/app"))
	other.Name = "httpproxy/team-a/app:prefix:/app"
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("app.test", ios, other))},
		clusters: []*clusterv3.Cluster{port("team-a/api/80/1a2b3c4d", clusterv3.Cluster_LEAST_REQUEST),
			port("team-a/api/80", clusterv3.Cluster_ROUND_ROBIN)},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("team-a/api/80/1a2b3c4d", a.addr()), assignment("team-a/api/80", a.addr())},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	get(t, c, p.httpURL(t, "/app"), "app.test", map[string]string{"X-Client": "ios"})
	get(t, c, p.httpURL(t, "/app/x"), "app.test", nil)

	route := map[string]string{"listener": "ingress_http", "vhost": "app.test", "route": "httpproxy/team-a/app", "path": "/app", "code_class": "2xx"}
	waitMetric(t, p, "portico_proxy_requests_total", route, 2)
	service := map[string]string{"service_namespace": "team-a", "service_name": "api", "service_port": "80", "code_class": "2xx"}
	waitMetric(t, p, "portico_proxy_upstream_requests_total", service, 2)
	if got := seriesOf(t, p, "portico_proxy_requests_total", "vhost", "app.test"); len(got) != 1 {
		t.Errorf("requests of two variants of one route: %d series, want 1: %v", len(got), got)
	}
	if got := seriesOf(t, p, "portico_proxy_upstream_requests_total", "service_name", "api"); len(got) != 1 {
		t.Errorf("requests to two clusters of one Service port: %d series, want 1: %v", len(got), got)
	}

	// One of the port's clusters goes: the series stays and keeps counting;
	// when the last goes, it goes.
	cp.set("v2", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("app.test", other))},
		clusters:  []*clusterv3.Cluster{port("team-a/api/80", clusterv3.Cluster_ROUND_ROBIN)},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("team-a/api/80", a.addr())},
	})
	p.waitVersion(t, "v2")
	get(t, c, p.httpURL(t, "/app"), "app.test", nil)
	waitMetric(t, p, "portico_proxy_upstream_requests_total", service, 3)
	waitMetric(t, p, "portico_proxy_requests_total", route, 3)
	// The port's only cluster gives way to another (a policy change), again and again:
	// the series goes on, whichever the proxy looks at first.
	for i := range 8 {
		name := fmt.Sprintf("team-a/api/80/%08x", i)
		policy := []clusterv3.Cluster_LbPolicy{clusterv3.Cluster_RANDOM, clusterv3.Cluster_LEAST_REQUEST}[i%2]
		version := fmt.Sprintf("swap%d", i)
		cp.set(version, resources{
			listeners: []*listenerv3.Listener{httpListener(t)},
			routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("app.test", withName(toCluster(name, prefixMatch("/app")), other.Name)))},
			clusters:  []*clusterv3.Cluster{port(name, policy)},
			endpoints: []*endpointv3.ClusterLoadAssignment{assignment(name, a.addr())},
		})
		p.waitVersion(t, version)
		get(t, c, p.httpURL(t, "/app"), "app.test", nil)
		waitMetric(t, p, "portico_proxy_upstream_requests_total", service, float64(4+i))
	}
	waitMetric(t, p, "portico_proxy_requests_total", route, 11)
	cp.set("v3", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("app.test", toCluster("B", prefixMatch("/"))))},
		clusters:  []*clusterv3.Cluster{edsCluster("B")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("B", a.addr())},
	})
	p.waitVersion(t, "v3")
	if got := seriesOf(t, p, "portico_proxy_upstream_requests_total", "service_name", "api"); len(got) != 0 {
		t.Errorf("the Service port's clusters are gone but its series remain: %v", got)
	}
	if got := seriesOf(t, p, "portico_proxy_requests_total", "route", "httpproxy/team-a/app"); len(got) != 0 {
		t.Errorf("the object's routes are gone but their series remain: %v", got)
	}
}

func withName(r *routev3.Route, name string) *routev3.Route {
	r.Name = name
	return r
}

// Series appear with the first event they count, not before: a proxy that
// served nothing exports no request series, and one request adds exactly
// the series it counts.
func TestSeriesAppearWithTheirFirstRequest(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	a := startBackend(t, "A")
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http",
			vhost("a.test", toCluster("A", prefixMatch("/a")), toCluster("A", prefixMatch("/b"))),
			vhost("b.test", toCluster("A", prefixMatch("/"))))},
		clusters:  []*clusterv3.Cluster{edsCluster("A")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("A", a.addr())},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	perRequest := []string{"portico_proxy_requests_total", "portico_proxy_request_duration_seconds", "portico_proxy_response_size_bytes",
		"portico_proxy_upstream_requests_total", "portico_proxy_upstream_retries_total", "portico_proxy_upstream_timeouts_total",
		"portico_proxy_upstream_per_try_timeouts_total", "portico_proxy_upstream_connect_failures_total"}
	count := func() map[string]int {
		out := map[string]int{}
		mfs, err := p.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if slices.Contains(perRequest, mf.GetName()) {
				out[mf.GetName()] = len(mf.GetMetric())
			}
		}
		return out
	}
	if got := count(); len(got) != 0 {
		t.Fatalf("before any request: series %v, want none", got)
	}
	get(t, noRedirectClient(), p.httpURL(t, "/a"), "a.test", nil)
	waitMetric(t, p, "portico_proxy_upstream_requests_total", map[string]string{"service_name": "A", "code_class": "2xx"}, 1)
	want := map[string]int{"portico_proxy_requests_total": 1, "portico_proxy_request_duration_seconds": 1,
		"portico_proxy_response_size_bytes": 1, "portico_proxy_upstream_requests_total": 1}
	if got := count(); !maps.Equal(got, want) {
		t.Errorf("after one request: series %v, want %v", got, want)
	}
}

func TestUpstreamFailureMetrics(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	blocked := func(_ int64, w http.ResponseWriter, r *http.Request) { sleepUntilCancelled(r, 30*time.Second) }
	slow, unavailable := startScripted(t, blocked), startScripted(t, failFirst(1<<40, 503))
	rp := func(on string, n uint32, codes ...uint32) *routev3.RetryPolicy {
		return &routev3.RetryPolicy{RetryOn: on, NumRetries: wrapperspb.UInt32(n), RetriableStatusCodes: codes}
	}
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			retryRoute("unavailable", "/retry", rp("retriable-status-codes", 2, 503)),
			retryRoute("closed", "/closed", rp("connect-failure", 1)),
			// The backend never answers: each attempt times out, then the route timeout cuts the request.
			retryRoute("slow", "/per-try", rp("gateway-error", 1), func(a *routev3.RouteAction) {
				a.RetryPolicy.PerTryTimeout = durationpb.New(100 * time.Millisecond)
			}),
			retryRoute("slow", "/route-timeout", nil, func(a *routev3.RouteAction) { a.Timeout = durationpb.New(100 * time.Millisecond) }),
		))},
		clusters: []*clusterv3.Cluster{edsCluster("unavailable"), edsCluster("closed"), edsCluster("slow")},
		endpoints: []*endpointv3.ClusterLoadAssignment{
			assignment("unavailable", unavailable.addr()), assignment("closed", testutil.RefusedAddr(t)), assignment("slow", slow.addr()),
		},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	for path, want := range map[string]int{"/retry": 503, "/closed": 502, "/per-try": 504, "/route-timeout": 504} {
		if r := get(t, c, p.httpURL(t, path), "x", nil); r.Status != want {
			t.Errorf("%s: status %d, want %d", path, r.Status, want)
		}
	}
	cluster := func(name string) map[string]string { return map[string]string{"service_name": name} }
	for _, m := range []struct {
		name    string
		cluster string
		want    float64
	}{
		{"portico_proxy_upstream_retries_total", "unavailable", 2},
		{"portico_proxy_upstream_retries_total", "closed", 1},
		{"portico_proxy_upstream_retries_total", "slow", 1},
		{"portico_proxy_upstream_connect_failures_total", "closed", 2}, // the attempt and its retry
		{"portico_proxy_upstream_per_try_timeouts_total", "slow", 2},
		{"portico_proxy_upstream_timeouts_total", "slow", 1},
	} {
		waitMetric(t, p, m.name, cluster(m.cluster), m.want)
	}
	// What did not happen has no series.
	for _, m := range []struct{ name, cluster string }{
		{"portico_proxy_upstream_connect_failures_total", "unavailable"},
		{"portico_proxy_upstream_timeouts_total", "unavailable"},
	} {
		if s := series(t, p, m.name, cluster(m.cluster)); s != nil {
			t.Errorf("%s of %s: %v, want no series", m.name, m.cluster, s)
		}
	}
	waitMetric(t, p, "portico_proxy_upstream_requests_total", map[string]string{"service_name": "closed", "code_class": "5xx"}, 1)
}

// Series of routes, virtual hosts and clusters that leave the configuration
// are deleted; those that stay keep counting from where they were.
func TestMetricsOfRemovedConfigurationAreDeleted(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	a, b := startBackend(t, "A"), startBackend(t, "B")
	hc := edsCluster("B")
	hc.HealthChecks = []*corev3.HealthCheck{httpHealthCheck("/healthz", "b", time.Hour, 3, 1)}
	v1 := resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http",
			vhost("a.test", toCluster("A", prefixMatch("/"))),
			vhost("b.test", toCluster("B", prefixMatch("/"))))},
		clusters:  []*clusterv3.Cluster{edsCluster("A"), hc},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("A", a.addr()), assignment("B", b.addr())},
	}
	cp.set("v1", v1)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	waitFor(t, "B's endpoint healthy", func() bool { return endpointHealthy(p, "B", b.addr()) })
	get(t, c, p.httpURL(t, "/"), "a.test", nil)
	get(t, c, p.httpURL(t, "/"), "b.test", nil)
	get(t, c, p.httpURL(t, "/nothing"), "nowhere.test", nil)
	reqA := map[string]string{"vhost": "a.test", "route": "to-A", "code_class": "2xx"}
	waitMetric(t, p, "portico_proxy_requests_total", reqA, 1)
	waitMetric(t, p, "portico_proxy_requests_total", map[string]string{"vhost": "b.test", "route": "to-B", "code_class": "2xx"}, 1)
	waitMetric(t, p, "portico_proxy_upstream_requests_total", map[string]string{"service_name": "B", "code_class": "2xx"}, 1)
	for _, name := range []string{"portico_proxy_upstream_requests_total", "portico_proxy_cluster_healthy_endpoints"} {
		if len(seriesOf(t, p, name, "service_name", "B")) == 0 {
			t.Fatalf("%s has no series of cluster B before its removal", name)
		}
	}

	// v2: b.test and its cluster are gone; a.test's route is renamed.
	v2 := resources{
		listeners: v1.listeners,
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http",
			vhost("a.test", toCluster("A", prefixMatch("/"))))},
		clusters:  []*clusterv3.Cluster{edsCluster("A")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("A", a.addr())},
	}
	cp.set("v2", v2)
	p.waitVersion(t, "v2")
	for _, m := range []struct{ name, label, value string }{
		{"portico_proxy_requests_total", "vhost", "b.test"},
		{"portico_proxy_request_duration_seconds", "vhost", "b.test"},
		{"portico_proxy_response_size_bytes", "vhost", "b.test"},
		{"portico_proxy_upstream_requests_total", "service_name", "B"},
		{"portico_proxy_upstream_retries_total", "service_name", "B"},
		{"portico_proxy_upstream_timeouts_total", "service_name", "B"},
		{"portico_proxy_upstream_per_try_timeouts_total", "service_name", "B"},
		{"portico_proxy_upstream_connect_failures_total", "service_name", "B"},
		{"portico_proxy_cluster_healthy_endpoints", "service_name", "B"},
	} {
		if got := seriesOf(t, p, m.name, m.label, m.value); len(got) != 0 {
			t.Errorf("after removing b.test and cluster B, %s still has %s=%q series: %v", m.name, m.label, m.value, got)
		}
	}
	// What stays keeps its counts.
	get(t, c, p.httpURL(t, "/"), "a.test", nil)
	waitMetric(t, p, "portico_proxy_requests_total", reqA, 2)
	waitMetric(t, p, "portico_proxy_upstream_requests_total", map[string]string{"service_name": "A", "code_class": "2xx"}, 2)
	// The listener's unmatched series stays with the listener.
	waitMetric(t, p, "portico_proxy_requests_total", map[string]string{"vhost": "(none)", "route": "(none)", "code_class": "4xx"}, 1)

	// v3: the route of a.test is renamed: its old series goes, the new one starts.
	renamed := toCluster("A", prefixMatch("/"))
	renamed.Name = "renamed"
	cp.set("v3", resources{
		listeners: v1.listeners,
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("a.test", renamed))},
		clusters:  v2.clusters, endpoints: v2.endpoints,
	})
	p.waitVersion(t, "v3")
	if got := seriesOf(t, p, "portico_proxy_requests_total", "route", "to-A"); len(got) != 0 {
		t.Errorf("route to-A was renamed but its series remain: %v", got)
	}
	get(t, c, p.httpURL(t, "/"), "a.test", nil)
	waitMetric(t, p, "portico_proxy_requests_total", map[string]string{"vhost": "a.test", "route": "renamed", "code_class": "2xx"}, 1)
}
