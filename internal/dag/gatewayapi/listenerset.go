package gatewayapi

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
)

// listenerSetResult is a ListenerSet whose parent is a Gateway of Portico's: its
// listeners, checked together with the Gateway's, or why it is not attached.
type listenerSetResult struct {
	ls        *gatewayv1.ListenerSet
	key       types.NamespacedName
	listeners []*listenerState
	// accepted is nil, or why none of its listeners is served: NotAllowed (the
	// Gateway's allowedListeners refuse it), ParentNotAccepted, ListenersNotValid.
	accepted *condError
}

// processListenerSets attaches every ListenerSet to its parent Gateway when that
// Gateway is Portico's and its allowedListeners admit the ListenerSet's namespace.
// The listeners of a Gateway and of its ListenerSets are checked as one list (for
// conflicts: the first keeps a port and hostname): the Gateway's own first, then the
// ListenerSets' by age, then by namespace/name. A ListenerSet whose parent is not a
// Gateway of Portico's is not Portico's: no status.
func processListenerSets(p *dag.Processing, gateways map[types.NamespacedName]*gatewayResult, grants grantIndex) {
	for key, ls := range p.Store().ListenerSets {
		g := listenerSetParent(ls, gateways)
		if g == nil {
			continue
		}
		if g.setsByKey == nil {
			g.setsByKey = map[types.NamespacedName]*listenerSetResult{}
		}
		set := &listenerSetResult{ls: ls, key: key}
		g.sets = append(g.sets, set)
		g.setsByKey[key] = set
	}
	for _, g := range gateways {
		slices.SortFunc(g.sets, func(a, b *listenerSetResult) int {
			if c := a.ls.CreationTimestamp.Compare(b.ls.CreationTimestamp.Time); c != 0 {
				return c
			}
			return cmp.Compare(a.key.String(), b.key.String())
		})
		mergeListeners(p, g, grants)
	}
}

// listenerSetParent returns the Gateway of Portico's that a ListenerSet names, or nil.
func listenerSetParent(ls *gatewayv1.ListenerSet, gateways map[types.NamespacedName]*gatewayResult) *gatewayResult {
	if key, ok := listenerSetParentKey(ls); ok {
		return gateways[key]
	}
	return nil
}

// listenerSetParentKey is the Gateway a ListenerSet's parentRef names, or false when it
// names another kind.
func listenerSetParentKey(ls *gatewayv1.ListenerSet) (types.NamespacedName, bool) {
	ref := ls.Spec.ParentRef
	if (ref.Group != nil && string(*ref.Group) != groupName) || (ref.Kind != nil && string(*ref.Kind) != "Gateway") {
		return types.NamespacedName{}, false
	}
	ns := ls.Namespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	return types.NamespacedName{Namespace: ns, Name: string(ref.Name)}, true
}

// mergeListeners checks the listeners of g's attached ListenerSets after g's own, in
// order, and resolves their certificates (a ListenerSet's own namespace needs no
// ReferenceGrant; another does, from kind ListenerSet).
func mergeListeners(p *dag.Processing, g *gatewayResult, grants grantIndex) {
	specs := slices.Clone(g.gw.Spec.Listeners)
	own := len(specs)
	var attached []*listenerSetResult
	for _, set := range g.sets {
		set.accepted = setAttachment(p.Store(), g, set)
		if set.accepted != nil {
			for _, e := range set.ls.Spec.Listeners {
				ls := &listenerState{spec: listenerOf(e), set: set}
				ls.check.accepted = &condError{Type: string(gatewayv1.ListenerConditionAccepted), Reason: set.accepted.Reason, Message: set.accepted.Message}
				ls.check.kinds, _ = listenerKinds(ls.spec)
				set.listeners = append(set.listeners, ls)
			}
			continue
		}
		attached = append(attached, set)
		for _, e := range set.ls.Spec.Listeners {
			specs = append(specs, listenerOf(e))
		}
	}
	checks := validateListeners(specs)
	i := own
	for _, set := range attached {
		for range set.ls.Spec.Listeners {
			ls := &listenerState{spec: specs[i], check: checks[i], set: set}
			if ls.spec.Hostname != nil {
				ls.hostname = strings.ToLower(string(*ls.spec.Hostname))
			}
			if ls.check.accepted == nil {
				resolveListenerTLS(p, objectRef{kind: dag.KindListenerSet, namespace: set.key.Namespace}, ls, grants)
			}
			if ls.check.accepted == nil {
				// The Gateway's client validation holds for every HTTPS listener on
				// its ports, a ListenerSet's too: a set must not open a way around it.
				resolveFrontendValidation(p, g.gw, ls, grants)
			}
			set.listeners = append(set.listeners, ls)
			i++
		}
		// A set with no listener to serve (all in conflict, or without a usable
		// certificate) is not accepted, and does not count among its Gateway's.
		if !slices.ContainsFunc(set.listeners, (*listenerState).usable) {
			set.accepted = newError(string(gatewayv1.ListenerSetConditionAccepted), string(gatewayv1.ListenerSetReasonListenersNotValid),
				"no listener can be served (see the listeners' conditions)")
		}
	}
}

