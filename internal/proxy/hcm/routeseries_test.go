package hcm

import (
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/portico-dev/portico/internal/proxy/stats"
)

// referenceRouteSeries are the route series as client_golang's own vectors
// count them, with the names, help and buckets of routeCollector's.
type referenceRouteSeries struct {
	requests       *prometheus.CounterVec
	duration, size *prometheus.HistogramVec
}

func newReferenceRouteSeries(reg *prometheus.Registry) *referenceRouteSeries {
	r := &referenceRouteSeries{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "portico", Subsystem: "proxy", Name: requestsName, Help: requestsHelp},
			stats.WithClass(routeLabels)),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "portico", Subsystem: "proxy", Name: durationName, Help: durationHelp,
			Buckets: latencyBuckets[:]}, routeLabels),
		size: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "portico", Subsystem: "proxy", Name: sizeName, Help: sizeHelp,
			Buckets: sizeBuckets[:]}, routeLabels),
	}
	reg.MustRegister(r.requests, r.duration, r.size)
	return r
}

func (r *referenceRouteSeries) observe(key RouteKey, status int, seconds float64, bytes int64) {
	r.requests.WithLabelValues(key.values(stats.CodeClasses[stats.CodeClass(status)])...).Inc()
	r.duration.WithLabelValues(key.values()...).Observe(seconds)
	r.size.WithLabelValues(key.values()...).Observe(float64(bytes))
}

func gatherRoutes(t *testing.T, g prometheus.Gatherer) []*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	return mfs
}

// The route series export exactly what client_golang's vectors export for the
// same requests: names, help, labels, every bucket, count and sum, the
// series of each code class appearing with its first request.
func TestRouteSeriesExportAsClientGolangDoes(t *testing.T) {
	ours, theirs := prometheus.NewRegistry(), prometheus.NewRegistry()
	m := NewMetrics(ours, slog.New(slog.DiscardHandler))
	ref := newReferenceRouteSeries(theirs)
	keys := []RouteKey{
		{Listener: "ingress_http", Vhost: "shop.example.com", Route: "httpproxy/shop/web", Path: "/cart"},
		{Listener: "ingress_http", Vhost: "shop.example.com", Route: UnmatchedLabel, Path: UnmatchedLabel},
		{Listener: "ingress_https", Vhost: UnmatchedLabel, Route: UnmatchedLabel, Path: UnmatchedLabel},
	}
	routes := make([]*RouteStats, len(keys))
	for i, k := range keys {
		routes[i] = &RouteStats{M: m, Key: k}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	statuses := []int{101, 200, 204, 301, 404, 431, 503, 0, 99, 600}
	// Durations at, just above and between the bounds, and past the last one;
	// sizes likewise, up to past 256 MiB.
	var seconds []float64
	for _, b := range latencyBuckets {
		seconds = append(seconds, b, b*1.0001, b/3)
	}
	seconds = append(seconds, 0, 601, 3600)
	var sizes []int64
	for _, b := range sizeBuckets {
		sizes = append(sizes, int64(b), int64(b)+1, int64(b)/3)
	}
	sizes = append(sizes, 0, 1<<30)
	for n := range 5000 {
		// The unmatched listener's stats see only 404s: its other classes'
		// series must not exist.
		i := n % len(keys)
		status := statuses[rng.IntN(len(statuses))]
		if i == 2 {
			status = 404
		}
		s, b := seconds[rng.IntN(len(seconds))], sizes[rng.IntN(len(sizes))]
		routes[i].Observe(status, s, b)
		ref.observe(keys[i], status, s, b)
	}
	got, want := gatherRoutes(t, ours), gatherRoutes(t, theirs)
	// client_golang stamps each series' creation with its own clock, and
	// sums floats in another order.
	ignore := protocmp.IgnoreFields(&dto.Counter{}, "created_timestamp")
	ignoreH := protocmp.IgnoreFields(&dto.Histogram{}, "created_timestamp", "sample_sum")
	if diff := cmp.Diff(want, got, protocmp.Transform(), ignore, ignoreH); diff != "" {
		t.Errorf("exported series differ from client_golang's (-theirs +ours):\n%s", diff)
	}
	for _, mf := range got {
		for _, metric := range mf.GetMetric() {
			if c := metric.GetCounter(); c != nil && c.GetCreatedTimestamp() == nil {
				t.Errorf("%s %v: no created timestamp", mf.GetName(), metric.GetLabel())
			}
			if h := metric.GetHistogram(); h != nil {
				if h.GetCreatedTimestamp() == nil {
					t.Errorf("%s %v: no created timestamp", mf.GetName(), metric.GetLabel())
				}
				if wantSum := sumOf(want, mf.GetName(), metric); !closeTo(h.GetSampleSum(), wantSum) {
					t.Errorf("%s %v: sum %v, want %v", mf.GetName(), metric.GetLabel(), h.GetSampleSum(), wantSum)
				}
			}
		}
	}
}

// sumOf is the sample sum of the histogram of family name with metric's labels in mfs.
func sumOf(mfs []*dto.MetricFamily, name string, metric *dto.Metric) float64 {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if cmp.Equal(m.GetLabel(), metric.GetLabel(), protocmp.Transform()) {
				return m.GetHistogram().GetSampleSum()
			}
		}
	}
	return math.NaN()
}

func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

// seriesCount is how many series the route families in g hold.
func seriesCount(t *testing.T, g prometheus.Gatherer) int {
	n := 0
	for _, mf := range gatherRoutes(t, g) {
		n += len(mf.GetMetric())
	}
	return n
}

