package gatewayapi

import (
	"iter"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
)

// Findings is what Portico's status of one Gateway API object reports as wrong.
type Findings struct {
	// Ours is false when Portico writes no status for the object: a GatewayClass of
	// another controller, a Gateway of such a class, a ListenerSet or route whose parents
	// are all other controllers' (or do not exist), a BackendTLSPolicy that no route of
	// Portico's uses, a ReferenceGrant, a kind that is not Gateway API's.
	Ours bool
	// Problems are its status's errors, then its warnings, in the status's own words.
	Problems []dag.Problem
}

// ObjectFindings says what the status of obj would report as wrong if s held it (in
// place of the object of its key): what the admission webhook warns about. It builds
// obj with only the objects of s that its status depends on (scope): one request costs
// what the object's neighbourhood costs, and a scan of the routes at most, not a build
// of the whole cluster.
//
// The Gateway's data plane address is not looked at: a data plane that is still being
// deployed is not a problem of the object.
func ObjectFindings(obj runtime.Object, s *store.Store, opts dag.Options) Findings {
	ref, ok := dag.RefOf(obj)
	if !ok || !hasStatus(ref.Kind) {
		return Findings{}
	}
	if s == nil {
		s = store.New()
	}
	opts.Processors = []dag.Processor{Processor{}}
	for _, st := range dag.Build(scope(s, obj), opts).Statuses {
		if st.Object == ref {
			return Findings{Ours: true, Problems: append(append([]dag.Problem(nil), st.Errors...), st.Warnings...)}
		}
	}
	return Findings{}
}

// hasStatus reports whether Portico writes Gateway API status for objects of kind.
func hasStatus(kind string) bool {
	switch kind {
	case dag.KindGatewayClass, dag.KindGateway, dag.KindListenerSet, dag.KindHTTPRoute, dag.KindGRPCRoute, dag.KindTLSRoute, dag.KindBackendTLSPolicy:
		return true
	}
	return false
}

// scope returns a store holding obj and what its status depends on in s:
//
//   - always GatewayClasses, ReferenceGrants, Namespaces and CRDs, and the Services,
//     Secrets, ConfigMaps and endpoints that a build looks up by key (s's maps, shared);
//   - the Gateways obj is about (itself, a ListenerSet's parent, a route's parents, the
//     parents of the routes that send to a BackendTLSPolicy's Services), each with all
//     its ListenerSets: their listeners are checked for conflicts as one list;
//   - the routes it is about (a route itself, those sending to a policy's Services) and,
//     when those Gateways carry both HTTPRoutes and GRPCRoutes, those of them that may
//     share a hostname with these, and so on (addMixedRoutes);
//   - for a BackendTLSPolicy, the policies with a Service in common: the oldest applies.
//
// Nothing else reaches a status: each Gateway has its own data plane, and a route
// attaches to its parents' listeners whatever other routes do (but for the hostnames
// HTTPRoutes and GRPCRoutes may not share). The property test holds it to full builds.
func scope(s *store.Store, obj runtime.Object) *store.Store {
	sc := store.New()
	sc.Services, sc.Endpoints, sc.EndpointSlices, sc.Secrets = s.Services, s.Endpoints, s.EndpointSlices, s.Secrets
	sc.Namespaces, sc.ConfigMaps, sc.GatewayAPICRDs = s.Namespaces, s.ConfigMaps, s.GatewayAPICRDs
	sc.GatewayClasses, sc.ReferenceGrants = s.GatewayClasses, s.ReferenceGrants
	w := &scopeWalk{s: s, sc: sc, gateways: map[types.NamespacedName]bool{}, routes: map[dag.ObjectRef]anyRoute{}}
	switch o := obj.(type) {
	case *gatewayv1.GatewayClass:
		sc.GatewayClasses = maps.Clone(s.GatewayClasses)
		sc.GatewayClasses[o.Name] = o
		return sc
	case *gatewayv1.Gateway:
		w.gateways[types.NamespacedName{Namespace: o.Namespace, Name: o.Name}] = true
	case *gatewayv1.ListenerSet:
		if key, ok := listenerSetParentKey(o); ok {
			w.gateways[key] = true
		}
	case *gatewayv1.BackendTLSPolicy:
		w.addPolicies(o)
	default:
		if r, ok := routeOf(obj); ok {
			w.addRoute(r)
		}
	}
	w.addGateways()
	w.addMixedRoutes()
	sc.Upsert(obj)
	return sc
}

