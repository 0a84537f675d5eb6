package gatewayapi

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
)

// state is what one Gateway API build made, kept by a dag.Incremental for the next
// (Processor.NewState), so that a change costs in proportion to the routes it reaches.
//
// Every route is processed against a context: the GatewayClasses, the Gateways with
// their listeners and ListenerSets, the ReferenceGrants and the BackendTLSPolicies. When
// none of those (nor the Namespaces, ConfigMaps and CRDs, nor a Service or Secret they
// read) changed, the context is kept, and only the routes that changed, or that read a
// Service or Secret that changed, are processed again: each is taken out of the counts
// and data planes it contributed to and put back as it is now, and the hosts it served
// are built again. Anything else is built whole, as Process builds: a Gateway's listener
// edited or a ReferenceGrant removed processes every route again, since each may now
// attach, or resolve its backends, differently.
//
// Routes decide one another's fate in one place: on a listener where both HTTPRoutes and
// GRPCRoutes are attached, the older keeps a hostname (refuseKindConflicts). A change of
// a route attached to such a listener is built whole.
//
// Process is a rebuild; the property tests hold Update to it (incremental_test.go).
type state struct {
	pr  Processor
	ctx *buildContext

	routes map[dag.ObjectRef]*routeState
	// byDep are the routes that read each Service and Secret.
	byDep map[dag.Dep]map[dag.ObjectRef]struct{}
	// kinds counts, per listener, the HTTPRoutes (0) and GRPCRoutes (1) attached to it
	// before refuseKindConflicts: a listener with both is mixed.
	kinds  map[*listenerState]*[2]int
	planes map[types.NamespacedName]*plane
	// dirty are the Gateways (their listeners' counts, their data planes) and the
	// policies (their ancestors) that routes changed since the last build's output.
	dirty         map[*gatewayResult]struct{}
	dirtyPolicies map[*policyResult]struct{}

	// gateways and statuses are what the build made, ordered as dag wants them.
	gateways []*dag.Gateway
	statuses []*dag.Status
}

// buildContext is what every route is processed against.
type buildContext struct {
	classes       map[string]*classResult
	classStatuses []dag.Status
	grants        grantIndex
	gateways      []*gatewayResult
	byKey         map[types.NamespacedName]*gatewayResult
	policies      *policyIndex
	// deps are the Services and Secrets read to make it.
	deps map[dag.Dep]struct{}
}

// routeState is one route of the store and what it contributed.
type routeState struct {
	obj any // the store's object, to tell an edit
	// route is nil when no parentRef names a Gateway of Portico's: not Portico's.
	route *attachedRoute
	// raw are the listeners of its attachments before refuseKindConflicts.
	raw    []*listenerState
	deps   []dag.Dep
	slots  []slot
	uses   []policyUse
	status *dag.Status
}

// Why a build was whole.
const (
	reasonFirst   = "first build"
	reasonAll     = "the incremental builder built everything (IngressClasses or certificate delegations changed, or it started over)"
	reasonContext = "a GatewayClass, Gateway, ListenerSet, ReferenceGrant, BackendTLSPolicy, Namespace, ConfigMap or CRD changed"
	reasonDeps    = "a Service or Secret that a Gateway, ListenerSet or BackendTLSPolicy uses changed"
	reasonMixed   = "a route attached to a listener with both HTTPRoutes and GRPCRoutes changed"
	reasonMany    = "the change reaches half the routes"
)

// contextKinds are the kinds the context is made of.
var contextKinds = []store.Kind{store.KindNamespace, store.KindGatewayClass, store.KindGateway, store.KindListenerSet,
	store.KindReferenceGrant, store.KindBackendTLSPolicy, store.KindConfigMap, store.KindGatewayAPICRD}

