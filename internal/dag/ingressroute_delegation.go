package dag

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
)

// markCycles rejects every IngressRoute on a delegation cycle. Cycles are a property of
// the objects, not of where a walk enters them, so every member is rejected whichever
// root reaches it: a root cannot pick which of them breaks.
func markCycles(g *irGraph) {
	t := tarjan{g: g, index: map[*irNode]int{}, low: map[*irNode]int{}, onStack: map[*irNode]bool{}}
	for _, n := range g.order {
		if _, done := t.index[n]; !done && n.usable() {
			t.connect(n)
		}
	}
	for _, scc := range t.sccs {
		if len(scc) == 1 && !delegatesTo(g, scc[0], scc[0]) {
			continue
		}
		path := cyclePath(g, scc)
		for _, n := range scc {
			n.reject("delegation cycle: %s; remove one of these delegations", path)
		}
	}
}

// delegationTargets are the usable vertices n delegates to, in route order.
func delegationTargets(g *irGraph, n *irNode) []*irNode {
	var out []*irNode
	for i := range n.ir.Spec.Routes {
		d := n.ir.Spec.Routes[i].Delegate
		if d == nil {
			continue
		}
		if t, _ := g.lookup(n, d); t != nil && t.usable() && !t.isRoot() {
			out = append(out, t)
		}
	}
	return out
}

func delegatesTo(g *irGraph, from, to *irNode) bool {
	return slices.Contains(delegationTargets(g, from), to)
}

// tarjan finds the strongly connected components of the delegation graph.
type tarjan struct {
	g       *irGraph
	next    int
	index   map[*irNode]int
	low     map[*irNode]int
	stack   []*irNode
	onStack map[*irNode]bool
	sccs    [][]*irNode
}

func (t *tarjan) connect(n *irNode) {
	t.index[n], t.low[n] = t.next, t.next
	t.next++
	t.stack = append(t.stack, n)
	t.onStack[n] = true
	for _, m := range delegationTargets(t.g, n) {
		if _, seen := t.index[m]; !seen {
			t.connect(m)
			t.low[n] = min(t.low[n], t.low[m])
		} else if t.onStack[m] {
			t.low[n] = min(t.low[n], t.index[m])
		}
	}
	if t.low[n] != t.index[n] {
		return
	}
	var scc []*irNode
	for {
		m := t.stack[len(t.stack)-1]
		t.stack = t.stack[:len(t.stack)-1]
		t.onStack[m] = false
		scc = append(scc, m)
		if m == n {
			break
		}
	}
	t.sccs = append(t.sccs, scc)
}

// cyclePath describes one cycle through the first member of scc (in name order), e.g.
// "IngressRoute a/x -> IngressRoute b/y -> IngressRoute a/x".
func cyclePath(g *irGraph, scc []*irNode) string {
	in := map[*irNode]bool{}
	for _, n := range scc {
		in[n] = true
	}
	start := scc[0]
	for _, n := range scc {
		if n.ref.Namespace+"/"+n.ref.Name < start.ref.Namespace+"/"+start.ref.Name {
			start = n
		}
	}
	// Breadth-first search back to start, inside the component.
	prev := map[*irNode]*irNode{}
	queue := []*irNode{start}
	var last *irNode
	for len(queue) > 0 && last == nil {
		n := queue[0]
		queue = queue[1:]
		for _, m := range delegationTargets(g, n) {
			if m == start {
				last = n
				break
			}
			if _, seen := prev[m]; !seen && in[m] {
				prev[m] = n
				queue = append(queue, m)
			}
		}
	}
	path := []string{start.ref.String()}
	for n := last; n != nil && n != start; n = prev[n] {
		path = append(path, n.ref.String())
	}
	path = append(path, start.ref.String())
	// The walk back went from the end to the start: reverse the middle.
	slices.Reverse(path[1 : len(path)-1])
	return strings.Join(path, " -> ")
}

// irClaim is a route a root's delegation tree asks for on the root's hosts.
type irClaim struct {
	match string
	// route is nil for a delegation that was refused: its prefix answers 503, so that a
	// broken delegate never lets its traffic fall through to a shorter prefix of another
	// team.
	route *ingressroutev1.Route
	owner *irNode
	// prefix is the prefix delegated to owner; "" for the root itself. For a refused
	// delegation it is the refused prefix.
	prefix string
	depth  int
	order  int
	// via is how the walk reached owner.
	via *chain
}

