package gatewayapi

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
)

// plane is the data plane of one served Gateway while routes are added to and removed
// from it: what each route contributes to each host of each port, and the hosts as last
// built. A route's change builds again only the hosts it contributes to; the others
// keep their virtual hosts, pointer for pointer, which the translator reuses.
type plane struct {
	g     *gatewayResult
	ports map[uint32]*portPlan
	out   *dag.Gateway
}

// portPlan is what one port of a Gateway serves: routes by host for HTTP, server names
// for HTTPS and TLS.
type portPlan struct {
	port uint32
	// owners are the hostnames of the port's served listeners ("" for none): a host is
	// served by the most specific listener matching it (listener isolation).
	owners []string
	http   map[string]*hostPlan
	secure map[string]*securePlan
	// dirtyHTTP and dirtySecure are the hosts and server names to build again.
	dirtyHTTP, dirtySecure map[string]struct{}
	out                    *dag.GatewayPort
}

// hostPlan is one host's routes, by route (a route adds a host once, however many of
// its parentRefs lead there), and its virtual host as last built.
type hostPlan struct {
	routes routeSet[[]routeEntry]
	// listener: the host of a served listener, served even without routes, so that a
	// more specific listener's requests never fall through to a less specific one's.
	listener bool
	vh       *dag.VirtualHost
}

// securePlan is one server name: its certificate, its routes and the routes of the
// other hosts its listener serves; or, for a TLS listener's, the TLSRoutes that pass
// its connections through (the oldest serves them).
type securePlan struct {
	secret  *dag.Secret
	more    []*dag.Secret
	clients *dag.ClientValidation
	// tlsListener: the server name is a TLS listener's, whose connections are TCP
	// streams (passed through, or decrypted with secret), never HTTP.
	tlsListener bool
	// listener: the server name of a served listener (else a TLSRoute's hostname under
	// a TLS listener's wildcard, gone with its last route).
	listener  bool
	routes    routeSet[[]routeEntry]
	also      map[string]*hostPlan
	dirtyAlso map[string]struct{}
	tls       routeSet[*routeResult]
	// misdirected answer 421 for the hosts other listeners of the port serve (a client
	// that reuses a connection for another host, as HTTP/2 clients do, must open one
	// with that host's server name); alsoOut are the Also hosts as last patched.
	misdirected []*dag.VirtualHost
	alsoOut     []*dag.VirtualHost
	out         *dag.SecureVirtualHost
}

// slot is where a route's entries were put: a host of an HTTP port, the server name of
// an HTTPS listener or another host it serves (also), or a TLS server name.
type slot struct {
	port *portPlan
	kind slotKind
	name string // the host, or the server name
	also string // slotAlso: the host under the server name
}

type slotKind uint8

const (
	slotHTTP slotKind = iota
	slotSecure
	slotAlso
	slotTLS
)

// newPlane is the data plane of a served Gateway without routes: every served listener
// has its host.
func newPlane(g *gatewayResult) *plane {
	pl := &plane{g: g, ports: map[uint32]*portPlan{}}
	for _, l := range g.servedListeners() {
		if !l.usable() {
			continue
		}
		port := uint32(l.spec.Port)
		pp := pl.ports[port]
		if pp == nil {
			pp = &portPlan{port: port, http: map[string]*hostPlan{}, secure: map[string]*securePlan{},
				dirtyHTTP: map[string]struct{}{}, dirtySecure: map[string]struct{}{}}
			pl.ports[port] = pp
		}
		pp.owners = append(pp.owners, l.hostname)
		name := hostOrAny(l.hostname)
		if l.spec.Protocol == gatewayv1.HTTPProtocolType {
			if pp.http[name] == nil {
				pp.http[name] = &hostPlan{}
			}
			pp.http[name].listener = true
			pp.dirtyHTTP[name] = struct{}{}
		} else {
			pp.secure[name] = newSecurePlan(l, true)
			pp.dirtySecure[name] = struct{}{}
		}
	}
	for _, pp := range pl.ports {
		for name, sp := range pp.secure {
			if !sp.tlsListener {
				sp.misdirected = misdirectedHosts(g.key, name, pp.owners)
			}
		}
	}
	return pl
}

