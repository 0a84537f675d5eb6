package proxy

import (
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// unmatchedLabel is the vhost, route and path label value of requests that
// matched no virtual host (or, for route and path, no route of their virtual
// host), and of requests refused before routing (431).
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

// Label names. Upstream series name the Service port, not the xDS cluster:
// the clusters of one port that differ only by policy are one series, and
// the names do not clash with the namespace and service labels that
// Prometheus's Kubernetes discovery gives every scraped target.
var (
	routeLabels    = []string{"listener", "vhost", "route", "path"}
	upstreamLabels = []string{"service_namespace", "service_name", "service_port"}
)

// metrics are the proxy's Prometheus collectors. They always exist (so the
// hot path needs no nil checks) and are registered only when a Registerer is
// configured.
//
// A series is created by the first event it counts, never ahead of it (see
// lazyGroup), and deleted when the last route or cluster labelled with it
// leaves the configuration, so that label cardinality follows the
// configuration in force and the traffic it has seen.
type metrics struct {
	requests         *prometheus.CounterVec   // routeLabels, code_class
	duration         *prometheus.HistogramVec // routeLabels
	responseSize     *prometheus.HistogramVec // routeLabels
	upstreamRequests *prometheus.CounterVec   // upstreamLabels, code_class
	retries          *prometheus.CounterVec   // upstreamLabels
	perTryTimeouts   *prometheus.CounterVec   // upstreamLabels
	timeouts         *prometheus.CounterVec   // upstreamLabels
	connectFailures  *prometheus.CounterVec   // upstreamLabels
	// destinationsRefused counts connections the egress guard refused.
	destinationsRefused *prometheus.CounterVec // reason
	headersRefused      *prometheus.CounterVec // reason
	xdsUpdates          *prometheus.CounterVec
	// healthyEndpoints exists for Service ports with a health-checked cluster.
	healthyEndpoints *prometheus.GaugeVec
	// outlierEjections and ejectedEndpoints exist for Service ports with a
	// cluster that has outlier detection.
	outlierEjections *prometheus.CounterVec // upstreamLabels
	ejectedEndpoints *prometheus.GaugeVec   // upstreamLabels
	// The TCP proxy's series (tcp_proxy filter chains), by upstreamLabels.
	tcpConnections   *prometheus.CounterVec
	tcpActive        *prometheus.GaugeVec
	tcpSentBytes     *prometheus.CounterVec
	tcpReceivedBytes *prometheus.CounterVec

	accessLogDropped prometheus.Counter
	// filterReplies counts the requests an HTTP filter answered, by filter
	// name and status code.
	filterReplies *prometheus.CounterVec
	// mirrors counts the copies of requests for mirrors, by result.
	mirrors *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, log *slog.Logger) *metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "portico", Subsystem: "proxy", Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "portico", Subsystem: "proxy", Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "portico", Subsystem: "proxy", Name: name, Help: help, Buckets: buckets}, labels)
	}
	withClass := func(labels []string) []string { return append(append([]string(nil), labels...), "code_class") }
	m := &metrics{
		requests: counter("requests_total",
			"Downstream HTTP requests by listener, virtual host, route (the object that declared it, kind/namespace/name), its path condition and response code class; \"(none)\" when nothing matched.",
			withClass(routeLabels)...),
		duration: histogram("request_duration_seconds",
			"Time from receiving a downstream request to finishing its response, by listener, virtual host, route and path condition.",
			latencyBuckets, routeLabels...),
		responseSize: histogram("response_size_bytes",
			"Response body bytes sent downstream, by listener, virtual host, route and path condition.",
			sizeBuckets, routeLabels...),
		upstreamRequests: counter("upstream_requests_total",
			"Requests forwarded to a Service port, by the code class of the response the client got.",
			withClass(upstreamLabels)...),
		retries: counter("upstream_retries_total",
			"Retries of upstream requests (route retry_policy), by Service port.", upstreamLabels...),
		perTryTimeouts: counter("upstream_per_try_timeouts_total",
			"Upstream attempts that exceeded the route's per_try_timeout, by Service port.", upstreamLabels...),
		timeouts: counter("upstream_timeouts_total",
			"Requests that exceeded the route timeout while forwarded to a Service port.", upstreamLabels...),
		connectFailures: counter("upstream_connect_failures_total",
			"Upstream attempts and TCP proxy connections that could not connect (refused, connect_timeout, a destination the proxy refuses), by Service port.", upstreamLabels...),
		destinationsRefused: counter("upstream_destinations_refused_total",
			"Upstream connections the proxy would not make, by reason: a name resolving to a loopback (loopback), link-local (link_local) or unspecified (unspecified) address, or any endpoint at an address Portico listens on (own_address).",
			"reason"),
		headersRefused: counter("request_headers_refused_total",
			"Requests answered 431 because their headers exceeded max_request_headers_kb (reason size) or max_headers_count (reason count).",
			"reason"),
		xdsUpdates: counter("xds_updates_total", "xDS responses by resource type and outcome (ack or nack).", "type", "result"),
		healthyEndpoints: gauge("cluster_healthy_endpoints",
			"Endpoints passing active health checks, by Service port (summed over its clusters with health_checks).", upstreamLabels...),
		outlierEjections: counter("upstream_outlier_ejections_total",
			"Endpoints ejected by outlier detection, by Service port (clusters with outlier_detection only).", upstreamLabels...),
		ejectedEndpoints: gauge("cluster_ejected_endpoints",
			"Endpoints currently ejected by outlier detection, by Service port (summed over its clusters with outlier_detection).", upstreamLabels...),
		tcpConnections: counter("tcp_connections_total",
			"TCP proxy connections made to a Service port (TLS passthrough and terminated TLS).", upstreamLabels...),
		tcpActive: gauge("tcp_active_connections",
			"TCP proxy connections to a Service port open now.", upstreamLabels...),
		tcpSentBytes: counter("tcp_sent_bytes_total",
			"Bytes the TCP proxy sent to a Service port (what its clients sent).", upstreamLabels...),
		tcpReceivedBytes: counter("tcp_received_bytes_total",
			"Bytes the TCP proxy received from a Service port (what its clients were sent).", upstreamLabels...),
		filterReplies: counter("http_filter_replies_total",
			"Requests answered by an HTTP filter (denied by an IP rule, rate limited, refused by authorization or JWT verification, a CORS preflight) instead of the router, by filter and status code.",
			"filter", "code"),
		mirrors: counter("mirror_requests_total",
			"Copies of requests for a route's mirrors (request_mirror_policies), by result: sent (an answer came back, dropped), timeout, error, skipped_body_too_large (bodies over 1 MiB are not copied), skipped_too_many_in_flight (512 copies at once at most), skipped_error.",
			"result"),
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
		m.tcpConnections = register(reg, m.tcpConnections, log)
		m.tcpActive = register(reg, m.tcpActive, log)
		m.tcpSentBytes = register(reg, m.tcpSentBytes, log)
		m.tcpReceivedBytes = register(reg, m.tcpReceivedBytes, log)
		m.accessLogDropped = register(reg, m.accessLogDropped, log)
		m.filterReplies = register(reg, m.filterReplies, log)
		m.mirrors = register(reg, m.mirrors, log)
	}
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

