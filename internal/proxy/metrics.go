package proxy

import (
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/portico-dev/portico/internal/proxy/router"
	"github.com/portico-dev/portico/internal/proxy/stats"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"github.com/portico-dev/portico/internal/proxy/xdsclient"
	"github.com/prometheus/client_golang/prometheus"
)

// unmatchedLabel is the vhost, route and path label value of requests that
// matched no virtual host (or, for route and path, no route of their virtual
// host), and of requests refused before routing (431).
const unmatchedLabel = "(none)"

// latencyBuckets extend to 10 minutes: beyond Envoy's default route timeout
// (15s) and any reasonable configured one, so that slow routes land in a
// bucket instead of +Inf.
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300, 600}

// sizeBuckets are response body sizes from 64 bytes to 256 MiB, by factors of 4.
var sizeBuckets = prometheus.ExponentialBuckets(64, 4, 12)

// Reasons of refused request headers (reason label).
const (
	headersTooLarge = "size"
	tooManyHeaders  = "count"
)

// routeLabels name a route's series.
var routeLabels = []string{"listener", "vhost", "route", "path"}

// metrics are the proxy's Prometheus collectors. They always exist (so the
// hot path needs no nil checks) and are registered only when a Registerer is
// configured.
//
// A series is created by the first event it counts, never ahead of it (see
// stats.Group), and deleted when the last route or cluster labelled with it
// leaves the configuration, so that label cardinality follows the
// configuration in force and the traffic it has seen.
type metrics struct {
	requests       *prometheus.CounterVec   // routeLabels, code_class
	duration       *prometheus.HistogramVec // routeLabels
	responseSize   *prometheus.HistogramVec // routeLabels
	headersRefused *prometheus.CounterVec   // reason
	xdsUpdates     *prometheus.CounterVec

	// upstream are the series of Service ports (package upstream).
	upstream *upstream.Metrics

	accessLogDropped prometheus.Counter
	// filterReplies counts the requests an HTTP filter answered, by filter
	// name and status code.
	filterReplies *prometheus.CounterVec
	// mirrors counts the copies of requests for mirrors, by result.
	mirrors *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, log *slog.Logger) *metrics {
	m := &metrics{
		requests: stats.CounterVec("requests_total",
			"Downstream HTTP requests by listener, virtual host, route (the object that declared it, kind/namespace/name), its path condition and response code class; \"(none)\" when nothing matched.",
			stats.WithClass(routeLabels)...),
		duration: stats.HistogramVec("request_duration_seconds",
			"Time from receiving a downstream request to finishing its response, by listener, virtual host, route and path condition.",
			latencyBuckets, routeLabels...),
		responseSize: stats.HistogramVec("response_size_bytes",
			"Response body bytes sent downstream, by listener, virtual host, route and path condition.",
			sizeBuckets, routeLabels...),
		headersRefused: stats.CounterVec("request_headers_refused_total",
			"Requests answered 431 because their headers exceeded max_request_headers_kb (reason size) or max_headers_count (reason count).",
			"reason"),
		xdsUpdates: stats.CounterVec("xds_updates_total", "xDS responses by resource type and outcome (ack or nack).", "type", "result"),
		filterReplies: stats.CounterVec("http_filter_replies_total",
			"Requests answered by an HTTP filter (denied by an IP rule, rate limited, refused by authorization or JWT verification, a CORS preflight) instead of the router, by filter and status code.",
			"filter", "code"),
		mirrors: stats.CounterVec("mirror_requests_total",
			"Copies of requests for a route's mirrors (request_mirror_policies), by result: sent (an answer came back, dropped), timeout, error, skipped_body_too_large (bodies over 1 MiB are not copied), skipped_too_many_in_flight (512 copies at once at most), skipped_error.",
			"result"),
		accessLogDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "portico",
			Subsystem: "proxy",
			Name:      "access_log_dropped_total",
			Help:      "Access log lines dropped because the log sink was slower than the traffic (the queue of lines waiting for it was full).",
		}),
		upstream: upstream.NewMetrics(reg, log),
	}
	if reg != nil {
		m.requests = stats.Register(reg, m.requests, log)
		m.duration = stats.Register(reg, m.duration, log)
		m.responseSize = stats.Register(reg, m.responseSize, log)
		m.headersRefused = stats.Register(reg, m.headersRefused, log)
		m.xdsUpdates = stats.Register(reg, m.xdsUpdates, log)
		m.accessLogDropped = stats.Register(reg, m.accessLogDropped, log)
		m.filterReplies = stats.Register(reg, m.filterReplies, log)
		m.mirrors = stats.Register(reg, m.mirrors, log)
	}
	return m
}

func (m *metrics) xdsUpdate(typeURL, result string) {
	m.xdsUpdates.WithLabelValues(xdsclient.ShortTypeName(typeURL), result).Inc()
}

// headersRefusedFor counts a request refused for reason; a reason's series
// appears with its first refusal.
func (m *metrics) headersRefusedFor(reason string) {
	m.headersRefused.WithLabelValues(reason).Inc()
}