// scopeWalk gathers the objects of one scope. The maps of sc it writes (Gateways,
// ListenerSets, routes, policies) are its own; the others are s's and never written.
type scopeWalk struct {
	s, sc    *store.Store
	gateways map[types.NamespacedName]bool
	// routes are the routes in scope.
	routes map[dag.ObjectRef]anyRoute
}

// addRoute adds r and its parent Gateways.
func (w *scopeWalk) addRoute(r anyRoute) {
	w.sc.Upsert(r.obj)
	w.routes[r.ref] = r
	for key := range w.parentGateways(r) {
		w.gateways[key] = true
	}
}

// addPolicies adds the BackendTLSPolicies that target a Service pol targets, and the
// routes that send to one of those Services (with their parents): pol's ancestors.
func (w *scopeWalk) addPolicies(pol *gatewayv1.BackendTLSPolicy) {
	services := policyServices(pol)
	for _, other := range w.s.BackendTLSPolicies {
		if other.Namespace == pol.Namespace && sharesKey(policyServices(other), services) {
			w.sc.Upsert(other)
		}
	}
	for r := range routes(w.s) {
		for _, ref := range routeBackends(r.obj) {
			if group, kind, key := backendKey(r.ref.Namespace, ref); group == "" && kind == "Service" && services[key] {
				w.addRoute(r)
				break
			}
		}
	}
}

// policyServices are the Services a BackendTLSPolicy targets.
func policyServices(pol *gatewayv1.BackendTLSPolicy) map[types.NamespacedName]bool {
	out := map[types.NamespacedName]bool{}
	for _, t := range (&policyResult{policy: pol, key: types.NamespacedName{Namespace: pol.Namespace, Name: pol.Name}}).targets() {
		out[t.service] = true
	}
	return out
}

func sharesKey(a, b map[types.NamespacedName]bool) bool {
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}

// addGateways adds the Gateways in scope and every ListenerSet whose parent is one.
func (w *scopeWalk) addGateways() {
	for key := range w.gateways {
		if gw := w.s.Gateways[key]; gw != nil {
			w.sc.Upsert(gw)
		}
	}
	for _, ls := range w.s.ListenerSets {
		if key, ok := listenerSetParentKey(ls); ok && w.gateways[key] {
			w.sc.Upsert(ls)
		}
	}
}

// addMixedRoutes adds, when the Gateways in scope carry both HTTPRoutes and GRPCRoutes,
// those of them that may serve a hostname of an HTTPRoute or GRPCRoute in scope, then
// those that may serve one of theirs, and so on: a route is refused a hostname that a
// route of the other kind keeps, which depends on whether that one was refused in turn.
// Routes' own hostnames are compared (none is any host): the hosts they serve on a
// listener are within them.
func (w *scopeWalk) addMixedRoutes() {
	var hosts []string
	kinds := map[string]bool{}
	for _, r := range w.routes {
		if r.ref.Kind != dag.KindTLSRoute {
			hosts = append(hosts, requestHosts(r)...)
			kinds[r.ref.Kind] = true
		}
	}
	if len(kinds) == 0 || len(w.s.HTTPRoutes) == 0 && !kinds[dag.KindHTTPRoute] || len(w.s.GRPCRoutes) == 0 && !kinds[dag.KindGRPCRoute] {
		return
	}
	var others []anyRoute
	for r := range routes(w.s) {
		if _, in := w.routes[r.ref]; in || r.ref.Kind == dag.KindTLSRoute {
			continue
		}
		for key := range w.parentGateways(r) {
			if w.gateways[key] {
				others = append(others, r)
				kinds[r.ref.Kind] = true
				break
			}
		}
	}
	if len(kinds) < 2 {
		return
	}
	for added := true; added; {
		added = false
		for i, r := range others {
			if r.obj == nil {
				continue
			}
			if h := requestHosts(r); hostsOverlap(h, hosts) {
				w.sc.Upsert(r.obj)
				hosts = append(hosts, h...)
				others[i].obj, added = nil, true
			}
		}
	}
}

