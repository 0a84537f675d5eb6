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
// can only serve requests that every include on its way let through. An include seals
// its requests: those that no route under it matches are answered 404 (503 when the
// include cannot be followed), never passed to another route of the includer, as a
// delegated IngressRoute prefix is.

// proxyNode is one HTTPProxy during a build.
type proxyNode struct {
	p       *contourv1.HTTPProxy
	ref     ObjectRef
	ignored string
	check   proxyCheck
	// includedBy describes the includes that reach this object; includingInvalid the
	// invalid objects that include it.
	includedBy, includingInvalid []string
	// host and moreHosts are those it serves routes on: most objects serve on one,
	// so the map is only made for a second.
	host         string
	moreHosts    map[string]bool
	names        []string // hostNames, made once
	plans        []routePlan
	includeConds []conditions // those of spec.includes, parsed
	tcp          *TCPProxy
}

func (n *proxyNode) addHost(h string) {
	switch {
	case n.host == "" || n.host == h:
		n.host = h
	case n.moreHosts == nil:
		n.moreHosts = map[string]bool{h: true}
	default:
		n.moreHosts[h] = true
	}
}

func (n *proxyNode) isRoot() bool { return n.p.Spec.VirtualHost != nil }

func (n *proxyNode) usable() bool { return n.ignored == "" && len(n.check.errors) == 0 }

func (n *proxyNode) objRef() ObjectRef       { return n.ref }
func (n *proxyNode) createdAt() *metav1.Time { return &n.p.CreationTimestamp }
func (n *proxyNode) hostNames() []string {
	if n.names == nil {
		n.names = []string{strings.ToLower(n.p.Spec.VirtualHost.Fqdn)}
	}
	return n.names
}

// fqdnInvalid reports whether a root's fqdn is no host name: validateHTTPProxy said so
// (checked once), or, when the spec could not be read, it is not one.
func (n *proxyNode) fqdnInvalid() bool {
	if n.p.Annotations[contourv1.DecodeErrorAnnotation] != "" {
		return validateProxyFQDN(n.p.Spec.VirtualHost.Fqdn) != ""
	}
	return slices.ContainsFunc(n.check.errors, func(p Problem) bool { return p.Reason == "FQDNInvalid" })
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
			n.ignored = fmt.Sprintf("ingress class %q is not %s", class, b.opts.classesText())
			continue
		}
		if reason := p.Annotations[contourv1.DecodeErrorAnnotation]; reason != "" {
			n.check.fail(problemSpec, "SpecUnreadable", "its spec cannot be read: %s; fix that field", reason)
			continue
		}
		// The routes are translated even when the object is already invalid, so that its
		// status lists every problem at once, not one more after each fix.
		routeConds, includeConds := validateHTTPProxy(p, &n.check)
		if !b.opts.RateLimitService {
			warnGlobalUnenforced(p, &n.check)
		}
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
		return c, !b.opts.servesClass(c)
	}
	for _, a := range ingressRouteClassAnnotations {
		if v, ok := p.Annotations[a]; ok {
			return v, !b.opts.servesClass(v)
		}
	}
	return "", false
}

