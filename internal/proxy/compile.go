package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/portico-dev/portico/internal/proxy/hcm"
	"github.com/portico-dev/portico/internal/proxy/internal/layered"
	"github.com/portico-dev/portico/internal/proxy/internal/sorted"
	"github.com/portico-dev/portico/internal/proxy/listener"
	"github.com/portico-dev/portico/internal/proxy/router"
	"github.com/portico-dev/portico/internal/proxy/upstream"
)

// snapshot is one complete, immutable configuration. Requests load the
// listener configuration once and use it to the end, so a swap never changes
// the configuration under an in-flight request.
type snapshot struct {
	listeners map[string]*listener.Config
	clusters  layered.Map[string, *upstream.Cluster]
	version   string // the system version of the newest response it includes
	gen       uint64 // the compilation that built it (see routeStatsFor)

	// What each compiled part was built from: the next compilation reuses a
	// part whose inputs are the same specs (a delta response replaces only the
	// specs of the resources it carries), so applying a change recompiles what
	// it touches and not the whole configuration.
	clusterInputs layered.Map[string, clusterInputs]
	chains        map[*chainSpec]*compiledChain
	// specRevisions are the store's revisions of clusters and endpoints it
	// was compiled at; secretRevision, of secrets.
	specRevisions  [2]uint64
	secretRevision uint64
	// rebuiltChains counts the chains compiled anew rather than reused;
	// sameRouteStats: none was, and the chains are the previous snapshot's.
	rebuiltChains  int
	sameRouteStats bool
	// compiledAt numbers the compilation (gen is that of the route stats);
	// routeStatsClean: once applied, the proxy keeps the stats of its routes
	// only, none that a failed compilation resolved (see syncRouteStats).
	compiledAt      uint64
	routeStatsClean bool
	// clusterRefs counts, by cluster, the chains that use it. patched: the
	// clusters are the previous snapshot's but for touched, the ones added,
	// removed or relinked (see patchClusters); else any may have changed.
	clusterRefs layered.Map[string, int]
	patched     bool
	touched     []string
}

// clusterInputs are the specs an upstream.Cluster is compiled from.
type clusterInputs struct {
	spec       *upstream.ClusterSpec
	assignment *upstream.AssignmentSpec // nil for a cluster with inline endpoints
	clientCert *tls.Certificate         // from SDS, presented to upstreams; nil: none
}

// compiledChain is a filter chain with the resources it was compiled from.
type compiledChain struct {
	routes  *router.RouteTable // from RDS; nil for inline routes and tcp_proxy
	secrets []*tls.Certificate // from SDS, in the chain's order
	fc      *listener.FilterChain
}

// incompleteError says which reference keeps a configuration from being applied.
type incompleteError struct{ missing string }

func (e *incompleteError) Error() string { return "incomplete configuration: " + e.missing }

// reconcile compiles the accepted resources and applies the result if it is
// complete; otherwise the previous configuration stays in force (Envoy's
// warming, simplified to all-or-nothing).
func (p *Proxy) reconcile(ctx context.Context) {
	snap, err := p.compile()
	if err != nil {
		// Mid-update (types at different versions) a missing reference is
		// expected to arrive with the next response; once every type is at
		// one version it will not, and deserves attention.
		level := slog.LevelDebug
		if p.store.settled() {
			level = slog.LevelWarn
		}
		p.log.Log(ctx, level, "keeping the previous configuration", "reason", err.Error(), "version", p.store.version)
		return
	}
	p.apply(ctx, snap)
}

