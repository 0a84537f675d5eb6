package dag

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
)

// A root's path space is divided into zones, as DNS is: the root holds every path, and
// each delegation hands the zone of its prefix to another object. A path belongs to the
// zone of its longest delegated prefix, and an object serves a route, or delegates a
// prefix, only inside a zone it holds. So a team can only ever act on the paths handed to
// it, minus what it handed on; a delegation that cannot be followed keeps its zone
// (answering 503) so that its traffic never falls through to another team.

// zone is one delegated prefix of a root's tree.
type zone struct {
	prefix string
	// holders serve the zone: the object it was delegated to, and those it handed the
	// same prefix on to. Empty when the delegation could not be followed.
	holders []*irNode
	// from is the object that delegated the zone (the root holds the zone "").
	from  *irNode
	to    string // namespace/name of the delegate, for messages
	depth int    // delegations between the root and the zone's first holder
}

// zoneTrie finds the zone of a path: the one with the longest prefix of it. It is a radix
// tree (edges carry strings), so that its size follows the number of zones rather than the
// length of their prefixes.
type zoneTrie struct {
	zone  *zone
	edges []trieEdge
}

type trieEdge struct {
	label string // never empty; edges of a node start with different bytes
	next  *zoneTrie
}

func (t *zoneTrie) insert(z *zone) {
	n, rest := t, z.prefix
	for rest != "" {
		i := n.edgeFor(rest[0])
		if i < 0 {
			n.edges = append(n.edges, trieEdge{label: rest, next: &zoneTrie{zone: z}})
			return
		}
		e := &n.edges[i]
		common := commonPrefixLen(e.label, rest)
		if common < len(e.label) {
			// Split the edge where the new prefix leaves it.
			mid := &zoneTrie{edges: []trieEdge{{label: e.label[common:], next: e.next}}}
			e.label, e.next = e.label[:common], mid
		}
		n, rest = e.next, rest[common:]
	}
	n.zone = z
}

func (t *zoneTrie) lookup(path string) *zone {
	found := t.zone
	n, rest := t, path
	for rest != "" {
		i := n.edgeFor(rest[0])
		if i < 0 || !strings.HasPrefix(rest, n.edges[i].label) {
			break
		}
		n, rest = n.edges[i].next, rest[len(n.edges[i].label):]
		if n.zone != nil {
			found = n.zone
		}
	}
	return found
}

func (t *zoneTrie) edgeFor(b byte) int {
	for i := range t.edges {
		if t.edges[i].label[0] == b {
			return i
		}
	}
	return -1
}

func commonPrefixLen(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// irClaim is a route an object asks for in one of its zones.
type irClaim struct {
	match string
	// route is nil for a stand-in answering status: 503 for a delegation that cannot be
	// followed, 404 for the prefix of a zone whose holders have no route for it (so that
	// no request in a zone ever reaches another zone's routes).
	route  *ingressroutev1.Route
	status uint32
	owner  *irNode
	zone   *zone
	depth  int
	order  int
}

// step is an object to process in the zone it was delegated, with the objects that led
// to it (to recognise cycles).
// sealDepth ranks a zone's 404 seal below every other claim for its prefix.
const sealDepth = math.MaxInt

type step struct {
	node  *irNode
	zone  *zone
	path  *pathLink
	depth int // delegations between the root and node
}

type pathLink struct {
	node   *irNode
	parent *pathLink
}

func (p *pathLink) contains(n *irNode) bool {
	for ; p != nil; p = p.parent {
		if p.node == n {
			return true
		}
	}
	return false
}

// describe renders the path from the root to n and back to target: a cycle.
func (p *pathLink) describe(target *irNode) string {
	var names []string
	for l := p; l != nil; l = l.parent {
		names = append(names, l.node.ref.String())
		if l.node == target {
			break
		}
	}
	slices.Reverse(names)
	return strings.Join(append(names, target.ref.String()), " -> ")
}

// rootWalk follows the delegations of one root, breadth first, so that a zone is always
// decided by the delegation closest to the root.
type rootWalk struct {
	g      *irGraph
	root   *irNode
	hosts  []string
	zones  zoneTrie
	claims []*irClaim
	// seen holds each object the walk reached, with the delegation that reached it: an
	// object is served at most once per root, which bounds a walk by the size of the
	// objects it reaches.
	seen map[*irNode]choice
	// routed are the routes to services, by zone: a co-holder of a zone cannot delegate
	// a prefix that covers a route of a holder closer to the root.
	routed map[*zone][]*irClaim
	// preferred are the delegations an object is served by when several reach it: the
	// one of the longest prefix (see newRootWalk). better collects those this pass found.
	preferred, better map[*irNode]choice
	// effects are what the walk says about objects, applied once the walk is final.
	effects []effect
	reached []*irNode
}

// choice is the delegation that serves an object.
type choice struct {
	from   *irNode
	prefix string
}

// effect is a remark the walk makes about an object.
type effect struct {
	node *irNode
	kind effectKind
	text string
}

type effectKind int

const (
	effectNote effectKind = iota
	effectDelegatedBy
	effectRefused
)

// maxWalkPasses bounds the passes of newRootWalk.
const maxWalkPasses = 8

// newRootWalk walks a root's tree. An object is served once, by the delegation of the
// longest prefix that reaches it: all of them are nested (every route of the object is
// under each), and the longest comes from the zone that holds the object's paths, so
// another team cannot capture the object by reaching it first with a shorter prefix.
// A pass that finds a longer delegation to an object already served starts the walk
// again preferring it; preferences only lengthen, so the passes end.
func newRootWalk(g *irGraph, root *irNode) *rootWalk {
	preferred := map[*irNode]choice{}
	var w *rootWalk
	for pass := 1; ; pass++ {
		w = walkOnce(g, root, preferred)
		if len(w.better) == 0 || pass == maxWalkPasses {
			break
		}
		for t, c := range w.better {
			preferred[t] = c
		}
	}
	w.apply()
	return w
}

func walkOnce(g *irGraph, root *irNode, preferred map[*irNode]choice) *rootWalk {
	w := &rootWalk{
		g: g, root: root, hosts: rootHosts(root),
		seen:      map[*irNode]choice{root: {}},
		routed:    map[*zone][]*irClaim{},
		preferred: preferred,
		better:    map[*irNode]choice{},
	}
	w.zones.insert(&zone{holders: []*irNode{root}})
	queue := []step{{node: root, zone: w.zones.zone}}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		queue = append(queue, w.process(s)...)
	}
	return w
}

