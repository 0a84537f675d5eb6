package upstream

import (
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/portico-dev/portico/internal/proxy/stats"
	"github.com/prometheus/client_golang/prometheus"
)

// upstreamLabels name a Service port: not the xDS cluster, so that the
// clusters of one port that differ only by policy are one series, and not
// namespace and service, which Prometheus's Kubernetes discovery gives every
// scraped target.
var upstreamLabels = []string{"service_namespace", "service_name", "service_port"}

// Metrics are the collectors of the Service ports' series (see
// metrics for their lifecycle).
type Metrics struct {
	upstreamRequests *prometheus.CounterVec // upstreamLabels, code_class
	retries          *prometheus.CounterVec // upstreamLabels
	perTryTimeouts   *prometheus.CounterVec // upstreamLabels
	timeouts         *prometheus.CounterVec // upstreamLabels
	connectFailures  *prometheus.CounterVec // upstreamLabels
	overflows        *prometheus.CounterVec // upstreamLabels, breaker
	// DestinationsRefused counts connections the egress guard refused.
	DestinationsRefused *prometheus.CounterVec // reason
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
}

func NewMetrics(reg prometheus.Registerer, log *slog.Logger) *Metrics {
	m := &Metrics{
		upstreamRequests: stats.CounterVec("upstream_requests_total",
			"Requests forwarded to a Service port, by the code class of the response the client got.",
			stats.WithClass(upstreamLabels)...),
		retries: stats.CounterVec("upstream_retries_total",
			"Retries of upstream requests (route retry_policy), by Service port.", upstreamLabels...),
		perTryTimeouts: stats.CounterVec("upstream_per_try_timeouts_total",
			"Upstream attempts that exceeded the route's per_try_timeout, by Service port.", upstreamLabels...),
		timeouts: stats.CounterVec("upstream_timeouts_total",
			"Requests that exceeded the route timeout while forwarded to a Service port.", upstreamLabels...),
		connectFailures: stats.CounterVec("upstream_connect_failures_total",
			"Upstream attempts and TCP proxy connections that could not connect (refused, connect_timeout, a destination the proxy refuses), by Service port.", upstreamLabels...),
		overflows: stats.CounterVec("upstream_overflows_total",
			"Times a circuit breaker of a Service port's cluster was reached, by breaker: max_connections (a request waited for a connection), max_pending_requests and max_requests (a request answered 503 with x-envoy-overloaded), max_retries (a retry not made).",
			append(upstreamLabels[:len(upstreamLabels):len(upstreamLabels)], "breaker")...),
		DestinationsRefused: stats.CounterVec("upstream_destinations_refused_total",
			"Upstream connections the proxy would not make, by reason: a name resolving to a loopback (loopback), link-local (link_local) or unspecified (unspecified) address, or any endpoint at an address Portico listens on (own_address).",
			"reason"),
		healthyEndpoints: stats.GaugeVec("cluster_healthy_endpoints",
			"Endpoints passing active health checks, by Service port (summed over its clusters with health_checks).", upstreamLabels...),
		outlierEjections: stats.CounterVec("upstream_outlier_ejections_total",
			"Endpoints ejected by outlier detection, by Service port (clusters with outlier_detection only).", upstreamLabels...),
		ejectedEndpoints: stats.GaugeVec("cluster_ejected_endpoints",
			"Endpoints currently ejected by outlier detection, by Service port (summed over its clusters with outlier_detection).", upstreamLabels...),
		tcpConnections: stats.CounterVec("tcp_connections_total",
			"TCP proxy connections made to a Service port (TLS passthrough and terminated TLS).", upstreamLabels...),
		tcpActive: stats.GaugeVec("tcp_active_connections",
			"TCP proxy connections to a Service port open now.", upstreamLabels...),
		tcpSentBytes: stats.CounterVec("tcp_sent_bytes_total",
			"Bytes the TCP proxy sent to a Service port (what its clients sent).", upstreamLabels...),
		tcpReceivedBytes: stats.CounterVec("tcp_received_bytes_total",
			"Bytes the TCP proxy received from a Service port (what its clients were sent).", upstreamLabels...),
	}
	if reg != nil {
		m.upstreamRequests = stats.Register(reg, m.upstreamRequests, log)
		m.retries = stats.Register(reg, m.retries, log)
		m.perTryTimeouts = stats.Register(reg, m.perTryTimeouts, log)
		m.timeouts = stats.Register(reg, m.timeouts, log)
		m.connectFailures = stats.Register(reg, m.connectFailures, log)
		m.overflows = stats.Register(reg, m.overflows, log)
		m.DestinationsRefused = stats.Register(reg, m.DestinationsRefused, log)
		m.healthyEndpoints = stats.Register(reg, m.healthyEndpoints, log)
		m.outlierEjections = stats.Register(reg, m.outlierEjections, log)
		m.ejectedEndpoints = stats.Register(reg, m.ejectedEndpoints, log)
		m.tcpConnections = stats.Register(reg, m.tcpConnections, log)
		m.tcpActive = stats.Register(reg, m.tcpActive, log)
		m.tcpSentBytes = stats.Register(reg, m.tcpSentBytes, log)
		m.tcpReceivedBytes = stats.Register(reg, m.tcpReceivedBytes, log)
	}
	return m
}