// compile links the accepted specs into a snapshot. It fails with an
// *incompleteError when something referenced has not arrived (yet).
func (p *Proxy) compile() (*snapshot, error) {
	s := p.store
	if !s.received(resourcev3.ListenerType) {
		return nil, &incompleteError{missing: "no listeners received yet"}
	}
	p.statsGen++
	snap := &snapshot{
		listeners:     make(map[string]*listener.Config),
		version:       s.version,
		gen:           p.statsGen,
		compiledAt:    p.statsGen,
		chains:        make(map[*chainSpec]*compiledChain),
		specRevisions: [2]uint64{s.revisions[resourcev3.ClusterType], s.revisions[resourcev3.EndpointType]},
		// A changed secret may be a cluster's client certificate: the clusters
		// are linked in full then (see patchClusters).
		secretRevision: s.revisions[resourcev3.SecretType],
	}
	names := sorted.Keys(s.byType[resourcev3.ListenerType])
	for _, name := range names {
		spec := s.byType[resourcev3.ListenerType][name].(*listenerSpec)
		lc, err := p.compileListener(spec, snap)
		if err != nil {
			return nil, fmt.Errorf("listener %q: %w", name, err)
		}
		snap.listeners[name] = lc
	}
	p.markReusedRouteStats(snap)
	if err := p.compileClusters(names, snap); err != nil {
		return nil, err
	}
	for _, lc := range snap.listeners {
		lc.Clusters = snap.clusters
	}
	return snap, nil
}

// compileClusters adds to snap the clusters its filter chains use, listener
// by listener in order. When the applied snapshot's clusters can be patched
// with what changed since (see patchClusters), it is not done in full.
func (p *Proxy) compileClusters(listeners []string, snap *snapshot) error {
	prev := p.current.Load()
	if p.patchClusters(prev, snap) {
		return nil
	}
	var n int
	if prev != nil {
		n = prev.clusters.Len()
	}
	snap.clusters = layered.New[string, *upstream.Cluster](n)
	snap.clusterInputs = layered.New[string, clusterInputs](n)
	for _, name := range listeners {
		spec := p.store.byType[resourcev3.ListenerType][name].(*listenerSpec)
		for _, cs := range spec.chains {
			if err := p.compileChainClusters(cs, snap); err != nil {
				return fmt.Errorf("listener %q: %w", name, err)
			}
		}
	}
	refs := make(map[string]int, snap.clusters.Len())
	for cs, cc := range snap.chains {
		for _, name := range chainClusters(cs, cc) {
			refs[name]++
		}
	}
	snap.clusterRefs = layered.FromMap(refs)
	return nil
}

// patchClusters gives snap the clusters of prev (the applied snapshot)
// changed by what differs between them: the clusters that chains stopped or
// started using and those whose spec or endpoints changed in the store since
// prev was compiled. It costs in proportion to those, where a full compilation
// relinks every cluster. prev's maps are never modified (requests read them):
// snap gets patched copies, or prev's own when nothing changed. It reports
// false when the change is not known or large, and when a cluster is
// missing, for compileClusters to compile in full (and to report what is missing as it always has).
func (p *Proxy) patchClusters(prev, snap *snapshot) bool {
	if prev == nil || !prev.clusterRefs.Made() || prev.secretRevision != snap.secretRevision {
		return false
	}
	changed, ok := p.store.clusterChanges(prev.specRevisions)
	if !ok || len(changed) > prev.clusters.Len()/4+16 {
		return false
	}
	refs := chainRefChanges(prev, snap)
	if len(refs) > prev.clusters.Len()/4+16 {
		return false
	}
	if len(refs) == 0 && !usesAnyOf(&prev.clusterRefs, changed) {
		snap.clusters, snap.clusterInputs, snap.clusterRefs = prev.clusters, prev.clusterInputs, prev.clusterRefs
		snap.patched = true // the previous snapshot's maps, as its chains use the same clusters
		return true
	}
	snap.clusters, snap.clusterInputs, snap.clusterRefs = prev.clusters.Patched(), prev.clusterInputs.Patched(), prev.clusterRefs.Patched()
	defer snap.settleClusters()
	for name, d := range refs {
		if n, _ := snap.clusterRefs.Get(name); n+d > 0 {
			snap.clusterRefs.Set(name, n+d)
		} else {
			snap.clusters.Remove(name)
			snap.clusterInputs.Remove(name)
			snap.clusterRefs.Remove(name)
		}
		snap.touched = append(snap.touched, name)
	}
	for name := range changed {
		if _, counted := refs[name]; !counted {
			snap.touched = append(snap.touched, name)
		}
	}
	for _, name := range snap.touched {
		_, used := snap.clusterRefs.Get(name)
		_, linked := snap.clusters.Get(name)
		_, dirty := changed[name]
		if !used || (linked && !dirty) {
			continue
		}
		if err := p.linkCluster(name, snap); err != nil {
			snap.touched = nil
			return false
		}
	}
	snap.patched = true
	return true
}

