package gatewayapi

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
)

// attachedRoute is a route with what each of its parentRefs naming a Gateway of
// Portico's made of it.
type attachedRoute struct {
	result  *routeResult
	parents []parentResult
}

// parentResult is one parentRef: the listeners it attached the route to, or why none.
type parentResult struct {
	ref         gatewayv1.ParentReference
	attachments []attachment
	err         *condError
}

// attachRoute returns a route of kind in namespace ns, built by process, attached to
// each of its parentRefs that names a Gateway of Portico's; nil for a route without
// one, which is not Portico's (no status).
func attachRoute(p *dag.Processing, gateways map[types.NamespacedName]*gatewayResult, kind gatewayv1.Kind, ns string,
	spec gatewayv1.CommonRouteSpec, hostnames []gatewayv1.Hostname, process func() *routeResult) *attachedRoute {
	parents := attachParents(p, gateways, kind, ns, spec.ParentRefs, hostnames)
	if len(parents) == 0 {
		return nil
	}
	res := process()
	refuseParents(parents, res)
	return &attachedRoute{result: res, parents: parents}
}

// attachParents attaches a route of kind in namespace ns to each of its parentRefs
// that names a Gateway of Portico's or a ListenerSet of one.
func attachParents(p *dag.Processing, gateways map[types.NamespacedName]*gatewayResult, kind gatewayv1.Kind, ns string,
	refs []gatewayv1.ParentReference, hostnames []gatewayv1.Hostname) []parentResult {
	hosts := make([]string, len(hostnames))
	for i, h := range hostnames {
		hosts[i] = string(h)
	}
	var out []parentResult
	for _, pr := range refs {
		if t, ok := parentOf(ns, pr, gateways); ok {
			atts, err := attach(p.Store(), t, pr, kind, ns, hosts)
			out = append(out, parentResult{ref: pr, attachments: atts, err: err})
		}
	}
	return out
}

// refuseParents detaches a route that cannot be served from every parent it attached
// to, which then says why.
func refuseParents(parents []parentResult, res *routeResult) {
	if res.accepted == nil {
		return
	}
	for i := range parents {
		if parents[i].err == nil {
			parents[i].err, parents[i].attachments = res.accepted, nil
		}
	}
}

// countAttached adds n (1 or -1) to the attachedRoutes of each listener the route is
// attached to by at least one parentRef.
func countAttached(r *attachedRoute, n int32) {
	var seen []*listenerState
	for _, pr := range r.parents {
		for _, a := range pr.attachments {
			if !slices.Contains(seen, a.listener) {
				seen = append(seen, a.listener)
				a.listener.attached += n
			}
		}
	}
}

// status is the route's status: one entry per parentRef of Portico's, with Accepted
// and ResolvedRefs.
func (r *attachedRoute) status() (dag.Status, bool) {
	rs := &gatewayv1.RouteStatus{}
	var errs, notes []dag.Problem
	attachedTo := 0
	for _, pr := range r.parents {
		ps := gatewayv1.RouteParentStatus{ParentRef: pr.ref, ControllerName: dag.GatewayControllerName}
		if pr.err != nil {
			ps.Conditions = append(ps.Conditions, condition(pr.err.Type, false, pr.err.Reason, pr.err.Message))
			errs = append(errs, pr.err.problem(fmt.Sprintf("parent %s: ", pr.ref.Name)))
		} else {
			attachedTo++
			ps.Conditions = append(ps.Conditions, condition(string(gatewayv1.RouteConditionAccepted), true, string(gatewayv1.RouteReasonAccepted), "attached to "+listenerNames(pr.attachments)))
		}
		if e := r.result.resolved; e != nil {
			ps.Conditions = append(ps.Conditions, condition(e.Type, false, e.Reason, e.Message))
		} else {
			ps.Conditions = append(ps.Conditions, condition(string(gatewayv1.RouteConditionResolvedRefs), true, string(gatewayv1.RouteReasonResolvedRefs), "references resolved"))
		}
		rs.Parents = append(rs.Parents, ps)
	}
	if e := r.result.resolved; e != nil {
		consequence := " (the requests the rule would send it are answered 500)"
		if r.result.ref.Kind == dag.KindTLSRoute {
			consequence = " (that backend gets no connections; with none left, connections are closed)"
		}
		p := e.problem("")
		p.Message += consequence
		notes = append(notes, p)
	}
	ok := fmt.Sprintf("attached to %d of %d parents", attachedTo, len(r.parents))
	// A route attached somewhere is served: a parent it could not attach to is a remark.
	if attachedTo > 0 {
		notes, errs = append(errs, notes...), nil
	}
	st := summary(r.result.ref, errs, notes, ok)
	st.GatewayAPI = &dag.GatewayAPIStatus{Route: rs}
	return st, true
}

func listenerNames(atts []attachment) string {
	names := make([]string, 0, len(atts))
	for _, a := range atts {
		owner := a.gateway.key
		if a.listener.set != nil {
			owner = a.listener.set.key
		}
		names = append(names, fmt.Sprintf("%s/%s", owner, a.listener.spec.Name))
	}
	return strings.Join(names, ", ")
}

