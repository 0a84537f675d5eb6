package proxy

import (
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// unmatchedLabel is the vhost and route label value of requests that matched
// no virtual host (or, for route, no route of their virtual host), and of
// requests refused before routing (431).
const unmatchedLabel = "(none)"

// codeClasses are the values of the code_class label.
var codeClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// codeClass returns the index in codeClasses of a status code; anything
// outside 100-599 counts as 5xx.
func codeClass(status int) int {
	if c := status/100 - 1; c >= 0 && c < len(codeClasses) {
		return c
	}
	return len(codeClasses) - 1
}

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

// metrics are the proxy's Prometheus collectors. They always exist (so the
// hot path needs no nil checks) and are registered only when a Registerer is
// configured.
//
// Series of routes and clusters are resolved once per route or cluster (on
// its first request, see lazySeries), never per request, and are deleted when
// the route or cluster leaves the configuration, so that label cardinality
// follows the configuration in force.
type metrics struct {
	requests         *prometheus.CounterVec   // listener, vhost, route, code_class
	duration         *prometheus.HistogramVec // listener, vhost, route
	responseSize     *prometheus.HistogramVec // listener, vhost, route
	upstreamRequests *prometheus.CounterVec   // cluster, code_class
	retries          *prometheus.CounterVec   // cluster
	perTryTimeouts   *prometheus.CounterVec   // cluster
	timeouts         *prometheus.CounterVec   // cluster
	connectFailures  *prometheus.CounterVec   // cluster
	// destinationsRefused counts connections the egress guard refused.
	destinationsRefused *prometheus.CounterVec // reason
	headersRefused      *prometheus.CounterVec // reason
	xdsUpdates          *prometheus.CounterVec
	// healthyEndpoints exists for clusters with active health checks.
	healthyEndpoints *prometheus.GaugeVec
	// outlierEjections and ejectedEndpoints exist for clusters with outlier
	// detection.
	outlierEjections *prometheus.CounterVec // cluster
	ejectedEndpoints *prometheus.GaugeVec   // cluster

	accessLogDropped prometheus.Counter

	// refusedSize and refusedCount are the children of headersRefused.
	refusedSize, refusedCount prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, log *slog.Logger) *metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "portico", Subsystem: "proxy", Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "portico", Subsystem: "proxy", Name: name, Help: help, Buckets: buckets}, labels)
	}
	m := &metrics{
		requests: counter("requests_total",
			"Downstream HTTP requests by listener, virtual host, route (xDS names; \"(none)\" when nothing matched) and response code class.",
			"listener", "vhost", "route", "code_class"),
		duration: histogram("request_duration_seconds",
			"Time from receiving a downstream request to finishing its response, by listener, virtual host and route.",
			latencyBuckets, "listener", "vhost", "route"),
		responseSize: histogram("response_size_bytes",
			"Response body bytes sent downstream, by listener, virtual host and route.",
			sizeBuckets, "listener", "vhost", "route"),
		upstreamRequests: counter("upstream_requests_total",
			"Requests forwarded to a cluster, by cluster and the code class of the response the client got.",
			"cluster", "code_class"),
		retries: counter("upstream_retries_total",
			"Retries of upstream requests (route retry_policy) by cluster.", "cluster"),
		perTryTimeouts: counter("upstream_per_try_timeouts_total",
			"Upstream attempts that exceeded the route's per_try_timeout, by cluster.", "cluster"),
		timeouts: counter("upstream_timeouts_total",
			"Requests that exceeded the route timeout while forwarded to a cluster, by cluster.", "cluster"),
		connectFailures: counter("upstream_connect_failures_total",
			"Upstream attempts that could not connect (refused, connect_timeout), by cluster.", "cluster"),
		destinationsRefused: counter("upstream_destinations_refused_total",
			"Upstream connections the proxy would not make, by reason: a name resolving to a loopback (loopback), link-local (link_local) or unspecified (unspecified) address, or any endpoint at an address Portico listens on (own_address).",
			"reason"),
		headersRefused: counter("request_headers_refused_total",
			"Requests answered 431 because their headers exceeded max_request_headers_kb (reason size) or max_headers_count (reason count).",
			"reason"),
		xdsUpdates: counter("xds_updates_total", "xDS responses by resource type and outcome (ack or nack).", "type", "result"),
		healthyEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "portico",
			Subsystem: "proxy",
			Name:      "cluster_healthy_endpoints",
			Help:      "Endpoints passing active health checks, by cluster (clusters with health_checks only).",
		}, []string{"cluster"}),
		outlierEjections: counter("upstream_outlier_ejections_total",
			"Endpoints ejected by outlier detection, by cluster (clusters with outlier_detection only).", "cluster"),
		ejectedEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "portico",
			Subsystem: "proxy",
			Name:      "cluster_ejected_endpoints",
			Help:      "Endpoints currently ejected by outlier detection, by cluster (clusters with outlier_detection only).",
		}, []string{"cluster"}),
		accessLogDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "portico",
			Subsystem: "proxy",
			Name:      "access_log_dropped_total",
			Help:      "Access log lines dropped because the log sink was slower than the traffic (the queue of lines waiting for it was full).",
		}),
	}
	if reg != nil {
		m.requests = register(reg, m.requests, log)
		m.duration = register(reg, m.duration, log)
		m.responseSize = register(reg, m.responseSize, log)
		m.upstreamRequests = register(reg, m.upstreamRequests, log)
		m.retries = register(reg, m.retries, log)
		m.perTryTimeouts = register(reg, m.perTryTimeouts, log)
		m.timeouts = register(reg, m.timeouts, log)
		m.connectFailures = register(reg, m.connectFailures, log)
		m.destinationsRefused = register(reg, m.destinationsRefused, log)
		m.headersRefused = register(reg, m.headersRefused, log)
		m.xdsUpdates = register(reg, m.xdsUpdates, log)
		m.healthyEndpoints = register(reg, m.healthyEndpoints, log)
		m.outlierEjections = register(reg, m.outlierEjections, log)
		m.ejectedEndpoints = register(reg, m.ejectedEndpoints, log)
		m.accessLogDropped = register(reg, m.accessLogDropped, log)
	}
	m.refusedSize = m.headersRefused.WithLabelValues(headersTooLarge)
	m.refusedCount = m.headersRefused.WithLabelValues(tooManyHeaders)
	return m
}

