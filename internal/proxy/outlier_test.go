package proxy

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/portico-dev/portico/internal/testutil"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// outlierCluster is an EDS cluster with outlier detection (other fields at
// Envoy's defaults unless mutate sets them).
func outlierCluster(name string, interval, baseEjection time.Duration, mutate ...func(od *clusterv3.OutlierDetection)) *clusterv3.Cluster {
	c := edsCluster(name)
	c.OutlierDetection = &clusterv3.OutlierDetection{Interval: durationpb.New(interval), BaseEjectionTime: durationpb.New(baseEjection)}
	for _, m := range mutate {
		m(c.OutlierDetection)
	}
	return c
}

// ejected reports whether outlier detection has ejected an endpoint in the
// applied configuration.
func ejected(p *testProxy, cluster, endpoint string) bool {
	snap := p.current.Load()
	if snap == nil || snap.clusterNamed(cluster) == nil || snap.clusterNamed(cluster).Outlier == nil {
		return false
	}
	c := snap.clusterNamed(cluster)
	for i, ep := range c.Endpoints {
		if ep == endpoint {
			return c.OutlierHosts[i].Ejected.Load()
		}
	}
	return false
}

// oneRouteTo is a configuration routing every request to the clusters' first
// cluster, with each cluster's endpoints.
func oneRouteTo(t *testing.T, clusters []*clusterv3.Cluster, endpoints map[string][]string) resources {
	res := resources{listeners: []*listenerv3.Listener{httpListener(t)}, clusters: clusters}
	vh := vhost("*")
	for _, c := range clusters {
		res.endpoints = append(res.endpoints, assignment(c.Name, endpoints[c.Name]...))
		vh.Routes = append(vh.Routes, toCluster(c.Name, separatedMatch("/"+c.Name)))
	}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vh)}
	return res
}

// TestOutlierDetection: an endpoint that answers 5 consecutive 5xx is
// ejected at once and gets no traffic (every request succeeds on the other
// endpoint) until its ejection time is over; then it gets traffic again.
// max_ejection_percent is Envoy's default 10%, yet one endpoint of two may
// always be ejected.
func TestOutlierDetection(t *testing.T) {
	t.Parallel()
	a := startProtoBackend(t, "a", nil, "http/1.1")
	b := startProtoBackend(t, "b", nil, "http/1.1")
	b.status.Store(500)
	cp := startControlPlane(t)
	const base = time.Second
	cp.set("v1", oneRouteTo(t, []*clusterv3.Cluster{outlierCluster("od", 100*time.Millisecond, base)},
		map[string][]string{"od": {a.addr(), b.addr()}}))
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	url := p.httpURL(t, "/od")

	// Round robin: a, b, a, b... b's fifth 500 is the tenth request.
	// ejectedAt is taken before the request that ejects b is sent: the ejection starts
	// when the proxy sees its 500, before the client does, so only a time taken before
	// that request bounds the ejection's start from below.
	statuses := map[int]int{}
	var ejectedAt time.Time
	for i := range 10 {
		if i == 9 {
			ejectedAt = time.Now()
		}
		r, _ := getProto(t, c, url)
		statuses[r.Status]++
	}
	if diff := cmp.Diff(map[int]int{200: 5, 500: 5}, statuses); diff != "" {
		t.Fatalf("first 10 requests (-want +got):\n%s", diff)
	}
	if !ejected(p, "od", b.addr()) {
		t.Fatal("b not ejected after 5 consecutive 500s")
	}
	for i := range 10 {
		if r, e := getProto(t, c, url); r.Status != 200 || e.Backend != "a" {
			t.Fatalf("request %d with b ejected: %d from %q, want 200 from a", i, r.Status, e.Backend)
		}
	}
	if n := b.hits.Load(); n != 5 {
		t.Errorf("b got %d requests, want 5 (none while ejected)", n)
	}
	if v, _ := gaugeValue(t, p, "portico_proxy_upstream_outlier_ejections_total", "od"); v != 1 {
		t.Errorf("ejections counted: %v, want 1", v)
	}
	if v, _ := gaugeValue(t, p, "portico_proxy_cluster_ejected_endpoints", "od"); v != 1 {
		t.Errorf("ejected endpoints gauge: %v, want 1", v)
	}

	t.Run("the ejected endpoint returns after base_ejection_time", func(t *testing.T) {
		waitFor(t, "b gets traffic again", func() bool {
			get(t, c, url, "x", nil)
			return b.hits.Load() > 5
		})
		if d := time.Since(ejectedAt); d < base {
			t.Errorf("b was back after %s, before base_ejection_time (%s)", d, base)
		}
		if v, _ := gaugeValue(t, p, "portico_proxy_cluster_ejected_endpoints", "od"); v != 0 {
			t.Errorf("ejected endpoints gauge: %v, want 0", v)
		}
		ended := false
		for _, rec := range p.logs.records("outlier ejection ended") {
			ended = ended || (rec["endpoint"] == b.addr() && rec["reason"] == "ejection time elapsed")
		}
		if !ended {
			t.Error("no log line for the end of the ejection")
		}
	})
}