// headersRefusedFor counts a request refused for reason; a reason's series
// appears with its first refusal.
func (m *metrics) headersRefusedFor(reason string) {
	m.headersRefused.WithLabelValues(reason).Inc()
}

func (m *metrics) filterReply(filter string, status int) {
	m.filterReplies.WithLabelValues(filter, strconv.Itoa(status)).Inc()
}

func (m *metrics) mirrored(result string) { m.mirrors.WithLabelValues(result).Inc() }

// lazyGroup guards the series of one label set, each created by the first
// event it counts. Once retired (the label set left the configuration and
// its series were deleted) it creates none again, so that a request still
// running on an old configuration cannot bring deleted series back.
type lazyGroup struct {
	mu      sync.Mutex
	retired bool
}

// lazyGet returns *p, creating it with create, unless g is retired: then
// discard, which nothing exports. The request path calls it only when *p is
// not there yet (a load of p first), so that it never locks once a series
// exists.
func lazyGet[T any](g *lazyGroup, p *atomic.Pointer[T], create func() T, discard T) T {
	g.mu.Lock()
	defer g.mu.Unlock()
	if v := p.Load(); v != nil {
		return *v
	}
	if g.retired {
		return discard
	}
	v := create()
	p.Store(&v)
	return v
}

// retire stops creation and calls remove, under the lock, to delete what
// was created.
func (g *lazyGroup) retire(remove func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.retired {
		g.retired = true
		remove()
	}
}