// Update builds again what ch reaches (see build).
func (b *state) Update(p *dag.Processing, ch dag.ProcessorChanges) dag.ProcessorOutput {
	why := reasonFirst
	switch {
	case b.ctx == nil:
	case ch.All:
		why = reasonAll
	case b.contextChanged(ch):
		why = reasonContext
	case b.contextDepChanged(ch.Deps):
		why = reasonDeps
	default:
		changed := b.changedRoutes(p.Store(), ch)
		if len(changed) == 0 {
			return b.output(nil, "")
		}
		if 2*len(changed) > len(b.routes) {
			why = reasonMany
			break
		}
		touched, whole := b.update(p, changed)
		if whole == "" {
			return b.output(touched, "")
		}
		why = whole
	}
	b.rebuild(p)
	return b.output(nil, why)
}

func (b *state) output(touched []dag.ObjectRef, full string) dag.ProcessorOutput {
	return dag.ProcessorOutput{Gateways: b.gateways, Statuses: b.statuses, Touched: touched, Full: full}
}

func (b *state) contextChanged(ch dag.ProcessorChanges) bool {
	return slices.ContainsFunc(contextKinds, ch.Kinds.Has)
}

func (b *state) contextDepChanged(deps []dag.Dep) bool {
	for _, d := range deps {
		if _, ok := b.ctx.deps[d]; ok {
			return true
		}
	}
	return false
}

// rebuild builds everything: the context, then every route (attached to its parents;
// an HTTPRoute and a GRPCRoute never share a hostname on a listener), the attached
// routes counted and their backends' BackendTLSPolicies applied, then each served
// Gateway's data plane and every status.
func (b *state) rebuild(p *dag.Processing) {
	*b = state{pr: b.pr, routes: map[dag.ObjectRef]*routeState{}, byDep: map[dag.Dep]map[dag.ObjectRef]struct{}{},
		kinds: map[*listenerState]*[2]int{}, planes: map[types.NamespacedName]*plane{},
		dirty: map[*gatewayResult]struct{}{}, dirtyPolicies: map[*policyResult]struct{}{}}
	b.ctx = newContext(p, b.pr)
	for _, g := range b.ctx.gateways {
		if g.served() {
			b.planes[g.key] = newPlane(g)
		}
	}
	s := p.Store()
	var http []*attachedRoute
	add := func(ref dag.ObjectRef, obj any) {
		rs := b.process(p, obj)
		b.routes[ref] = rs
		if rs.route != nil && ref.Kind != dag.KindTLSRoute {
			http = append(http, rs.route)
		}
	}
	for key, hr := range s.HTTPRoutes {
		add(routeRef(dag.KindHTTPRoute, key), hr)
	}
	for key, gr := range s.GRPCRoutes {
		add(routeRef(dag.KindGRPCRoute, key), gr)
	}
	refuseKindConflicts(http)
	for key, tr := range s.TLSRoutes {
		add(routeRef(dag.KindTLSRoute, key), tr)
	}
	converted := map[*dag.Cluster]*dag.Cluster{}
	for ref, rs := range b.routes {
		if rs.route != nil {
			b.place(p, ref, rs, converted)
		}
	}
	b.gateways = b.buildPlanes(nil)
	all := slices.Clone(b.ctx.classStatuses)
	for _, st := range b.contextStatuses(b.ctx.gateways, b.ctx.policies.all) {
		if st != nil {
			all = append(all, *st)
		}
	}
	clear(b.dirty)
	clear(b.dirtyPolicies)
	b.statuses = make([]*dag.Status, 0, len(all)+len(b.routes))
	for i := range all {
		b.statuses = append(b.statuses, &all[i])
	}
	for _, rs := range b.routes {
		if rs.status != nil {
			b.statuses = append(b.statuses, rs.status)
		}
	}
	slices.SortStableFunc(b.statuses, func(a, c *dag.Status) int { return dag.CompareObjectRefs(a.Object, c.Object) })
}