// upstreamKey is the label set of a Service port's series (upstreamLabels).
type upstreamKey struct {
	namespace, service, port string
}

func (k upstreamKey) values(extra ...string) []string {
	return append([]string{k.namespace, k.service, k.port}, extra...)
}

// String is the access log's name of the Service port,
// <namespace>/<service>/<port> (the service alone for a cluster that does
// not name one).
func (k upstreamKey) String() string {
	if k.namespace == "" && k.port == "" {
		return k.service
	}
	return k.namespace + "/" + k.service + "/" + k.port
}

// ClusterStatKey labels a cluster's series after the Service port it sends
// to. Portico's translator sets alt_stat_name to <namespace>_<service>_<port>
// (Envoy's cluster stats use the same name), and Kubernetes names and port
// names cannot hold '_', so three non-empty parts are exactly those. Any
// other cluster is labelled by its alt_stat_name, or else its name, as the
// service alone.
func ClusterStatKey(name, altStatName string) upstreamKey {
	if altStatName == "" {
		return upstreamKey{service: name}
	}
	parts := strings.Split(altStatName, "_")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return upstreamKey{service: altStatName}
	}
	return upstreamKey{namespace: parts[0], service: parts[1], port: parts[2]}
}

// tcpSeries are a Service port's TCP proxy series, created together by its
// first connection.
type TCPSeries struct {
	Connections prometheus.Counter
	Active      prometheus.Gauge
	Sent        prometheus.Counter
	Received    prometheus.Counter
}

// Stats are the series of one Service port, shared by the clusters
// labelled with it (one per policy: load balancing, health checks,
// protocol...), so that those fold into one series. Each series is created
// by the first event it counts.
type Stats struct {
	m     *Metrics
	key   upstreamKey
	Label string // key.String(), for access log lines
	// users counts the clusters of the applied configuration that hold
	// them (ClusterState.HoldStats; ADS goroutine only); the series are
	// deleted when it drops to 0.
	users int

	series          stats.Group
	requests        [len(stats.CodeClasses)]atomic.Pointer[prometheus.Counter]
	retries         atomic.Pointer[prometheus.Counter]
	perTryTimeouts  atomic.Pointer[prometheus.Counter]
	timeouts        atomic.Pointer[prometheus.Counter]
	connectFailures atomic.Pointer[prometheus.Counter]
	overflows       [len(breakerNames)]atomic.Pointer[prometheus.Counter]
	ejections       atomic.Pointer[prometheus.Counter]
	tcp             atomic.Pointer[TCPSeries]
	// healthy and ejected are sums of what the port's clusters report
	// (guarded by series.mu).
	healthy, ejected sharedGauge
}