// misdirectedHosts are the virtual hosts that answer 421 Misdirected Request on the
// server name name (an HTTPS listener's hostname, or "*") for the hostnames of the
// port's other listeners (owners) within it: every one under "*", the more specific
// ones under a wildcard. A request whose Host another listener serves is never routed
// by its connection's listener. (The translator answers 421 to the hosts outside a
// server name with a hostname: httpsRouteConfig.)
func misdirectedHosts(gw types.NamespacedName, name string, owners []string) []*dag.VirtualHost {
	var out []*dag.VirtualHost
	seen := map[string]bool{name: true}
	add := func(host string) {
		if seen[host] {
			return
		}
		seen[host] = true
		out = append(out, &dag.VirtualHost{Name: host, Routes: []*dag.Route{{
			Path: dag.PathMatch{Kind: dag.PathPrefix, Value: "/"}, DirectStatus: http.StatusMisdirectedRequest,
			Source: dag.ObjectRef{Kind: dag.KindGateway, Namespace: gw.Namespace, Name: gw.Name},
		}}})
	}
	for _, h := range owners {
		other := hostOrAny(h)
		if other != "*" && (name == "*" || hostMatches(name, other)) {
			add(other)
		}
	}
	slices.SortFunc(out, func(a, b *dag.VirtualHost) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func newSecurePlan(l *listenerState, listener bool) *securePlan {
	return &securePlan{secret: l.secret, more: l.more, clients: l.clients, tlsListener: l.spec.Protocol == gatewayv1.TLSProtocolType, listener: listener,
		also: map[string]*hostPlan{}, dirtyAlso: map[string]struct{}{}}
}

func hostOrAny(h string) string {
	if h == "" {
		return "*"
	}
	return h
}

// add puts a route's entries on the hosts an attachment to a usable listener of the
// plane's Gateway serves that its listener owns, returning where they went.
func (pl *plane) add(a attachment, r *routeResult, slots []slot) []slot {
	pp := pl.ports[uint32(a.listener.spec.Port)]
	for _, host := range a.hosts {
		owner, ok := ownerHostname(pp.owners, host)
		if !ok || owner != a.listener.hostname {
			continue // a more specific listener serves this host
		}
		var s slot
		switch a.listener.spec.Protocol {
		case gatewayv1.HTTPProtocolType:
			s = slot{port: pp, kind: slotHTTP, name: host}
		case gatewayv1.TLSProtocolType:
			s = slot{port: pp, kind: slotTLS, name: host}
		default:
			s = slot{port: pp, kind: slotSecure, name: hostOrAny(a.listener.hostname)}
			if host != s.name {
				s.kind, s.also = slotAlso, host
			}
		}
		if pp.put(s, a.listener, r) {
			slots = append(slots, s)
		}
	}
	return slots
}

// put adds r's entries to s, unless r is there already; it reports whether it added.
func (pp *portPlan) put(s slot, l *listenerState, r *routeResult) bool {
	switch s.kind {
	case slotHTTP:
		hp := pp.http[s.name]
		if hp == nil {
			hp = &hostPlan{}
			pp.http[s.name] = hp
		}
		if !hp.routes.add(r.ref, func() []routeEntry { return pp.entriesOn(r, s.name) }) {
			return false
		}
		pp.dirtyHTTP[s.name] = struct{}{}
		return true
	case slotTLS:
		sp := pp.secure[s.name]
		if sp == nil {
			sp = newSecurePlan(l, false)
			pp.secure[s.name] = sp
		}
		if !sp.tls.add(r.ref, func() *routeResult { return r }) {
			return false
		}
	case slotSecure:
		if !pp.secure[s.name].routes.add(r.ref, func() []routeEntry { return pp.entriesOn(r, s.name) }) {
			return false
		}
	case slotAlso:
		sp := pp.secure[s.name]
		hp := sp.also[s.also]
		if hp == nil {
			hp = &hostPlan{}
			sp.also[s.also] = hp
		}
		if !hp.routes.add(r.ref, func() []routeEntry { return pp.entriesOn(r, s.also) }) {
			return false
		}
		sp.dirtyAlso[s.also] = struct{}{}
	}
	pp.dirtySecure[s.name] = struct{}{}
	return true
}

// remove takes route ref's entries out of the slots add returned: a host or server name
// that no listener has and no route serves any more goes.
func remove(ref dag.ObjectRef, slots []slot) {
	for _, s := range slots {
		pp := s.port
		switch s.kind {
		case slotHTTP:
			hp := pp.http[s.name]
			hp.routes.remove(ref)
			if len(hp.routes.items) == 0 && !hp.listener {
				delete(pp.http, s.name)
			}
			pp.dirtyHTTP[s.name] = struct{}{}
			continue
		case slotTLS:
			sp := pp.secure[s.name]
			sp.tls.remove(ref)
			if len(sp.tls.items) == 0 && !sp.listener {
				delete(pp.secure, s.name)
			}
		case slotSecure:
			pp.secure[s.name].routes.remove(ref)
		case slotAlso:
			sp := pp.secure[s.name]
			hp := sp.also[s.also]
			hp.routes.remove(ref)
			if len(hp.routes.items) == 0 {
				delete(sp.also, s.also)
			}
			sp.dirtyAlso[s.also] = struct{}{}
		}
		pp.dirtySecure[s.name] = struct{}{}
	}
}

// entriesOn are r's entries as served for host on the port: their redirects that keep
// the listener's port sent to it, ranked by the route's own hostname that matches host.
func (pp *portPlan) entriesOn(r *routeResult, host string) []routeEntry {
	return withHostRank(redirectOnPort(r.entries, pp.port), rankHostname(r.hostnames, host))
}

// withHostRank returns entries ranked rank on the host they are added to: copies when
// the rank is not the zero one, the entries being shared by every host of the route.
func withHostRank(entries []routeEntry, rank hostnameRank) []routeEntry {
	if rank == (hostnameRank{}) {
		return entries
	}
	out := slices.Clone(entries)
	for i := range out {
		out[i].host = rank
	}
	return out
}

// redirectOnPort returns entries with the redirects that keep the listener's port
// (neither scheme nor port given) sent to port: copies, the entries being shared by
// every listener the route attaches to.
func redirectOnPort(entries []routeEntry, port uint32) []routeEntry {
	if !slices.ContainsFunc(entries, func(e routeEntry) bool { return e.listenerPort }) {
		return entries
	}
	out := slices.Clone(entries)
	for i, e := range out {
		if e.listenerPort {
			r, rd := *e.route, *e.route.Redirect
			rd.Port = port
			r.Redirect = &rd
			out[i].route = &r
		}
	}
	return out
}

// build returns the Gateway's data plane, building again the hosts that changed: the
// ports in ascending order, each port's hosts ordered by name, each host's routes by
// precedence. It is the previous one (the same pointer) when nothing changed.
func (pl *plane) build() *dag.Gateway {
	ports := slices.Sorted(maps.Keys(pl.ports))
	changed := pl.out == nil
	for _, port := range ports {
		if pp := pl.ports[port]; pp.out == nil || len(pp.dirtyHTTP) > 0 || len(pp.dirtySecure) > 0 {
			pp.build(pl.g.key)
			changed = true
		}
	}
	if !changed {
		return pl.out
	}
	pl.out = &dag.Gateway{Name: pl.g.key}
	for _, port := range ports {
		pl.out.Ports = append(pl.out.Ports, pl.ports[port].out)
	}
	return pl.out
}

// build makes the port's dag.GatewayPort again from the previous one, with its dirty
// hosts and server names built again. A TLS listener's server name without a TLSRoute
// closes its connections rather than leaving them to a hostname-less HTTPS listener of
// the port (listener isolation).
func (pp *portPlan) build(gw types.NamespacedName) {
	out := &dag.GatewayPort{Port: pp.port}
	var prevHTTP []*dag.VirtualHost
	var prevHTTPS []*dag.SecureVirtualHost
	if pp.out != nil {
		prevHTTP, prevHTTPS = pp.out.HTTP, pp.out.HTTPS
	}
	out.HTTP = patchSorted(prevHTTP, pp.dirtyHTTP, vhostName, buildHost(pp.http))
	out.HTTPS = patchSorted(prevHTTPS, pp.dirtySecure, func(svh *dag.SecureVirtualHost) string { return svh.Name }, func(name string) (*dag.SecureVirtualHost, bool) {
		sp := pp.secure[name]
		if sp == nil {
			return nil, false
		}
		sp.build(name, gw, pp.port)
		return sp.out, true
	})
	clear(pp.dirtyHTTP)
	clear(pp.dirtySecure)
	pp.out = out
}

// build makes the server name's secure virtual host again, its Also hosts that did not
// change kept.
func (sp *securePlan) build(name string, gw types.NamespacedName, port uint32) {
	svh := &dag.SecureVirtualHost{VirtualHost: *virtualHost(name, entriesOf(sp.routes)), Secret: sp.secret, MoreSecrets: sp.more, ClientValidation: sp.clients}
	switch {
	case len(sp.tls.items) > 0:
		svh.Passthrough, svh.TCPProxy = sp.secret == nil, passthrough(gw, port, name, sp.secret != nil, sp.tls)
	case sp.tlsListener:
		svh.Passthrough, svh.TCPProxy = sp.secret == nil, closedProxy(gw, port)
	}
	sp.alsoOut = patchSorted(sp.alsoOut, sp.dirtyAlso, vhostName, buildHost(sp.also))
	svh.Also = sp.alsoOut
	if len(sp.misdirected) > 0 {
		svh.Also = slices.SortedFunc(slices.Values(slices.Concat(sp.alsoOut, sp.misdirected)),
			func(a, b *dag.VirtualHost) int { return strings.Compare(a.Name, b.Name) })
	}
	clear(sp.dirtyAlso)
	sp.out = svh
}

// patchSorted returns prev (ordered by name) with the elements named in dirty made
// again by remake, which says false for one that is gone: a new list, prev being kept
// by the graph that holds it. Without dirty names it is prev itself; nil when empty.
func patchSorted[T any](prev []T, dirty map[string]struct{}, name func(T) string, remake func(string) (T, bool)) []T {
	if len(dirty) == 0 {
		return prev
	}
	names := slices.Sorted(maps.Keys(dirty))
	var out []T
	if n := len(prev) + len(names); n > 0 {
		out = slices.Grow(out, n)
	}
	i := 0
	for _, n := range names {
		j, _ := slices.BinarySearchFunc(prev[i:], n, func(e T, n string) int { return strings.Compare(name(e), n) })
		out = append(out, prev[i:i+j]...)
		i += j
		if i < len(prev) && name(prev[i]) == n {
			i++ // made again, or gone
		}
		if e, ok := remake(n); ok {
			out = append(out, e)
		}
	}
	out = append(out, prev[i:]...)
	if len(out) == 0 {
		return nil
	}
	return out
}

func vhostName(vh *dag.VirtualHost) string { return vh.Name }

// buildHost builds the virtual host of a host of hosts again; false for one that is
// gone.
func buildHost(hosts map[string]*hostPlan) func(string) (*dag.VirtualHost, bool) {
	return func(name string) (*dag.VirtualHost, bool) {
		hp := hosts[name]
		if hp == nil {
			return nil, false
		}
		hp.vh = virtualHost(name, hp.entries())
		return hp.vh, true
	}
}

// entries are the host's routes' entries (each route's in its order), to be sorted.
func (hp *hostPlan) entries() []routeEntry { return entriesOf(hp.routes) }

func entriesOf(byRoute routeSet[[]routeEntry]) []routeEntry {
	n := 0
	for _, it := range byRoute.items {
		n += len(it.v)
	}
	out := make([]routeEntry, 0, n)
	for _, it := range byRoute.items {
		out = append(out, it.v...)
	}
	return out
}

// routeSet holds a value per route: a list while it is short (most hosts have one
// route), indexed once it grows, so that a host with thousands of routes (a listener's
// catch-all) adds and removes one in constant time. Its order means nothing.
type routeSet[V any] struct {
	items []routeItem[V]
	index map[dag.ObjectRef]int // nil while items are few
}

type routeItem[V any] struct {
	ref dag.ObjectRef
	v   V
}

// routeSetIndexed is the length from which a routeSet is indexed.
const routeSetIndexed = 8

func (rs *routeSet[V]) find(ref dag.ObjectRef) int {
	if rs.index != nil {
		if i, ok := rs.index[ref]; ok {
			return i
		}
		return -1
	}
	return slices.IndexFunc(rs.items, func(it routeItem[V]) bool { return it.ref == ref })
}

// add adds ref's value, made by value, unless ref has one; it reports whether it added.
func (rs *routeSet[V]) add(ref dag.ObjectRef, value func() V) bool {
	if rs.find(ref) >= 0 {
		return false
	}
	rs.items = append(rs.items, routeItem[V]{ref, value()})
	switch {
	case rs.index != nil:
		rs.index[ref] = len(rs.items) - 1
	case len(rs.items) >= routeSetIndexed:
		rs.index = make(map[dag.ObjectRef]int, len(rs.items))
		for i, it := range rs.items {
			rs.index[it.ref] = i
		}
	}
	return true
}

// remove removes ref's value, the last one taking its place.
func (rs *routeSet[V]) remove(ref dag.ObjectRef) {
	i := rs.find(ref)
	if i < 0 {
		return
	}
	last := len(rs.items) - 1
	rs.items[i] = rs.items[last]
	rs.items[last] = routeItem[V]{}
	rs.items = rs.items[:last]
	if rs.index != nil {
		delete(rs.index, ref)
		if i < last {
			rs.index[rs.items[i].ref] = i
		}
	}
}

func virtualHost(name string, entries []routeEntry) *dag.VirtualHost {
	sortByPrecedence(entries)
	vh := &dag.VirtualHost{Name: name, Routes: make([]*dag.Route, len(entries))}
	for i, e := range entries {
		vh.Routes[i] = e.route
	}
	return vh
}

// closedProxy is the TCP proxy of a TLS listener's server name that no TLSRoute
// serves: to a cluster without endpoints, so that both data planes close the
// connection. Its name cannot be a Service's (Service names have no dots).
func closedProxy(gw types.NamespacedName, port uint32) *dag.TCPProxy {
	c := &dag.Cluster{Name: fmt.Sprintf("%s/%s.no-route/%d", gw.Namespace, gw.Name, port), Service: types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name + ".no-route"}, Port: int32(port)}
	return &dag.TCPProxy{Clusters: []*dag.WeightedCluster{{Cluster: c, Weight: 1}}, Source: dag.ObjectRef{Kind: dag.KindGateway, Namespace: gw.Namespace, Name: gw.Name}}
}

// passthrough is the TCP proxy of server name host: of the TLSRoutes that want it, the
// one whose own hostname matches it most precisely (as for HTTP routes, hostnameRank),
// then the oldest, then by namespace/name. Where the listener terminates TLS, its
// backends are those a BackendTLSPolicy re-encrypts to, if any.
func passthrough(gw types.NamespacedName, port uint32, host string, terminates bool, routes routeSet[*routeResult]) *dag.TCPProxy {
	best := slices.MinFunc(routes.items, func(a, b routeItem[*routeResult]) int {
		ra, rb := rankHostname(a.v.hostnames, host), rankHostname(b.v.hostnames, host)
		if c := cmp.Compare(rb.exact, ra.exact); c != 0 {
			return c
		}
		if c := cmp.Compare(rb.chars, ra.chars); c != 0 {
			return c
		}
		if c := a.v.created.Compare(b.v.created); c != 0 {
			return c
		}
		return dag.CompareObjectRefs(a.ref, b.ref)
	}).v
	clusters := best.tcp
	if terminates && best.reencrypted != nil {
		if len(best.reencrypted) == 0 {
			return closedProxy(gw, port)
		}
		clusters = best.reencrypted
	}
	return &dag.TCPProxy{Clusters: clusters, Source: best.ref}
}