// Removing a route's stats deletes its series; a request that finishes on
// them later does not bring them back, and stats made again for the same
// labels start from zero.
func TestRouteSeriesRemovedStayRemoved(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, slog.New(slog.DiscardHandler))
	key := RouteKey{Listener: "ingress_http", Vhost: "a.test", Route: "ingress/default/a", Path: "/"}
	s := &RouteStats{M: m, Key: key}
	if n := seriesCount(t, reg); n != 0 {
		t.Fatalf("%d series before any request, want 0", n)
	}
	s.Observe(200, 0.01, 100)
	s.Observe(503, 0.01, 100)
	if n := seriesCount(t, reg); n != 4 {
		t.Fatalf("%d series after a 2xx and a 5xx, want 4 (two classes, two histograms)", n)
	}
	s.Remove()
	if n := seriesCount(t, reg); n != 0 {
		t.Fatalf("%d series after removal, want 0", n)
	}
	s.Observe(200, 0.01, 100)
	s.Observe(404, 0.01, 100)
	if n := seriesCount(t, reg); n != 0 {
		t.Fatalf("%d series after late requests on removed stats, want 0", n)
	}
	again := &RouteStats{M: m, Key: key}
	again.Observe(200, 0.01, 100)
	if v := counterValue(t, reg, key, "2xx"); v != 1 {
		t.Errorf("2xx of new stats for the same labels: %v, want 1", v)
	}
}

// Two proxies sharing a registry share the route collector, and stats of
// one label set in both export one series, their counts added.
func TestRouteSeriesOfOneLabelSetAdd(t *testing.T) {
	reg := prometheus.NewRegistry()
	log := slog.New(slog.DiscardHandler)
	m1, m2 := NewMetrics(reg, log), NewMetrics(reg, log)
	key := RouteKey{Listener: "ingress_http", Vhost: "a.test", Route: "ingress/default/a", Path: "/"}
	s1, s2 := &RouteStats{M: m1, Key: key}, &RouteStats{M: m2, Key: key}
	s1.Observe(200, 0.01, 100)
	s2.Observe(200, 0.01, 100)
	s2.Observe(200, 0.01, 100)
	if v := counterValue(t, reg, key, "2xx"); v != 3 {
		t.Errorf("2xx: %v, want 3", v)
	}
	s1.Remove()
	s1.Observe(200, 0.01, 100) // late, on removed stats: not counted
	s2.Observe(200, 0.01, 100)
	if v := counterValue(t, reg, key, "2xx"); v != 4 {
		t.Errorf("2xx after one proxy's stats left and one more request: %v, want 4 (a counter never goes down)", v)
	}
	s2.Remove()
	if n := seriesCount(t, reg); n != 0 {
		t.Errorf("%d series after both proxies' stats left, want 0", n)
	}
}

// Requests, removals and scrapes at once (run with -race): every scrape
// succeeds, and the series of stats still in use count every request.
func TestRouteSeriesConcurrentScrapes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, slog.New(slog.DiscardHandler))
	key := func(i int) RouteKey {
		return RouteKey{Listener: "ingress_http", Vhost: fmt.Sprintf("h%d.test", i), Route: "ingress/default/h", Path: "/"}
	}
	const routes, requests = 8, 500
	var wg sync.WaitGroup
	kept := make([]*RouteStats, routes)
	for i := range routes {
		kept[i] = &RouteStats{M: m, Key: key(i)}
		wg.Go(func() {
			for n := range requests {
				kept[i].Observe(100+100*(n%5), 0.001, int64(n))
				gone := &RouteStats{M: m, Key: key(routes + n%3)}
				gone.Observe(200, 0.001, 1)
				gone.Remove()
			}
		})
	}
	for range 20 {
		if _, err := reg.Gather(); err != nil {
			t.Fatalf("gather during requests: %v", err)
		}
	}
	wg.Wait()
	for i := range routes {
		if v := counterValue(t, reg, key(i), "2xx"); v != requests/5 {
			t.Errorf("route %d: 2xx %v, want %d", i, v, requests/5)
		}
	}
}

func counterValue(t *testing.T, g prometheus.Gatherer, key RouteKey, class string) float64 {
	t.Helper()
	want := append(key.values(), class)
	for _, mf := range gatherRoutes(t, g) {
		if mf.GetName() != "portico_proxy_"+requestsName {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i, l := range m.GetLabel() {
				// Labels come sorted by name: code_class, listener, path, route, vhost.
				if l.GetValue() != want[labelOrder[i]] {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return math.NaN()
}

// labelOrder maps the requests series' labels, sorted by name, to their
// places in RouteKey.values(class).
var labelOrder = []int{4, 0, 3, 2, 1}

// A label value client_golang would refuse (invalid UTF-8; xDS strings
// cannot hold one) fails the scrape of its own series only.
func TestRouteSeriesInvalidLabelFailsOnlyItsOwn(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, slog.New(slog.DiscardHandler))
	good := RouteKey{Listener: "ingress_http", Vhost: "a.test", Route: "ingress/default/a", Path: "/"}
	(&RouteStats{M: m, Key: good}).Observe(200, 0.01, 1)
	(&RouteStats{M: m, Key: RouteKey{Listener: "ingress_http", Vhost: "b\xff.test", Route: "r", Path: "/"}}).Observe(200, 0.01, 1)
	mfs, err := reg.Gather()
	if err == nil {
		t.Error("no error for a label value that is not UTF-8")
	}
	if got := counterValue(t, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return mfs, nil }), good, "2xx"); got != 1 {
		t.Errorf("the valid route's 2xx: %v, want 1", got)
	}
}