// register registers c, reusing an identical collector that is already
// registered (e.g. a second Proxy sharing one registry).
func register[C prometheus.Collector](reg prometheus.Registerer, c C, log *slog.Logger) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	log.Warn("cannot register proxy metrics", "error", err)
	return c
}

func (m *metrics) xdsUpdate(typeURL, result string) {
	m.xdsUpdates.WithLabelValues(shortTypeName(typeURL), result).Inc()
}

// headersRefusedFor counts a request refused for reason.
func (m *metrics) headersRefusedFor(reason string) {
	if reason == headersTooLarge {
		m.refusedSize.Inc()
	} else {
		m.refusedCount.Inc()
	}
}

// lazySeries holds series resolved on first use. Once retired (its route or
// cluster left the configuration and its series were deleted) it never
// resolves again, so that a request still running on an old configuration
// cannot bring deleted series back.
type lazySeries[T any] struct {
	resolved atomic.Pointer[T]
	mu       sync.Mutex
	retired  bool
}

// get returns the resolved series, resolving them with create unless
// retired (then discard, which nothing exports).
func (l *lazySeries[T]) get(create func() *T, discard *T) *T {
	if s := l.resolved.Load(); s != nil {
		return s
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.resolved.Load(); s != nil {
		return s
	}
	if l.retired {
		return discard
	}
	s := create()
	l.resolved.Store(s)
	return s
}

// retire stops resolution and reports whether series had been resolved (and
// so need deleting).
func (l *lazySeries[T]) retire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.retired = true
	return l.resolved.Load() != nil
}

