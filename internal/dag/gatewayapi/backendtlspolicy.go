package gatewayapi

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
)

// caKey is the key of a ConfigMap or Secret that holds a CA bundle for a
// BackendTLSPolicy, as the API asks.
const caKey = "ca.crt"

// policyResult is one BackendTLSPolicy: the upstream validation it asks for, or why it
// cannot be used, and the Gateways whose routes send to a Service it targets (its
// status ancestors), with how many routes do.
type policyResult struct {
	policy *gatewayv1.BackendTLSPolicy
	key    types.NamespacedName
	// validation is nil when the policy cannot be used: the backends it targets then
	// get no requests (their share is answered 500).
	validation *dag.UpstreamValidation
	// accepted is nil, or the Accepted reason: Invalid, NoValidCACertificate,
	// Conflicted (an older policy targets the same Service port).
	accepted *condError
	// resolved is nil, or the first caCertificateRef that cannot be used.
	resolved  *condError
	ancestors map[types.NamespacedName]int
}

// policyTarget is a Service, or one of its ports by name (sectionName).
type policyTarget struct {
	service types.NamespacedName
	port    string // "" for the whole Service
}

// policyIndex holds every BackendTLSPolicy, per target the one that applies, and per
// Service every policy that targets it.
type policyIndex struct {
	all      []*policyResult
	applied  map[policyTarget]*policyResult
	targeted map[types.NamespacedName][]*policyResult
}

// indexPolicies validates every BackendTLSPolicy and gives each target its oldest
// policy (then by namespace/name); the younger ones are Conflicted.
func indexPolicies(p *dag.Processing) *policyIndex {
	idx := &policyIndex{applied: map[policyTarget]*policyResult{}, targeted: map[types.NamespacedName][]*policyResult{}}
	for key, pol := range p.Store().BackendTLSPolicies {
		res := &policyResult{policy: pol, key: key, ancestors: map[types.NamespacedName]int{}}
		res.validation, res.accepted, res.resolved = policyValidation(p, pol)
		idx.all = append(idx.all, res)
	}
	slices.SortFunc(idx.all, func(a, b *policyResult) int {
		if c := a.policy.CreationTimestamp.Compare(b.policy.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.key.String(), b.key.String())
	})
	for _, res := range idx.all {
		for _, t := range res.targets() {
			idx.targeted[t.service] = append(idx.targeted[t.service], res)
			if older := idx.applied[t]; older != nil {
				res.accepted = newError(string(gatewayv1.PolicyConditionAccepted), string(gatewayv1.PolicyReasonConflicted),
					"BackendTLSPolicy %s, older, already targets %s: only one policy applies to a Service port; remove one", older.key, t)
				continue
			}
			idx.applied[t] = res
		}
	}
	return idx
}

func (t policyTarget) String() string {
	if t.port == "" {
		return "Service " + t.service.String()
	}
	return fmt.Sprintf("Service %s port %s", t.service, t.port)
}

// targets are the Services (and ports) a policy names; targetRefs of other kinds
// select nothing Portico sends to.
func (r *policyResult) targets() []policyTarget {
	var out []policyTarget
	for _, ref := range r.policy.Spec.TargetRefs {
		if coreGroup(string(ref.Group)) != "" || ref.Kind != "Service" {
			continue
		}
		t := policyTarget{service: types.NamespacedName{Namespace: r.key.Namespace, Name: string(ref.Name)}}
		if ref.SectionName != nil {
			t.port = string(*ref.SectionName)
		}
		out = append(out, t)
	}
	return out
}

