package gatewayapi

import (
	"fmt"
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

// processHTTPRoutes builds every HTTPRoute and attaches it to its parents. A route
// whose parentRefs name no Gateway of Portico's is not Portico's: no status.
func processHTTPRoutes(p *dag.Processing, grants grantIndex, gateways map[types.NamespacedName]*gatewayResult) []*attachedRoute {
	var out []*attachedRoute
	for _, hr := range p.Store().HTTPRoutes {
		parents := attachParents(p, gateways, httpRouteKind, hr.Namespace, hr.Spec.ParentRefs, hr.Spec.Hostnames)
		if len(parents) == 0 {
			continue
		}
		res := processHTTPRoute(p, grants, hr)
		refuseParents(parents, res)
		out = append(out, &attachedRoute{result: res, parents: parents})
	}
	return out
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

// countAttachedRoutes sets each listener's attachedRoutes: the routes attached to it
// by at least one parentRef.
func countAttachedRoutes(routes []*attachedRoute) {
	for _, r := range routes {
		seen := map[*listenerState]bool{}
		for _, pr := range r.parents {
			for _, a := range pr.attachments {
				if !seen[a.listener] {
					seen[a.listener] = true
					a.listener.attached++
				}
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
		consequence := " (the rule's other backends get its requests; with none, the rule answers 500)"
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
