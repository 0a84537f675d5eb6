package dag

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// KindHTTPProxy is the ObjectRef kind of HTTPProxies.
const KindHTTPProxy = "HTTPProxy"

// An HTTPProxy root owns a host; includes hand the requests that match their conditions
// (a path prefix, headers, query parameters) to other objects, which add conditions of
// their own. Conditions only ever narrow down the include chain, so an included object
// can only serve requests that every include on its way let through. An include that
// cannot be followed keeps its requests: they are answered 503, never passed to another
// route of the root.

// proxyNode is one HTTPProxy during a build.
type proxyNode struct {
	p       *contourv1.HTTPProxy
	ref     ObjectRef
	ignored string
	check   proxyCheck
	// includedBy describes the includes that reach this object; includingInvalid the
	// invalid objects that include it.
	includedBy, includingInvalid []string
	// hosts are those it serves routes on (made on first use).
	hosts        map[string]bool
	plans        []routePlan
	includeConds []conditions // those of spec.includes, parsed
	tcp          *TCPProxy
}

func (n *proxyNode) addHost(h string) {
	if n.hosts == nil {
		n.hosts = make(map[string]bool, 1)
	}
	n.hosts[h] = true
}

func (n *proxyNode) isRoot() bool { return n.p.Spec.VirtualHost != nil }

func (n *proxyNode) usable() bool { return n.ignored == "" && len(n.check.errors) == 0 }

func (n *proxyNode) objRef() ObjectRef       { return n.ref }
func (n *proxyNode) createdAt() *metav1.Time { return &n.p.CreationTimestamp }
func (n *proxyNode) hostNames() []string {
	return []string{strings.ToLower(n.p.Spec.VirtualHost.Fqdn)}
}

func (n *proxyNode) reject(format string, args ...any) {
	n.check.fail(problemVirtualHost, "HostConflict", format, args...)
}

func (n *proxyNode) note(format string, args ...any) {
	n.check.warn(problemVirtualHost, "HostConflict", format, args...)
}

// proxyGraph is the set of HTTPProxies of one build.
type proxyGraph struct {
	nodes map[types.NamespacedName]*proxyNode
	order []*proxyNode // by namespace, then name
}

func (g *proxyGraph) lookup(from *proxyNode, name, namespace string) (*proxyNode, types.NamespacedName) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	if key.Namespace == "" {
		key.Namespace = from.p.Namespace
	}
	return g.nodes[key], key
}