// Series are the series per Service port label set, shared by its
// clusters (see ClusterState.HoldStats). ADS goroutine only.
type Series struct {
	m     *Metrics
	byKey map[upstreamKey]*Stats
}

func NewSeries(m *Metrics) *Series {
	return &Series{m: m, byKey: make(map[upstreamKey]*Stats)}
}

// StatsFor returns the stats of key, creating them. Only the ADS
// goroutine calls it.
func (u *Series) StatsFor(key upstreamKey) *Stats {
	s, ok := u.byKey[key]
	if !ok {
		s = &Stats{m: u.m, key: key, Label: key.String()}
		s.healthy.vec, s.ejected.vec = u.m.healthyEndpoints, u.m.ejectedEndpoints
		u.byKey[key] = s
	}
	return s
}

// HoldStats makes the cluster of cs hold s (nil: none, the cluster goes),
// adding what it held before to released: a Service port's series are
// deleted when no cluster holds them (upstreamSeries.release).
func (cs *ClusterState) HoldStats(s *Stats, released *[]*Stats) {
	if cs.stats == s {
		return
	}
	if s != nil {
		s.users++
	}
	if cs.stats != nil {
		*released = append(*released, cs.stats)
	}
	cs.stats = s
}

// Release lets go of a hold on s, deleting its series with
// the last.
func (u *Series) Release(s *Stats) {
	if s.users--; s.users == 0 {
		u.drop(s)
	}
}

// DropUnused deletes the stats no applied cluster uses: those
// of clusters that a failed compilation built.
func (u *Series) DropUnused() {
	for _, s := range u.byKey {
		if s.users == 0 {
			u.drop(s)
		}
	}
}

func (u *Series) drop(s *Stats) {
	if u.byKey[s.key] == s {
		delete(u.byKey, s.key)
	}
	s.remove()
}

// counter returns the series in c of the vector vec, creating it.
func (s *Stats) counter(c *atomic.Pointer[prometheus.Counter], vec *prometheus.CounterVec, extra ...string) prometheus.Counter {
	if v := c.Load(); v != nil {
		return *v
	}
	return stats.Get(&s.series, c, func() prometheus.Counter { return vec.WithLabelValues(s.key.values(extra...)...) }, stats.DiscardedCounter)
}

// Request counts a forwarded request by the code class of its response.
func (s *Stats) Request(status int) {
	class := stats.CodeClass(status)
	if c := s.requests[class].Load(); c != nil {
		(*c).Inc()
		return
	}
	s.counter(&s.requests[class], s.m.upstreamRequests, stats.CodeClasses[class]).Inc()
}

func (s *Stats) Retried() { s.counter(&s.retries, s.m.retries).Inc() }

func (s *Stats) PerTryTimedOut() { s.counter(&s.perTryTimeouts, s.m.perTryTimeouts).Inc() }

func (s *Stats) TimedOut() { s.counter(&s.timeouts, s.m.timeouts).Inc() }

func (s *Stats) ConnectFailed() { s.counter(&s.connectFailures, s.m.connectFailures).Inc() }

// overflowed counts a circuit breaker reached.
func (s *Stats) overflowed(b breaker) {
	s.counter(&s.overflows[b], s.m.overflows, breakerNames[b]).Inc()
}

func (s *Stats) ejection() { s.counter(&s.ejections, s.m.outlierEjections).Inc() }

// tcpSeries returns the TCP proxy series, creating them.
func (s *Stats) TCPSeries() *TCPSeries {
	if t := s.tcp.Load(); t != nil {
		return t
	}
	t := stats.Get(&s.series, &s.tcp, func() TCPSeries {
		v := s.key.values()
		return TCPSeries{
			Connections: s.m.tcpConnections.WithLabelValues(v...),
			Active:      s.m.tcpActive.WithLabelValues(v...),
			Sent:        s.m.tcpSentBytes.WithLabelValues(v...),
			Received:    s.m.tcpReceivedBytes.WithLabelValues(v...),
		}
	}, TCPSeries{Connections: stats.DiscardedCounter, Active: stats.DiscardedGauge, Sent: stats.DiscardedCounter, Received: stats.DiscardedCounter})
	return &t
}