// policyValidation returns the upstream validation a policy asks for, or why it cannot
// be used (Accepted: Invalid, NoValidCACertificate), and the first caCertificateRef
// that cannot be used (ResolvedRefs: InvalidKind, InvalidCACertificateRef).
func policyValidation(p *dag.Processing, pol *gatewayv1.BackendTLSPolicy) (*dag.UpstreamValidation, *condError, *condError) {
	invalid := func(format string, args ...any) *condError {
		return newError(string(gatewayv1.PolicyConditionAccepted), string(gatewayv1.PolicyReasonInvalid), format, args...)
	}
	v := pol.Spec.Validation
	host := strings.ToLower(string(v.Hostname))
	if msg := hostnameProblem(host); msg != "" || strings.HasPrefix(host, "*") {
		return nil, invalid("spec.validation.hostname %q is not a precise hostname: %s", v.Hostname, cmp.Or(msg, "no wildcard")), nil
	}
	names, uris := []string{host}, []string(nil)
	if len(v.SubjectAltNames) > 0 {
		var msg string
		if names, uris, msg = subjectAltNames(v.SubjectAltNames); msg != "" {
			return nil, invalid("%s", msg), nil
		}
	}
	switch {
	case v.WellKnownCACertificates != nil && len(v.CACertificateRefs) > 0:
		return nil, invalid("spec.validation: set caCertificateRefs or wellKnownCACertificates, not both"), nil
	case v.WellKnownCACertificates != nil:
		return nil, invalid("spec.validation.wellKnownCACertificates %q is not supported yet: put the CA certificates in a ConfigMap (key %s) and list it in caCertificateRefs", *v.WellKnownCACertificates, caKey), nil
	case len(v.CACertificateRefs) == 0:
		return nil, invalid("spec.validation needs caCertificateRefs: a ConfigMap of this namespace with the CA certificates in key %s", caKey), nil
	}
	var bundle [][]byte
	var refNames []string
	var resolved *condError
	for i, ref := range v.CACertificateRefs {
		ca, err := caCertificates(p, pol.Namespace, ref, fmt.Sprintf("spec.validation.caCertificateRefs[%d]", i))
		if err != nil {
			resolved = cmp.Or(resolved, err)
			continue
		}
		bundle = append(bundle, ca)
		refNames = append(refNames, fmt.Sprintf("%s %s/%s", ref.Kind, pol.Namespace, ref.Name))
	}
	if len(bundle) == 0 {
		return nil, newError(string(gatewayv1.PolicyConditionAccepted), string(gatewayv1.BackendTLSPolicyReasonNoValidCACertificate),
			"no caCertificateRef can be used (%s): connections to its backends would fail, so they get no requests", resolved.Message), resolved
	}
	return &dag.UpstreamValidation{CAName: strings.Join(refNames, ","), CACert: bytes.Join(bundle, []byte("\n")),
		SubjectNames: names, SubjectURIs: uris, ServerName: host}, nil, resolved
}

// subjectAltNames splits a policy's subjectAltNames into the DNS names and the URIs a
// backend's certificate may carry (it is accepted when it carries any one of them),
// or says which entry is wrong and how to fix it. Hostnames are compared without
// case, URIs exactly as written, as the data planes compare them.
func subjectAltNames(sans []gatewayv1.SubjectAltName) (names, uris []string, problem string) {
	for i, san := range sans {
		field := fmt.Sprintf("spec.validation.subjectAltNames[%d]", i)
		switch san.Type {
		case gatewayv1.HostnameSubjectAltNameType:
			if san.URI != "" {
				return nil, nil, field + ": type Hostname takes hostname, not uri: remove uri, or set type URI"
			}
			name := strings.ToLower(string(san.Hostname))
			if msg := hostnameProblem(name); name == "" || msg != "" {
				return nil, nil, fmt.Sprintf("%s.hostname %q is not a hostname: %s", field, san.Hostname, cmp.Or(msg, "set the DNS name the certificate carries"))
			}
			names = append(names, name)
		case gatewayv1.URISubjectAltNameType:
			if san.Hostname != "" {
				return nil, nil, field + ": type URI takes uri, not hostname: remove hostname, or set type Hostname"
			}
			if msg := uriProblem(string(san.URI)); msg != "" {
				return nil, nil, fmt.Sprintf("%s.uri %q is not an absolute URI: %s", field, san.URI, msg)
			}
			uris = append(uris, string(san.URI))
		default:
			return nil, nil, fmt.Sprintf("%s: type %q is not a subject alternative name type: use Hostname or URI", field, san.Type)
		}
	}
	return names, uris, ""
}

// uriProblem says why u is not an absolute URI as the API defines it (RFC 3986 with a
// scheme and an authority naming a host, at most 253 characters), or "".
func uriProblem(u string) string {
	const example = "write it as scheme://host/path, e.g. spiffe://trust.example.com/ns/team/sa/web"
	switch {
	case u == "":
		return "set the URI the certificate carries (" + example + ")"
	case len(u) > 253:
		return fmt.Sprintf("it is %d characters long, at most 253 are allowed", len(u))
	case strings.ContainsFunc(u, func(r rune) bool { return r <= ' ' || r >= 0x7f }):
		return "spaces, control and non-ASCII characters must be percent-encoded"
	}
	parsed, err := url.Parse(u)
	switch {
	case err != nil:
		return fmt.Sprintf("%v; %s", errors.Unwrap(err), example)
	case parsed.Scheme == "" || parsed.Opaque != "" || !strings.HasPrefix(u[len(parsed.Scheme)+1:], "//"):
		return "it needs a scheme and an authority: " + example
	case parsed.Host == "":
		return "its authority names no host: " + example
	}
	return ""
}