// Series that nothing exports, for requests of routes and clusters that
// left the configuration while they ran.
var (
	discardedCounter   prometheus.Counter   = prometheus.NewCounter(prometheus.CounterOpts{Name: "discarded"})
	discardedGauge     prometheus.Gauge     = prometheus.NewGauge(prometheus.GaugeOpts{Name: "discarded"})
	discardedHistogram prometheus.Histogram = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "discarded"})
)

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
	series     lazyGroup
	requests   [len(codeClasses)]atomic.Pointer[prometheus.Counter]
	histograms atomic.Pointer[routeObservers]
	gen        uint64 // the last compilation that referenced it (ADS goroutine only)
}

// observe records a finished request: its code class's counter and the
// histograms, each created by its first request.
func (s *routeStats) observe(status int, seconds float64, bytes int64) {
	class := codeClass(status)
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
	return lazyGet(&s.series, &s.requests[class], func() prometheus.Counter {
		return s.m.requests.WithLabelValues(s.key.values(codeClasses[class])...)
	}, discardedCounter)
}

func (s *routeStats) createObservers() routeObservers {
	return lazyGet(&s.series, &s.histograms, func() routeObservers {
		return routeObservers{
			duration: s.m.duration.WithLabelValues(s.key.values()...),
			size:     s.m.responseSize.WithLabelValues(s.key.values()...),
		}
	}, routeObservers{duration: discardedHistogram, size: discardedHistogram})
}

// remove deletes the route's series.
func (s *routeStats) remove() {
	s.series.retire(func() {
		for class := range s.requests {
			if s.requests[class].Load() != nil {
				s.m.requests.DeleteLabelValues(s.key.values(codeClasses[class])...)
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
func (p *Proxy) compileRouteStats(listener string, rt *routeTable, gen uint64, prev *filterChain) *routeTableStats {
	ts := &routeTableStats{noVhost: p.routeStatsFor(routeKey{listener, unmatchedLabel, unmatchedLabel, unmatchedLabel}, gen)}
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
	vs := vhostStats{noRoute: p.routeStatsFor(routeKey{listener, vh.name, unmatchedLabel, unmatchedLabel}, gen),
		routes: make([]*routeStats, len(vh.routes))}
	for j, r := range vh.routes {
		vs.routes[j] = p.routeStatsFor(routeKey{listener, vh.name, r.label, r.pathLabel}, gen)
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

// routeLabel is a route's route label: the object that declared it, which
// Portico's route names start with (<kind>/<namespace>/<name>, then ':' and
// the path condition); a name without ':' whole; "#<index>" (its position in
// the virtual host) when it has none.
func routeLabel(name string, index int) string {
	if name == "" {
		return "#" + strconv.Itoa(index)
	}
	if object, _, ok := strings.Cut(name, ":"); ok && object != "" {
		return object
	}
	return name
}

// pathLabel is a route's path label: the value of its path condition, the
// regular expression for safe_regex.
func pathLabel(m *routeMatch) string {
	if m.kind == pathRegex {
		return m.regex
	}
	return m.value
}