// remove deletes every series of the Service port.
func (s *Stats) remove() {
	s.series.Retire(func() {
		v := s.key.values()
		for class := range s.requests {
			if s.requests[class].Load() != nil {
				s.m.upstreamRequests.DeleteLabelValues(s.key.values(stats.CodeClasses[class])...)
			}
		}
		for b := range s.overflows {
			if s.overflows[b].Load() != nil {
				s.m.overflows.DeleteLabelValues(s.key.values(breakerNames[b])...)
			}
		}
		for _, c := range []struct {
			p   *atomic.Pointer[prometheus.Counter]
			vec *prometheus.CounterVec
		}{{&s.retries, s.m.retries}, {&s.perTryTimeouts, s.m.perTryTimeouts}, {&s.timeouts, s.m.timeouts},
			{&s.connectFailures, s.m.connectFailures}, {&s.ejections, s.m.outlierEjections}} {
			if c.p.Load() != nil {
				c.vec.DeleteLabelValues(v...)
			}
		}
		if s.tcp.Load() != nil {
			s.m.tcpConnections.DeleteLabelValues(v...)
			s.m.tcpActive.DeleteLabelValues(v...)
			s.m.tcpSentBytes.DeleteLabelValues(v...)
			s.m.tcpReceivedBytes.DeleteLabelValues(v...)
		}
		s.healthy.drop(v)
		s.ejected.drop(v)
	})
}

// sharedGauge is a gauge of a Service port that sums what its clusters
// report (each its own endpoints' state, see gaugeShare). It exists while
// at least one cluster reports.
type sharedGauge struct {
	vec   *prometheus.GaugeVec
	users int
	g     prometheus.Gauge
}

func (sg *sharedGauge) drop(values []string) {
	if sg.g != nil {
		sg.vec.DeleteLabelValues(values...)
		sg.g, sg.users = nil, 0
	}
}

// gaugeShare is one cluster's part of a sharedGauge. Its owner (a health
// checker or outlier detector) serializes its calls.
type gaugeShare struct {
	stats *Stats
	gauge *sharedGauge
	last  float64
}

// healthyShare and ejectedShare join the port's gauges.
func (s *Stats) healthyShare() *gaugeShare { return s.join(&s.healthy) }
func (s *Stats) ejectedShare() *gaugeShare { return s.join(&s.ejected) }

func (s *Stats) join(sg *sharedGauge) *gaugeShare {
	s.series.Locked(func(retired bool) {
		if !retired {
			if sg.users == 0 {
				sg.g = sg.vec.WithLabelValues(s.key.values()...)
			}
			sg.users++
		}
	})
	return &gaugeShare{stats: s, gauge: sg}
}

// set reports the cluster's value.
func (gs *gaugeShare) set(v float64) {
	gs.stats.series.Locked(func(bool) {
		if gs.gauge.g != nil {
			gs.gauge.g.Add(v - gs.last)
		}
		gs.last = v
	})
}

// leave withdraws the cluster's value; the last cluster to leave deletes
// the series (and, for ejected endpoints, the ejection counter with it).
func (gs *gaugeShare) leave() {
	if gs == nil {
		return
	}
	gs.stats.series.Locked(func(bool) { gs.leaveLocked() })
}

func (gs *gaugeShare) leaveLocked() {
	s := gs.stats
	sg := gs.gauge
	if sg.g == nil {
		return // dropped with the port's series
	}
	sg.g.Add(-gs.last)
	gs.last = 0
	if sg.users--; sg.users > 0 {
		return
	}
	sg.drop(s.key.values())
	if sg == &s.ejected && s.ejections.Load() != nil {
		s.m.outlierEjections.DeleteLabelValues(s.key.values()...)
		s.ejections.Store(nil)
	}
}