func (m *metrics) filterReply(filter string, status int) {
	m.filterReplies.WithLabelValues(filter, strconv.Itoa(status)).Inc()
}

func (m *metrics) mirrored(result string) { m.mirrors.WithLabelValues(result).Inc() }

// routeKey is the label set of a route's request series: routes that differ
// only in what the labels do not show (header conditions, policies) share
// them.
type routeKey struct {
	listener, vhost, route, path string
}

func (k routeKey) values(extra ...string) []string {
	return append([]string{k.listener, k.vhost, k.route, k.path}, extra...)
}

// routeObservers are a route's histograms, created together with its first
// finished request.
type routeObservers struct {
	duration, size prometheus.Observer
}

// routeStats are the request metrics of one routeKey (or of the requests of
// a listener or virtual host that matched nothing). The proxy keeps one per
// routeKey across configurations.
type routeStats struct {
	m          *metrics
	key        routeKey
	series     stats.Group
	requests   [len(stats.CodeClasses)]atomic.Pointer[prometheus.Counter]
	histograms atomic.Pointer[routeObservers]
	gen        uint64 // the last compilation that referenced it (ADS goroutine only)
}

// observe records a finished request: its code class's counter and the
// histograms, each created by its first request.
func (s *routeStats) observe(status int, seconds float64, bytes int64) {
	class := stats.CodeClass(status)
	var requests prometheus.Counter
	if c := s.requests[class].Load(); c != nil {
		requests = *c
	} else {
		requests = s.createRequests(class)
	}
	obs := s.histograms.Load()
	if obs == nil {
		o := s.createObservers()
		obs = &o
	}
	requests.Inc()
	obs.duration.Observe(seconds)
	obs.size.Observe(float64(bytes))
}

func (s *routeStats) createRequests(class int) prometheus.Counter {
	return stats.Get(&s.series, &s.requests[class], func() prometheus.Counter {
		return s.m.requests.WithLabelValues(s.key.values(stats.CodeClasses[class])...)
	}, stats.DiscardedCounter)
}

func (s *routeStats) createObservers() routeObservers {
	return stats.Get(&s.series, &s.histograms, func() routeObservers {
		return routeObservers{
			duration: s.m.duration.WithLabelValues(s.key.values()...),
			size:     s.m.responseSize.WithLabelValues(s.key.values()...),
		}
	}, routeObservers{duration: stats.DiscardedHistogram, size: stats.DiscardedHistogram})
}

// remove deletes the route's series.
func (s *routeStats) remove() {
	s.series.Retire(func() {
		for class := range s.requests {
			if s.requests[class].Load() != nil {
				s.m.requests.DeleteLabelValues(s.key.values(stats.CodeClasses[class])...)
			}
		}
		if s.histograms.Load() != nil {
			s.m.duration.DeleteLabelValues(s.key.values()...)
			s.m.responseSize.DeleteLabelValues(s.key.values()...)
		}
	})
}

// routeTableStats are the request metrics of one filter chain's route
// table, indexed like it, so that the request path finds them without a
// lookup.
type routeTableStats struct {
	noVhost *routeStats
	vhosts  []vhostStats // by virtualHost.slot; a free slot's are zero
	// base is the stats of the chain's applied compilation these were built
	// from (nil: none); dropped are the slots in base.vhosts of the
	// virtual hosts they do not keep, whose stats may no longer be used.
	base    *routeTableStats
	dropped []int
}

type vhostStats struct {
	noRoute *routeStats
	routes  []*routeStats // by route.index
}

// routeStatsFor returns the stats of key, creating them, and marks them as
// used by the compilation gen. Only the ADS goroutine calls it.
func (p *Proxy) routeStatsFor(key routeKey, gen uint64) *routeStats {
	s, ok := p.routeStats[key]
	if !ok {
		s = &routeStats{m: p.metrics, key: key}
		p.routeStats[key] = s
	}
	s.gen = gen
	return s
}

// compileRouteStats resolves (without creating series) the stats of every
// route of rt served on listener. prev is the chain's applied compilation
// (nil: none): a virtual host it shares with rt keeps its stats, found
// without looking up each of its routes.
func (p *Proxy) compileRouteStats(listener string, rt *router.RouteTable, gen uint64, prev *filterChain) *routeTableStats {
	ts := &routeTableStats{noVhost: p.routeStatsFor(routeKey{listener, unmatchedLabel, unmatchedLabel, unmatchedLabel}, gen)}
	if prev == nil || prev.stats == nil {
		ts.vhosts = make([]vhostStats, rt.Slots)
		for _, vh := range rt.Vhosts {
			ts.vhosts[vh.Slot] = p.vhostStatsFor(listener, vh, gen)
		}
		return ts
	}
	ts.base = prev.stats
	if rt.PatchedFrom(prev.routes) {
		p.patchRouteStats(ts, listener, rt, gen)
		return ts
	}
	ts.vhosts = make([]vhostStats, rt.Slots)
	match := router.NewAligner(prev.routes.Vhosts, func(vh *router.VirtualHost) *router.VhostDef { return vh.VhostDef })
	kept := make([]bool, len(prev.stats.vhosts))
	for _, vh := range rt.Vhosts {
		vs := &ts.vhosts[vh.Slot]
		if j, ok := match.Find(vh.VhostDef); ok {
			if slot := prev.routes.Vhosts[j].Slot; !kept[slot] {
				*vs = prev.stats.vhosts[slot]
				kept[slot] = true
				vs.mark(gen)
				continue
			}
		}
		*vs = p.vhostStatsFor(listener, vh, gen)
	}
	for _, vh := range prev.routes.Vhosts {
		if !kept[vh.Slot] {
			ts.dropped = append(ts.dropped, vh.Slot)
		}
	}
	return ts
}