// settleClusters ends the patch of snap's cluster maps (see layered.settle).
func (snap *snapshot) settleClusters() {
	snap.clusters.Settle()
	snap.clusterInputs.Settle()
	snap.clusterRefs.Settle()
}

// usesAnyOf reports whether a cluster of refs is among names.
func usesAnyOf(refs *layered.Map[string, int], names map[string]struct{}) bool {
	for name := range names {
		if _, ok := refs.Get(name); ok {
			return true
		}
	}
	return false
}

// chainRefChanges returns, by cluster, how many more (or fewer) uses next
// has than prev (a use is a virtual host of a route table, or a chain that
// names the cluster itself); clusters used as often are left out.
func chainRefChanges(prev, next *snapshot) map[string]int {
	refs := make(map[string]int)
	for cs, cc := range next.chains {
		old, ok := prev.chains[cs]
		if old == cc {
			continue
		}
		if ok && cs.tcp == nil && cc.fc.Routes.PatchedFrom(old.fc.Routes) {
			cc.fc.Routes.Patch.CountClusterUses(refs)
			continue
		}
		var was []string
		if ok {
			was = chainClusters(cs, old)
		}
		diffNames(was, chainClusters(cs, cc), refs)
	}
	for cs, old := range prev.chains {
		if _, ok := next.chains[cs]; !ok {
			diffNames(chainClusters(cs, old), nil, refs)
		}
	}
	for name, d := range refs {
		if d == 0 {
			delete(refs, name)
		}
	}
	return refs
}

// diffNames counts in refs the names of was as one use fewer and those of
// now as one more. The lists of one chain keep their order from one version
// to the next, so their common beginning and end, which cancel out, are skipped.
func diffNames(was, now []string, refs map[string]int) {
	for len(was) > 0 && len(now) > 0 && was[0] == now[0] {
		was, now = was[1:], now[1:]
	}
	for len(was) > 0 && len(now) > 0 && was[len(was)-1] == now[len(now)-1] {
		was, now = was[:len(was)-1], now[:len(now)-1]
	}
	for _, name := range was {
		refs[name]--
	}
	for _, name := range now {
		refs[name]++
	}
}

// chainClusters returns the clusters a compiled chain uses: a tcp_proxy's
// each once, a route table's once per virtual host that names it.
func chainClusters(cs *chainSpec, cc *compiledChain) []string {
	if cs.tcp == nil {
		names := cc.fc.Routes.ClusterUses()
		if filters := cs.hcm.Filters.Clusters(); len(filters) > 0 {
			names = append(slices.Clip(names), filters...)
		}
		return names
	}
	names := make([]string, 0, len(cs.tcp.Clusters))
	for _, c := range cs.tcp.Clusters {
		if !slices.Contains(names, c.Name) {
			names = append(names, c.Name)
		}
	}
	return names
}

