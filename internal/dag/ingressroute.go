package dag

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
)

// KindIngressRoute is the ObjectRef kind of IngressRoutes.
const KindIngressRoute = "IngressRoute"

// ingressRouteClassAnnotations select the ingress class of an IngressRoute, as for Ingress.
var ingressRouteClassAnnotations = []string{
	"kubernetes.io/ingress.class",
	"projectcontour.io/ingress.class",
	"contour.heptio.com/ingress.class",
}

// irNode is one IngressRoute during a build: what is wrong with it, and what the
// delegation graph did with it.
type irNode struct {
	ir  *ingressroutev1.IngressRoute
	ref ObjectRef
	// ignored is set when the object belongs to another ingress class.
	ignored string
	// invalid holds the reasons the whole object is rejected.
	invalid []string
	// notes are remarks on a served object (a missing Service, an ignored value).
	notes []string
	// delegatedBy describes the accepted delegations to this object.
	delegatedBy []string
	// refused describes delegations to this object that were refused because of it.
	refused []string
	// delegatingInvalid names invalid objects that delegate to this one.
	delegatingInvalid []string
	hosts             map[string]bool
}

func (n *irNode) isRoot() bool { return n.ir.Spec.VirtualHost != nil }

func (n *irNode) usable() bool { return n.ignored == "" && len(n.invalid) == 0 }

func (n *irNode) note(format string, args ...any) {
	n.notes = append(n.notes, fmt.Sprintf(format, args...))
}

func (n *irNode) reject(format string, args ...any) {
	n.invalid = append(n.invalid, fmt.Sprintf(format, args...))
}

// irGraph is the set of IngressRoutes of one build.
type irGraph struct {
	nodes map[types.NamespacedName]*irNode
	order []*irNode // by namespace, then name
}

func (g *irGraph) lookup(from *irNode, d *ingressroutev1.Delegate) (*irNode, types.NamespacedName) {
	key := types.NamespacedName{Namespace: d.Namespace, Name: d.Name}
	if key.Namespace == "" {
		key.Namespace = from.ir.Namespace
	}
	return g.nodes[key], key
}

// processIngressRoutes adds the virtual hosts of every valid root IngressRoute, and the
// routes delegated from them, to the graph. It runs after Ingress processing: a host an
// Ingress serves cannot be taken by an IngressRoute.
func (b *builder) processIngressRoutes(g *irGraph, roots []*irNode) {
	certs := map[*irNode]rootCert{}
	for _, root := range roots {
		if root.usable() {
			secret, minTLS := b.rootTLS(root)
			certs[root] = rootCert{secret: secret, minTLS: minTLS}
		}
	}
	for _, w := range walkRoots(g, roots) {
		c := certs[w.root]
		b.serveRoot(w, c.secret, c.minTLS)
	}
	noteUnservedDelegators(g)
	for _, n := range g.order {
		b.setIngressRouteStatus(n)
	}
}

// candidateRoots are the roots that may own their hosts: valid on their own, and in a
// root namespace.
func (b *builder) candidateRoots(g *irGraph) []*irNode {
	var roots []*irNode
	for _, n := range g.order {
		if n.usable() && n.isRoot() {
			roots = append(roots, n)
		}
	}
	b.checkRootNamespaces(roots)
	return roots
}