// rootWalk follows the delegations of one root.
type rootWalk struct {
	g      *irGraph
	root   *irNode
	hosts  []string
	claims map[string][]*irClaim
	seen   map[visitKey]bool
	count  int // claims made so far, for their order
	// edges are every delegation of the tree, followed or refused.
	edges []delegationEdge
}

// delegationEdge is a delegation of prefix, made depth-1 levels below the root.
type delegationEdge struct {
	prefix  string
	depth   int
	from    ObjectRef
	to      string // namespace/name of the target
	refused bool
}

// chain is the path of delegations (edge indexes) from the root to an object.
type chain struct {
	edge   int
	parent *chain
}

func (c *chain) contains(edge int) bool {
	for ; c != nil; c = c.parent {
		if c.edge == edge {
			return true
		}
	}
	return false
}

type visitKey struct {
	node   *irNode
	prefix string
}

func (w *rootWalk) claim(match string, r *ingressroutev1.Route, owner *irNode, prefix string, depth int, via *chain) {
	w.claims[match] = append(w.claims[match], &irClaim{match: match, route: r, owner: owner, prefix: prefix, depth: depth, order: w.count, via: via})
	w.count++
}

// visit adds n's routes, served under prefix, and follows its delegations.
func (w *rootWalk) visit(n *irNode, prefix string, depth int, via *chain) {
	for _, h := range w.hosts {
		n.hosts[h] = true
	}
	for i := range n.ir.Spec.Routes {
		r := &n.ir.Spec.Routes[i]
		if r.Delegate == nil {
			w.claim(r.Match, r, n, prefix, depth, via)
			continue
		}
		t, key := w.g.lookup(n, r.Delegate)
		edge := len(w.edges)
		w.edges = append(w.edges, delegationEdge{prefix: r.Match, depth: depth + 1, from: n.ref, to: key.String()})
		next := &chain{edge: edge, parent: via}
		if reason := w.refusal(n, r, t); reason != "" {
			w.edges[edge].refused = true
			n.note("route %q: not delegated to IngressRoute %s: %s; requests under %q get 503", r.Match, key, reason, r.Match)
			// The 503 stands in for the delegate: it holds the whole delegated prefix, as
			// the delegate's own routes would, so that no object delegated a shorter
			// prefix takes the traffic the delegating object gave away.
			w.claim(r.Match, nil, n, r.Match, depth+1, next)
			continue
		}
		t.delegatedBy = append(t.delegatedBy, fmt.Sprintf("%q delegated by %s on %s", r.Match, n.ref, w.hosts[0]))
		k := visitKey{node: t, prefix: r.Match}
		if !w.seen[k] {
			w.seen[k] = true
			w.visit(t, r.Match, depth+1, next)
		}
	}
}

// refusal says why the delegation of route r from n to t cannot be followed, or "".
func (w *rootWalk) refusal(n *irNode, r *ingressroutev1.Route, t *irNode) string {
	switch {
	case t == nil:
		return "it does not exist"
	case t.ignored != "":
		return "it belongs to another ingress class"
	case !t.usable():
		return "it is invalid (see its status)"
	case t.isRoot():
		t.note("%s delegates %q to it, which is ignored: only IngressRoutes without spec.virtualhost can be delegated to", n.ref, r.Match)
		return "it is a root (it has spec.virtualhost): only IngressRoutes without a virtualhost can be delegated to"
	}
	for i := range t.ir.Spec.Routes {
		if m := t.ir.Spec.Routes[i].Match; !strings.HasPrefix(m, r.Match) {
			t.refused = append(t.refused, fmt.Sprintf("%s delegates %q to it, but its route %q is not under %q", n.ref, r.Match, m, r.Match))
			return fmt.Sprintf("its route %q is not under %q", m, r.Match)
		}
	}
	return ""
}

