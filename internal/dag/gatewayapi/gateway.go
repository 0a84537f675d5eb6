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
)

// gatewayResult is a Gateway of one of Portico's classes and its listeners, with what
// routes attach to them.
type gatewayResult struct {
	gw        *gatewayv1.Gateway
	key       types.NamespacedName
	listeners []*listenerState
	// accepted is nil, or why the Gateway is not served at all.
	accepted *condError
	// addresses are where its data plane is reached; awaitingAddress, when set, says
	// why it has none yet (its load balancer is being set up) and what to do.
	addresses       []gatewayv1.GatewayStatusAddress
	awaitingAddress string
	// sets are the ListenerSets whose parent it is, in the order of precedence of their
	// listeners (listenerset.go); setsByKey finds them by namespace/name.
	sets      []*listenerSetResult
	setsByKey map[types.NamespacedName]*listenerSetResult
}

// objectRef is the kind and namespace of the object that refers to something, as
// ReferenceGrants' from entries name it.
type objectRef struct {
	kind, namespace string
}

// listenerState is one listener of a Gateway: its checks, certificate and the routes
// counted as attached (in the final pass).
type listenerState struct {
	spec     gatewayv1.Listener
	check    listenerCheck
	hostname string // lower case, "" when it has none
	// secret is its first usable certificate, more the others (each presented to the
	// clients whose SNI its names match).
	secret *dag.Secret
	more   []*dag.Secret
	// clients is the client certificate validation of an HTTPS listener's port
	// (spec.tls.frontend); nil: none.
	clients  *dag.ClientValidation
	attached int32
	// set is the ListenerSet the listener comes from, nil for the Gateway's own.
	set *listenerSetResult
}

func (l *listenerState) usable() bool { return l.check.usable() }

// attachable reports whether routes attach to the listener (and count in its
// attachedRoutes): accepted, with a route kind to accept, even when its certificate
// cannot be used and it is not served.
func (l *listenerState) attachable() bool { return l.check.accepted == nil && len(l.check.kinds) > 0 }

// problem says what keeps the listener from being served, or what it refuses, or nil.
func (l *listenerState) problem() *condError {
	for _, e := range []*condError{l.check.accepted, l.check.resolvedRefs} {
		if e != nil {
			return e
		}
	}
	return nil
}

// processGateways returns the Gateways of Portico's accepted classes; those of other
// classes are not Portico's (no status, nothing served).
func processGateways(p *dag.Processing, classes map[string]*classResult, grants grantIndex) []*gatewayResult {
	var out []*gatewayResult
	for key, gw := range p.Store().Gateways {
		class := classes[string(gw.Spec.GatewayClassName)]
		if class == nil {
			continue
		}
		res := &gatewayResult{gw: gw, key: key}
		checks := validateListeners(gw.Spec.Listeners)
		for i, l := range gw.Spec.Listeners {
			ls := &listenerState{spec: l, check: checks[i]}
			if l.Hostname != nil {
				ls.hostname = strings.ToLower(string(*l.Hostname))
			}
			if ls.check.accepted == nil {
				resolveListenerTLS(p, objectRef{kind: "Gateway", namespace: gw.Namespace}, ls, grants)
			}
			if ls.check.accepted == nil {
				resolveFrontendValidation(p, gw, ls, grants)
			}
			res.listeners = append(res.listeners, ls)
		}
		switch {
		case !class.accepted:
			res.accepted = newError(string(gatewayv1.GatewayConditionAccepted), string(gatewayv1.GatewayReasonPending),
				"GatewayClass %s is not accepted (see its status)", class.class.Name)
		default:
			res.accepted = validateGatewaySpec(gw)
		}
		if res.accepted == nil && !slices.ContainsFunc(res.listeners, (*listenerState).attachable) {
			res.accepted = newError(string(gatewayv1.GatewayConditionAccepted), string(gatewayv1.GatewayReasonListenersNotValid),
				"no listener is accepted (see the listeners' conditions)")
		}
		out = append(out, res)
	}
	return out
}