// hostHoldingRoots are the roots that hold their hosts against Ingresses: Portico's roots
// in a root namespace, valid or not (a typo in a root must not hand its host to whoever
// staged an Ingress for it), whose host names themselves are valid.
func (b *builder) hostHoldingRoots(g *irGraph) []hostRoot {
	var out []hostRoot
	for _, n := range g.order {
		if n.ignored != "" || !n.isRoot() || validateVirtualHost(&ingressroutev1.VirtualHost{Fqdn: n.ir.Spec.VirtualHost.Fqdn, Aliases: n.ir.Spec.VirtualHost.Aliases}) != nil {
			continue
		}
		if len(b.opts.RootNamespaces) > 0 && !slices.Contains(b.opts.RootNamespaces, n.ir.Namespace) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// rootHostsByName maps each host to the oldest root claiming it. A host several
// roots claim is still theirs against Ingresses (a newer Ingress cannot take it by
// adding a decoy root), though those roots are then all rejected.
func rootHostsByName(roots []hostRoot) map[string]hostRoot {
	out := map[string]hostRoot{}
	for _, r := range roots {
		for _, h := range r.hostNames() {
			if prev := out[h]; prev == nil || r.createdAt().Before(prev.createdAt()) {
				out[h] = r
			}
		}
	}
	return out
}

type rootCert struct {
	secret *Secret
	minTLS string
}

// walkRoots walks every valid root.
func walkRoots(g *irGraph, roots []*irNode) []*rootWalk {
	var walks []*rootWalk
	for _, root := range roots {
		if root.usable() {
			walks = append(walks, newRootWalk(g, root))
		}
	}
	return walks
}

// noteUnservedDelegators tells vertices which objects would delegate to them if they were
// served themselves, so that an orphan's status points at the real problem.
func noteUnservedDelegators(g *irGraph) {
	for _, n := range g.order {
		if n.usable() || n.ignored != "" {
			continue
		}
		for i := range n.ir.Spec.Routes {
			if d := n.ir.Spec.Routes[i].Delegate; d != nil {
				if t, _ := g.lookup(n, d); t != nil && t != n {
					t.delegatingInvalid = append(t.delegatingInvalid, n.ref.String())
				}
			}
		}
	}
}

// ingressRouteGraph collects the IngressRoutes, with their class and static validation.
func (b *builder) ingressRouteGraph() *irGraph {
	g := &irGraph{nodes: map[types.NamespacedName]*irNode{}}
	for _, ir := range b.store.SortedIngressRoutes() {
		n := &irNode{
			ir:    ir,
			ref:   ObjectRef{Kind: KindIngressRoute, Namespace: ir.Namespace, Name: ir.Name},
			hosts: map[string]bool{},
		}
		if class, other := b.ingressRouteClass(ir); other {
			n.ignored = fmt.Sprintf("ingress class %q is not %s", class, b.opts.classesText())
		} else {
			n.invalid = ingressRouteProblems(ir)
		}
		g.nodes[types.NamespacedName{Namespace: ir.Namespace, Name: ir.Name}] = n
		g.order = append(g.order, n)
	}
	markDelegationCycles(g)
	return g
}

// markDelegationCycles rejects the newest object of every delegation cycle (see
// breakCycles), naming the cycle. Only delegations the prefix rule would let through
// count: one it refuses anyway (a route of the target not under the delegated prefix)
// cannot loop.
func markDelegationCycles(g *irGraph) {
	var nodes []*irNode
	for _, n := range g.order {
		if n.usable() && !n.isRoot() {
			nodes = append(nodes, n)
		}
	}
	edges := func(n *irNode) []*irNode {
		var out []*irNode
		for i := range n.ir.Spec.Routes {
			r := &n.ir.Spec.Routes[i]
			if r.Delegate == nil {
				continue
			}
			if t, _ := g.lookup(n, r.Delegate); t != nil && t.usable() && !t.isRoot() && routesUnder(t, r.Match) {
				out = append(out, t)
			}
		}
		return out
	}
	blamed := breakCycles(cycleGraph[*irNode]{
		nodes: nodes,
		edges: edges,
		newer: func(a, b *irNode) bool {
			return newerObject(a.ref, &a.ir.CreationTimestamp, b.ref, &b.ir.CreationTimestamp)
		},
		name: func(n *irNode) string { return n.ref.String() },
	})
	for _, n := range nodes {
		if cycle, ok := blamed[n]; ok {
			n.reject("its delegation closes a cycle: %s; it is the newest object on the cycle, so its delegation is the one rejected: remove the delegation that points back up the chain", cycle)
		}
	}
}

// routesUnder reports whether every route of n is under prefix.
func routesUnder(n *irNode, prefix string) bool {
	for i := range n.ir.Spec.Routes {
		if !strings.HasPrefix(n.ir.Spec.Routes[i].Match, prefix) {
			return false
		}
	}
	return true
}

// newerObject reports whether object a came after b: a later creation time, then a
// later namespace/name (a deterministic order for objects of the same age).
func newerObject(a ObjectRef, at *metav1.Time, b ObjectRef, bt *metav1.Time) bool {
	if !at.Equal(bt) {
		return bt.Before(at)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace > b.Namespace
	}
	return a.Name > b.Name
}

// ingressRouteClass returns the class an IngressRoute's annotation names, and whether it
// is another controller's. Without the annotation an IngressRoute is Portico's.
func (b *builder) ingressRouteClass(ir *ingressroutev1.IngressRoute) (string, bool) {
	for _, a := range ingressRouteClassAnnotations {
		if v, ok := ir.Annotations[a]; ok {
			return v, !b.opts.servesClass(v)
		}
	}
	return "", false
}

// checkRootNamespaces enforces --root-namespaces: only there may IngressRoutes own hosts.
func (b *builder) checkRootNamespaces(roots []*irNode) {
	if len(b.opts.RootNamespaces) == 0 {
		return
	}
	for _, r := range roots {
		if !slices.Contains(b.opts.RootNamespaces, r.ir.Namespace) {
			r.reject("root IngressRoutes (with spec.virtualhost) are only allowed in namespaces %s; ask an administrator of those namespaces to delegate a path to this object instead",
				strings.Join(b.opts.RootNamespaces, ", "))
		}
	}
}

// rootHosts are the host names a root serves, lower-cased, fqdn first.
func rootHosts(n *irNode) []string {
	vh := n.ir.Spec.VirtualHost
	hosts := []string{strings.ToLower(vh.Fqdn)}
	for _, a := range vh.Aliases {
		hosts = append(hosts, strings.ToLower(a))
	}
	return hosts
}

// checkRootHosts rejects roots whose host an Ingress serves, and the newer roots of a
// host that more than one root claims, whatever their kinds (IngressRoute, HTTPProxy):
// the oldest claimant keeps it, so that a new root can neither take a working host over
// nor take it down. The oldest holds it even while it is invalid itself (a typo in a root
// must not hand its host to whoever claims it next), as against Ingresses. Roots created
// at the same moment are all rejected: seed 003's rule for conflicting roots, where
// nothing tells which came first. holders are the roots that hold their hosts.
func (b *builder) checkRootHosts(roots, holders []hostRoot) {
	claims := map[string][]hostRoot{}
	for _, r := range roots {
		if !r.usable() {
			continue
		}
		for _, h := range r.hostNames() {
			if owner := b.ingressOwner(h); owner != "" {
				r.reject("host %q is already served by %s; a root cannot share a host with Ingresses", h, owner)
				continue
			}
			claims[h] = append(claims[h], r)
		}
	}
	if len(claims) == 0 {
		return
	}
	byHost := map[string][]hostRoot{} // every root holding each claimed host, valid or not
	for _, r := range holders {
		for _, h := range r.hostNames() {
			if _, claimed := claims[h]; claimed && !slices.Contains(byHost[h], r) {
				byHost[h] = append(byHost[h], r)
			}
		}
	}
	hosts := make([]string, 0, len(claims))
	for h := range claims {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		if all := byHost[h]; len(all) > 1 {
			settleSharedHost(h, claims[h], all)
		}
	}
}

// settleSharedHost rejects every claimant of host but the single oldest holder, and
// tells that one who was refused.
func settleSharedHost(host string, claimants, holders []hostRoot) {
	oldest := holders[0]
	for _, r := range holders[1:] {
		if r.createdAt().Before(oldest.createdAt()) {
			oldest = r
		}
	}
	var tied []hostRoot
	for _, r := range holders {
		if r.createdAt().Equal(oldest.createdAt()) {
			tied = append(tied, r)
		}
	}
	if len(tied) > 1 {
		for _, r := range claimants {
			r.reject("host %q is also claimed by %s, created at the same time: a host has one root; remove it from all but one of them", host, names(tied, r))
		}
		return
	}
	for _, r := range claimants {
		if r == oldest {
			continue
		}
		state := ""
		if !oldest.usable() {
			state = " (invalid itself: fix or delete it to free the host)"
		}
		r.reject("host %q belongs to the older %s%s: a host has one root; remove it from this one", host, oldest.objRef(), state)
		oldest.note("host %q is also claimed by the newer %s, which was rejected", host, r.objRef())
	}
}

// names lists the roots other than self.
func names(roots []hostRoot, self hostRoot) string {
	var out []string
	for _, o := range roots {
		if o != self {
			out = append(out, o.objRef().String())
		}
	}
	return strings.Join(out, ", ")
}

// hostRoot is a root object of any kind, as host ownership sees it.
type hostRoot interface {
	objRef() ObjectRef
	createdAt() *metav1.Time
	// hostNames are the hosts it claims, lower-cased.
	hostNames() []string
	usable() bool
	reject(format string, args ...any)
	note(format string, args ...any)
}

func (n *irNode) objRef() ObjectRef       { return n.ref }
func (n *irNode) createdAt() *metav1.Time { return &n.ir.CreationTimestamp }
func (n *irNode) hostNames() []string     { return rootHosts(n) }

// ingressOwner names the Ingress that serves host, or "".
func (b *builder) ingressOwner(host string) string {
	vh := b.vhosts[host]
	if vh == nil && b.svhosts[host] != nil {
		vh = &b.svhosts[host].VirtualHost
	}
	switch {
	case vh != nil && len(vh.Routes) > 0:
		return vh.Routes[0].Source.String()
	case vh != nil:
		return "an Ingress"
	}
	return ""
}

// rootTLS resolves a root's certificate: a Secret of its own namespace, or of another
// namespace that delegates it with a TLSCertificateDelegation. Without a usable
// certificate the root is rejected: its host must never be served in plain text instead.
func (b *builder) rootTLS(root *irNode) (*Secret, string) {
	t := root.ir.Spec.VirtualHost.TLS
	if t == nil {
		return nil, ""
	}
	key := types.NamespacedName{Namespace: root.ir.Namespace, Name: t.SecretName}
	if ns, name, ok := strings.Cut(t.SecretName, "/"); ok {
		key = types.NamespacedName{Namespace: ns, Name: name}
		if ns != root.ir.Namespace && !b.certificateDelegated(key, root.ir.Namespace) {
			root.reject("spec.virtualhost.tls.secretName %q: namespace %s does not delegate Secret %s to namespace %s; add a TLSCertificateDelegation in %s listing it",
				t.SecretName, ns, name, root.ir.Namespace, ns)
			return nil, ""
		}
	}
	secret, err := b.tlsSecret(key)
	if err != nil {
		root.reject("spec.virtualhost.tls: %v", err)
		return nil, ""
	}
	minTLS := t.MinimumProtocolVersion
	if minTLS == "" {
		minTLS = DefaultIngressRouteMinTLSVersion
	}
	return secret, minTLS
}

// DefaultIngressRouteMinTLSVersion is seed 003's default minimumProtocolVersion.
const DefaultIngressRouteMinTLSVersion = "1.1"

// certificateDelegated reports whether a TLSCertificateDelegation in the Secret's
// namespace lets namespace use it.
func (b *builder) certificateDelegated(secret types.NamespacedName, namespace string) bool {
	if b.delegationsByNS == nil {
		b.delegationsByNS = map[string][]*ingressroutev1.TLSCertificateDelegation{}
		for key, d := range b.store.TLSCertificateDelegations {
			b.delegationsByNS[key.Namespace] = append(b.delegationsByNS[key.Namespace], d)
		}
	}
	for _, d := range b.delegationsByNS[secret.Namespace] {
		for _, cd := range d.Spec.Delegations {
			if delegates(cd.SecretName, cd.TargetNamespaces, secret.Name, namespace) {
				return true
			}
		}
	}
	// projectcontour.io/v1 delegations say the same in the newer API group.
	for key, d := range b.store.ProjectTLSCertificateDelegations {
		if key.Namespace != secret.Namespace {
			continue
		}
		for _, cd := range d.Spec.Delegations {
			if delegates(cd.SecretName, cd.TargetNamespaces, secret.Name, namespace) {
				return true
			}
		}
	}
	return false
}

func delegates(secretName string, targets []string, secret, namespace string) bool {
	return secretName == secret && (slices.Contains(targets, namespace) || slices.Contains(targets, "*"))
}

func (b *builder) setIngressRouteStatus(n *irNode) {
	st := Status{Object: n.ref, Root: n.isRoot()}
	if n.isRoot() {
		// A root is about its own hosts, served or not (metrics count invalid roots by host).
		for _, h := range rootHosts(n) {
			n.hosts[h] = true
		}
	}
	for h := range n.hosts {
		st.Hosts = append(st.Hosts, h)
	}
	sort.Strings(st.Hosts)
	switch {
	case n.ignored != "":
		st.Status, st.Description = StatusIgnored, n.ignored
	case len(n.invalid) > 0:
		st.Status, st.Description = StatusInvalid, notServed(n.invalid)
	case n.isRoot():
		st.Status, st.Description, st.Noted = StatusValid, withNotes("valid IngressRoute", n.notes), len(n.notes) > 0
	case len(n.delegatedBy) > 0:
		st.Status, st.Noted = StatusValid, len(n.refused)+len(n.notes) > 0
		st.Description = withNotes("valid delegated IngressRoute: "+strings.Join(capped(n.delegatedBy), "; "), append(n.refused, n.notes...))
	case len(n.refused) > 0:
		// Seed 003: every route of a delegate must start with the prefix delegated to it;
		// one that does not makes the delegate invalid (when no other delegation serves
		// it), and the status says which route and prefix.
		st.Status, st.Description = StatusInvalid, notServed(append([]string{"every delegation to it was refused, because of its own routes"}, capped(n.refused)...))
	default:
		desc := "not part of a delegation chain from a root"
		if d := capped(n.delegatingInvalid); len(d) > 0 {
			desc += "; " + strings.Join(d, ", ") + " delegate to it but are not served themselves"
		}
		st.Status, st.Description = StatusOrphaned, desc
	}
	b.statuses = append(b.statuses, st)
}

// maxNotes bounds the remarks in one description: other teams' objects can add remarks
// to an object (by delegating to it), and a status must stay a readable, bounded size.
const maxNotes = 50

func withNotes(desc string, notes []string) string {
	if extra := capped(notes); len(extra) > 0 {
		return desc + "; " + strings.Join(extra, "; ")
	}
	return desc
}

// capped drops repeated messages and keeps at most maxNotes of them.
func capped(notes []string) []string {
	out := uniqueInOrder(notes)
	if len(out) > maxNotes {
		out = append(out[:maxNotes:maxNotes], fmt.Sprintf("and %d more", len(out)-maxNotes))
	}
	return out
}