// winners resolves routes that several objects of the tree ask for with the same prefix:
// the object with the longest delegated prefix serves it (a delegation hands over all of
// its prefix, as a DNS zone delegation does), then the one closest to the root.
func (w *rootWalk) winners() []*irClaim {
	w.dropShadowed()
	matches := make([]string, 0, len(w.claims))
	for m := range w.claims {
		matches = append(matches, m)
	}
	sort.Strings(matches)
	out := make([]*irClaim, 0, len(matches))
	for _, m := range matches {
		cs := w.claims[m]
		sort.SliceStable(cs, func(i, j int) bool {
			a, c := cs[i], cs[j]
			if len(a.prefix) != len(c.prefix) {
				return len(a.prefix) > len(c.prefix)
			}
			if a.depth != c.depth {
				return a.depth < c.depth
			}
			return a.order < c.order
		})
		win := cs[0]
		for _, c := range cs[1:] {
			switch {
			case c.owner == win.owner:
			case win.route == nil:
				c.owner.note("route %q is not served on %s: %s delegates %q to an IngressRoute that cannot be served, so it answers 503 (see that object's status)", m, w.hosts[0], win.owner.ref, m)
			default:
				c.owner.note("route %q is not served on %s: %s serves it (%q is delegated to it)", m, w.hosts[0], win.owner.ref, win.prefix)
			}
		}
		out = append(out, win)
	}
	return out
}

// dropShadowed removes the routes that lie inside a prefix the tree delegated elsewhere:
// a longer delegated prefix than the one the route's object holds, or the same prefix
// delegated closer to the root. An object delegated "/" cannot serve "/a/x" once "/a" is
// delegated to another object, even when that object cannot be served (its prefix then
// answers 503).
func (w *rootWalk) dropShadowed() {
	for m, cs := range w.claims {
		kept := cs[:0]
		for _, c := range cs {
			if e, shadowed := w.shadow(c); shadowed {
				if e.refused {
					c.owner.note("route %q is not served on %s: %s delegates %q to %s, which cannot be served, so it answers 503 (see %s's status)", m, w.hosts[0], e.from, e.prefix, e.to, e.from)
				} else {
					c.owner.note("route %q is not served on %s: %s delegates %q to %s", m, w.hosts[0], e.from, e.prefix, e.to)
				}
				continue
			}
			kept = append(kept, c)
		}
		if len(kept) == 0 {
			delete(w.claims, m)
		} else {
			w.claims[m] = kept
		}
	}
}

// shadow finds a delegation that takes c's route away: one of a longer prefix, or of the
// same prefix made closer to the root by an object that is not on c's own chain (a
// delegate may hand its whole prefix on).
func (w *rootWalk) shadow(c *irClaim) (delegationEdge, bool) {
	for i, e := range w.edges {
		if !strings.HasPrefix(c.match, e.prefix) {
			continue
		}
		if len(e.prefix) > len(c.prefix) || (len(e.prefix) == len(c.prefix) && e.depth < c.depth && !c.via.contains(i)) {
			return e, true
		}
	}
	return delegationEdge{}, false
}

// servedRoute is a graph route with whether plain HTTP may reach it on a TLS host.
type servedRoute struct {
	route          *Route
	permitInsecure bool
}

// serveRoot walks a valid root's delegation tree and adds its hosts to the graph.
func (b *builder) serveRoot(g *irGraph, root *irNode, secret *Secret, minTLS string) {
	w := &rootWalk{g: g, root: root, hosts: rootHosts(root), claims: map[string][]*irClaim{}, seen: map[visitKey]bool{}}
	w.visit(root, "", 0, nil)
	winners := w.winners()
	matches := map[string]bool{}
	for _, c := range winners {
		matches[c.match] = true
	}
	var routes []servedRoute
	for _, c := range winners {
		routes = append(routes, b.claimRoutes(c, matches)...)
	}
	for _, h := range w.hosts {
		vh := b.vhost(h)
		if secret == nil {
			for _, r := range routes {
				vh.Routes = append(vh.Routes, r.route)
			}
			b.alsoUnderWildcardCertificates(vh)
			continue
		}
		svh := &SecureVirtualHost{VirtualHost: VirtualHost{Name: h}, Secret: secret, MinTLSVersion: minTLS}
		for _, r := range routes {
			svh.Routes = append(svh.Routes, r.route)
			if r.permitInsecure {
				vh.Routes = append(vh.Routes, r.route)
			} else {
				vh.Routes = append(vh.Routes, &Route{Path: r.route.Path, Source: r.route.Source, HTTPSRedirect: true})
			}
		}
		b.svhosts[h] = svh
	}
}