func (p *Proxy) compileChainClusters(cs *chainSpec, snap *snapshot) error {
	if cs.tcp != nil {
		for _, c := range cs.tcp.Clusters {
			if err := p.compileCluster(c.Name, snap); err != nil {
				return fmt.Errorf("tcp_proxy: %w", err)
			}
		}
		return nil
	}
	for _, name := range cs.hcm.Filters.Clusters() {
		if err := p.compileCluster(name, snap); err != nil {
			return fmt.Errorf("http filters: %w", err)
		}
	}
	routes := snap.chains[cs].fc.Routes
	for _, vh := range routes.Vhosts {
		for _, name := range vh.Clusters {
			if err := p.compileCluster(name, snap); err != nil {
				return fmt.Errorf("route configuration %q: %w", routes.Name, err)
			}
		}
	}
	return nil
}

func (p *Proxy) compileListener(spec *listenerSpec, snap *snapshot) (*listener.Config, error) {
	lc := &listener.Config{
		Name:    spec.name,
		Address: spec.address,
		Tls:     spec.tls,
		Chains:  make(map[string]*listener.FilterChain),

		FiltersTimeout:    spec.filtersTimeout,
		ContinueOnTimeout: spec.continueOnTimeout,
		ProxyProtocol:     spec.proxyProtocol,
	}
	if lc.Tls {
		lc.Certificates = lc
	}
	for _, cs := range spec.chains {
		fc, err := p.compileChain(spec.name, cs, snap)
		if err != nil {
			return nil, err
		}
		lc.HasTCP = lc.HasTCP || fc.Tcp != nil
		if len(cs.serverNames) == 0 {
			lc.Chains[""] = fc
		}
		for _, n := range cs.serverNames {
			lc.Chains[n] = fc
		}
	}
	return lc, nil
}

func (p *Proxy) compileChain(listenerName string, cs *chainSpec, snap *snapshot) (*listener.FilterChain, error) {
	cc, err := p.chainInputs(cs)
	if err != nil {
		return nil, err
	}
	var old *compiledChain
	if prev := p.current.Load(); prev != nil {
		old = prev.chains[cs]
	}
	if old.sameInputs(cc) {
		cc = old // its route stats are marked by markReusedRouteStats
	} else {
		cc.fc = p.buildChain(listenerName, cs, cc, old, snap.gen)
		snap.rebuiltChains++
	}
	snap.chains[cs] = cc
	return cc.fc, nil
}

// chainInputs looks up the route configuration and secrets cs uses.
func (p *Proxy) chainInputs(cs *chainSpec) (*compiledChain, error) {
	cc := &compiledChain{}
	if cs.tcp == nil && cs.hcm.InlineRoutes == nil {
		rt, ok := lookup[*router.RouteTable](p.store, resourcev3.RouteType, cs.hcm.RdsName)
		if !ok {
			return nil, &incompleteError{missing: fmt.Sprintf("route configuration %q", cs.hcm.RdsName)}
		}
		// Its hosts come in the first VirtualHost response, after it: until then
		// the table would answer 404 for every host, as Envoy waits for VHDS too.
		if rt.Vhds && !p.store.received(resourcev3.VirtualHostType) {
			return nil, &incompleteError{missing: fmt.Sprintf("virtual hosts (VHDS) of route configuration %q", cs.hcm.RdsName)}
		}
		cc.routes = rt
	}
	if cs.tls != nil {
		for _, name := range cs.tls.SecretNames {
			cert, ok := lookup[*tls.Certificate](p.store, resourcev3.SecretType, name)
			if !ok {
				return nil, &incompleteError{missing: fmt.Sprintf("secret %q", name)}
			}
			cc.secrets = append(cc.secrets, cert)
		}
	}
	return cc, nil
}

// sameInputs reports whether cc (nil: never compiled) was compiled from the
// resources next names.
func (cc *compiledChain) sameInputs(next *compiledChain) bool {
	return cc != nil && cc.routes == next.routes && slices.Equal(cc.secrets, next.secrets)
}