// validateGatewaySpec refuses what Portico cannot do with a Gateway as a whole.
func validateGatewaySpec(gw *gatewayv1.Gateway) *condError {
	if inf := gw.Spec.Infrastructure; inf != nil && inf.ParametersRef != nil {
		return newError(string(gatewayv1.GatewayConditionAccepted), string(gatewayv1.GatewayReasonInvalidParameters),
			"spec.infrastructure.parametersRef (%s %s) is not supported: remove it", inf.ParametersRef.Kind, inf.ParametersRef.Name)
	}
	if gw.Spec.TLS != nil && gw.Spec.TLS.Backend != nil {
		// Backends that require a client certificate would refuse every request.
		return newError(string(gatewayv1.GatewayConditionAccepted), "UnsupportedValue",
			"spec.tls.backend (a client certificate for backends) is not supported yet: remove it")
	}
	for i, a := range gw.Spec.Addresses {
		if a.Type != nil && *a.Type != gatewayv1.IPAddressType && *a.Type != gatewayv1.HostnameAddressType {
			return newError(string(gatewayv1.GatewayConditionAccepted), string(gatewayv1.GatewayReasonUnsupportedAddress),
				"spec.addresses[%d]: address type %q is not supported: use IPAddress or Hostname", i, *a.Type)
		}
	}
	return nil
}

// staticAddressProblem says why the addresses a Gateway asks for cannot be given it, or
// "": an entry without a value asks for an address of that type, which its data plane
// gets (feature GatewayAddressEmpty); a given value is a static address, which Portico
// cannot promise yet, so the Gateway is not Programmed rather than served elsewhere.
func staticAddressProblem(gw *gatewayv1.Gateway) string {
	for i, a := range gw.Spec.Addresses {
		if a.Value != "" {
			return fmt.Sprintf("spec.addresses[%d]: the static address %q cannot be given yet: remove its value to have an address assigned", i, a.Value)
		}
	}
	return ""
}

func (g *gatewayResult) usableListeners() int {
	n := 0
	for _, l := range g.listeners {
		if l.usable() {
			n++
		}
	}
	return n
}

// served reports whether the Gateway gets a data plane: accepted, with a listener
// that can be served.
func (g *gatewayResult) served() bool { return g.accepted == nil && g.usableListeners() > 0 }

// resolveListenerTLS finds the certificate of an HTTPS listener, or of a TLS listener
// that terminates (its TLSRoutes then get a TCP stream of the decrypted bytes), and
// refuses a TLS mode the protocol cannot have.
func resolveListenerTLS(p *dag.Processing, owner objectRef, ls *listenerState, grants grantIndex) {
	l := ls.spec
	mode := gatewayv1.TLSModeTerminate
	if l.TLS != nil && l.TLS.Mode != nil {
		mode = *l.TLS.Mode
	}
	switch {
	case l.Protocol == gatewayv1.HTTPSProtocolType && mode != gatewayv1.TLSModeTerminate:
		ls.check.accepted = newError(string(gatewayv1.ListenerConditionAccepted), string(gatewayv1.ListenerReasonUnsupportedValue),
			"an HTTPS listener terminates TLS: set tls.mode Terminate, or use protocol TLS to pass connections through")
		return
	case l.Protocol == gatewayv1.TLSProtocolType && mode == gatewayv1.TLSModePassthrough:
		return
	case l.Protocol != gatewayv1.HTTPSProtocolType && l.Protocol != gatewayv1.TLSProtocolType:
		return
	}
	secrets, err := listenerCertificates(p, owner, l, grants)
	ls.check.resolvedRefs = err
	if len(secrets) == 0 {
		ls.check.badCertificate = true
		return
	}
	ls.secret, ls.more = secrets[0], secrets[1:]
}

// listenerCertificates returns the certificates of a listener's certificateRefs that
// can be used, in their order, and the first ref that cannot be used. The listener
// serves the usable ones (each to the clients whose SNI its names match); without
// any it is not served.
func listenerCertificates(p *dag.Processing, owner objectRef, l gatewayv1.Listener, grants grantIndex) ([]*dag.Secret, *condError) {
	if l.TLS == nil || len(l.TLS.CertificateRefs) == 0 {
		return nil, newError(string(gatewayv1.ListenerConditionResolvedRefs), string(gatewayv1.ListenerReasonInvalidCertificateRef),
			"a %s listener that terminates TLS needs tls.certificateRefs naming a kubernetes.io/tls Secret", l.Protocol)
	}
	var out []*dag.Secret
	var firstErr *condError
	for i, ref := range l.TLS.CertificateRefs {
		secret, err := listenerCertificate(p, owner, ref, fmt.Sprintf("tls.certificateRefs[%d]", i), grants)
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		out = append(out, secret)
	}
	return out, firstErr
}