// refuseKindConflicts keeps HTTPRoutes and GRPCRoutes off each other's hostnames: the
// spec forbids merging their rules, and on one listener a hostname is one virtual host.
// Of two routes of the two kinds attached to one listener with hostnames in common,
// the older (then the first by namespace/name) keeps its parent; the other is refused
// there (Accepted False). Only the routes on listeners that have both kinds are looked
// at: a build with thousands of HTTPRoutes and no GRPCRoute pays one pass.
func refuseKindConflicts(routes []*attachedRoute) {
	kinds := map[*listenerState]uint8{}
	for _, r := range routes {
		for _, pr := range r.parents {
			for _, a := range pr.attachments {
				kinds[a.listener] |= kindBit(r.result.ref.Kind)
			}
		}
	}
	var mixed []*attachedRoute
	for _, r := range routes {
		if slices.ContainsFunc(r.parents, func(pr parentResult) bool {
			return slices.ContainsFunc(pr.attachments, func(a attachment) bool { return kinds[a.listener] == bothKinds })
		}) {
			mixed = append(mixed, r)
		}
	}
	slices.SortStableFunc(mixed, func(a, b *attachedRoute) int {
		if c := a.result.created.Compare(b.result.created); c != 0 {
			return c
		}
		return dag.CompareObjectRefs(a.result.ref, b.result.ref)
	})
	claims := map[*listenerState]*hostClaims{}
	for _, r := range mixed {
		for i := range r.parents {
			pr := &r.parents[i]
			if err := kindConflict(r.result.ref, pr.attachments, claims); err != nil {
				pr.err, pr.attachments = err, nil
				continue
			}
			for _, a := range pr.attachments {
				if claims[a.listener] == nil {
					claims[a.listener] = &hostClaims{}
				}
				claims[a.listener].add(r.result.ref, a.hosts)
			}
		}
	}
}

const bothKinds = 3

// kindBit is the bit of an HTTP route kind in a listener's set of attached kinds.
func kindBit(kind string) uint8 {
	switch kind {
	case dag.KindHTTPRoute:
		return 1
	case dag.KindGRPCRoute:
		return 2
	}
	return 0
}

// hostClaims are the hosts routes of each kind serve on one listener, by kind bit:
// precise names ("*" for any host) indexed, wildcards listed.
type hostClaims struct {
	exact     [3]map[string]dag.ObjectRef
	wildcards [3][]hostOwner
	// all are every host, in the order claimed: scanned for a wildcard or "*".
	all [3][]hostOwner
}

type hostOwner struct {
	host  string
	owner dag.ObjectRef
}

func (hc *hostClaims) add(owner dag.ObjectRef, hosts []string) {
	k := kindBit(owner.Kind)
	for _, h := range hosts {
		hc.all[k] = append(hc.all[k], hostOwner{h, owner})
		if strings.HasPrefix(h, "*.") {
			hc.wildcards[k] = append(hc.wildcards[k], hostOwner{h, owner})
			continue
		}
		if hc.exact[k] == nil {
			hc.exact[k] = map[string]dag.ObjectRef{}
		}
		if _, ok := hc.exact[k][h]; !ok {
			hc.exact[k][h] = owner
		}
	}
}

// conflict returns a route of kind bit k that serves a request host that host (a
// precise name, a wildcard or "*") also serves.
func (hc *hostClaims) conflict(k uint8, host string) (dag.ObjectRef, bool) {
	if len(hc.exact[k]) == 0 && len(hc.wildcards[k]) == 0 {
		return dag.ObjectRef{}, false
	}
	if host == "*" || strings.HasPrefix(host, "*.") {
		// Rare: look at every host of the other kind.
		for _, o := range hc.all[k] {
			if hostsOverlap([]string{host}, []string{o.host}) {
				return o.owner, true
			}
		}
		return dag.ObjectRef{}, false
	}
	if owner, ok := hc.exact[k][host]; ok {
		return owner, true
	} else if owner, ok := hc.exact[k]["*"]; ok {
		return owner, true
	}
	for _, w := range hc.wildcards[k] {
		if hostsOverlap([]string{host}, []string{w.host}) {
			return w.owner, true
		}
	}
	return dag.ObjectRef{}, false
}

// kindConflict says why route cannot have attachments: a route of the other kind
// already serves one of their hosts on the same listener.
func kindConflict(route dag.ObjectRef, atts []attachment, claims map[*listenerState]*hostClaims) *condError {
	other := bothKinds &^ kindBit(route.Kind)
	for _, a := range atts {
		hc := claims[a.listener]
		if hc == nil {
			continue
		}
		for _, h := range a.hosts {
			if owner, ok := hc.conflict(other, h); ok {
				return newError(string(gatewayv1.RouteConditionAccepted), reasonConflictingRouteKind,
					"%s %s/%s (older, or first by namespace/name) already serves a hostname of this route on listener %s/%s: a hostname is served by HTTPRoutes or by GRPCRoutes, not both; give the routes different hostnames",
					owner.Kind, owner.Namespace, owner.Name, a.gateway.key, a.listener.spec.Name)
			}
		}
	}
	return nil
}

// reasonConflictingRouteKind is Portico's reason (the spec names none) for a route
// refused because a route of the other kind has its hostname.
const reasonConflictingRouteKind = "HostnameConflict"

// hostsOverlap reports whether two sets of served hosts ("*" for any) have a request
// host in common.
func hostsOverlap(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == "*" || y == "*" || hostMatches(x, y) || hostMatches(y, x) {
				return true
			}
		}
	}
	return false
}