// buildChain compiles cs from the resources cc names: its routes' stats, and
// the server TLS configuration of a chain that terminates TLS. old is what
// the applied snapshot compiled cs from (nil: none).
func (p *Proxy) buildChain(listenerName string, cs *chainSpec, cc, old *compiledChain, gen uint64) *listener.FilterChain {
	fc := &listener.FilterChain{Tcp: cs.tcp}
	if cs.tcp == nil {
		fc.Spec, fc.Routes = cs.hcm, cs.hcm.InlineRoutes
		if cc.routes != nil {
			fc.Routes = cc.routes
		}
		var prev *listener.FilterChain
		if old != nil {
			prev = old.fc
		}
		fc.Stats = p.compileRouteStats(listenerName, fc.Routes, gen, prev)
	}
	if cs.tls != nil {
		certs := append([]tls.Certificate(nil), cs.tls.InlineCerts...)
		for _, c := range cc.secrets {
			certs = append(certs, *c)
		}
		fc.TlsConfig = listener.NewServerTLSConfig(cs.tls, certs)
	}
	return fc
}

// markReusedRouteStats marks the route stats of the chains snap reuses as
// used by its compilation. When it reuses every chain of the applied
// snapshot, which a change of clusters or endpoints does, the same routes
// have the same stats: snap takes the applied compilation's number, and
// neither their marks nor the sweep (syncRouteStats) have anything to do.
func (p *Proxy) markReusedRouteStats(snap *snapshot) {
	prev := p.current.Load()
	if prev == nil {
		return // every chain is new
	}
	if snap.rebuiltChains == 0 && len(prev.chains) == len(snap.chains) {
		snap.gen, snap.sameRouteStats = prev.gen, true
		return
	}
	for cs, cc := range snap.chains {
		if prev.chains[cs] == cc {
			markRouteStats(cc.fc.Stats, snap.gen)
		}
	}
}

// markRouteStats marks the stats of a reused chain as used by the compilation
// gen, as compileRouteStats does for a new one, so that syncRouteStats keeps them.
func markRouteStats(ts *hcm.RouteTableStats, gen uint64) {
	if ts == nil {
		return
	}
	ts.NoVhost.Gen = gen
	for i := range ts.Vhosts {
		ts.Vhosts[i].Mark(gen)
	}
}

// compileCluster adds the named cluster, with its endpoints, to snap: the
// applied snapshot's when compiled from the same specs, else a new one.
func (p *Proxy) compileCluster(name string, snap *snapshot) error {
	if _, done := snap.clusters.Get(name); done {
		return nil
	}
	return p.linkCluster(name, snap)
}

// linkCluster sets the named cluster of snap from the store's specs.
func (p *Proxy) linkCluster(name string, snap *snapshot) error {
	spec, ok := lookup[*upstream.ClusterSpec](p.store, resourcev3.ClusterType, name)
	if !ok {
		return &incompleteError{missing: fmt.Sprintf("cluster %q", name)}
	}
	in := clusterInputs{spec: spec}
	if spec.Kind == upstream.ClusterEDS {
		cla, ok := lookup[*upstream.AssignmentSpec](p.store, resourcev3.EndpointType, spec.ServiceName)
		if !ok {
			return &incompleteError{missing: fmt.Sprintf("endpoints %q of cluster %q", spec.ServiceName, name)}
		}
		in.assignment = cla
	}
	if spec.TLS != nil && spec.TLS.ClientSecret != "" {
		cert, ok := lookup[*tls.Certificate](p.store, resourcev3.SecretType, spec.TLS.ClientSecret)
		if !ok {
			return &incompleteError{missing: fmt.Sprintf("secret %q of cluster %q", spec.TLS.ClientSecret, name)}
		}
		in.clientCert = cert
	}
	snap.clusterInputs.Set(name, in)
	if prev := p.current.Load(); prev != nil {
		if was, _ := prev.clusterInputs.Get(name); was == in {
			uc, _ := prev.clusters.Get(name)
			snap.clusters.Set(name, uc)
			return nil
		}
	}
	snap.clusters.Set(name, p.buildCluster(name, in))
	return nil
}