// routeKey is the label set of a route's request series.
type routeKey struct {
	listener, vhost, route string
}

// routeSeries are the request series of one routeKey.
type routeSeries struct {
	requests [len(codeClasses)]prometheus.Counter
	duration prometheus.Observer
	size     prometheus.Observer
}

// routeStats are the request metrics of one route (or of the requests of a
// listener or virtual host that matched nothing). The proxy keeps one per
// routeKey across configurations.
type routeStats struct {
	m      *metrics
	key    routeKey
	series lazySeries[routeSeries]
	gen    uint64 // the last compilation that referenced it (ADS goroutine only)
}

func (s *routeStats) get() *routeSeries {
	if rs := s.series.resolved.Load(); rs != nil {
		return rs
	}
	return s.series.get(s.create, discardedRouteSeries)
}

func (s *routeStats) create() *routeSeries {
	k := s.key
	rs := &routeSeries{
		duration: s.m.duration.WithLabelValues(k.listener, k.vhost, k.route),
		size:     s.m.responseSize.WithLabelValues(k.listener, k.vhost, k.route),
	}
	for i, c := range codeClasses {
		rs.requests[i] = s.m.requests.WithLabelValues(k.listener, k.vhost, k.route, c)
	}
	return rs
}

// remove deletes the route's series.
func (s *routeStats) remove() {
	if !s.series.retire() {
		return
	}
	k := s.key
	s.m.duration.DeleteLabelValues(k.listener, k.vhost, k.route)
	s.m.responseSize.DeleteLabelValues(k.listener, k.vhost, k.route)
	for _, c := range codeClasses {
		s.m.requests.DeleteLabelValues(k.listener, k.vhost, k.route, c)
	}
}

// observe records a finished request.
func (s *routeStats) observe(status int, seconds float64, bytes int64) {
	rs := s.get()
	rs.requests[codeClass(status)].Inc()
	rs.duration.Observe(seconds)
	rs.size.Observe(float64(bytes))
}

// clusterSeries are the series of one cluster.
type clusterSeries struct {
	requests        [len(codeClasses)]prometheus.Counter
	retries         prometheus.Counter
	perTryTimeouts  prometheus.Counter
	timeouts        prometheus.Counter
	connectFailures prometheus.Counter
}

// clusterStats are the metrics of one cluster, kept in its clusterState.
type clusterStats struct {
	m      *metrics
	name   string
	series lazySeries[clusterSeries]
}

func (m *metrics) newClusterStats(name string) *clusterStats {
	return &clusterStats{m: m, name: name}
}

func (s *clusterStats) get() *clusterSeries {
	if cs := s.series.resolved.Load(); cs != nil {
		return cs
	}
	return s.series.get(s.create, discardedClusterSeries)
}

func (s *clusterStats) create() *clusterSeries {
	cs := &clusterSeries{
		retries:         s.m.retries.WithLabelValues(s.name),
		perTryTimeouts:  s.m.perTryTimeouts.WithLabelValues(s.name),
		timeouts:        s.m.timeouts.WithLabelValues(s.name),
		connectFailures: s.m.connectFailures.WithLabelValues(s.name),
	}
	for i, c := range codeClasses {
		cs.requests[i] = s.m.upstreamRequests.WithLabelValues(s.name, c)
	}
	return cs
}

// remove deletes the cluster's series.
func (s *clusterStats) remove() {
	if s == nil || !s.series.retire() {
		return
	}
	for _, v := range []*prometheus.CounterVec{s.m.retries, s.m.perTryTimeouts, s.m.timeouts, s.m.connectFailures} {
		v.DeleteLabelValues(s.name)
	}
	for _, c := range codeClasses {
		s.m.upstreamRequests.DeleteLabelValues(s.name, c)
	}
}