// markIncludeCycles makes invalid the newest object of every include cycle (see
// breakCycles), naming the cycle: the rule IngressRoute delegation cycles follow, which
// does not depend on where a root's walk enters the cycle. Only includes the walk would
// follow count: roots, objects of another class and objects invalid on their own are
// never followed, and an object without includes cannot lead back.
func markIncludeCycles(g *proxyGraph) {
	leads := func(n *proxyNode) bool { return len(n.p.Spec.Includes) > 0 && !n.isRoot() && n.usable() }
	var nodes []*proxyNode
	for _, n := range g.order {
		if leads(n) {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return
	}
	edges := func(n *proxyNode) []*proxyNode {
		var out []*proxyNode
		for i := range n.p.Spec.Includes {
			inc := &n.p.Spec.Includes[i]
			if t, _ := g.lookup(n, inc.Name, inc.Namespace); t != nil && leads(t) {
				out = append(out, t)
			}
		}
		return out
	}
	blamed := breakCycles(cycleGraph[*proxyNode]{
		nodes: nodes,
		edges: edges,
		newer: func(a, b *proxyNode) bool {
			return newerObject(a.ref, &a.p.CreationTimestamp, b.ref, &b.p.CreationTimestamp)
		},
		name: func(n *proxyNode) string { return n.ref.String() },
	})
	for _, n := range nodes {
		if cycle, ok := blamed[n]; ok {
			n.check.fail(problemInclude, "IncludeCreatesCycle", "its include closes a cycle: %s; it is the newest object on the cycle (by creationTimestamp, then namespace/name), so it is the one not served: remove one of the includes on the cycle", cycle)
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
		if n.ignored != "" || !n.isRoot() || n.fqdnInvalid() {
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
		clients, ok := b.proxyClientValidation(root)
		if !ok {
			continue
		}
		fallback, ok := b.proxyFallback(root)
		if !ok {
			continue
		}
		providers, ok := b.proxyJWTProviders(root)
		if !ok {
			continue
		}
		auth, ok := b.proxyAuthorization(root)
		if !ok {
			continue
		}
		w := &proxyWalk{g: g, root: root, host: root.hostNames()[0], claims: map[string]*proxyClaim{}, clients: clients, fallback: fallback, auth: auth, global: b.opts.GlobalAuthorization, jwtProviders: providers,
			noInsecure: b.opts.DisablePermitInsecure}
		tcp := b.proxyRootTCP(w)
		if root.p.Spec.TCPProxy != nil && tcp == nil {
			continue // the root is invalid now: its tcpproxy cannot be served
		}
		w.visit(root, rootConditions(), "", 0, true)
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
	// auth is the root's authorization, nil without one.
	auth *Authorization
	// global is the installation's authorization, nil without one.
	global *GlobalAuthorization
	// clients is how the root's TLS host checks client certificates; nil: it does not.
	clients *ClientValidation
	// fallback is the fallback certificate when the root enables it; nil: it does not.
	fallback *Secret
	// noInsecure: the installation disables permitInsecure (Options.DisablePermitInsecure).
	noInsecure bool
	// jwtProviders are the root's, which its routes and those it includes require.
	jwtProviders []JWTProvider
}

// proxyClaim is a route an object asks for, under its merged conditions.
type proxyClaim struct {
	// route is nil for a seal: the 404 that answers the requests of a followed include
	// that no route under it matches. Any other claim with the same conditions replaces
	// a seal, and a seal never competes (nor warns).
	route          *Route
	owner          *proxyNode
	depth          int
	permitInsecure bool
	conds          conditions
	// unfollowed marks the 503 route of an include that is not followed.
	unfollowed bool
	// twin is the second route of a prefix rewrite (rewriteTwin): served with route
	// when it wins, unless another claim holds the twin's conditions.
	twin *Route
}

func (c *proxyClaim) seal() bool { return c.route == nil }

// visit claims n's routes under conds and follows its includes. condsKey is
// conds.key(), or "" when not computed yet. insecureOK says that every include on the
// way granted permitInsecure. The includes the walk follows hold no cycle
// (markIncludeCycles made the newest object of each invalid), and maxProxyVisits bounds
// the objects it reaches.
func (w *proxyWalk) visit(n *proxyNode, conds conditions, condsKey string, depth int, insecureOK bool) {
	w.visits++
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
		if permit && w.noInsecure {
			if w.root.p.Spec.VirtualHost.TLS != nil {
				n.check.warn(problemInsecure, "PermitInsecureDisabled", "spec.routes[%d].permitInsecure is ignored on %s: this installation disables it (--disable-permit-insecure); the route is redirected to HTTPS", i, w.host)
			}
			permit = false
		}
		key := ""
		if plan.conds.addsNothing() {
			key = condsKey // merged holds the same requests as conds
		}
		route := plan.build(merged)
		if plan.jwt != nil || len(w.jwtProviders) > 0 {
			req, msg := jwtRequirement(plan.jwt, w.jwtProviders)
			if msg != "" {
				// Served as if it required nothing, the route would expose what it protects.
				n.check.warn(problemJWT, "JWTProviderNotDefined", "spec.routes[%d] answers 503 on %s: its %s", i, w.host, msg)
				route = &Route{Path: merged.path, Headers: merged.headers, Query: merged.query, Source: n.ref, DirectStatus: 503}
			}
			route.JWT = req
			if permit && req.Provider != "" {
				n.check.warn(problemInsecure, "PermitInsecureIgnored", "spec.routes[%d].permitInsecure is ignored on %s: the route requires a JSON Web Token, which is verified over HTTPS only; it is redirected to HTTPS", i, w.host)
				permit = false
			}
		}
		if route.Authorization = routeAuthorization(w.global, w.root.p, n.p.Spec.Routes[i].AuthPolicy); route.Authorization != nil {
			if w.auth == nil && !route.Authorization.Disabled {
				// Its host's check is disabled, and the server it would enable is not
				// usable (see the root's status): never served unchecked.
				n.check.warn(problemAuth, "AuthServerUnusable", "spec.routes[%d] answers 503 on %s: its authPolicy enables the installation's external authorization, which cannot be used (see the root's status)", i, w.host)
				route = &Route{Path: merged.path, Headers: merged.headers, Query: merged.query, Source: n.ref, DirectStatus: 503, Authorization: &RouteAuthorization{Disabled: true}}
			}
			httpRouteContext(w.auth, route.Authorization, n.p.Spec.Routes[i].AuthPolicy, i, &n.check)
			if permit && !route.Authorization.Disabled && w.global == nil {
				n.check.warn(problemAuth, "PlainHTTPNotAuthorized", "spec.routes[%d] is served over plain HTTP too (permitInsecure), where its requests are not authorized: only HTTPS requests of %s are checked; remove permitInsecure to redirect them to HTTPS", i, w.host)
			}
		}
		w.claim(proxyClaim{route: route, owner: n, depth: depth, permitInsecure: permit, conds: merged, twin: rewriteTwin(route)}, key)
	}
	for i := range n.p.Spec.Includes {
		inc := &n.p.Spec.Includes[i]
		merged := conds.merge(n.includeConds[i])
		key := ""
		if n.includeConds[i].addsNothing() {
			key = condsKey
		}
		t, name := w.g.lookup(n, inc.Name, inc.Namespace)
		if reason, why := w.refusal(n, t); reason != "" {
			n.check.warn(problemInclude, reason, "spec.includes[%d] (%s) is not followed on %s: %s %s; requests matching its conditions get 503", i, merged.describe(), w.host, name, why)
			w.claim(proxyClaim{route: &Route{Path: merged.path, Headers: merged.headers, Query: merged.query, Source: n.ref, DirectStatus: 503}, owner: n, depth: depth + 1, conds: merged, unfollowed: true}, key)
			continue
		}
		t.includedBy = append(t.includedBy, fmt.Sprintf("included by %s on %s (%s)", n.ref, w.host, merged.describe()))
		// The include's requests belong to t: those that no route under it matches get
		// 404, never a shorter route of the includer (as for a delegated IngressRoute
		// prefix).
		key = w.claim(proxyClaim{owner: t, depth: depth + 1, conds: merged}, key)
		w.visit(t, merged, key, depth+1, insecureOK && inc.PermitInsecure)
	}
}

// refusal says why the include of t from n cannot be followed: a status reason and the
// explanation, or "".
func (w *proxyWalk) refusal(n, t *proxyNode) (string, string) {
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
	case w.visits >= maxProxyVisits:
		w.root.check.warn(problemInclude, "TooManyIncludes", "the includes of this root reach more than %d objects on %s; the rest answer 503", maxProxyVisits, w.host)
		return "TooManyIncludes", fmt.Sprintf("would exceed %d included objects for this root", maxProxyVisits)
	}
	return "", ""
}

// claim records a route and returns the key of its conditions (key, unless "", is that
// key already computed). Among routes with the same conditions the one closest to the
// root wins, then the first; a seal gives way to any of them.
func (w *proxyWalk) claim(c proxyClaim, key string) string {
	if key == "" {
		key = c.conds.key()
	}
	prev, ok := w.claims[key]
	switch {
	case !ok:
		p := new(proxyClaim)
		*p = c
		w.claims[key] = p
		w.keys = append(w.keys, key)
		return key
	case c.seal():
		return key
	case prev.seal():
		*prev = c
		return key
	}
	win, lose := prev, &c
	if c.depth < prev.depth {
		old := *prev
		*prev = c
		win, lose = prev, &old
	}
	if lose.owner != win.owner && !lose.unfollowed {
		where := "closer to the root"
		if win.depth == lose.depth {
			where = "as deep in the includes and reached first"
		}
		lose.owner.check.warn(problemRoute, "DuplicateMatchConditions", "route (%s) is not served on %s: %s, %s, has a route with the same conditions", lose.conds.describe(), w.host, win.owner.ref, where)
	}
	return key
}

// serveProxyRoot adds a root's host with its routes (and TCP proxy) to the graph.
func (b *builder) serveProxyRoot(w *proxyWalk, secret *Secret, tcp *TCPProxy) {
	vhSpec := w.root.p.Spec.VirtualHost
	plainServes := secret == nil && !(vhSpec.TLS != nil && vhSpec.TLS.Passthrough)
	var plain, secure []*Route
	for _, k := range w.keys {
		c := w.claims[k]
		route := c.route
		if route == nil {
			route = &Route{Path: c.conds.path, Headers: c.conds.headers, Query: c.conds.query, Source: c.owner.ref, DirectStatus: 404}
		}
		open := plainServes || c.permitInsecure
		secure = append(secure, route)
		if open {
			plain = append(plain, route)
		} else {
			redirect := &Route{Path: route.Path, Headers: route.Headers, Query: route.Query, Source: route.Source, HTTPSRedirect: true}
			if w.global != nil {
				// The installation's authorization checks the plain listener's
				// requests, redirects too, as the route's are checked (as in Contour).
				redirect.Authorization = route.Authorization
			}
			plain = append(plain, redirect)
		}
		if c.twin != nil {
			if _, taken := w.claims[conditions{path: c.twin.Path, headers: c.conds.headers, query: c.conds.query}.key()]; !taken {
				secure = append(secure, c.twin)
				if open {
					// (Redirected, it needs no route: the route's redirect covers its paths.)
					plain = append(plain, c.twin)
				}
			}
		}
	}
	h := w.host
	// Checked with the root (validateProxyVirtualHost): no problem is left to report.
	var checked proxyCheck
	ipFilter := proxyIPFilter(vhSpec.IPAllowFilterPolicy, vhSpec.IPDenyFilterPolicy, "spec.virtualhost", &checked)
	cors := proxyCORS(vhSpec.CORSPolicy, &checked)
	rateLimit := withDefaultGlobal(proxyRateLimit(vhSpec.RateLimitPolicy, "", &checked), b.opts.DefaultGlobalRateLimit)
	if len(plain) > 0 || (secret == nil && tcp == nil) {
		vh := b.vhost(h)
		vh.IPFilter, vh.CORS = ipFilter, cors
		vh.Routes = append(vh.Routes, plain...)
		vh.RateLimit = rateLimit
		if secret == nil && tcp == nil {
			b.alsoUnderWildcardCertificates(vh)
		}
	}
	if secret == nil && tcp == nil {
		return
	}
	svh := &SecureVirtualHost{VirtualHost: VirtualHost{Name: h, IPFilter: ipFilter, CORS: cors, RateLimit: rateLimit}, Secret: secret, TCPProxy: tcp, Authorization: w.auth, JWTProviders: w.jwtProviders}
	if t := vhSpec.TLS; t != nil {
		svh.Passthrough = t.Passthrough
		svh.MinTLSVersion = t.MinimumProtocolVersion
		if svh.MinTLSVersion == "" {
			svh.MinTLSVersion = DefaultProxyMinTLSVersion
		}
		svh.MaxTLSVersion = t.MaximumProtocolVersion
		svh.ClientValidation = w.clients
		svh.HTTPVersions = proxyHTTPVersions(w.root.p.Spec.HTTPVersions)
	}
	if tcp == nil {
		svh.Routes = secure
	}
	b.svhosts[h] = svh
	if w.fallback != nil && tcp == nil {
		b.addToFallback(svh, w.fallback)
	}
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
	// (A protocol is refused, and headers policies are ignored with a warning, by
	// validateTCPProxy.)
	return &TCPProxy{Clusters: b.proxyServices(n, tp.Services, field, pol, false, &n.check), Source: n.ref}
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
	if n.host != "" {
		st.Hosts = make([]string, 1, 1+len(n.moreHosts))
		st.Hosts[0] = n.host
		for h := range n.moreHosts {
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
		st.Status, st.Description, st.Noted = StatusValid, withNotes("valid HTTPProxy", warnings), len(warnings) > 0
	case len(n.includedBy) > 0:
		st.Status, st.Description, st.Noted = StatusValid, withNotes("valid HTTPProxy, "+strings.Join(capped(n.includedBy), "; "), warnings), len(warnings) > 0
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

// rewriteTwin returns the second route a prefix rewrite ending in "/" needs on a segment
// prefix: "/api" rewritten to "/" must send "/api/x" as "/x", not "//x", so "/api/" gets
// a route of its own with the same rewrite. nil when none is needed.
func rewriteTwin(r *Route) *Route {
	if r.PrefixRewrite == "" || !strings.HasSuffix(r.PrefixRewrite, "/") || r.Path.Kind != PathPrefix || r.Path.Value == "/" {
		return nil
	}
	twin := *r
	twin.Path = PathMatch{Kind: PathStringPrefix, Value: r.Path.Value + "/"}
	return &twin
}