func (w *rootWalk) note(n *irNode, format string, args ...any) {
	w.effects = append(w.effects, effect{node: n, kind: effectNote, text: fmt.Sprintf(format, args...)})
}

// apply records the final walk's remarks on the objects.
func (w *rootWalk) apply() {
	for _, n := range w.reached {
		for _, h := range w.hosts {
			n.hosts[h] = true
		}
	}
	for _, e := range w.effects {
		switch e.kind {
		case effectNote:
			e.node.notes = append(e.node.notes, e.text)
		case effectDelegatedBy:
			e.node.delegatedBy = append(e.node.delegatedBy, e.text)
		case effectRefused:
			e.node.refused = append(e.node.refused, e.text)
		}
	}
}

// prefer records that t should be served by from's delegation of prefix, if it is
// longer than any found so far.
func (w *rootWalk) prefer(t, from *irNode, prefix string) {
	if c, ok := w.better[t]; !ok || len(prefix) > len(c.prefix) {
		w.better[t] = choice{from: from, prefix: prefix}
	}
}

func (w *rootWalk) claim(c *irClaim) {
	c.order = len(w.claims)
	w.claims = append(w.claims, c)
}

// process takes n's routes in its zone and returns the delegations to follow.
func (w *rootWalk) process(s step) []step {
	n, z := s.node, s.zone
	w.reached = append(w.reached, n)
	path := &pathLink{node: n, parent: s.path}
	// Every delegation is judged against the zones as they were before n's own: n may
	// delegate both "/a" and "/a/b".
	var allowed []*ingressroutev1.Route
	for i := range n.ir.Spec.Routes {
		r := &n.ir.Spec.Routes[i]
		if r.Delegate == nil {
			c := &irClaim{match: r.Match, route: r, owner: n, zone: z, depth: s.depth}
			w.claim(c)
			w.routed[z] = append(w.routed[z], c)
			continue
		}
		if other := w.zones.lookup(r.Match); other != z {
			w.note(n, "route %q: not delegated: %s", r.Match, other.describe())
			continue
		}
		// Handing the zone itself on shadows nothing (holders share it); a sub-zone
		// must not cover a closer holder's route.
		if c := w.closerRoute(z, r.Match, s.depth); c != nil && r.Match != z.prefix {
			w.note(n, "route %q: not delegated: %s, closer to the root, routes %q", r.Match, c.owner.ref, c.match)
			continue
		}
		allowed = append(allowed, r)
	}
	var next []step
	for _, r := range allowed {
		t, key := w.g.lookup(n, r.Delegate)
		reason := w.refusal(n, r, t, path)
		if r.Match == z.prefix {
			// n hands its own zone on: the delegate holds it with n.
			if reason == "" {
				z.holders = append(z.holders, t)
				next = append(next, w.follow(t, r, n, z, path, s.depth+1))
			} else {
				w.note(n, "route %q: not delegated to IngressRoute %s: %s; requests under %q that no route of this object serves get 503", r.Match, key, reason, r.Match)
				w.claim(&irClaim{match: r.Match, status: 503, owner: n, zone: z, depth: s.depth + 1})
			}
			continue
		}
		sub := &zone{prefix: r.Match, from: n, to: key.String(), depth: s.depth + 1}
		w.zones.insert(sub)
		if reason != "" {
			w.note(n, "route %q: not delegated to IngressRoute %s: %s; requests under %q get 503", r.Match, key, reason, r.Match)
			w.claim(&irClaim{match: r.Match, status: 503, owner: n, zone: sub, depth: sub.depth})
			continue
		}
		sub.holders = []*irNode{t}
		if r.Match != "/" {
			// Seals the zone: its prefix answers 404 unless something in it routes it
			// (nothing shorter than "/" can match, so "/" needs no seal).
			w.claim(&irClaim{match: r.Match, status: 404, owner: n, zone: sub, depth: sealDepth})
		}
		next = append(next, w.follow(t, r, n, sub, path, s.depth+1))
	}
	return next
}