func (p *Proxy) buildCluster(name string, in clusterInputs) *upstream.Cluster {
	spec, endpoints, healthAddrs := in.spec, in.spec.Endpoints, in.spec.HealthAddrs
	var held []string
	if in.assignment != nil {
		endpoints, healthAddrs, held = in.assignment.Endpoints, in.assignment.HealthAddrs, in.assignment.Held
	}
	cs := p.clusterState(name)
	uc := &upstream.Cluster{
		Name:        name,
		Stats:       p.upstreamSeries.StatsFor(spec.StatKey),
		Endpoints:   endpoints,
		HealthAddrs: healthAddrs,
		Dialer: upstream.EndpointDialer{Guard: p.egress, Cluster: name, Timeout: spec.ConnectTimeout,
			Network: spec.Network, ByName: spec.ByName},
		LB:          spec.LB,
		HealthCheck: spec.HealthCheck,
		TLS:         spec.TLS,
		Scheme:      "http",
		HTTP2:       spec.Protocol.Protocol == upstream.ProtoHTTP2,
		Breakers:    spec.Breakers,
		State:       cs,
		Active:      cs.ActiveCounters(endpoints),
		Added:       addedTimes(spec.LB.SlowStart, cs, endpoints),
		Held:        held,
		AllHosts:    &upstream.HostSet{Idx: upstream.AllIndexes(len(endpoints))},
	}
	if spec.TLS != nil {
		uc.Scheme = "https"
	}
	if in.clientCert != nil {
		uc.TLS = spec.TLS.WithClientCertificate(in.clientCert)
	}
	if tr := cs.TransportFor(spec); tr != nil {
		uc.Transport = tr
	}
	if spec.HealthCheck != nil {
		// Checkers start when the snapshot is applied (syncClusters).
		if cs.Health == nil {
			cs.Health = upstream.NewHealthState(name, &cs.Served, p.log, &p.healthCheckers, &p.healthRunning)
		}
		uc.Health = cs.Health
	}
	if spec.Outlier != nil {
		// Its interval timer starts when the snapshot is applied (syncClusters).
		if cs.Outlier == nil {
			cs.Outlier = upstream.NewOutlierState(name, p.log, &p.outlierRunning)
		}
		uc.Outlier, uc.OutlierSpec = cs.Outlier, spec.Outlier
		uc.OutlierHosts = cs.Outlier.HostsFor(endpoints)
	}
	return uc
}

// clusterState returns the state a cluster keeps across snapshots. States
// of clusters that disappear are dropped at the next apply.
func (p *Proxy) clusterState(cluster string) *upstream.ClusterState {
	cs, ok := p.clusterStates[cluster]
	if !ok {
		cs = upstream.NewClusterState()
		p.clusterStates[cluster] = cs
	}
	return cs
}

// syncClusters brings the clusters' shared state in line with the snapshot
// being applied: health checkers start for new endpoints and stop for
// removed endpoints and clusters, removed clusters' state is dropped, and
// so are the series of the Service ports that no cluster is labelled with
// any more. Clusters reused from the applied snapshot need nothing; of a
// patched snapshot, only the touched clusters can be other ones.
func (p *Proxy) syncClusters(snap *snapshot) {
	var applied *layered.Map[string, *upstream.Cluster]
	if prev := p.current.Load(); prev != nil {
		applied = &prev.clusters
	}
	var released []*upstream.Stats
	full := true
	if snap.patched {
		for _, name := range snap.touched {
			if cs, ok := p.clusterStates[name]; ok {
				p.syncCluster(name, cs, snap, applied, &released)
			}
		}
		// Every cluster of snap has a state, so with as many states as
		// clusters no state is left to drop (as one of a cluster that a
		// failed compilation built).
		full = len(p.clusterStates) != snap.clusters.Len()
	}
	if full {
		for name, cs := range p.clusterStates {
			p.syncCluster(name, cs, snap, applied, &released)
		}
	}
	// After every cluster has taken its Service port's stats: a port whose
	// only cluster gives way to another (its policy changed) keeps its series.
	for _, s := range released {
		p.upstreamSeries.Release(s)
	}
	if full {
		p.upstreamSeries.DropUnused()
	}
}

