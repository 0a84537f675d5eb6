package proxy

import (
	"strings"
	"sync/atomic"

	"github.com/portico-dev/portico/internal/proxy/stats"
	"github.com/prometheus/client_golang/prometheus"
)

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

// clusterStatKey labels a cluster's series after the Service port it sends
// to. Portico's translator sets alt_stat_name to <namespace>_<service>_<port>
// (Envoy's cluster stats use the same name), and Kubernetes names and port
// names cannot hold '_', so three non-empty parts are exactly those. Any
// other cluster is labelled by its alt_stat_name, or else its name, as the
// service alone.
func clusterStatKey(name, altStatName string) upstreamKey {
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
type tcpSeries struct {
	connections prometheus.Counter
	active      prometheus.Gauge
	sent        prometheus.Counter
	received    prometheus.Counter
}

// upstreamStats are the series of one Service port, shared by the clusters
// labelled with it (one per policy: load balancing, health checks,
// protocol...), so that those fold into one series. Each series is created
// by the first event it counts.
type upstreamStats struct {
	m     *metrics
	key   upstreamKey
	label string // key.String(), for access log lines
	// users counts the clusters of the applied configuration that hold
	// them (clusterState.holdStats; ADS goroutine only); the series are
	// deleted when it drops to 0.
	users int

	series          stats.Group
	requests        [len(stats.CodeClasses)]atomic.Pointer[prometheus.Counter]
	retries         atomic.Pointer[prometheus.Counter]
	perTryTimeouts  atomic.Pointer[prometheus.Counter]
	timeouts        atomic.Pointer[prometheus.Counter]
	connectFailures atomic.Pointer[prometheus.Counter]
	ejections       atomic.Pointer[prometheus.Counter]
	tcp             atomic.Pointer[tcpSeries]
	// healthy and ejected are sums of what the port's clusters report
	// (guarded by series.mu).
	healthy, ejected sharedGauge
}

// upstreamStatsFor returns the stats of key, creating them. Only the ADS
// goroutine calls it.
func (p *Proxy) upstreamStatsFor(key upstreamKey) *upstreamStats {
	s, ok := p.upstreamStats[key]
	if !ok {
		s = &upstreamStats{m: p.metrics, key: key, label: key.String()}
		s.healthy.vec, s.ejected.vec = p.metrics.healthyEndpoints, p.metrics.ejectedEndpoints
		p.upstreamStats[key] = s
	}
	return s
}

// holdStats makes the cluster of cs hold s (nil: none, the cluster goes),
// adding what it held before to released: a Service port's series are
// deleted when no cluster holds them (releaseUpstreamStats).
func (cs *clusterState) holdStats(s *upstreamStats, released *[]*upstreamStats) {
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

// releaseUpstreamStats lets go of a hold on s, deleting its series with
// the last.
func (p *Proxy) releaseUpstreamStats(s *upstreamStats) {
	if s.users--; s.users == 0 {
		p.dropUpstreamStats(s)
	}
}

// dropUnusedUpstreamStats deletes the stats no applied cluster uses: those
// of clusters that a failed compilation built.
func (p *Proxy) dropUnusedUpstreamStats() {
	for _, s := range p.upstreamStats {
		if s.users == 0 {
			p.dropUpstreamStats(s)
		}
	}
}

func (p *Proxy) dropUpstreamStats(s *upstreamStats) {
	if p.upstreamStats[s.key] == s {
		delete(p.upstreamStats, s.key)
	}
	s.remove()
}

// counter returns the series in c of the vector vec, creating it.
func (s *upstreamStats) counter(c *atomic.Pointer[prometheus.Counter], vec *prometheus.CounterVec, extra ...string) prometheus.Counter {
	if v := c.Load(); v != nil {
		return *v
	}
	return stats.Get(&s.series, c, func() prometheus.Counter { return vec.WithLabelValues(s.key.values(extra...)...) }, stats.DiscardedCounter)
}

// request counts a forwarded request by the code class of its response.
func (s *upstreamStats) request(status int) {
	class := stats.CodeClass(status)
	if c := s.requests[class].Load(); c != nil {
		(*c).Inc()
		return
	}
	s.counter(&s.requests[class], s.m.upstreamRequests, stats.CodeClasses[class]).Inc()
}

func (s *upstreamStats) retried() { s.counter(&s.retries, s.m.retries).Inc() }

func (s *upstreamStats) perTryTimedOut() { s.counter(&s.perTryTimeouts, s.m.perTryTimeouts).Inc() }

func (s *upstreamStats) timedOut() { s.counter(&s.timeouts, s.m.timeouts).Inc() }

func (s *upstreamStats) connectFailed() { s.counter(&s.connectFailures, s.m.connectFailures).Inc() }

func (s *upstreamStats) ejection() { s.counter(&s.ejections, s.m.outlierEjections).Inc() }

// tcpSeries returns the TCP proxy series, creating them.
func (s *upstreamStats) tcpSeries() *tcpSeries {
	if t := s.tcp.Load(); t != nil {
		return t
	}
	t := stats.Get(&s.series, &s.tcp, func() tcpSeries {
		v := s.key.values()
		return tcpSeries{
			connections: s.m.tcpConnections.WithLabelValues(v...),
			active:      s.m.tcpActive.WithLabelValues(v...),
			sent:        s.m.tcpSentBytes.WithLabelValues(v...),
			received:    s.m.tcpReceivedBytes.WithLabelValues(v...),
		}
	}, tcpSeries{connections: stats.DiscardedCounter, active: stats.DiscardedGauge, sent: stats.DiscardedCounter, received: stats.DiscardedCounter})
	return &t
}

// remove deletes every series of the Service port.
func (s *upstreamStats) remove() {
	s.series.Retire(func() {
		v := s.key.values()
		for class := range s.requests {
			if s.requests[class].Load() != nil {
				s.m.upstreamRequests.DeleteLabelValues(s.key.values(stats.CodeClasses[class])...)
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
	stats *upstreamStats
	gauge *sharedGauge
	last  float64
}

// healthyShare and ejectedShare join the port's gauges.
func (s *upstreamStats) healthyShare() *gaugeShare { return s.join(&s.healthy) }
func (s *upstreamStats) ejectedShare() *gaugeShare { return s.join(&s.ejected) }

func (s *upstreamStats) join(sg *sharedGauge) *gaugeShare {
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