// caCertificates returns the CA bundle of one caCertificateRef: key ca.crt of a
// ConfigMap or Secret of the policy's namespace.
func caCertificates(p *dag.Processing, ns string, ref gatewayv1.LocalObjectReference, field string) ([]byte, *condError) {
	refErr := func(reason gatewayv1.PolicyConditionReason, format string, args ...any) *condError {
		return newError(string(gatewayv1.BackendTLSPolicyConditionResolvedRefs), string(reason), field+": "+format, args...)
	}
	key := types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
	var data []byte
	switch {
	case coreGroup(string(ref.Group)) == "" && ref.Kind == "ConfigMap":
		cm := p.Store().ConfigMaps[key]
		if cm == nil {
			return nil, refErr(gatewayv1.BackendTLSPolicyReasonInvalidCACertificateRef, "ConfigMap %s not found", key)
		}
		data = []byte(cm.Data[caKey])
	case coreGroup(string(ref.Group)) == "" && ref.Kind == "Secret":
		s := p.Secret(key)
		if s == nil {
			return nil, refErr(gatewayv1.BackendTLSPolicyReasonInvalidCACertificateRef, "Secret %s not found", key)
		}
		data = s.Data[caKey]
	default:
		return nil, refErr(gatewayv1.BackendTLSPolicyReasonInvalidKind, "%s %q is not supported: refer to a ConfigMap (or a Secret)", ref.Kind, ref.Group)
	}
	if len(data) == 0 {
		return nil, refErr(gatewayv1.BackendTLSPolicyReasonInvalidCACertificateRef, "%s %s has no key %s", ref.Kind, key, caKey)
	}
	if !dag.ValidCABundle(data) {
		return nil, refErr(gatewayv1.BackendTLSPolicyReasonInvalidCACertificateRef, "%s %s: %s holds no PEM certificate", ref.Kind, key, caKey)
	}
	return data, nil
}

// policyFor returns the policy that applies to a cluster's Service port: one that
// names the port, else one for the whole Service.
func (idx *policyIndex) policyFor(c *dag.Cluster) *policyResult {
	if c.PortName != "" {
		if r := idx.applied[policyTarget{service: c.Service, port: c.PortName}]; r != nil {
			return r
		}
	}
	return idx.applied[policyTarget{service: c.Service}]
}

// policyUse is a Gateway whose routes send to a Service a policy targets: an ancestor
// of the policy.
type policyUse struct {
	policy  *policyResult
	gateway types.NamespacedName
}

// applyPolicies makes the backends of an attached route that a policy targets speak
// TLS, verified as it says, and returns the policies targeting the Services it sends to
// with the Gateways it is attached to: their ancestors (count them with countUses). A
// backend whose policy cannot be used is an invalid backend of its rule: its share of
// the requests is answered 500 (all of them when it is the only one), since an
// unverified connection is what the policy forbids. A TLSRoute attached to a listener
// that terminates TLS gets its backends re-encrypted the same way (reencrypted).
// converted keeps the clusters made for one build.
func applyPolicies(p *dag.Processing, idx *policyIndex, r *attachedRoute, converted map[*dag.Cluster]*dag.Cluster) []policyUse {
	r.result.reencrypted = nil
	if len(idx.all) == 0 {
		return nil
	}
	gateways := attachedGateways(r)
	if len(gateways) == 0 {
		return nil
	}
	var uses []policyUse
	use := func(wc *dag.WeightedCluster) {
		for _, pol := range idx.targeted[wc.Cluster.Service] {
			for gw := range gateways {
				if u := (policyUse{pol, gw}); !slices.Contains(uses, u) {
					uses = append(uses, u)
				}
			}
		}
	}
	targeted := func(wc *dag.WeightedCluster) bool { return idx.targeted[wc.Cluster.Service] != nil }
	if terminated(r) && slices.ContainsFunc(r.result.tcp, targeted) {
		r.result.reencrypted = []*dag.WeightedCluster{} // none usable: the connections are closed
		for _, wc := range r.result.tcp {
			use(wc)
			if c := tlsCluster(p, idx, wc.Cluster, converted); c != nil {
				r.result.reencrypted = append(r.result.reencrypted, &dag.WeightedCluster{Cluster: c, Weight: wc.Weight})
			}
		}
	}
	for _, e := range r.result.entries {
		if !slices.ContainsFunc(e.route.Clusters, targeted) {
			continue
		}
		kept := make([]*dag.WeightedCluster, 0, len(e.route.Clusters))
		for _, wc := range e.route.Clusters {
			use(wc)
			if c := tlsCluster(p, idx, wc.Cluster, converted); c != nil {
				wc.Cluster = c
				kept = append(kept, wc)
			} else {
				e.route.InvalidBackendWeight += wc.Weight
			}
		}
		e.route.Clusters = kept
		if len(kept) == 0 {
			e.route.DirectStatus, e.route.InvalidBackendWeight = 500, 0
		}
	}
	return uses
}