// listenerCertificate returns the certificate of one certificateRef of a listener of
// owner (a Gateway or a ListenerSet, whose own namespace needs no ReferenceGrant).
func listenerCertificate(p *dag.Processing, owner objectRef, ref gatewayv1.SecretObjectReference, field string, grants grantIndex) (*dag.Secret, *condError) {
	refErr := func(reason gatewayv1.ListenerConditionReason, format string, args ...any) *condError {
		return newError(string(gatewayv1.ListenerConditionResolvedRefs), string(reason), field+": "+format, args...)
	}
	group, kind := "", "Secret"
	if ref.Group != nil {
		group = coreGroup(string(*ref.Group))
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	ns := owner.namespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	if group != "" || kind != "Secret" {
		return nil, refErr(gatewayv1.ListenerReasonInvalidCertificateRef, "%s/%s is not supported: refer to a Secret", group, kind)
	}
	if !grants.permitted(objectKind{groupName, owner.kind}, owner.namespace, objectKind{"", "Secret"}, ns, string(ref.Name)) {
		return nil, refErr(gatewayv1.ListenerReasonRefNotPermitted,
			"Secret %s/%s is in another namespace and no ReferenceGrant there allows %ss of namespace %s to use it; add one", ns, ref.Name, owner.kind, owner.namespace)
	}
	secret, err := p.TLSSecret(types.NamespacedName{Namespace: ns, Name: string(ref.Name)})
	if err != nil {
		return nil, refErr(gatewayv1.ListenerReasonInvalidCertificateRef, "%v", err)
	}
	return secret, nil
}

// gatewayStatus is the Gateway's status once routes are counted.
func (g *gatewayResult) status() dag.Status {
	listeners, invalidListeners, notes := listenerStatuses(g.listeners, g.accepted == nil)
	gs := &gatewayv1.GatewayStatus{Listeners: listeners}
	var errs []dag.Problem
	switch {
	case g.accepted != nil:
		gs.Conditions = append(gs.Conditions,
			condition(g.accepted.Type, false, g.accepted.Reason, g.accepted.Message),
			condition(string(gatewayv1.GatewayConditionProgrammed), false, string(gatewayv1.GatewayReasonInvalid), "not served: "+g.accepted.Message))
		errs = append(errs, g.accepted.problem(""))
	case invalidListeners == len(g.listeners):
		e := newError(string(gatewayv1.GatewayConditionProgrammed), string(gatewayv1.GatewayReasonInvalid), "no listener can be served (see their conditions)")
		gs.Conditions = append(gs.Conditions,
			condition(string(gatewayv1.GatewayConditionAccepted), true, string(gatewayv1.GatewayReasonListenersNotValid), e.Message),
			condition(e.Type, false, e.Reason, e.Message))
		errs = append(errs, e.problem(""))
	case invalidListeners > 0:
		gs.Conditions = append(gs.Conditions,
			condition(string(gatewayv1.GatewayConditionAccepted), true, string(gatewayv1.GatewayReasonListenersNotValid),
				fmt.Sprintf("%d of %d listeners are not served (see their conditions)", invalidListeners, len(g.listeners))),
			condition(string(gatewayv1.GatewayConditionProgrammed), true, string(gatewayv1.GatewayReasonProgrammed), "its valid listeners are served"))
	default:
		gs.Conditions = append(gs.Conditions,
			condition(string(gatewayv1.GatewayConditionAccepted), true, string(gatewayv1.GatewayReasonAccepted), "Portico serves this Gateway"),
			condition(string(gatewayv1.GatewayConditionProgrammed), true, string(gatewayv1.GatewayReasonProgrammed), "its listeners are served"))
	}
	if insecureFrontend(g.gw) {
		gs.Conditions = append(gs.Conditions, condition(string(gatewayv1.GatewayConditionInsecureFrontendValidationMode), true,
			string(gatewayv1.GatewayReasonConfigurationChanged), "spec.tls.frontend lets clients in without a valid certificate (mode AllowInsecureFallback)"))
	}
	gs.Addresses = g.addresses
	if msg := staticAddressProblem(g.gw); msg != "" {
		for i, c := range gs.Conditions {
			if c.Type == string(gatewayv1.GatewayConditionProgrammed) && c.Status == metav1.ConditionTrue {
				gs.Conditions[i] = condition(c.Type, false, string(gatewayv1.GatewayReasonAddressNotUsable), msg)
				notes = append(notes, dag.Problem{Type: c.Type, Reason: string(gatewayv1.GatewayReasonAddressNotUsable), Message: msg})
			}
		}
	} else if g.awaitingAddress != "" {
		reason := string(gatewayv1.GatewayReasonAddressNotAssigned)
		if len(g.addresses) > 0 {
			reason = string(gatewayv1.GatewayReasonPending) // reached there, not answering yet
		}
		for i, c := range gs.Conditions {
			if c.Type == string(gatewayv1.GatewayConditionProgrammed) && c.Status == metav1.ConditionTrue {
				gs.Conditions[i] = condition(c.Type, false, reason, g.awaitingAddress)
				notes = append(notes, dag.Problem{Type: c.Type, Reason: reason, Message: g.awaitingAddress})
			}
		}
	}
	st := summary(dag.ObjectRef{Kind: dag.KindGateway, Namespace: g.key.Namespace, Name: g.key.Name}, errs, notes,
		fmt.Sprintf("served: %d listeners", len(g.listeners)-invalidListeners))
	gs.AttachedListenerSets = new(g.attachedSets())
	st.GatewayAPI = &dag.GatewayAPIStatus{Gateway: gs}
	return st
}

// listenerStatuses are the statuses of listeners of an object that is accepted or not,
// how many are not served, and what keeps each from being served.
func listenerStatuses(listeners []*listenerState, accepted bool) (out []gatewayv1.ListenerStatus, unserved int, notes []dag.Problem) {
	for _, l := range listeners {
		out = append(out, listenerStatus(l, accepted))
		if !l.usable() {
			unserved++
		}
		if e := l.problem(); e != nil {
			notes = append(notes, e.problem(fmt.Sprintf("listener %s: ", l.spec.Name)))
		}
	}
	return out, unserved, notes
}

// listenerStatus has the four conditions of a listener, always all four, so that a
// condition that no longer applies is seen to be cleared. A listener of a Gateway that
// is not accepted is not programmed.
func listenerStatus(l *listenerState, gatewayAccepted bool) gatewayv1.ListenerStatus {
	c := l.check
	ls := gatewayv1.ListenerStatus{Name: l.spec.Name, SupportedKinds: c.kinds, AttachedRoutes: l.attached}
	if ls.SupportedKinds == nil {
		ls.SupportedKinds = []gatewayv1.RouteGroupKind{}
	}
	if c.accepted != nil {
		ls.Conditions = append(ls.Conditions, condition(c.accepted.Type, false, c.accepted.Reason, c.accepted.Message))
	} else {
		ls.Conditions = append(ls.Conditions, condition(string(gatewayv1.ListenerConditionAccepted), true, string(gatewayv1.ListenerReasonAccepted), "accepted"))
	}
	if c.resolvedRefs != nil {
		ls.Conditions = append(ls.Conditions, condition(c.resolvedRefs.Type, false, c.resolvedRefs.Reason, c.resolvedRefs.Message))
	} else {
		ls.Conditions = append(ls.Conditions, condition(string(gatewayv1.ListenerConditionResolvedRefs), true, string(gatewayv1.ListenerReasonResolvedRefs), "references resolved"))
	}
	if c.conflicted != nil {
		ls.Conditions = append(ls.Conditions, condition(c.conflicted.Type, true, c.conflicted.Reason, c.conflicted.Message))
	} else {
		ls.Conditions = append(ls.Conditions, condition(string(gatewayv1.ListenerConditionConflicted), false, string(gatewayv1.ListenerReasonNoConflicts), ""))
	}
	switch {
	case l.usable() && gatewayAccepted:
		ls.Conditions = append(ls.Conditions, condition(string(gatewayv1.ListenerConditionProgrammed), true, string(gatewayv1.ListenerReasonProgrammed), "served"))
	case l.usable():
		ls.Conditions = append(ls.Conditions, condition(string(gatewayv1.ListenerConditionProgrammed), false, string(gatewayv1.ListenerReasonInvalid), "not served: the Gateway is not accepted"))
	case c.conflicted != nil:
		ls.Conditions = append(ls.Conditions, condition(string(gatewayv1.ListenerConditionProgrammed), false, c.conflicted.Reason, "not served: "+c.conflicted.Message))
	default:
		ls.Conditions = append(ls.Conditions, condition(string(gatewayv1.ListenerConditionProgrammed), false, string(gatewayv1.ListenerReasonInvalid), "not served: see its other conditions"))
	}
	return ls
}
