package hcm

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/portico-dev/portico/internal/proxy/accesslog"
	"github.com/portico-dev/portico/internal/proxy/stats"
)

// UnmatchedLabel is the vhost, route and path label value of requests that
// matched no virtual host (or, for route and path, no route of their virtual
// host), and of requests refused before routing (431).
const UnmatchedLabel = accesslog.Unmatched

// latencyBuckets extend to 10 minutes: beyond Envoy's default route timeout
// (15s) and any reasonable configured one, so that slow routes land in a
// bucket instead of +Inf.
var latencyBuckets = [...]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300, 600}

// sizeBuckets are response body sizes from 64 bytes to 256 MiB, by factors of 4.
var sizeBuckets = func() (b [12]float64) {
	copy(b[:], prometheus.ExponentialBuckets(64, 4, len(b)))
	return b
}()

// Reasons of refused request headers (reason label).
const (
	headersTooLarge = "size"
	tooManyHeaders  = "count"
)

// routeLabels name a route's series.
var routeLabels = []string{"listener", "vhost", "route", "path"}

// Metrics are the request path's Prometheus collectors. They always
// exist (so the hot path needs no nil checks) and are registered only when
// a Registerer is configured.
//
// A series is created by the first event it counts, never ahead of it (see
// stats.Group), and deleted when the last route labelled with it leaves the
// configuration, so that label cardinality follows the configuration in
// force and the traffic it has seen.
type Metrics struct {
	routes         *routeCollector        // the requests, duration and size series of routes
	headersRefused *prometheus.CounterVec // reason
	// filterReplies counts the requests an HTTP filter answered, by filter
	// name and status code.
	filterReplies *prometheus.CounterVec
	// mirrors counts the copies of requests for mirrors, by result.
	mirrors *prometheus.CounterVec
	// malformed counts the requests the HTTP/1.1 codec answered itself, by
	// status code.
	malformed *prometheus.CounterVec
}

// NewMetrics creates the request path's collectors, registered with reg when
// it is not nil.
func NewMetrics(reg prometheus.Registerer, log *slog.Logger) *Metrics {
	m := &Metrics{
		routes: newRouteCollector(),
		headersRefused: stats.CounterVec("request_headers_refused_total",
			"Requests answered 431 because their headers exceeded max_request_headers_kb (reason size) or max_headers_count (reason count).",
			"reason"),
		filterReplies: stats.CounterVec("http_filter_replies_total",
			"Requests answered by an HTTP filter (denied by an IP rule, rate limited, refused by authorization or JWT verification, a CORS preflight) instead of the router, by filter and status code.",
			"filter", "code"),
		mirrors: stats.CounterVec("mirror_requests_total",
			"Copies of requests for a route's mirrors (request_mirror_policies), by result: sent (an answer came back, dropped), timeout, error, skipped_body_too_large (bodies over 1 MiB are not copied), skipped_too_many_in_flight (512 copies at once at most), skipped_error.",
			"result"),
		malformed: stats.CounterVec("downstream_requests_malformed_total",
			"HTTP/1.1 requests the proxy could not read and answered itself before routing (400 malformed, 431 head over the read limit, 501 unsupported Transfer-Encoding, 505 version), by status code; the connection is closed after the answer.",
			"code"),
	}
	if reg != nil {
		m.routes = stats.Register(reg, m.routes, log)
		m.headersRefused = stats.Register(reg, m.headersRefused, log)
		m.filterReplies = stats.Register(reg, m.filterReplies, log)
		m.mirrors = stats.Register(reg, m.mirrors, log)
		m.malformed = stats.Register(reg, m.malformed, log)
	}
	return m
}

// headersRefusedFor counts a request refused for reason; a reason's series
// appears with its first refusal.
func (m *Metrics) headersRefusedFor(reason string) {
	m.headersRefused.WithLabelValues(reason).Inc()
}

func (m *Metrics) filterReply(filter string, status int) {
	m.filterReplies.WithLabelValues(filter, strconv.Itoa(status)).Inc()
}

func (m *Metrics) mirrored(result string) { m.mirrors.WithLabelValues(result).Inc() }

// RouteKey is the label set of a route's request series: routes that differ
// only in what the labels do not show (header conditions, policies) share
// them.
type RouteKey struct {
	Listener, Vhost, Route, Path string
}

func (k RouteKey) values(extra ...string) []string {
	return append([]string{k.Listener, k.Vhost, k.Route, k.Path}, extra...)
}

// RouteStats are the request metrics of one routeKey (or of the requests of
// a listener or virtual host that matched nothing). The proxy keeps one per
// routeKey across configurations.
type RouteStats struct {
	counts routeCounts // first: a request touches nothing else
	M      *Metrics
	Key    RouteKey
	series stats.Group
	Gen    uint64 // the last compilation that referenced it (ADS goroutine only)
}

// Observe records a finished request: its code class's counter and the
// histograms, each series created by its first request.
func (s *RouteStats) Observe(status int, seconds float64, bytes int64) {
	class := stats.CodeClass(status)
	if want := classCreated(class) | histogramsCreated; s.counts.created.Load()&want != want {
		s.create(want)
	}
	s.counts.observe(class, seconds, bytes)
}

// create makes the series of bits exist, unless the route's stats were
// retired: then nothing exports what they count.
func (s *RouteStats) create(bits uint32) {
	s.series.Locked(func(retired bool) {
		if retired {
			return // Remove has set every bit
		}
		created := s.counts.created.Load()
		if created == 0 {
			s.M.routes.add(s)
		}
		now := time.Now().UnixNano()
		for i := range s.counts.createdAt {
			if bit := uint32(1) << i; bits&bit != 0 && created&bit == 0 {
				s.counts.createdAt[i].Store(now)
			}
		}
		s.counts.created.Or(bits)
	})
}

// Remove deletes the route's series. A request that finishes later counts
// in stats nothing exports.
func (s *RouteStats) Remove() {
	s.series.Retire(func() {
		if s.counts.created.Load() != 0 {
			s.M.routes.remove(s) // reads the series it created
		}
		s.counts.created.Store(allCreated)
	})
}

// RouteTableStats are the request metrics of one filter chain's route
// table, indexed like it, so that the request path finds them without a
// lookup.
type RouteTableStats struct {
	NoVhost *RouteStats
	Vhosts  []VhostStats // by virtualHost.slot; a free slot's are zero
	// Base is the stats of the chain's applied compilation these were built
	// from (nil: none); dropped are the slots in base.vhosts of the
	// virtual hosts they do not keep, whose stats may no longer be used.
	Base    *RouteTableStats
	Dropped []int
}

// VhostStats are the request metrics of one virtual host's routes.
type VhostStats struct {
	NoRoute *RouteStats
	Routes  []*RouteStats // by route.index
}

// Mark marks the stats as used by the compilation gen.
func (vs *VhostStats) Mark(gen uint64) {
	if vs.NoRoute == nil {
		return // a free slot
	}
	vs.NoRoute.Gen = gen
	for _, s := range vs.Routes {
		s.Gen = gen
	}
}
