package gatewayapi

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
)

// attachment is a route attached to one listener, for the hosts it serves there.
type attachment struct {
	gateway  *gatewayResult
	listener *listenerState
	hosts    []string
}

// parentTarget is what a parentRef names: a Gateway of Portico's (its own listeners),
// or a ListenerSet of such a Gateway (the ListenerSet's listeners).
type parentTarget struct {
	gateway *gatewayResult
	set     *listenerSetResult // nil: the Gateway itself
}

// parentOf returns the Gateway or ListenerSet of Portico's that a parentRef names, and
// false when it names something else (another kind, another controller's Gateway,
// nothing): those parents get no status entry from Portico.
func parentOf(routeNS string, pr gatewayv1.ParentReference, gateways map[types.NamespacedName]*gatewayResult) (parentTarget, bool) {
	group, kind, key := parentKey(routeNS, pr)
	switch {
	case group != groupName:
	case kind == "Gateway":
		if g := gateways[key]; g != nil {
			return parentTarget{gateway: g}, true
		}
	case kind == dag.KindListenerSet:
		// A ListenerSet has one parent: at most one Gateway lists it.
		for _, g := range gateways {
			if set := g.setsByKey[key]; set != nil {
				return parentTarget{gateway: g, set: set}, true
			}
		}
	}
	return parentTarget{}, false
}

// parentKey is what a parentRef of a route in namespace routeNS names, its defaults
// applied: group, kind and namespace/name.
func parentKey(routeNS string, pr gatewayv1.ParentReference) (group, kind string, key types.NamespacedName) {
	group, kind = groupName, "Gateway"
	if pr.Group != nil {
		group = string(*pr.Group)
	}
	if pr.Kind != nil {
		kind = string(*pr.Kind)
	}
	ns := routeNS
	if pr.Namespace != nil {
		ns = string(*pr.Namespace)
	}
	return group, kind, types.NamespacedName{Namespace: ns, Name: string(pr.Name)}
}

func (t parentTarget) String() string {
	if t.set != nil {
		return "ListenerSet " + t.set.key.String()
	}
	return "Gateway " + t.gateway.key.String()
}

// listeners are the listeners a route attaches to through this parent.
func (t parentTarget) listeners() []*listenerState {
	if t.set != nil {
		return t.set.listeners
	}
	return t.gateway.listeners
}

// accepted is nil, or why no route attaches to the parent.
func (t parentTarget) accepted() *condError {
	if t.set != nil {
		return t.set.accepted
	}
	return t.gateway.accepted
}

// namespace is the namespace allowedRoutes "Same" means.
func (t parentTarget) namespace() string {
	if t.set != nil {
		return t.set.key.Namespace
	}
	return t.gateway.key.Namespace
}

// attach returns the listeners of t that a route of kind in namespace routeNS attaches
// to through pr, with the hosts it serves on each, or the Accepted condition's reason
// why none: NoMatchingParent (no listener has the sectionName and port), then
// NotAllowedByListeners (allowedRoutes refuses the route), then
// NoMatchingListenerHostname (no hostname in common).
func attach(s *store.Store, t parentTarget, pr gatewayv1.ParentReference, kind gatewayv1.Kind, routeNS string, hostnames []string) ([]attachment, *condError) {
	if e := t.accepted(); e != nil {
		return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonNoMatchingParent),
			"%s is not accepted (see its status): %s", t, e.Message)
	}
	var named, allowed []*listenerState
	for _, l := range t.listeners() {
		if pr.SectionName != nil && string(*pr.SectionName) != string(l.spec.Name) {
			continue
		}
		if pr.Port != nil && *pr.Port != l.spec.Port {
			continue
		}
		named = append(named, l)
		if l.attachable() && acceptsKind(l, kind) && allowsNamespace(s, l, t.namespace(), routeNS) {
			allowed = append(allowed, l)
		}
	}
	if len(named) == 0 {
		return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonNoMatchingParent),
			"%s has no listener%s: fix parentRefs", t, describeSection(pr))
	}
	if len(allowed) == 0 {
		if !slices.ContainsFunc(named, (*listenerState).attachable) {
			return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonNotAllowedByListeners),
				"the listener%s of %s is not accepted (see its listener conditions)", describeSection(pr), t)
		}
		return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonNotAllowedByListeners),
			"no listener%s of %s allows %ss from namespace %s: its allowedRoutes must name the kind and the namespace", describeSection(pr), t, kind, routeNS)
	}
	var out []attachment
	for _, l := range allowed {
		if hosts := intersectHostnames(l.hostname, hostnames); len(hosts) > 0 {
			out = append(out, attachment{gateway: t.gateway, listener: l, hosts: hosts})
		}
	}
	if len(out) == 0 {
		return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonNoMatchingListenerHostname),
			"no hostname of the route is within the hostname of a listener%s of %s: fix spec.hostnames", describeSection(pr), t)
	}
	return out, nil
}

func describeSection(pr gatewayv1.ParentReference) string {
	out := ""
	if pr.SectionName != nil {
		out += fmt.Sprintf(" named %q", *pr.SectionName)
	}
	if pr.Port != nil {
		out += fmt.Sprintf(" on port %d", *pr.Port)
	}
	return out
}

func acceptsKind(l *listenerState, kind gatewayv1.Kind) bool {
	for _, k := range l.check.kinds {
		if k.Kind == kind {
			return true
		}
	}
	return false
}

// allowsNamespace applies a listener's allowedRoutes.namespaces: Same (the default:
// the namespace of the listener's Gateway or ListenerSet), All, None, or Selector
// against the labels of the route's Namespace.
func allowsNamespace(s *store.Store, l *listenerState, ownerNS, routeNS string) bool {
	from := gatewayv1.NamespacesFromSame
	var selector *metav1.LabelSelector
	if l.spec.AllowedRoutes != nil && l.spec.AllowedRoutes.Namespaces != nil {
		if f := l.spec.AllowedRoutes.Namespaces.From; f != nil {
			from = *f
		}
		selector = l.spec.AllowedRoutes.Namespaces.Selector
	}
	return namespaceAllowed(s, from, selector, ownerNS, routeNS)
}

// namespaceAllowed applies a "from" rule (allowedRoutes, allowedListeners) to an object
// in namespace ns: All, Same (as ownerNS), Selector (the Namespace's labels), None.
func namespaceAllowed(s *store.Store, from gatewayv1.FromNamespaces, selector *metav1.LabelSelector, ownerNS, ns string) bool {
	switch from {
	case gatewayv1.NamespacesFromAll:
		return true
	case gatewayv1.NamespacesFromSame:
		return ownerNS == ns
	case gatewayv1.NamespacesFromSelector:
		if selector == nil {
			return false
		}
		sel, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			return false
		}
		n := s.Namespaces[ns]
		return n != nil && sel.Matches(labels.Set(n.Labels))
	}
	return false
}