// setAttachment is nil when the Gateway takes the ListenerSet's listeners, or why not.
func setAttachment(s *store.Store, g *gatewayResult, set *listenerSetResult) *condError {
	if g.accepted != nil {
		return newError(string(gatewayv1.ListenerSetConditionAccepted), string(gatewayv1.ListenerSetReasonParentNotAccepted),
			"Gateway %s is not accepted (see its status)", g.key)
	}
	from := gatewayv1.NamespacesFromNone
	al := g.gw.Spec.AllowedListeners
	if al != nil && al.Namespaces != nil && al.Namespaces.From != nil {
		from = *al.Namespaces.From
	}
	var selector *metav1.LabelSelector
	if al != nil && al.Namespaces != nil {
		selector = al.Namespaces.Selector
	}
	if !namespaceAllowed(s, from, selector, g.key.Namespace, set.key.Namespace) {
		return newError(string(gatewayv1.ListenerSetConditionAccepted), string(gatewayv1.ListenerSetReasonNotAllowed),
			"Gateway %s does not allow ListenerSets from namespace %s: its spec.allowedListeners.namespaces (from: %s) must admit them", g.key, set.key.Namespace, from)
	}
	return nil
}

// listenerOf is a ListenerSet's listener as a Gateway's.
func listenerOf(e gatewayv1.ListenerEntry) gatewayv1.Listener {
	return gatewayv1.Listener(e)
}

// servedListeners are the Gateway's own listeners and those of its attached
// ListenerSets: what its data plane serves (those that are usable).
func (g *gatewayResult) servedListeners() []*listenerState {
	out := g.listeners
	for _, set := range g.sets {
		if set.accepted == nil {
			out = append(out[:len(out):len(out)], set.listeners...)
		}
	}
	return out
}

// attachedSets counts the ListenerSets attached to the Gateway (status
// attachedListenerSets).
func (g *gatewayResult) attachedSets() int32 {
	n := int32(0)
	for _, set := range g.sets {
		if set.accepted == nil {
			n++
		}
	}
	return n
}

// status is the ListenerSet's status once routes are counted.
func (set *listenerSetResult) status() dag.Status {
	ss := &gatewayv1.ListenerSetStatus{}
	var errs []dag.Problem
	statuses, unserved, notes := listenerStatuses(set.listeners, set.accepted == nil)
	for _, ls := range statuses {
		ss.Listeners = append(ss.Listeners, gatewayv1.ListenerEntryStatus(ls))
	}
	if set.accepted != nil {
		notes = nil // the set's own condition says it all
	}
	accepted, programmed := string(gatewayv1.ListenerSetConditionAccepted), string(gatewayv1.ListenerSetConditionProgrammed)
	switch {
	case set.accepted != nil:
		ss.Conditions = append(ss.Conditions,
			condition(accepted, false, set.accepted.Reason, set.accepted.Message),
			condition(programmed, false, notProgrammedReason(set.accepted.Reason), "not served: "+set.accepted.Message))
		errs = append(errs, set.accepted.problem(""))
	case unserved > 0:
		ss.Conditions = append(ss.Conditions,
			condition(accepted, true, string(gatewayv1.ListenerSetReasonListenersNotValid),
				fmt.Sprintf("%d of %d listeners are not served (see their conditions)", unserved, len(set.listeners))),
			condition(programmed, true, string(gatewayv1.ListenerSetReasonProgrammed), "its valid listeners are served"))
	default:
		ss.Conditions = append(ss.Conditions,
			condition(accepted, true, string(gatewayv1.ListenerSetReasonAccepted), "its listeners are part of its Gateway's"),
			condition(programmed, true, string(gatewayv1.ListenerSetReasonProgrammed), "its listeners are served"))
	}
	st := summary(dag.ObjectRef{Kind: dag.KindListenerSet, Namespace: set.key.Namespace, Name: set.key.Name}, errs, notes,
		fmt.Sprintf("served: %d listeners", len(set.listeners)-unserved))
	st.GatewayAPI = &dag.GatewayAPIStatus{ListenerSet: ss}
	return st
}

// notProgrammedReason is the Programmed reason of a ListenerSet that is not accepted
// for reason: the spec's Programmed reasons, NotAllowed as the conformance suite
// expects it.
func notProgrammedReason(reason string) string {
	if reason == string(gatewayv1.ListenerSetReasonParentNotAccepted) {
		return "ParentNotProgrammed"
	}
	return reason
}
