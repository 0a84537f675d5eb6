package gatewayapi

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
)

// portPlan collects what one port of a Gateway serves before it becomes a
// dag.GatewayPort: routes by host for HTTP, server names for HTTPS.
type portPlan struct {
	http   map[string][]routeEntry
	secure map[string]*securePlan
	// owners are the hostnames of the port's served listeners ("" for none): a host is
	// served by the most specific listener matching it (listener isolation).
	owners []string
	// seen keeps a route from being added twice to a host (two parentRefs naming the
	// same listener).
	seen map[string]map[dag.ObjectRef]bool
}

// securePlan is one server name: its certificate, its routes and the routes of the
// other hosts its listener serves; or, for a TLS listener's, the TLSRoutes that pass
// its connections through (the oldest serves them).
type securePlan struct {
	secret *dag.Secret
	more   []*dag.Secret
	routes []routeEntry
	also   map[string][]routeEntry
	tls    []*routeResult
	// tlsListener: the server name is a TLS listener's, whose connections are TCP
	// streams (passed through, or decrypted with secret), never HTTP.
	tlsListener bool
}

// dataPlane builds the data plane of a served Gateway: every served listener gets its
// host (so that a more specific listener's requests never fall through to a less
// specific one's routes, even when it has no route), and every attached route its
// hosts, routes ordered by the spec's precedence.
func dataPlane(g *gatewayResult, routes []*attachedRoute) *dag.Gateway {
	ports := map[uint32]*portPlan{}
	for _, l := range g.servedListeners() {
		if !l.usable() {
			continue
		}
		pp := ports[uint32(l.spec.Port)]
		if pp == nil {
			pp = &portPlan{http: map[string][]routeEntry{}, secure: map[string]*securePlan{}, seen: map[string]map[dag.ObjectRef]bool{}}
			ports[uint32(l.spec.Port)] = pp
		}
		pp.owners = append(pp.owners, l.hostname)
		name := hostOrAny(l.hostname)
		if l.spec.Protocol == gatewayv1.HTTPProtocolType {
			if _, ok := pp.http[name]; !ok {
				pp.http[name] = nil
			}
		} else {
			pp.secure[name] = &securePlan{secret: l.secret, more: l.more, also: map[string][]routeEntry{}, tlsListener: l.spec.Protocol == gatewayv1.TLSProtocolType}
		}
	}
	for _, r := range routes {
		for _, pr := range r.parents {
			for _, a := range pr.attachments {
				if a.gateway == g && a.listener.usable() {
					ports[uint32(a.listener.spec.Port)].add(a, r.result)
				}
			}
		}
	}
	out := &dag.Gateway{Name: g.key}
	for _, port := range slices.Sorted(maps.Keys(ports)) {
		out.Ports = append(out.Ports, ports[port].build(g.key, port))
	}
	return out
}

func hostOrAny(h string) string {
	if h == "" {
		return "*"
	}
	return h
}

// add puts a route's entries on the hosts the attachment serves that its listener owns.
func (pp *portPlan) add(a attachment, r *routeResult) {
	for _, host := range a.hosts {
		owner, ok := ownerHostname(pp.owners, host)
		if !ok || owner != a.listener.hostname {
			continue // a more specific listener serves this host
		}
		if pp.seen[host] == nil {
			pp.seen[host] = map[dag.ObjectRef]bool{}
		}
		if pp.seen[host][r.ref] {
			continue
		}
		pp.seen[host][r.ref] = true
		entries := withHostRank(redirectOnPort(r.entries, uint32(a.listener.spec.Port)), rankHostname(r.hostnames, host))
		switch a.listener.spec.Protocol {
		case gatewayv1.HTTPProtocolType:
			pp.http[host] = append(pp.http[host], entries...)
			continue
		case gatewayv1.TLSProtocolType:
			sp := pp.secure[host]
			if sp == nil {
				sp = &securePlan{secret: a.listener.secret, more: a.listener.more, also: map[string][]routeEntry{}, tlsListener: true}
				pp.secure[host] = sp
			}
			sp.tls = append(sp.tls, r)
			continue
		}
		sp := pp.secure[hostOrAny(a.listener.hostname)]
		if host == hostOrAny(a.listener.hostname) {
			sp.routes = append(sp.routes, entries...)
		} else {
			sp.also[host] = append(sp.also[host], entries...)
		}
	}
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

// build returns the port's hosts, ordered by name, each host's routes by precedence.
// A TLS listener's server name without a TLSRoute closes its connections rather than
// leaving them to a hostname-less HTTPS listener of the port (listener isolation).
func (pp *portPlan) build(gw types.NamespacedName, port uint32) *dag.GatewayPort {
	out := &dag.GatewayPort{Port: port}
	for _, host := range slices.Sorted(maps.Keys(pp.http)) {
		out.HTTP = append(out.HTTP, virtualHost(host, pp.http[host]))
	}
	for _, name := range slices.Sorted(maps.Keys(pp.secure)) {
		sp := pp.secure[name]
		svh := &dag.SecureVirtualHost{VirtualHost: *virtualHost(name, sp.routes), Secret: sp.secret, MoreSecrets: sp.more}
		switch {
		case len(sp.tls) > 0:
			svh.Passthrough, svh.TCPProxy = sp.secret == nil, passthrough(gw, port, name, sp.secret != nil, sp.tls)
		case sp.tlsListener:
			svh.Passthrough, svh.TCPProxy = sp.secret == nil, closedProxy(gw, port)
		}
		for _, host := range slices.Sorted(maps.Keys(sp.also)) {
			svh.Also = append(svh.Also, virtualHost(host, sp.also[host]))
		}
		out.HTTPS = append(out.HTTPS, svh)
	}
	slices.SortFunc(out.HTTPS, func(a, b *dag.SecureVirtualHost) int { return cmp.Compare(a.Name, b.Name) })
	return out
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
func passthrough(gw types.NamespacedName, port uint32, host string, terminates bool, routes []*routeResult) *dag.TCPProxy {
	best := slices.MinFunc(routes, func(a, b *routeResult) int {
		ra, rb := rankHostname(a.hostnames, host), rankHostname(b.hostnames, host)
		if c := cmp.Compare(rb.exact, ra.exact); c != 0 {
			return c
		}
		if c := cmp.Compare(rb.chars, ra.chars); c != 0 {
			return c
		}
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return dag.CompareObjectRefs(a.ref, b.ref)
	})
	clusters := best.tcp
	if terminates && best.reencrypted != nil {
		if len(best.reencrypted) == 0 {
			return closedProxy(gw, port)
		}
		clusters = best.reencrypted
	}
	return &dag.TCPProxy{Clusters: clusters, Source: best.ref}
}