// proxyGraph collects the HTTPProxies with their class, their static validation, and
// their routes translated (everything that does not depend on who includes them).
func (b *builder) proxyGraph() *proxyGraph {
	all := b.store.SortedHTTPProxies()
	g := &proxyGraph{nodes: make(map[types.NamespacedName]*proxyNode, len(all)), order: make([]*proxyNode, 0, len(all))}
	for _, p := range all {
		n := &proxyNode{p: p, ref: ObjectRef{Kind: KindHTTPProxy, Namespace: p.Namespace, Name: p.Name}}
		g.nodes[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = n
		g.order = append(g.order, n)
		if class, other := b.proxyClass(p); other {
			n.ignored = fmt.Sprintf("ingress class %q is not %q", class, b.opts.IngressClassName)
			continue
		}
		if reason := p.Annotations[contourv1.DecodeErrorAnnotation]; reason != "" {
			n.check.fail(problemSpec, "SpecUnreadable", "its spec cannot be read: %s; fix that field", reason)
			continue
		}
		// The routes are translated even when the object is already invalid, so that its
		// status lists every problem at once, not one more after each fix.
		routeConds, includeConds := validateHTTPProxy(p, &n.check)
		n.includeConds = includeConds
		n.plans = b.proxyRoutePlans(n, routeConds, &n.check)
		if tp := p.Spec.TCPProxy; tp != nil && len(tp.Services) > 0 {
			n.tcp = b.proxyTCPServices(n, tp)
		}
	}
	markIncludeCycles(g)
	return g
}

// proxyClass returns the class an HTTPProxy names (spec.ingressClassName, else an
// annotation), and whether it is another controller's. Without one it is Portico's.
func (b *builder) proxyClass(p *contourv1.HTTPProxy) (string, bool) {
	if c := p.Spec.IngressClassName; c != "" {
		return c, c != b.opts.IngressClassName
	}
	for _, a := range ingressRouteClassAnnotations {
		if v, ok := p.Annotations[a]; ok {
			return v, v != b.opts.IngressClassName
		}
	}
	return "", false
}

// markIncludeCycles makes invalid every object whose include closes a cycle, naming the
// cycle. Roots cannot be included, so cycles are among included objects; the search
// starts from the roots, then from the other objects, in name order, so the object
// blamed is always the same one.
func markIncludeCycles(g *proxyGraph) {
	const (
		unvisited = iota
		active
		done
	)
	state := map[*proxyNode]int{}
	var stack []*proxyNode
	var visit func(n *proxyNode)
	visit = func(n *proxyNode) {
		state[n] = active
		stack = append(stack, n)
		for _, inc := range n.p.Spec.Includes {
			t, _ := g.lookup(n, inc.Name, inc.Namespace)
			if t == nil || t.isRoot() || t.ignored != "" {
				continue
			}
			switch state[t] {
			case active:
				i := slices.Index(stack, t)
				var names []string
				for _, s := range stack[i:] {
					names = append(names, s.ref.String())
				}
				names = append(names, t.ref.String())
				n.check.fail(problemInclude, "IncludeCreatesCycle", "its include of %s closes a cycle: %s; remove one of these includes", t.ref, strings.Join(names, " -> "))
			case unvisited:
				visit(t)
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
	}
	for _, roots := range []bool{true, false} {
		for _, n := range g.order {
			if n.isRoot() == roots && state[n] == unvisited && n.ignored == "" {
				visit(n)
			}
		}
	}
}

// candidateProxyRoots are the roots that may own their hosts: valid on their own, in a
// root namespace.
func (b *builder) candidateProxyRoots(g *proxyGraph) []*proxyNode {
	var roots []*proxyNode
	for _, n := range g.order {
		if n.usable() && n.isRoot() {
			if ns := b.opts.RootNamespaces; len(ns) > 0 && !slices.Contains(ns, n.p.Namespace) {
				n.check.fail(problemRootNS, "RootProxyNotAllowedInNamespace", "root HTTPProxies (with spec.virtualhost) are only allowed in namespaces %s; ask an administrator of those namespaces to include this object instead", strings.Join(ns, ", "))
				continue
			}
			roots = append(roots, n)
		}
	}
	return roots
}

// proxyHoldingRoots are the roots that hold their hosts whether valid or not (see
// hostHoldingRoots).
func (b *builder) proxyHoldingRoots(g *proxyGraph) []hostRoot {
	var out []hostRoot
	for _, n := range g.order {
		if n.ignored != "" || !n.isRoot() || validateProxyFQDN(n.p.Spec.VirtualHost.Fqdn) != "" {
			continue
		}
		if ns := b.opts.RootNamespaces; len(ns) > 0 && !slices.Contains(ns, n.p.Namespace) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// processHTTPProxies serves every valid root with what its includes lead to.
func (b *builder) processHTTPProxies(g *proxyGraph, roots []*proxyNode) {
	for _, root := range roots {
		if !root.usable() {
			continue
		}
		secret, ok := b.proxyRootTLS(root)
		if !ok {
			continue
		}
		w := &proxyWalk{g: g, root: root, host: root.hostNames()[0], claims: map[string]*proxyClaim{}}
		tcp := b.proxyRootTCP(w)
		if root.p.Spec.TCPProxy != nil && tcp == nil {
			continue // the root is invalid now: its tcpproxy cannot be served
		}
		w.visit(root, rootConditions(), 0, nil, true)
		b.serveProxyRoot(w, secret, tcp)
	}
	for _, n := range g.order {
		if n.usable() || n.ignored != "" {
			continue
		}
		for _, inc := range n.p.Spec.Includes {
			if t, _ := g.lookup(n, inc.Name, inc.Namespace); t != nil && t != n {
				t.includingInvalid = append(t.includingInvalid, n.ref.String())
			}
		}
	}
	b.statuses = slices.Grow(b.statuses, len(g.order))
	for _, n := range g.order {
		b.setProxyStatus(n)
	}
}

// proxyRootTLS resolves a root's certificate; ok is false when the root cannot be served
// (its TLS was asked for but is unusable: the host must never be served in plain text
// instead).
func (b *builder) proxyRootTLS(root *proxyNode) (*Secret, bool) {
	t := root.p.Spec.VirtualHost.TLS
	if t == nil || t.Passthrough {
		return nil, true
	}
	key := types.NamespacedName{Namespace: root.p.Namespace, Name: t.SecretName}
	if ns, name, ok := strings.Cut(t.SecretName, "/"); ok {
		key = types.NamespacedName{Namespace: ns, Name: name}
		if ns != root.p.Namespace && !b.certificateDelegated(key, root.p.Namespace) {
			root.check.fail(problemTLS, "DelegationNotPermitted", "spec.virtualhost.tls.secretName %q: namespace %s does not delegate Secret %s to namespace %s; add a TLSCertificateDelegation in %s listing it",
				t.SecretName, ns, name, root.p.Namespace, ns)
			return nil, false
		}
	}
	secret, err := b.tlsSecret(key)
	if err != nil {
		root.check.fail(problemTLS, "SecretNotValid", "spec.virtualhost.tls: %v", err)
		return nil, false
	}
	return secret, true
}

// maxProxyVisits bounds the objects one root's include tree may visit: an object may be
// included several times (under different conditions), so a tree of a few objects could
// otherwise reach an exponential number of routes.
const maxProxyVisits = 1000

// proxyWalk follows the includes of one root, depth first.
type proxyWalk struct {
	g      *proxyGraph
	root   *proxyNode
	host   string
	claims map[string]*proxyClaim
	keys   []string // claim keys in first-claimed order
	visits int
}

// proxyClaim is a route an object asks for, under its merged conditions.
type proxyClaim struct {
	route          *Route
	owner          *proxyNode
	depth          int
	permitInsecure bool
	conds          conditions
	// unfollowed marks the 503 route of an include that is not followed.
	unfollowed bool
}

type proxyPath struct {
	node   *proxyNode
	parent *proxyPath
}

func (p *proxyPath) contains(n *proxyNode) bool {
	for ; p != nil; p = p.parent {
		if p.node == n {
			return true
		}
	}
	return false
}

// visit claims n's routes under conds and follows its includes. insecureOK says that
// every include on the way granted permitInsecure.
func (w *proxyWalk) visit(n *proxyNode, conds conditions, depth int, path *proxyPath, insecureOK bool) {
	w.visits++
	path = &proxyPath{node: n, parent: path}
	n.addHost(w.host)
	for i := range n.plans {
		plan := &n.plans[i]
		merged := conds.merge(plan.conds)
		if merged.path.Kind == PathRegex && merged.path.Value != plan.conds.path.Value {
			// The regex grew by the include's prefix: it must still be within bounds.
			if p := checkRegex(merged.path.Value); p != "" {
				n.check.warn(problemRoute, "RegexTooComplex", "spec.routes[%d] is not served on %s: under its include's prefix its path regex becomes %s", i, w.host, p)
				continue
			}
		}
		permit := plan.permitInsecure && (depth == 0 || insecureOK)
		if plan.permitInsecure && !permit && w.root.p.Spec.VirtualHost.TLS != nil {
			n.check.warn(problemInsecure, "PermitInsecureNotGranted", "spec.routes[%d].permitInsecure is ignored on %s: an included route is served over plain HTTP only when every include that leads to it sets permitInsecure: true; it is redirected to HTTPS", i, w.host)
		}
		w.claim(&proxyClaim{route: plan.build(merged), owner: n, depth: depth, permitInsecure: permit, conds: merged})
	}
	for i := range n.p.Spec.Includes {
		inc := &n.p.Spec.Includes[i]
		merged := conds.merge(n.includeConds[i])
		t, key := w.g.lookup(n, inc.Name, inc.Namespace)
		if reason, why := w.refusal(n, t, path); reason != "" {
			n.check.warn(problemInclude, reason, "spec.includes[%d] (%s) is not followed on %s: %s %s; requests matching its conditions get 503", i, merged.describe(), w.host, key, why)
			w.claim(&proxyClaim{route: &Route{Path: merged.path, Headers: merged.headers, Query: merged.query, Source: n.ref, DirectStatus: 503}, owner: n, depth: depth + 1, conds: merged, unfollowed: true})
			continue
		}
		t.includedBy = append(t.includedBy, fmt.Sprintf("included by %s on %s (%s)", n.ref, w.host, merged.describe()))
		w.visit(t, merged, depth+1, path, insecureOK && inc.PermitInsecure)
	}
}

// refusal says why the include of t from n cannot be followed: a status reason and the
// explanation, or "".
func (w *proxyWalk) refusal(n, t *proxyNode, path *proxyPath) (string, string) {
	switch {
	case t == nil:
		return "IncludeNotFound", "does not exist"
	case t.ignored != "":
		return "IncludeOtherClass", "belongs to another ingress class"
	case t.isRoot():
		t.check.warn(problemInclude, "RootIncluded", "%s includes it, which is refused: a root (an HTTPProxy with spec.virtualhost) cannot be included", n.ref)
		return "RootIncludesRoot", "is a root (it has spec.virtualhost): only HTTPProxies without a virtualhost can be included"
	case !t.usable():
		return "IncludeInvalid", "is invalid (see its status)"
	case len(t.p.Spec.Routes) == 0 && len(t.p.Spec.Includes) == 0:
		return "IncludeNothingToRoute", "has no routes or includes for HTTP requests (only spec.tcpproxy, which a root reaches through its own spec.tcpproxy.include)"
	case path.contains(t):
		return "IncludeCreatesCycle", "is already on this include chain (a cycle)"
	case w.visits >= maxProxyVisits:
		w.root.check.warn(problemInclude, "TooManyIncludes", "the includes of this root reach more than %d objects on %s; the rest answer 503", maxProxyVisits, w.host)
		return "TooManyIncludes", fmt.Sprintf("would exceed %d included objects for this root", maxProxyVisits)
	}
	return "", ""
}

// claim records a route; among routes with the same conditions the one closest to the
// root wins, then the first.
func (w *proxyWalk) claim(c *proxyClaim) {
	k := c.conds.key()
	prev, ok := w.claims[k]
	if !ok {
		w.claims[k] = c
		w.keys = append(w.keys, k)
		return
	}
	win, lose := prev, c
	if c.depth < prev.depth {
		win, lose = c, prev
		w.claims[k] = c
	}
	if lose.owner != win.owner && !lose.unfollowed {
		where := "closer to the root"
		if win.depth == lose.depth {
			where = "as deep in the includes and reached first"
		}
		lose.owner.check.warn(problemRoute, "DuplicateMatchConditions", "route (%s) is not served on %s: %s, %s, has a route with the same conditions", lose.conds.describe(), w.host, win.owner.ref, where)
	}
}

// serveProxyRoot adds a root's host with its routes (and TCP proxy) to the graph.
func (b *builder) serveProxyRoot(w *proxyWalk, secret *Secret, tcp *TCPProxy) {
	vhSpec := w.root.p.Spec.VirtualHost
	var plain, secure []*Route
	for _, k := range w.keys {
		c := w.claims[k]
		secure = append(secure, c.route)
		if secret == nil && !(vhSpec.TLS != nil && vhSpec.TLS.Passthrough) || c.permitInsecure {
			plain = append(plain, c.route)
		} else {
			plain = append(plain, &Route{Path: c.route.Path, Headers: c.route.Headers, Query: c.route.Query, Source: c.route.Source, HTTPSRedirect: true})
		}
	}
	h := w.host
	if len(plain) > 0 || (secret == nil && tcp == nil) {
		vh := b.vhost(h)
		vh.Routes = append(vh.Routes, plain...)
		if secret == nil && tcp == nil {
			b.alsoUnderWildcardCertificates(vh)
		}
	}
	if secret == nil && tcp == nil {
		return
	}
	svh := &SecureVirtualHost{VirtualHost: VirtualHost{Name: h}, Secret: secret, TCPProxy: tcp}
	if t := vhSpec.TLS; t != nil {
		svh.Passthrough = t.Passthrough
		svh.MinTLSVersion = t.MinimumProtocolVersion
		if svh.MinTLSVersion == "" {
			svh.MinTLSVersion = DefaultProxyMinTLSVersion
		}
		svh.MaxTLSVersion = t.MaximumProtocolVersion
	}
	if tcp == nil {
		svh.Routes = secure
	}
	b.svhosts[h] = svh
}

// proxyTCPServices resolves the services of an object's tcpproxy.
func (b *builder) proxyTCPServices(n *proxyNode, tp *contourv1.TCPProxy) *TCPProxy {
	field := "spec.tcpproxy"
	lb, _ := proxyLoadBalancer(tp.LoadBalancerPolicy, field+".loadBalancerPolicy", &n.check)
	if lb == LBRingHash {
		n.check.fail(problemTCPProxy, "LoadBalancerStrategyInvalid", "%s.loadBalancerPolicy: Cookie and RequestHash need HTTP requests; use RoundRobin, WeightedLeastRequest or Random", field)
		return nil
	}
	pol := clusterPolicy{lb: lb, hc: proxyTCPHealthCheck(tp.HealthCheckPolicy, field+".healthCheckPolicy", &n.check)}
	clusters := b.proxyServices(n, tp.Services, field, pol, &n.check)
	for _, wc := range clusters {
		// (A protocol is refused by validateTCPProxy.)
		if wc.RequestHeaders != nil || wc.ResponseHeaders != nil {
			n.check.fail(problemTCPProxy, "HTTPFeatureInvalid", "%s.services: headers policies need HTTP; remove them", field)
			return nil
		}
	}
	return &TCPProxy{Clusters: clusters, Source: n.ref}
}

// proxyRootTCP is a root's TCP proxy: its own services or those of the object its
// tcpproxy includes.
func (b *builder) proxyRootTCP(w *proxyWalk) *TCPProxy {
	root := w.root
	tp := root.p.Spec.TCPProxy
	if tp == nil {
		return nil
	}
	inc := tp.Include
	if inc == nil {
		inc = tp.IncludesDeprecated
	}
	if inc == nil {
		return root.tcp
	}
	t, key := w.g.lookup(root, inc.Name, inc.Namespace)
	var why string
	switch {
	case t == nil:
		why = "does not exist"
	case t.ignored != "":
		why = "belongs to another ingress class"
	case t.isRoot():
		why = "is a root: only HTTPProxies without a virtualhost can be included"
	case !t.usable():
		why = "is invalid (see its status)"
	case t.tcp == nil:
		why = "has no spec.tcpproxy.services"
	}
	if why != "" {
		root.check.fail(problemTCPProxy, "IncludeNotFound", "spec.tcpproxy.include %s %s; fix the include", key, why)
		return nil
	}
	t.includedBy = append(t.includedBy, fmt.Sprintf("tcpproxy included by %s on %s", root.ref, w.host))
	t.addHost(w.host)
	return t.tcp
}

// setProxyStatus records an HTTPProxy's status.
func (b *builder) setProxyStatus(n *proxyNode) {
	st := Status{Object: n.ref, Root: n.isRoot()}
	if n.isRoot() {
		for _, h := range n.hostNames() {
			n.addHost(h)
		}
	}
	if len(n.hosts) > 0 {
		st.Hosts = make([]string, 0, len(n.hosts))
		for h := range n.hosts {
			st.Hosts = append(st.Hosts, h)
		}
		sort.Strings(st.Hosts)
	}
	st.Warnings = cappedProblems(n.check.warnings)
	warnings := problemMessages(st.Warnings)
	switch {
	case n.ignored != "":
		st.Status, st.Description, st.Warnings = StatusIgnored, n.ignored, nil
	case len(n.check.errors) > 0:
		st.Errors = cappedProblems(n.check.errors)
		st.Status, st.Description = StatusInvalid, notServed(problemMessages(st.Errors))
	case n.isRoot():
		st.Status, st.Description = StatusValid, withNotes("valid HTTPProxy", warnings)
	case len(n.includedBy) > 0:
		st.Status, st.Description = StatusValid, withNotes("valid HTTPProxy, "+strings.Join(capped(n.includedBy), "; "), warnings)
	default:
		desc := "this HTTPProxy is not included by any root HTTPProxy (it has no spec.virtualhost): include it from a root, or give it a virtualhost"
		if d := capped(n.includingInvalid); len(d) > 0 {
			desc += "; " + strings.Join(d, ", ") + " include it but are not served themselves"
		}
		st.Status, st.Description = StatusOrphaned, withNotes(desc, warnings)
	}
	b.statuses = append(b.statuses, st)
}

// cappedProblems drops repeated problems and keeps at most maxNotes of them.
func cappedProblems(in []Problem) []Problem {
	if len(in) == 0 {
		return nil
	}
	var out []Problem
	seen := map[Problem]bool{}
	for _, p := range in {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if len(out) > maxNotes {
		out = append(out[:maxNotes:maxNotes], Problem{Type: "TooManyProblems", Reason: "Truncated", Message: fmt.Sprintf("and %d more", len(out)-maxNotes)})
	}
	return out
}

func problemMessages(ps []Problem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Message
	}
	return out
}
