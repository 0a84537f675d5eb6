package proxy

import (
	"log/slog"

	"github.com/portico-dev/portico/internal/proxy/router"
	"github.com/portico-dev/portico/internal/proxy/stats"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"github.com/portico-dev/portico/internal/proxy/xdsclient"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's Prometheus collectors. They always exist (so the
// hot path needs no nil checks) and are registered only when a Registerer is
// configured.
//
// A series is created by the first event it counts, never ahead of it (see
// stats.Group), and deleted when the last route or cluster labelled with it
// leaves the configuration, so that label cardinality follows the
// configuration in force and the traffic it has seen.
type metrics struct {
	// http are the series of the request path (package hcm's).
	http       *httpMetrics
	xdsUpdates *prometheus.CounterVec

	// upstream are the series of Service ports (package upstream).
	upstream *upstream.Metrics

	accessLogDropped prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, log *slog.Logger) *metrics {
	m := &metrics{
		http:       newHTTPMetrics(reg, log),
		xdsUpdates: stats.CounterVec("xds_updates_total", "xDS responses by resource type and outcome (ack or nack).", "type", "result"),
		accessLogDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "portico",
			Subsystem: "proxy",
			Name:      "access_log_dropped_total",
			Help:      "Access log lines dropped because the log sink was slower than the traffic (the queue of lines waiting for it was full).",
		}),
		upstream: upstream.NewMetrics(reg, log),
	}
	if reg != nil {
		m.xdsUpdates = stats.Register(reg, m.xdsUpdates, log)
		m.accessLogDropped = stats.Register(reg, m.accessLogDropped, log)
	}
	return m
}

func (m *metrics) xdsUpdate(typeURL, result string) {
	m.xdsUpdates.WithLabelValues(xdsclient.ShortTypeName(typeURL), result).Inc()
}

// routeStatsFor returns the stats of key, creating them, and marks them as
// used by the compilation gen. Only the ADS goroutine calls it.
func (p *Proxy) routeStatsFor(key routeKey, gen uint64) *routeStats {
	s, ok := p.routeStats[key]
	if !ok {
		s = &routeStats{m: p.metrics.http, key: key}
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