// requestHosts are the request hosts a route may serve: its hostnames, or any ("*").
func requestHosts(r anyRoute) []string {
	if len(r.hostnames) == 0 {
		return []string{"*"}
	}
	out := make([]string, len(r.hostnames))
	for i, h := range r.hostnames {
		out[i] = strings.ToLower(string(h))
	}
	return out
}

// parentGateways are the Gateways a route's parentRefs name, directly or through a
// ListenerSet of s.
func (w *scopeWalk) parentGateways(r anyRoute) iter.Seq[types.NamespacedName] {
	return func(yield func(types.NamespacedName) bool) {
		for _, pr := range r.parents {
			group, kind, key := parentKey(r.ref.Namespace, pr)
			if group != groupName {
				continue
			}
			switch kind {
			case dag.KindGateway:
			case dag.KindListenerSet:
				ls := w.s.ListenerSets[key]
				if ls == nil {
					continue
				}
				var ok bool
				if key, ok = listenerSetParentKey(ls); !ok {
					continue
				}
			default:
				continue
			}
			if !yield(key) {
				return
			}
		}
	}
}

// anyRoute is what scope reads of a route of any kind.
type anyRoute struct {
	obj       runtime.Object
	ref       dag.ObjectRef
	parents   []gatewayv1.ParentReference
	hostnames []gatewayv1.Hostname
}

// routeOf returns obj as a route, or false when it is not one.
func routeOf(obj runtime.Object) (anyRoute, bool) {
	ref, _ := dag.RefOf(obj)
	switch o := obj.(type) {
	case *gatewayv1.HTTPRoute:
		return anyRoute{obj: o, ref: ref, parents: o.Spec.ParentRefs, hostnames: o.Spec.Hostnames}, true
	case *gatewayv1.GRPCRoute:
		return anyRoute{obj: o, ref: ref, parents: o.Spec.ParentRefs, hostnames: o.Spec.Hostnames}, true
	case *gatewayv1.TLSRoute:
		return anyRoute{obj: o, ref: ref, parents: o.Spec.ParentRefs, hostnames: o.Spec.Hostnames}, true
	}
	return anyRoute{}, false
}

// routeBackends are the backendRefs of the rules of a route.
func routeBackends(obj runtime.Object) []gatewayv1.BackendObjectReference {
	var out []gatewayv1.BackendObjectReference
	switch o := obj.(type) {
	case *gatewayv1.HTTPRoute:
		for _, rule := range o.Spec.Rules {
			for _, b := range rule.BackendRefs {
				out = append(out, b.BackendObjectReference)
			}
		}
	case *gatewayv1.GRPCRoute:
		for _, rule := range o.Spec.Rules {
			for _, b := range rule.BackendRefs {
				out = append(out, b.BackendObjectReference)
			}
		}
	case *gatewayv1.TLSRoute:
		for _, rule := range o.Spec.Rules {
			for _, b := range rule.BackendRefs {
				out = append(out, b.BackendObjectReference)
			}
		}
	}
	return out
}

// routes are the routes of s, of every kind.
func routes(s *store.Store) iter.Seq[anyRoute] {
	return func(yield func(anyRoute) bool) {
		for _, m := range []iter.Seq[runtime.Object]{values(s.HTTPRoutes), values(s.GRPCRoutes), values(s.TLSRoutes)} {
			for obj := range m {
				if r, ok := routeOf(obj); ok && !yield(r) {
					return
				}
			}
		}
	}
}

// values are the objects of m as runtime.Objects.
func values[V runtime.Object](m map[types.NamespacedName]V) iter.Seq[runtime.Object] {
	return func(yield func(runtime.Object) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}