// closerRoute returns a route of zone z under prefix that a holder closer to the root
// than depth has, if any.
func (w *rootWalk) closerRoute(z *zone, prefix string, depth int) *irClaim {
	for _, c := range w.routed[z] {
		if c.depth < depth && strings.HasPrefix(c.match, prefix) {
			return c
		}
	}
	return nil
}

// follow records an accepted delegation and schedules its target.
func (w *rootWalk) follow(t *irNode, r *ingressroutev1.Route, from *irNode, z *zone, path *pathLink, depth int) step {
	w.effects = append(w.effects, effect{node: t, kind: effectDelegatedBy, text: fmt.Sprintf("%q delegated by %s on %s", r.Match, from.ref, w.hosts[0])})
	w.seen[t] = choice{from: from, prefix: r.Match}
	return step{node: t, zone: z, path: path, depth: depth}
}

// describe says who holds a zone, for the object whose route falls inside it.
func (z *zone) describe() string {
	if z.from == nil {
		return "the root holds it"
	}
	if len(z.holders) == 0 {
		return fmt.Sprintf("%s delegates %q to %s, a delegation that is refused, so it answers 503", z.from.ref, z.prefix, z.to)
	}
	return fmt.Sprintf("%s delegates %q to %s", z.from.ref, z.prefix, z.to)
}

// refusal says why the delegation of route r from n to t cannot be followed, or "".
func (w *rootWalk) refusal(n *irNode, r *ingressroutev1.Route, t *irNode, path *pathLink) string {
	switch {
	case t == nil:
		return "it does not exist"
	case t.ignored != "":
		return "it belongs to another ingress class"
	case !t.usable():
		return "it is invalid (see its status)"
	case t.isRoot():
		w.note(t, "%s delegates %q to it, which is ignored: only IngressRoutes without spec.virtualhost can be delegated to", n.ref, r.Match)
		return "it is a root (it has spec.virtualhost): only IngressRoutes without a virtualhost can be delegated to"
	}
	for i := range t.ir.Spec.Routes {
		if m := t.ir.Spec.Routes[i].Match; !strings.HasPrefix(m, r.Match) {
			w.effects = append(w.effects, effect{node: t, kind: effectRefused, text: fmt.Sprintf("%s delegates %q to it, but its route %q is not under %q", n.ref, r.Match, m, r.Match)})
			return fmt.Sprintf("its route %q is not under %q", m, r.Match)
		}
	}
	if c, seen := w.seen[t]; seen {
		if path.contains(t) {
			return "that would be a delegation cycle: " + path.describe(t)
		}
		if len(r.Match) > len(c.prefix) {
			w.prefer(t, n, r.Match)
		}
		return fmt.Sprintf("%s already delegates %q to it on this host (an object is served once per host)", c.from.ref, c.prefix)
	}
	if c, ok := w.preferred[t]; ok && (c.from != n || c.prefix != r.Match) {
		if len(r.Match) > len(c.prefix) {
			w.prefer(t, n, r.Match)
		}
		return fmt.Sprintf("%s delegates the longer prefix %q to it (an object is served once per host, by the longest delegation)", c.from.ref, c.prefix)
	}
	return ""
}