// newContext processes the classes, ReferenceGrants, Gateways with their ListenerSets,
// BackendTLSPolicies and the served Gateways' addresses.
func newContext(p *dag.Processing, pr Processor) *buildContext {
	c := &buildContext{byKey: map[types.NamespacedName]*gatewayResult{}, deps: map[dag.Dep]struct{}{}}
	c.classes, c.classStatuses = processClasses(p)
	c.grants = indexGrants(p.Store())
	c.gateways = processGateways(p, c.classes, c.grants)
	for _, g := range c.gateways {
		c.byKey[g.key] = g
	}
	processListenerSets(p, c.byKey, c.grants)
	c.policies = indexPolicies(p)
	if pr.Addresses != nil {
		for _, g := range c.gateways {
			if g.served() {
				g.addresses, g.awaitingAddress = pr.Addresses.Addresses(p, g.key)
			}
		}
	}
	for _, d := range p.TakeReads() {
		c.deps[d] = struct{}{}
	}
	return c
}

func routeRef(kind string, key types.NamespacedName) dag.ObjectRef {
	return dag.ObjectRef{Kind: kind, Namespace: key.Namespace, Name: key.Name}
}

// process builds one route (an HTTPRoute, GRPCRoute or TLSRoute of the store) against
// the context, attached to its parents.
func (b *state) process(p *dag.Processing, obj any) *routeState {
	rs := &routeState{obj: obj}
	c := b.ctx
	switch o := obj.(type) {
	case *gatewayv1.HTTPRoute:
		rs.route = attachRoute(p, c.byKey, httpRouteKind, o.Namespace, o.Spec.CommonRouteSpec, o.Spec.Hostnames,
			func() *routeResult { return processHTTPRoute(p, c.grants, o) })
	case *gatewayv1.GRPCRoute:
		rs.route = attachRoute(p, c.byKey, grpcRouteKind, o.Namespace, o.Spec.CommonRouteSpec, o.Spec.Hostnames,
			func() *routeResult { return processGRPCRoute(p, c.grants, o) })
	case *gatewayv1.TLSRoute:
		rs.route = attachRoute(p, c.byKey, tlsRouteKind, o.Namespace, o.Spec.CommonRouteSpec, o.Spec.Hostnames,
			func() *routeResult { return processTLSRoute(p, c.grants, o) })
	}
	rs.deps = p.TakeReads()
	if r := rs.route; r != nil {
		if bit := kindBit(r.result.ref.Kind); bit != 0 {
			for _, pr := range r.parents {
				for _, a := range pr.attachments {
					rs.raw = append(rs.raw, a.listener)
				}
			}
			b.countKinds(rs.raw, bit, 1)
		}
	}
	return rs
}

// countKinds adds n to the count of routes of kind bit on listeners.
func (b *state) countKinds(listeners []*listenerState, bit uint8, n int) {
	for _, l := range listeners {
		k := b.kinds[l]
		if k == nil {
			k = &[2]int{}
			b.kinds[l] = k
		}
		k[bit-1] += n
	}
}

// mixed reports whether a listener has both HTTPRoutes and GRPCRoutes attached.
func (b *state) mixed(listeners []*listenerState) bool {
	for _, l := range listeners {
		if k := b.kinds[l]; k != nil && k[0] > 0 && k[1] > 0 {
			return true
		}
	}
	return false
}

// place adds an attached route to the counts of its listeners, applies its backends'
// BackendTLSPolicies, puts its entries on the data planes of the Gateways it is attached
// to and makes its status.
func (b *state) place(p *dag.Processing, ref dag.ObjectRef, rs *routeState, converted map[*dag.Cluster]*dag.Cluster) {
	r := rs.route
	countAttached(r, 1)
	rs.uses = applyPolicies(p, b.ctx.policies, r, converted)
	countUses(rs.uses, 1)
	b.markDirty(rs)
	rs.deps = append(rs.deps, p.TakeReads()...)
	for _, pr := range r.parents {
		for _, a := range pr.attachments {
			if pl := b.planes[a.gateway.key]; pl != nil && a.listener.usable() {
				rs.slots = pl.add(a, r.result, rs.slots)
			}
		}
	}
	st, _ := r.status()
	rs.status = &st
	for _, d := range rs.deps {
		refs := b.byDep[d]
		if refs == nil {
			refs = map[dag.ObjectRef]struct{}{}
			b.byDep[d] = refs
		}
		refs[ref] = struct{}{}
	}
}

