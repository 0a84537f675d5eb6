package hcm

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/portico-dev/portico/internal/proxy/stats"
)

// A route's request series (portico_proxy_requests_total,
// portico_proxy_request_duration_seconds, portico_proxy_response_size_bytes)
// are counted in one block of its RouteStats (routeCounts) and exported by
// one collector (routeCollector), which client_golang's constant metrics
// turn into the same exposition its vectors give.
//
// Why not the vectors: a request reached a route's counter and two
// histograms through about ten dependent pointers (each series, its hot and
// cold halves, their bucket arrays). At 10,000 virtual hosts each request's
// route is cold in the cache, and each of those pointers was a miss: 0.96 µs
// of a request's CPU against 0.09 µs with one host (issue 22, ninth
// session). The block is addressed from the RouteStats alone, so its misses
// overlap, and it takes about 330 bytes where the three series took some
// 6.7 KB.

// Slots of routeCounts.buckets: the duration histogram's buckets then the
// size histogram's, each ending with its +Inf bucket.
const (
	durationSlots = len(latencyBuckets) + 1
	sizeSlots     = len(sizeBuckets) + 1
)

// Bits of routeCounts.created, one per series: the counter of each code
// class, and the two histograms, which are created together.
const (
	histogramsCreated = 1 << len(stats.CodeClasses)
	allCreated        = histogramsCreated<<1 - 1
)

func classCreated(class int) uint32 { return 1 << class }

// routeCounts are what a route's requests counted. Every field is updated
// atomically on its own: a scrape may see a request counted in one series
// and not yet in another, as with client_golang's own collectors, and (unlike
// them) in a histogram's bucket and not yet in its sum, so that sum/count may
// be off by one request's value for one scrape; every histogram it exports
// has a count equal to its buckets' total.
type routeCounts struct {
	created  atomic.Uint32 // which series exist (the bits above)
	requests [len(stats.CodeClasses)]atomic.Uint64
	buckets  [durationSlots + sizeSlots]atomic.Uint64 // observations per bucket, not cumulative
	// durationSum and sizeSum are the histograms' sums, as float64 bits.
	durationSum, sizeSum atomic.Uint64
	// createdAt are when each series was created (by the bits' order), for
	// the created timestamps client_golang's own series carry; written
	// under the stats' lock before the series' bit, read by scrapes after it.
	createdAt [len(stats.CodeClasses) + 1]atomic.Int64
}

func (c *routeCounts) observe(class int, seconds float64, bytes int64) {
	size := float64(bytes)
	c.requests[class].Add(1)
	c.buckets[bucketOf(latencyBuckets[:], seconds)].Add(1)
	c.buckets[durationSlots+bucketOf(sizeBuckets[:], size)].Add(1)
	addFloat(&c.durationSum, seconds)
	addFloat(&c.sizeSum, size)
}

// bucketOf is the bucket of v: the first whose upper bound is at least v
// (Prometheus's le), len(bounds) for +Inf. A linear search, as
// client_golang's for so few buckets: the small values that most requests
// observe are found first.
func bucketOf(bounds []float64, v float64) int {
	for i, b := range bounds {
		if v <= b {
			return i
		}
	}
	return len(bounds)
}