// hitTimes is a backend answering 500 that records when it was hit.
type hitTimes struct {
	mu    sync.Mutex
	times []time.Time
}

func (h *hitTimes) handle(_ int64, w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.times = append(h.times, time.Now())
	h.mu.Unlock()
	_, _ = io.Copy(io.Discard, r.Body)
	w.WriteHeader(http.StatusInternalServerError)
}

func (h *hitTimes) get() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.times...)
}

// TestOutlierEjectionBackOff: a cluster's only endpoint can be ejected too
// (requests then get 503 no healthy upstream, panic mode being disabled), and
// each ejection lasts base_ejection_time times the number of times the
// endpoint has been ejected.
func TestOutlierEjectionBackOff(t *testing.T) {
	t.Parallel()
	h := &hitTimes{}
	be := startScripted(t, h.handle)
	cp := startControlPlane(t)
	const base = 300 * time.Millisecond
	cl := outlierCluster("single", 50*time.Millisecond, base, func(od *clusterv3.OutlierDetection) {
		od.Consecutive_5Xx = wrapperspb.UInt32(1)
	})
	cl.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}}
	cp.set("v1", oneRouteTo(t, []*clusterv3.Cluster{cl}, map[string][]string{"single": {be.addr()}}))
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	url := p.httpURL(t, "/single")

	local := 0
	deadline := time.Now().Add(20 * time.Second)
	for len(h.get()) < 3 && time.Now().Before(deadline) {
		switch r := get(t, c, url, "x", nil); {
		case r.Status == 503 && r.Body == "no healthy upstream":
			local++
		case r.Status != 500:
			t.Fatalf("got %d %q, want the backend's 500 or 503 no healthy upstream", r.Status, r.Body)
		}
		time.Sleep(2 * time.Millisecond)
	}
	hits := h.get()
	if len(hits) < 3 {
		t.Fatalf("the endpoint got %d requests in 20s, want it back twice", len(hits))
	}
	if local == 0 {
		t.Error("no request got 503 no healthy upstream while the only endpoint was ejected")
	}
	first, second := hits[1].Sub(hits[0]), hits[2].Sub(hits[1])
	if first < base || second < 2*base {
		t.Errorf("ejections lasted %s and %s, want at least %s and %s", first, second, base, 2*base)
	}
	var durations []string
	for _, rec := range p.logs.records("outlier ejection") {
		durations = append(durations, rec["duration"].(string))
	}
	if len(durations) < 2 || durations[0] != "300ms" || durations[1] != "600ms" {
		t.Errorf("ejection durations logged %v, want 300ms then 600ms", durations)
	}
}