// retire takes a route out of everything it contributed to.
func (b *state) retire(ref dag.ObjectRef, rs *routeState) {
	for _, d := range rs.deps {
		if refs := b.byDep[d]; refs != nil {
			delete(refs, ref)
			if len(refs) == 0 {
				delete(b.byDep, d)
			}
		}
	}
	r := rs.route
	if r == nil {
		return
	}
	if bit := kindBit(r.result.ref.Kind); bit != 0 {
		b.countKinds(rs.raw, bit, -1)
	}
	countAttached(r, -1)
	countUses(rs.uses, -1)
	remove(ref, rs.slots)
	b.markDirty(rs)
}

// markDirty notes the Gateways and policies an attached route counts in.
func (b *state) markDirty(rs *routeState) {
	for _, pr := range rs.route.parents {
		for _, a := range pr.attachments {
			b.dirty[a.gateway] = struct{}{}
		}
	}
	for _, u := range rs.uses {
		b.dirtyPolicies[u.policy] = struct{}{}
	}
}

// changedRoutes are the routes whose object changed, and those that read a Service or
// Secret that changed.
func (b *state) changedRoutes(s *store.Store, ch dag.ProcessorChanges) map[dag.ObjectRef]struct{} {
	out := map[dag.ObjectRef]struct{}{}
	check := func(ref dag.ObjectRef) {
		cur, has := lookupRoute(s, ref)
		old := b.routes[ref]
		if (old != nil) != has || (has && old.obj != cur) {
			out[ref] = struct{}{}
		}
	}
	if ch.ObjectsKnown {
		for _, c := range ch.Objects {
			if kind := storeRouteKinds[c.Kind]; kind != "" {
				check(routeRef(kind, c.Key))
			}
		}
	} else {
		for storeKind, kind := range storeRouteKinds {
			if !ch.Kinds.Has(storeKind) {
				continue
			}
			for _, key := range routeKeys(s, storeKind) {
				check(routeRef(kind, key))
			}
			for ref := range b.routes {
				if ref.Kind == kind {
					check(ref)
				}
			}
		}
	}
	for _, d := range ch.Deps {
		for ref := range b.byDep[d] {
			out[ref] = struct{}{}
		}
	}
	return out
}

// storeRouteKinds are the route kinds of the store, with their dag kinds.
var storeRouteKinds = map[store.Kind]string{store.KindHTTPRoute: dag.KindHTTPRoute, store.KindGRPCRoute: dag.KindGRPCRoute, store.KindTLSRoute: dag.KindTLSRoute}

// lookupRoute returns the route ref names in s.
func lookupRoute(s *store.Store, ref dag.ObjectRef) (any, bool) {
	key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	switch ref.Kind {
	case dag.KindHTTPRoute:
		o, ok := s.HTTPRoutes[key]
		return o, ok
	case dag.KindGRPCRoute:
		o, ok := s.GRPCRoutes[key]
		return o, ok
	case dag.KindTLSRoute:
		o, ok := s.TLSRoutes[key]
		return o, ok
	}
	return nil, false
}

// routeKeys are the keys of the routes of one store kind.
func routeKeys(s *store.Store, k store.Kind) []types.NamespacedName {
	var out []types.NamespacedName
	switch k {
	case store.KindHTTPRoute:
		for key := range s.HTTPRoutes {
			out = append(out, key)
		}
	case store.KindGRPCRoute:
		for key := range s.GRPCRoutes {
			out = append(out, key)
		}
	case store.KindTLSRoute:
		for key := range s.TLSRoutes {
			out = append(out, key)
		}
	}
	return out
}