// alsoUnderWildcardCertificates adds a plain-HTTP host to the wildcard certificates that
// cover it (SecureVirtualHost.Also): TLS connections for it arrive on such a certificate
// and must reach its own routes, never the wildcard host's.
func (b *builder) alsoUnderWildcardCertificates(vh *VirtualHost) {
	for name, svh := range b.svhosts {
		if !svh.IsWildcard() || !coversOneLabel(name, vh.Name) || slices.Contains(svh.Also, vh) {
			continue
		}
		svh.Also = append(svh.Also, vh)
		sort.Slice(svh.Also, func(i, j int) bool { return svh.Also[i].Name < svh.Also[j].Name })
	}
}

// claimRoutes turns a winning claim into graph routes. A prefix rewrite ending in "/" on
// a prefix that does not gets a second route for the prefix followed by "/", so that
// "/app/x" rewritten from "/app" to "/" becomes "/x", not "//x".
func (b *builder) claimRoutes(c *irClaim, matches map[string]bool) []servedRoute {
	path := PathMatch{Kind: PathStringPrefix, Value: c.match}
	if c.route == nil {
		return []servedRoute{{route: &Route{Path: path, Source: c.owner.ref, DirectStatus: 503}}}
	}
	r, n := c.route, c.owner
	field := fmt.Sprintf("route %q: ", r.Match)
	out := &Route{Path: path, Source: n.ref, PrefixRewrite: r.PrefixRewrite, Clusters: b.routeClusters(n, r, field)}
	var notes []string
	if tp := r.TimeoutPolicy; tp != nil {
		out.Timeouts, notes = buildTimeouts(policyInput{field + "timeoutPolicy.request", tp.Request}, policyInput{field + "timeoutPolicy.idle", tp.Idle})
	}
	if rp := r.RetryPolicy; rp != nil {
		count := policyInput{field + "retryPolicy.count", rp.Count}
		if rp.Count == nil && rp.MaxRetries != nil {
			count = policyInput{field + "retryPolicy.maxRetries", rp.MaxRetries}
		}
		var more []string
		out.Retry, more = buildRetry(rawRetryPolicy{
			count:         count,
			statusCodes:   rp.OnStatusCodes,
			codesField:    field + "retryPolicy.onStatusCodes",
			perTryTimeout: policyInput{field + "retryPolicy.perTryTimeout", rp.PerTryTimeout},
		}, out.Timeouts)
		notes = append(notes, more...)
	}
	n.notes = append(n.notes, notes...)
	routes := []servedRoute{{route: out, permitInsecure: r.PermitInsecure}}
	if strings.HasSuffix(r.PrefixRewrite, "/") && !strings.HasSuffix(r.Match, "/") && !matches[r.Match+"/"] {
		slash := *out
		slash.Path.Value = r.Match + "/"
		routes = append(routes, servedRoute{route: &slash, permitInsecure: r.PermitInsecure})
	}
	return routes
}

// routeClusters resolves a route's services in the object's own namespace. When no
// service has a weight, traffic is split evenly; otherwise unset weights are 0.
func (b *builder) routeClusters(n *irNode, r *ingressroutev1.Route, field string) []*WeightedCluster {
	services := r.AllServices()
	var total int64
	for _, s := range services {
		if s.Weight != nil {
			total += *s.Weight
		}
	}
	var out []*WeightedCluster
	byName := map[string]*WeightedCluster{}
	for i := range services {
		s := &services[i]
		weight := uint32(1)
		if total > 0 {
			weight = 0
			if s.Weight != nil {
				weight = uint32(*s.Weight)
			}
		}
		pol := clusterPolicy{lb: LoadBalancer(firstNonEmpty(s.Strategy, n.ir.Spec.Strategy)), hc: healthCheck(s.HealthCheck)}
		if pol.hc == nil {
			pol.hc = healthCheck(n.ir.Spec.HealthCheck)
		}
		be := &networkingv1.IngressServiceBackend{Name: s.Name, Port: networkingv1.ServiceBackendPort{Number: s.Port}}
		cluster, warn := b.serviceCluster(n.ir.Namespace, be, pol)
		if warn != "" {
			n.note("%s%s", field, warn)
		}
		if wc, dup := byName[cluster.Name]; dup {
			wc.Weight += weight
			continue
		}
		wc := &WeightedCluster{Cluster: cluster, Weight: weight}
		byName[cluster.Name] = wc
		out = append(out, wc)
	}
	return out
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