// patchRouteStats gives ts, whose base is the stats of the table rt was
// patched from, those stats but for the virtual hosts the patch removed
// and added: the kept ones are in the same slots.
func (p *Proxy) patchRouteStats(ts *routeTableStats, listener string, rt *router.RouteTable, gen uint64) {
	ts.vhosts = make([]vhostStats, rt.Slots)
	copy(ts.vhosts, ts.base.vhosts)
	for _, vh := range rt.Patch.Removed {
		ts.dropped = append(ts.dropped, vh.Slot)
		ts.vhosts[vh.Slot] = vhostStats{}
	}
	for i := range ts.vhosts {
		ts.vhosts[i].mark(gen)
	}
	for _, vh := range rt.Patch.Added {
		ts.vhosts[vh.Slot] = p.vhostStatsFor(listener, vh, gen)
	}
}

// vhostStatsFor resolves the stats of vh's routes.
func (p *Proxy) vhostStatsFor(listener string, vh *router.VirtualHost, gen uint64) vhostStats {
	vs := vhostStats{noRoute: p.routeStatsFor(routeKey{listener, vh.Name, unmatchedLabel, unmatchedLabel}, gen),
		routes: make([]*routeStats, len(vh.Routes))}
	for j, r := range vh.Routes {
		vs.routes[j] = p.routeStatsFor(routeKey{listener, vh.Name, r.Label, r.PathLabel}, gen)
	}
	return vs
}

// syncRouteStats deletes the series of routes that the applied snapshot no
// longer has. Those can only be the stats of chains it rebuilt or dropped
// (of the virtual hosts a rebuilt chain did not keep) and those that failed
// compilations since the applied one resolved; when there were none of
// the latter, only the former are looked at, not every route's.
func (p *Proxy) syncRouteStats(snap *snapshot) {
	prev := p.current.Load()
	contiguous := prev != nil && prev.routeStatsClean && snap.compiledAt == prev.compiledAt+1
	switch {
	case snap.sameRouteStats:
		snap.routeStatsClean = contiguous
		return
	case contiguous:
		for cs, old := range prev.chains {
			if cc := snap.chains[cs]; cc != old {
				p.sweepRouteStats(old.fc.stats, cc, snap.gen)
			}
		}
	default:
		for key, s := range p.routeStats {
			if s.gen != snap.gen {
				s.remove()
				delete(p.routeStats, key)
			}
		}
	}
	// Swept: the stats each was built from are no longer needed, and would
	// otherwise keep every earlier version's alive, one through the next.
	for _, cc := range snap.chains {
		if cc.fc.stats != nil {
			cc.fc.stats.base, cc.fc.stats.dropped = nil, nil
		}
	}
	snap.routeStatsClean = true
}

// sweepRouteStats deletes those of the stats of old, a chain of the applied
// snapshot, that the compilation gen does not use. next is what replaces
// the chain (nil: none): when it was built from old, only the stats of the
// virtual hosts it dropped can be unused.
func (p *Proxy) sweepRouteStats(old *routeTableStats, next *compiledChain, gen uint64) {
	if old == nil {
		return
	}
	if next != nil && next.fc.stats != nil && next.fc.stats.base == old {
		for _, j := range next.fc.stats.dropped {
			p.sweepVhostStats(&old.vhosts[j], gen)
		}
		return
	}
	p.sweepStats(old.noVhost, gen)
	for i := range old.vhosts {
		p.sweepVhostStats(&old.vhosts[i], gen)
	}
}

func (p *Proxy) sweepVhostStats(vs *vhostStats, gen uint64) {
	if vs.noRoute == nil {
		return // a free slot
	}
	p.sweepStats(vs.noRoute, gen)
	for _, s := range vs.routes {
		p.sweepStats(s, gen)
	}
}

// sweepStats deletes s unless the compilation gen uses it.
func (p *Proxy) sweepStats(s *routeStats, gen uint64) {
	if s.gen != gen && p.routeStats[s.key] == s {
		s.remove()
		delete(p.routeStats, s.key)
	}
}