// countUses adds n (1 or -1) to the ancestors of uses.
func countUses(uses []policyUse, n int) {
	for _, u := range uses {
		u.policy.ancestors[u.gateway] += n
		if u.policy.ancestors[u.gateway] == 0 {
			delete(u.policy.ancestors, u.gateway)
		}
	}
}

// tlsCluster returns the cluster to send to instead of c: c when no policy applies to
// its Service port, its TLS twin when one does, nil when that policy cannot be used.
// converted keeps the twins, and maps each twin to itself (routes share clusters).
func tlsCluster(p *dag.Processing, idx *policyIndex, c *dag.Cluster, converted map[*dag.Cluster]*dag.Cluster) *dag.Cluster {
	if out, ok := converted[c]; ok {
		return out
	}
	pol := idx.policyFor(c)
	var out *dag.Cluster
	switch svc := p.Service(c.Service); {
	case pol == nil:
		out = c
	case pol.validation == nil:
		out = nil
	case svc == nil:
		out = c
	default:
		sp, ok := findPort(svc, c.Port)
		if !ok {
			sp = corev1.ServicePort{Port: c.Port}
		}
		out = p.ClusterTLS(svc, sp, tlsProtocol(c.Protocol), pol.validation)
		converted[out] = out
	}
	converted[c] = out
	return out
}

// tlsProtocol is the TLS form of a cluster protocol: HTTP/2 stays HTTP/2.
func tlsProtocol(protocol string) string {
	if protocol == "h2c" || protocol == "h2" {
		return "h2"
	}
	return "tls"
}

// terminated reports whether a route is attached to a listener that terminates TLS (a
// TLSRoute's connections there are decrypted, and may be encrypted again to the
// backend; through a passthrough listener they are the client's own TLS).
func terminated(r *attachedRoute) bool {
	for _, pr := range r.parents {
		for _, a := range pr.attachments {
			if a.listener.secret != nil {
				return true
			}
		}
	}
	return false
}

// attachedGateways are the Gateways a route is attached to.
func attachedGateways(r *attachedRoute) map[types.NamespacedName]bool {
	out := map[types.NamespacedName]bool{}
	for _, pr := range r.parents {
		for _, a := range pr.attachments {
			out[a.gateway.key] = true
		}
	}
	return out
}

// status is the policy's status, one ancestor per Gateway whose routes send to a
// Service it targets; a policy no such route uses has none, and no status from
// Portico.
func (r *policyResult) status() (dag.Status, bool) {
	if len(r.ancestors) == 0 {
		return dag.Status{}, false
	}
	accepted := condition(string(gatewayv1.PolicyConditionAccepted), true, string(gatewayv1.PolicyReasonAccepted), "applied to the connections to the Services it targets")
	resolved := condition(string(gatewayv1.BackendTLSPolicyConditionResolvedRefs), true, string(gatewayv1.BackendTLSPolicyReasonResolvedRefs), "references resolved")
	var errs, notes []dag.Problem
	if e := r.accepted; e != nil {
		accepted = condition(e.Type, false, e.Reason, e.Message)
		errs = append(errs, e.problem(""))
	}
	if e := r.resolved; e != nil {
		resolved = condition(e.Type, false, e.Reason, e.Message)
		notes = append(notes, e.problem(""))
	}
	ps := &gatewayv1.PolicyStatus{}
	group, kind := gatewayv1.Group(groupName), gatewayv1.Kind(dag.KindGateway)
	for _, gw := range slices.SortedFunc(maps.Keys(r.ancestors), func(a, b types.NamespacedName) int { return cmp.Compare(a.String(), b.String()) }) {
		ns := gatewayv1.Namespace(gw.Namespace)
		ps.Ancestors = append(ps.Ancestors, gatewayv1.PolicyAncestorStatus{
			AncestorRef:    gatewayv1.ParentReference{Group: &group, Kind: &kind, Namespace: &ns, Name: gatewayv1.ObjectName(gw.Name)},
			ControllerName: dag.GatewayControllerName,
			Conditions:     []metav1.Condition{accepted, resolved},
		})
	}
	ok := "applied"
	if r.validation != nil {
		ok = "applied: TLS to its backends, their certificates verified for " + strings.Join(slices.Concat(r.validation.SubjectNames, r.validation.SubjectURIs), ", ")
	}
	st := summary(dag.ObjectRef{Kind: dag.KindBackendTLSPolicy, Namespace: r.key.Namespace, Name: r.key.Name}, errs, notes, ok)
	st.GatewayAPI = &dag.GatewayAPIStatus{Policy: ps}
	return st, true
}