// TestOutlierDetectionRules: connect failures count as 5xx;
// enforcing_consecutive_5xx 0 never ejects; max_ejection_percent caps the
// ejected share beyond the first ejection; the default panic threshold
// sends traffic to an ejected only endpoint.
func TestOutlierDetectionRules(t *testing.T) {
	t.Parallel()
	ok1, ok2 := startProtoBackend(t, "ok1", nil, "http/1.1"), startProtoBackend(t, "ok2", nil, "http/1.1")
	bad1, bad2 := startProtoBackend(t, "bad1", nil, "http/1.1"), startProtoBackend(t, "bad2", nil, "http/1.1")
	bad1.status.Store(503)
	bad2.status.Store(500)
	refused := testutil.RefusedAddr(t)
	cp := startControlPlane(t)
	const base = time.Minute // no ejection ends during the test
	clusters := []*clusterv3.Cluster{
		outlierCluster("connect", time.Second, base),
		outlierCluster("never", time.Second, base, func(od *clusterv3.OutlierDetection) {
			od.EnforcingConsecutive_5Xx = wrapperspb.UInt32(0)
		}),
		outlierCluster("cap", time.Second, base, func(od *clusterv3.OutlierDetection) {
			od.MaxEjectionPercent = wrapperspb.UInt32(25)
		}),
		outlierCluster("panic", time.Second, base),
	}
	endpoints := map[string][]string{
		"connect": {ok1.addr(), refused},
		"never":   {ok1.addr(), bad1.addr()},
		"cap":     {ok1.addr(), bad1.addr(), bad2.addr(), ok2.addr()},
		"panic":   {bad2.addr()},
	}
	res := oneRouteTo(t, clusters, endpoints)
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	count := func(path string, n int) map[int]int {
		statuses := map[int]int{}
		for range n {
			statuses[get(t, c, p.httpURL(t, path), "x", nil).Status]++
		}
		return statuses
	}

	t.Run("connect failures count as 5xx", func(t *testing.T) {
		if diff := cmp.Diff(map[int]int{200: 5, 502: 5}, count("/connect", 10)); diff != "" {
			t.Errorf("first 10 requests (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[int]int{200: 10}, count("/connect", 10)); diff != "" {
			t.Errorf("with the refusing endpoint ejected (-want +got):\n%s", diff)
		}
	})
	t.Run("ejections survive a configuration swap", func(t *testing.T) {
		next := res
		next.clusters = append([]*clusterv3.Cluster(nil), res.clusters...)
		next.clusters[0] = outlierCluster("connect", 2*time.Second, base) // a new interval too
		cp.set("v2", next)
		p.waitVersion(t, "v2")
		if diff := cmp.Diff(map[int]int{200: 10}, count("/connect", 10)); diff != "" {
			t.Errorf("after the swap (-want +got):\n%s", diff)
		}
	})
	t.Run("enforcing_consecutive_5xx 0 never ejects", func(t *testing.T) {
		if diff := cmp.Diff(map[int]int{200: 10, 503: 10}, count("/never", 20)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if ejected(p, "never", bad1.addr()) {
			t.Error("bad1 ejected")
		}
	})
	t.Run("max_ejection_percent", func(t *testing.T) {
		// ok1, bad1, bad2, ok2 in turn: bad1's and bad2's fifth 5xx are the
		// 18th and 19th requests; 1 of 4 ejected is 25%, 2 would be 50%.
		count("/cap", 20)
		if !ejected(p, "cap", bad1.addr()) || ejected(p, "cap", bad2.addr()) {
			t.Fatalf("ejected: bad1 %v, bad2 %v; want bad1 only", ejected(p, "cap", bad1.addr()), ejected(p, "cap", bad2.addr()))
		}
		hits1, hits2 := bad1.hits.Load(), bad2.hits.Load()
		count("/cap", 12)
		if bad1.hits.Load() != hits1 || bad2.hits.Load() != hits2+4 {
			t.Errorf("12 more requests: bad1 got %d, bad2 %d; want 0 and 4", bad1.hits.Load()-hits1, bad2.hits.Load()-hits2)
		}
	})
	t.Run("an ejected only endpoint still gets traffic in panic mode", func(t *testing.T) {
		count("/panic", 5)
		if !ejected(p, "panic", bad2.addr()) {
			t.Fatal("bad2 not ejected")
		}
		// 0% healthy is below the default healthy_panic_threshold (50%).
		if diff := cmp.Diff(map[int]int{500: 3}, count("/panic", 3)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// TestOutlierEjectionEndsOnHealthCheck: a successful active health check ends
// an ejection (successful_active_health_check_uneject_host, default true).
func TestOutlierEjectionEndsOnHealthCheck(t *testing.T) {
	t.Parallel()
	a := startProtoBackend(t, "a", nil, "http/1.1")
	b := startProtoBackend(t, "b", nil, "http/1.1")
	b.status.Store(500) // its /healthz still answers 200
	cp := startControlPlane(t)
	hc := func(c *clusterv3.Cluster) *clusterv3.Cluster {
		c.HealthChecks = []*corev3.HealthCheck{httpHealthCheck("/healthz", "hc.example.com", 50*time.Millisecond, 1, 1)}
		return c
	}
	clusters := []*clusterv3.Cluster{
		hc(outlierCluster("uneject", time.Minute, time.Minute)),
		hc(outlierCluster("keep", time.Minute, time.Minute, func(od *clusterv3.OutlierDetection) {
			od.SuccessfulActiveHealthCheckUnejectHost = wrapperspb.Bool(false)
		})),
	}
	endpoints := map[string][]string{"uneject": {a.addr(), b.addr()}, "keep": {a.addr(), b.addr()}}
	cp.set("v1", oneRouteTo(t, clusters, endpoints))
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	for _, name := range []string{"uneject", "keep"} {
		waitFor(t, "healthy endpoints", func() bool { return endpointHealthy(p, name, a.addr()) && endpointHealthy(p, name, b.addr()) })
		for range 10 {
			get(t, c, p.httpURL(t, "/"+name), "x", nil)
		}
		// (The next passing check may already have ended it.)
		if v, _ := gaugeValue(t, p, "portico_proxy_upstream_outlier_ejections_total", name); v != 1 {
			t.Fatalf("%s: %v ejections, want b's", name, v)
		}
	}
	if !ejected(p, "keep", b.addr()) {
		t.Fatal("keep: b not ejected")
	}
	waitFor(t, "the next passing health check ends b's ejection", func() bool { return !ejected(p, "uneject", b.addr()) })
	// Checks keep passing every 50ms: the other cluster keeps b out.
	for range 10 {
		if r, e := getProto(t, c, p.httpURL(t, "/keep")); r.Status != 200 || e.Backend != "a" {
			t.Errorf("keep: %d from %q, want 200 from a", r.Status, e.Backend)
		}
		time.Sleep(20 * time.Millisecond)
	}
	found := false
	for _, rec := range p.logs.records("outlier ejection ended") {
		found = found || (rec["cluster"] == "uneject" && rec["reason"] == "active health check passed")
	}
	if !found {
		t.Error("no log line for the ejection ended by a health check")
	}
}

// TestOutlierSuccessRate: Envoy's default success rate detector (on unless
// enforcing_success_rate is 0) ejects an endpoint whose success rate over an
// interval is far below the others'.
func TestOutlierSuccessRate(t *testing.T) {
	t.Parallel()
	var addrs []string
	var bad *protoBackend
	for i, name := range []string{"s0", "s1", "s2", "s3", "s4"} {
		b := startProtoBackend(t, name, nil, "http/1.1")
		if i == 4 {
			b.status.Store(500)
			bad = b
		}
		addrs = append(addrs, b.addr())
	}
	cp := startControlPlane(t)
	cl := outlierCluster("sr", 300*time.Millisecond, time.Minute, func(od *clusterv3.OutlierDetection) {
		od.Consecutive_5Xx = wrapperspb.UInt32(0) // only the success rate detector
		od.SuccessRateRequestVolume = wrapperspb.UInt32(5)
	})
	cp.set("v1", oneRouteTo(t, []*clusterv3.Cluster{cl}, map[string][]string{"sr": addrs}))
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	waitFor(t, "the failing endpoint ejected by its success rate", func() bool {
		for range 10 {
			get(t, c, p.httpURL(t, "/sr"), "x", nil)
		}
		return ejected(p, "sr", bad.addr())
	})
	for _, rec := range p.logs.records("outlier ejection") {
		if reason, _ := rec["reason"].(string); !strings.HasPrefix(reason, "success rate 0.0% below") {
			t.Errorf("ejection reason %q, want the success rate", reason)
		}
	}
}

// TestOutlierStateFollowsEndpoints: an endpoint removed from the cluster
// forgets its ejection (as Envoy drops its detector state); the interval
// timer stops with the cluster's outlier detection.
func TestOutlierStateFollowsEndpoints(t *testing.T) {
	t.Parallel()
	a := startProtoBackend(t, "a", nil, "http/1.1")
	b := startProtoBackend(t, "b", nil, "http/1.1")
	b.status.Store(500)
	cp := startControlPlane(t)
	cl := outlierCluster("od", time.Minute, time.Minute)
	res := oneRouteTo(t, []*clusterv3.Cluster{cl}, map[string][]string{"od": {a.addr(), b.addr()}})
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	for range 10 {
		get(t, c, p.httpURL(t, "/od"), "x", nil)
	}
	if !ejected(p, "od", b.addr()) {
		t.Fatal("b not ejected")
	}
	next := res
	next.endpoints = []*endpointv3.ClusterLoadAssignment{assignment("od", a.addr())}
	cp.set("v2", next)
	p.waitVersion(t, "v2")
	b.status.Store(200)
	cp.set("v3", res)
	p.waitVersion(t, "v3")
	if ejected(p, "od", b.addr()) {
		t.Error("b is still ejected after leaving the cluster and coming back")
	}
	if seen := backendsOf(t, c, p.httpURL(t, "/od"), 4); seen["a"] != 2 || seen["b"] != 2 {
		t.Errorf("requests went to %v, want round robin over a and b", seen)
	}

	next = res
	next.clusters = []*clusterv3.Cluster{edsCluster("od")}
	cp.set("v4", next)
	p.waitVersion(t, "v4")
	if _, ok := gaugeValue(t, p, "portico_proxy_cluster_ejected_endpoints", "od"); ok {
		t.Error("ejected endpoints gauge still exported without outlier detection")
	}
}