// update processes the changed routes again, with the context kept, returning the
// objects whose status may have changed; or why it must build whole instead, its state
// then half updated.
func (b *state) update(p *dag.Processing, changed map[dag.ObjectRef]struct{}) ([]dag.ObjectRef, string) {
	for ref := range changed {
		if old := b.routes[ref]; old != nil && b.mixed(old.raw) {
			return nil, reasonMixed
		}
	}
	s := p.Store()
	converted := map[*dag.Cluster]*dag.Cluster{}
	statuses := map[dag.ObjectRef]*dag.Status{}
	for ref := range changed {
		if old := b.routes[ref]; old != nil {
			b.retire(ref, old)
			delete(b.routes, ref)
		}
		statuses[ref] = nil
		obj, ok := lookupRoute(s, ref)
		if !ok {
			continue
		}
		rs := b.process(p, obj)
		b.routes[ref] = rs
		if rs.route == nil {
			continue
		}
		if b.mixed(rs.raw) {
			return nil, reasonMixed
		}
		b.place(p, ref, rs, converted)
		statuses[ref] = rs.status
	}
	gateways := make([]*gatewayResult, 0, len(b.dirty))
	for g := range b.dirty {
		gateways = append(gateways, g)
	}
	b.gateways = b.buildPlanes(gateways)
	for ref, st := range b.contextStatuses(gateways, slices.Collect(maps.Keys(b.dirtyPolicies))) {
		statuses[ref] = st
	}
	clear(b.dirty)
	clear(b.dirtyPolicies)
	b.statuses = patchStatuses(b.statuses, statuses)
	touched := make([]dag.ObjectRef, 0, len(statuses))
	for ref := range statuses {
		touched = append(touched, ref)
	}
	return touched, ""
}

// buildPlanes returns the served Gateways' data planes, ordered by name: those of
// changed built again in the last list, or all when changed is nil.
func (b *state) buildPlanes(changed []*gatewayResult) []*dag.Gateway {
	if changed != nil {
		out := slices.Clone(b.gateways)
		for _, g := range changed {
			if pl := b.planes[g.key]; pl != nil {
				i, _ := slices.BinarySearchFunc(out, g.key.String(), func(gw *dag.Gateway, name string) int { return strings.Compare(gw.Name.String(), name) })
				out[i] = pl.build()
			}
		}
		return out
	}
	if len(b.planes) == 0 {
		return nil
	}
	out := make([]*dag.Gateway, 0, len(b.planes))
	for _, pl := range b.planes {
		out = append(out, pl.build())
	}
	slices.SortFunc(out, func(a, c *dag.Gateway) int { return strings.Compare(a.Name.String(), c.Name.String()) })
	return out
}

// contextStatuses are the statuses of gateways (with their ListenerSets) and policies
// as the routes now make them (attached routes counted, policies' ancestors): nil for
// a policy that has none.
func (b *state) contextStatuses(gateways []*gatewayResult, policies []*policyResult) map[dag.ObjectRef]*dag.Status {
	out := map[dag.ObjectRef]*dag.Status{}
	for _, g := range gateways {
		st := g.status()
		out[st.Object] = &st
		for _, set := range g.sets {
			st := set.status()
			out[st.Object] = &st
		}
	}
	for _, pol := range policies {
		ref := dag.ObjectRef{Kind: dag.KindBackendTLSPolicy, Namespace: pol.key.Namespace, Name: pol.key.Name}
		out[ref] = nil
		if st, ok := pol.status(); ok {
			out[ref] = &st
		}
	}
	return out
}

// patchStatuses returns prev (ordered by object, one status each) with the statuses of
// changes in place of those of their objects, nil removing one: a new list, prev being
// kept by the graph that holds it.
func patchStatuses(prev []*dag.Status, changes map[dag.ObjectRef]*dag.Status) []*dag.Status {
	refs := make([]dag.ObjectRef, 0, len(changes))
	for ref := range changes {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, dag.CompareObjectRefs)
	out := make([]*dag.Status, 0, len(prev)+len(refs))
	i := 0
	for _, ref := range refs {
		j, found := slices.BinarySearchFunc(prev[i:], ref, func(st *dag.Status, r dag.ObjectRef) int { return dag.CompareObjectRefs(st.Object, r) })
		out = append(out, prev[i:i+j]...)
		i += j
		if found {
			i++
		}
		if st := changes[ref]; st != nil {
			out = append(out, st)
		}
	}
	return append(out, prev[i:]...)
}