func addFloat(bits *atomic.Uint64, v float64) {
	for {
		old := bits.Load()
		if bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// routeCollector exports the series of every route whose stats created
// some. Two stats of one label set (two proxies sharing a registry) are
// exported as one series, their counts added, as the vectors they replace
// shared one series; when one of them leaves, what it counted stays in the
// series until the last one leaves, so that the series never goes down.
//
// A scrape holds the collector's lock while it sends the series, as
// client_golang's vectors hold theirs: meanwhile a route's first request
// and a route's removal wait.
type routeCollector struct {
	requests, duration, size *prometheus.Desc

	mu     sync.Mutex
	routes map[RouteKey]*routeEntry
}

// routeEntry are the stats of a label set that created series, and what
// those that left counted.
type routeEntry struct {
	stats []*RouteStats
	left  routeSnapshot
}

// The route series' names (after portico_proxy_) and help.
const (
	requestsName = "requests_total"
	requestsHelp = "Downstream HTTP requests by listener, virtual host, route (the object that declared it, kind/namespace/name), its path condition and response code class; \"(none)\" when nothing matched."
	durationName = "request_duration_seconds"
	durationHelp = "Time from receiving a downstream request to finishing its response, by listener, virtual host, route and path condition."
	sizeName     = "response_size_bytes"
	sizeHelp     = "Response body bytes sent downstream, by listener, virtual host, route and path condition."
)

func newRouteCollector() *routeCollector {
	name := func(n string) string { return prometheus.BuildFQName("portico", "proxy", n) }
	return &routeCollector{
		requests: prometheus.NewDesc(name(requestsName), requestsHelp, stats.WithClass(routeLabels), nil),
		duration: prometheus.NewDesc(name(durationName), durationHelp, routeLabels, nil),
		size:     prometheus.NewDesc(name(sizeName), sizeHelp, routeLabels, nil),
		routes:   make(map[RouteKey]*routeEntry),
	}
}

func (c *routeCollector) add(s *RouteStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.routes[s.Key]
	if e == nil {
		e = new(routeEntry)
		c.routes[s.Key] = e
	}
	e.stats = append(e.stats, s)
}

func (c *routeCollector) remove(s *RouteStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.routes[s.Key]
	if e == nil {
		return
	}
	e.stats = slices.DeleteFunc(e.stats, func(o *RouteStats) bool { return o == s })
	if len(e.stats) == 0 {
		delete(c.routes, s.Key)
		return
	}
	e.left.add(&s.counts)
}

func (c *routeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.requests
	ch <- c.duration
	ch <- c.size
}

func (c *routeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, e := range c.routes {
		snap := e.left
		for _, s := range e.stats {
			snap.add(&s.counts)
		}
		c.collect(ch, key, &snap)
	}
}

// routeSnapshot are the counts of a label set's stats, read once.
type routeSnapshot struct {
	created              uint32
	requests             [len(stats.CodeClasses)]uint64
	buckets              [durationSlots + sizeSlots]uint64
	durationSum, sizeSum float64
	createdAt            [len(stats.CodeClasses) + 1]int64 // unix nanoseconds
}

func (snap *routeSnapshot) add(c *routeCounts) {
	created := c.created.Load()
	for i := range c.createdAt {
		if created&(1<<i) != 0 && (snap.created&(1<<i) == 0 || c.createdAt[i].Load() < snap.createdAt[i]) {
			snap.createdAt[i] = c.createdAt[i].Load()
		}
	}
	snap.created |= created
	for i := range c.requests {
		snap.requests[i] += c.requests[i].Load()
	}
	for i := range c.buckets {
		snap.buckets[i] += c.buckets[i].Load()
	}
	snap.durationSum += math.Float64frombits(c.durationSum.Load())
	snap.sizeSum += math.Float64frombits(c.sizeSum.Load())
}

func (c *routeCollector) collect(ch chan<- prometheus.Metric, key RouteKey, snap *routeSnapshot) {
	for class, n := range snap.requests {
		if snap.created&classCreated(class) != 0 {
			ch <- metricOrError(c.requests)(prometheus.NewConstMetricWithCreatedTimestamp(c.requests, prometheus.CounterValue, float64(n),
				time.Unix(0, snap.createdAt[class]), key.values(stats.CodeClasses[class])...))
		}
	}
	if snap.created&histogramsCreated != 0 {
		labels, created := key.values(), time.Unix(0, snap.createdAt[len(stats.CodeClasses)])
		ch <- constHistogram(c.duration, latencyBuckets[:], snap.buckets[:durationSlots], snap.durationSum, created, labels)
		ch <- constHistogram(c.size, sizeBuckets[:], snap.buckets[durationSlots:], snap.sizeSum, created, labels)
	}
}

// constHistogram is a histogram of per-bucket counts (the last +Inf's).
func constHistogram(desc *prometheus.Desc, bounds []float64, counts []uint64, sum float64, created time.Time, labels []string) prometheus.Metric {
	cumulative := make(map[float64]uint64, len(bounds))
	var total uint64
	for i, b := range bounds {
		total += counts[i]
		cumulative[b] = total
	}
	total += counts[len(bounds)]
	return metricOrError(desc)(prometheus.NewConstHistogramWithCreatedTimestamp(desc, total, sum, cumulative, created, labels...))
}

// metricOrError reports a series whose labels client_golang refuses
// (invalid UTF-8, which xDS strings cannot hold) as the scrape's error
// without failing the other series.
func metricOrError(desc *prometheus.Desc) func(prometheus.Metric, error) prometheus.Metric {
	return func(m prometheus.Metric, err error) prometheus.Metric {
		if err != nil {
			return prometheus.NewInvalidMetric(desc, err)
		}
		return m
	}
}
