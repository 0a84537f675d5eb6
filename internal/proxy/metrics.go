package proxy

import (
	"log/slog"

	"github.com/portico-dev/portico/internal/proxy/hcm"
	"github.com/portico-dev/portico/internal/proxy/listener"
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
	http       *hcm.Metrics
	xdsUpdates *prometheus.CounterVec

	// upstream are the series of Service ports (package upstream).
	upstream *upstream.Metrics

	accessLogDropped prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, log *slog.Logger) *metrics {
	m := &metrics{
		http:       hcm.NewMetrics(reg, log),
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
func (p *Proxy) routeStatsFor(key hcm.RouteKey, gen uint64) *hcm.RouteStats {
	s, ok := p.routeStats[key]
	if !ok {
		s = &hcm.RouteStats{M: p.metrics.http, Key: key}
		p.routeStats[key] = s
	}
	s.Gen = gen
	return s
}

// compileRouteStats resolves (without creating series) the stats of every
// route of rt served on listener. prev is the chain's applied compilation
// (nil: none): a virtual host it shares with rt keeps its stats, found
// without looking up each of its routes.
func (p *Proxy) compileRouteStats(listenerName string, rt *router.RouteTable, gen uint64, prev *listener.FilterChain) *hcm.RouteTableStats {
	ts := &hcm.RouteTableStats{NoVhost: p.routeStatsFor(hcm.RouteKey{Listener: listenerName, Vhost: hcm.UnmatchedLabel, Route: hcm.UnmatchedLabel, Path: hcm.UnmatchedLabel}, gen)}
	if prev == nil || prev.Stats == nil {
		ts.Vhosts = make([]hcm.VhostStats, rt.Slots)
		for _, vh := range rt.Vhosts {
			ts.Vhosts[vh.Slot] = p.vhostStatsFor(listenerName, vh, gen)
		}
		return ts
	}
	ts.Base = prev.Stats
	if rt.PatchedFrom(prev.Routes) {
		p.patchRouteStats(ts, listenerName, rt, gen)
		return ts
	}
	ts.Vhosts = make([]hcm.VhostStats, rt.Slots)
	match := router.NewAligner(prev.Routes.Vhosts, func(vh *router.VirtualHost) *router.VhostDef { return vh.VhostDef })
	kept := make([]bool, len(prev.Stats.Vhosts))
	for _, vh := range rt.Vhosts {
		vs := &ts.Vhosts[vh.Slot]
		if j, ok := match.Find(vh.VhostDef); ok {
			if slot := prev.Routes.Vhosts[j].Slot; !kept[slot] {
				*vs = prev.Stats.Vhosts[slot]
				kept[slot] = true
				vs.Mark(gen)
				continue
			}
		}
		*vs = p.vhostStatsFor(listenerName, vh, gen)
	}
	for _, vh := range prev.Routes.Vhosts {
		if !kept[vh.Slot] {
			ts.Dropped = append(ts.Dropped, vh.Slot)
		}
	}
	return ts
}

// patchRouteStats gives ts, whose base is the stats of the table rt was
// patched from, those stats but for the virtual hosts the patch removed
// and added: the kept ones are in the same slots.
func (p *Proxy) patchRouteStats(ts *hcm.RouteTableStats, listenerName string, rt *router.RouteTable, gen uint64) {
	ts.Vhosts = make([]hcm.VhostStats, rt.Slots)
	copy(ts.Vhosts, ts.Base.Vhosts)
	for _, vh := range rt.Patch.Removed {
		ts.Dropped = append(ts.Dropped, vh.Slot)
		ts.Vhosts[vh.Slot] = hcm.VhostStats{}
	}
	for i := range ts.Vhosts {
		ts.Vhosts[i].Mark(gen)
	}
	for _, vh := range rt.Patch.Added {
		ts.Vhosts[vh.Slot] = p.vhostStatsFor(listenerName, vh, gen)
	}
}

// vhostStatsFor resolves the stats of vh's routes.
func (p *Proxy) vhostStatsFor(listenerName string, vh *router.VirtualHost, gen uint64) hcm.VhostStats {
	vs := hcm.VhostStats{NoRoute: p.routeStatsFor(hcm.RouteKey{Listener: listenerName, Vhost: vh.Name, Route: hcm.UnmatchedLabel, Path: hcm.UnmatchedLabel}, gen),
		Routes: make([]*hcm.RouteStats, len(vh.Routes))}
	for j, r := range vh.Routes {
		vs.Routes[j] = p.routeStatsFor(hcm.RouteKey{Listener: listenerName, Vhost: vh.Name, Route: r.Label, Path: r.PathLabel}, gen)
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
				p.sweepRouteStats(old.fc.Stats, cc, snap.gen)
			}
		}
	default:
		for key, s := range p.routeStats {
			if s.Gen != snap.gen {
				s.Remove()
				delete(p.routeStats, key)
			}
		}
	}
	// Swept: the stats each was built from are no longer needed, and would
	// otherwise keep every earlier version's alive, one through the next.
	for _, cc := range snap.chains {
		if cc.fc.Stats != nil {
			cc.fc.Stats.Base, cc.fc.Stats.Dropped = nil, nil
		}
	}
	snap.routeStatsClean = true
}

// sweepRouteStats deletes those of the stats of old, a chain of the applied
// snapshot, that the compilation gen does not use. next is what replaces
// the chain (nil: none): when it was built from old, only the stats of the
// virtual hosts it dropped can be unused.
func (p *Proxy) sweepRouteStats(old *hcm.RouteTableStats, next *compiledChain, gen uint64) {
	if old == nil {
		return
	}
	if next != nil && next.fc.Stats != nil && next.fc.Stats.Base == old {
		for _, j := range next.fc.Stats.Dropped {
			p.sweepVhostStats(&old.Vhosts[j], gen)
		}
		return
	}
	p.sweepStats(old.NoVhost, gen)
	for i := range old.Vhosts {
		p.sweepVhostStats(&old.Vhosts[i], gen)
	}
}

func (p *Proxy) sweepVhostStats(vs *hcm.VhostStats, gen uint64) {
	if vs.NoRoute == nil {
		return // a free slot
	}
	p.sweepStats(vs.NoRoute, gen)
	for _, s := range vs.Routes {
		p.sweepStats(s, gen)
	}
}

// sweepStats deletes s unless the compilation gen uses it.
func (p *Proxy) sweepStats(s *hcm.RouteStats, gen uint64) {
	if s.Gen != gen && p.routeStats[s.Key] == s {
		s.Remove()
		delete(p.routeStats, s.Key)
	}
}