// Series that nothing exports, for requests of routes and clusters that
// left the configuration while they ran.
var (
	discardedRouteSeries   = newDiscardedRouteSeries()
	discardedClusterSeries = newDiscardedClusterSeries()
)

func discardCounter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "discarded"})
}

func newDiscardedRouteSeries() *routeSeries {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "discarded"})
	rs := &routeSeries{duration: h, size: h}
	for i := range rs.requests {
		rs.requests[i] = discardCounter()
	}
	return rs
}

func newDiscardedClusterSeries() *clusterSeries {
	c := discardCounter()
	cs := &clusterSeries{retries: c, perTryTimeouts: c, timeouts: c, connectFailures: c}
	for i := range cs.requests {
		cs.requests[i] = c
	}
	return cs
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
func (p *Proxy) compileRouteStats(listener string, rt *routeTable, gen uint64, prev *filterChain) *routeTableStats {
	ts := &routeTableStats{noVhost: p.routeStatsFor(routeKey{listener, unmatchedLabel, unmatchedLabel}, gen)}
	if prev == nil || prev.stats == nil {
		ts.vhosts = make([]vhostStats, rt.slots)
		for _, vh := range rt.vhosts {
			ts.vhosts[vh.slot] = p.vhostStatsFor(listener, vh, gen)
		}
		return ts
	}
	ts.base = prev.stats
	if rt.patchedFrom(prev.routes) {
		p.patchRouteStats(ts, listener, rt, gen)
		return ts
	}
	ts.vhosts = make([]vhostStats, rt.slots)
	match := newAligner(prev.routes.vhosts, func(vh *virtualHost) *vhostDef { return vh.vhostDef })
	kept := make([]bool, len(prev.stats.vhosts))
	for _, vh := range rt.vhosts {
		vs := &ts.vhosts[vh.slot]
		if j, ok := match.find(vh.vhostDef); ok {
			if slot := prev.routes.vhosts[j].slot; !kept[slot] {
				*vs = prev.stats.vhosts[slot]
				kept[slot] = true
				vs.mark(gen)
				continue
			}
		}
		*vs = p.vhostStatsFor(listener, vh, gen)
	}
	for _, vh := range prev.routes.vhosts {
		if !kept[vh.slot] {
			ts.dropped = append(ts.dropped, vh.slot)
		}
	}
	return ts
}

// patchRouteStats gives ts, whose base is the stats of the table rt was
// patched from, those stats but for the virtual hosts the patch removed
// and added: the kept ones are in the same slots.
func (p *Proxy) patchRouteStats(ts *routeTableStats, listener string, rt *routeTable, gen uint64) {
	ts.vhosts = make([]vhostStats, rt.slots)
	copy(ts.vhosts, ts.base.vhosts)
	for _, vh := range rt.patch.removed {
		ts.dropped = append(ts.dropped, vh.slot)
		ts.vhosts[vh.slot] = vhostStats{}
	}
	for i := range ts.vhosts {
		ts.vhosts[i].mark(gen)
	}
	for _, vh := range rt.patch.added {
		ts.vhosts[vh.slot] = p.vhostStatsFor(listener, vh, gen)
	}
}

// vhostStatsFor resolves the stats of vh's routes.
func (p *Proxy) vhostStatsFor(listener string, vh *virtualHost, gen uint64) vhostStats {
	vs := vhostStats{noRoute: p.routeStatsFor(routeKey{listener, vh.name, unmatchedLabel}, gen),
		routes: make([]*routeStats, len(vh.routes))}
	for j, r := range vh.routes {
		vs.routes[j] = p.routeStatsFor(routeKey{listener, vh.name, r.label}, gen)
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

// routeLabel is a route's label: its xDS name, or "#<index>" (its position
// in the virtual host) when it has none.
func routeLabel(name string, index int) string {
	if name != "" {
		return name
	}
	return "#" + strconv.Itoa(index)
}