// syncCluster brings the state of one cluster in line with snap. The
// Service port stats it lets go are added to released.
func (p *Proxy) syncCluster(name string, cs *upstream.ClusterState, snap *snapshot, applied *layered.Map[string, *upstream.Cluster], released *[]*upstream.Stats) {
	uc, ok := snap.clusters.Get(name)
	if ok && applied != nil {
		if was, _ := applied.Get(name); was == uc {
			return
		}
	}
	if !ok {
		cs.StopAll()
		cs.HoldStats(nil, released)
		delete(p.clusterStates, name)
		return
	}
	cs.HoldStats(uc.Stats, released)
	cs.PruneActive(uc.Endpoints, uc.Held)
	switch {
	case uc.Outlier != nil:
		uc.Outlier.Configure(uc.OutlierSpec, uc.Endpoints, uc.OutlierHosts, uc.Stats)
	case cs.Outlier != nil:
		cs.Outlier.Stop() // outlier_detection was removed from the cluster
		cs.Outlier = nil
	}
	switch {
	case uc.Health != nil:
		// A successful check ends an outlier ejection.
		uc.Health.Outlier.Store(uc.Outlier)
		uc.Health.Configure(uc)
	case cs.Health != nil:
		cs.Health.Stop() // health_checks were removed from the cluster
		cs.Health = nil
	}
}

// stopHealthChecks stops every health checker and outlier detection timer
// and waits for them, and closes the clusters' idle connections. It runs after
// the ADS stream has ended, so no configuration can start new ones.
func (p *Proxy) stopHealthChecks() {
	for _, cs := range p.clusterStates {
		cs.StopAll()
	}
	p.healthRunning.Wait()
	p.outlierRunning.Wait()
}

// apply makes snap the served configuration: listeners are opened, kept or
// closed as needed, then every listener switches to its new configuration.
func (p *Proxy) apply(ctx context.Context, snap *snapshot) {
	p.syncClusters(snap)
	p.store.changesApplied(snap.specRevisions)
	p.syncRouteStats(snap)
	p.listeners.Sync(ctx, snap.listeners)
	p.refreshEgress(ctx)
	p.current.Store(snap)
	prev := p.appliedVersion.Load()
	if snap.version != "" {
		v := snap.version
		p.appliedVersion.Store(&v)
	}
	switch {
	case p.listeners.MarkReady():
		if n := p.listeners.UnboundN(); n > 0 {
			p.log.Warn("first complete configuration applied; not ready until every listener is bound", "version", snap.version, "unbound_listeners", n)
		} else {
			p.log.Info("first complete configuration applied; ready", "version", snap.version)
		}
	case snap.version == "":
		// Intermediate state while the types of an update arrive one by one.
		p.log.Debug("configuration applied (types at different versions)")
	case prev != nil && *prev == snap.version:
		// More resources of a version already applied (a response of another type, or
		// VHDS virtual hosts after their route configuration): said once per version.
		p.log.Debug("configuration applied again", "version", snap.version)
	default:
		p.log.Info("configuration applied", "version", snap.version)
	}
	p.listeners.Applied()
}

// addedTimes are when a slow-starting cluster's endpoints joined it; nil
// without slow start (the pick then never looks).
func addedTimes(ss *upstream.SlowStartSpec, cs *upstream.ClusterState, endpoints []string) []time.Time {
	if ss == nil {
		return nil
	}
	return cs.AddedTimes(endpoints, time.Now())
}