// winners keeps the claims made inside a zone their owner holds and, among claims for
// one prefix, the one closest to the root.
func (w *rootWalk) winners() []*irClaim {
	byMatch := map[string][]*irClaim{}
	for _, c := range w.claims {
		if z := w.zones.lookup(c.match); z != c.zone {
			if c.route != nil {
				c.owner.note("route %q is not served on %s: %s", c.match, w.hosts[0], z.describe())
			}
			continue
		}
		byMatch[c.match] = append(byMatch[c.match], c)
	}
	matches := make([]string, 0, len(byMatch))
	for m := range byMatch {
		matches = append(matches, m)
	}
	sort.Strings(matches)
	out := make([]*irClaim, 0, len(matches))
	for _, m := range matches {
		cs := byMatch[m]
		sort.SliceStable(cs, func(i, j int) bool {
			if cs[i].depth != cs[j].depth {
				return cs[i].depth < cs[j].depth
			}
			return cs[i].order < cs[j].order
		})
		win := cs[0]
		for _, c := range cs[1:] {
			if c.owner != win.owner && c.route != nil {
				c.owner.note("route %q is not served on %s: %s, closer to the root, serves it", m, w.hosts[0], win.owner.ref)
			}
		}
		out = append(out, win)
	}
	return out
}

// servedRoute is a graph route with whether plain HTTP may reach it on a TLS host.
type servedRoute struct {
	route          *Route
	permitInsecure bool
}

// serveRoot adds a root's hosts, with the routes its walk decided, to the graph.
func (b *builder) serveRoot(w *rootWalk, secret *Secret, minTLS string) {
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
	dot := strings.IndexByte(vh.Name, '.')
	if dot <= 0 {
		return
	}
	// The only wildcard that covers a name is "*" followed by the name without its
	// first label.
	// Each host is added once: a host has one root, and Ingress hosts are never roots'.
	// A wildcard whose connections are TCP-proxied has no routes to stand in for.
	if svh := b.svhosts["*"+vh.Name[dot:]]; svh != nil && svh.TCPProxy == nil {
		svh.Also = append(svh.Also, vh)
		b.alsoChanged = true
	}
}

// claimRoutes turns a winning claim into graph routes. A prefix rewrite ending in "/" on
// a prefix that does not gets a second route for the prefix followed by "/", so that
// "/app/x" rewritten from "/app" to "/" becomes "/x", not "//x".
func (b *builder) claimRoutes(c *irClaim, matches map[string]bool) []servedRoute {
	path := PathMatch{Kind: PathStringPrefix, Value: c.match}
	if c.route == nil {
		return []servedRoute{{route: &Route{Path: path, Source: c.owner.ref, DirectStatus: c.status}}}
	}
	r, n := c.route, c.owner
	field := routeField(r)
	out := &Route{Path: path, Source: n.ref, PrefixRewrite: r.PrefixRewrite, Clusters: b.routeClusters(n, r, field)}
	var notes []string
	out.Timeouts, out.Retry, notes = routePolicies(r, field)
	n.notes = append(n.notes, notes...)
	routes := []servedRoute{{route: out, permitInsecure: r.PermitInsecure}}
	if strings.HasSuffix(r.PrefixRewrite, "/") && !strings.HasSuffix(r.Match, "/") && !matches[r.Match+"/"] {
		slash := *out
		slash.Path.Value = r.Match + "/"
		routes = append(routes, servedRoute{route: &slash, permitInsecure: r.PermitInsecure})
	}
	return routes
}

// routeField prefixes the remarks about a route in its object's status.
func routeField(r *ingressroutev1.Route) string { return fmt.Sprintf("route %q: ", r.Match) }

// routePolicies interprets a route's timeout and retry policies (seed 002); the notes
// say which values fell back to a default. field prefixes the notes.
func routePolicies(r *ingressroutev1.Route, field string) (*TimeoutPolicy, *RetryPolicy, []string) {
	var timeouts *TimeoutPolicy
	var retry *RetryPolicy
	var notes []string
	if tp := r.TimeoutPolicy; tp != nil {
		timeouts, notes = buildTimeouts(policyInput{field + "timeoutPolicy.request", tp.Request}, policyInput{field + "timeoutPolicy.idle", tp.Idle})
	}
	if rp := r.RetryPolicy; rp != nil {
		count := policyInput{field + "retryPolicy.count", rp.Count}
		if rp.Count == nil && rp.MaxRetries != nil {
			count = policyInput{field + "retryPolicy.maxRetries", rp.MaxRetries}
		}
		var more []string
		retry, more = buildRetry(rawRetryPolicy{
			count:         count,
			statusCodes:   rp.OnStatusCodes,
			codesField:    field + "retryPolicy.onStatusCodes",
			perTryTimeout: policyInput{field + "retryPolicy.perTryTimeout", rp.PerTryTimeout},
		}, timeouts)
		notes = append(notes, more...)
	}
	return timeouts, retry, notes
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
		cluster, warn, annotations := b.serviceCluster(n.ir.Namespace, be, pol)
		for _, w := range []string{warn, annotations} {
			if w != "" {
				n.note("%s%s", field, w)
			}
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
