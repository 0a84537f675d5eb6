package translate

import (
	"fmt"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
	k8stypes "k8s.io/apimachinery/pkg/types"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/parallel"
)

// Incremental translates a sequence of graphs, translating again only the parts of
// each graph that are new: a virtual host, secure virtual host or cluster that is the
// same pointer as in the previous graph (dag.Incremental keeps them so) reuses its
// translation. A resource whose content did not change is returned as the same pointer
// as before, which lets the xDS server find what changed without comparing everything.
// The result holds the resources Translate returns for the same graph (the property test
// in incremental_test.go checks it), with clusters and load assignments ordered by name
// instead of by first reference; only the work differs.
//
// The graph's hosts are ordered by name, so the previous graph's hosts are matched with
// the new ones in one walk of both lists, without hashing; clusters are counted by the
// hosts that use them, so a change visits only the clusters of the hosts it replaced.
//
// Not safe for concurrent use.
type Incremental struct {
	opts Options

	http   []hostEntry[*dag.VirtualHost, *vhostEntry]
	secure []hostEntry[*dag.SecureVirtualHost, *secureEntry]
	// httpSpare and secureSpare are the arrays of the lists before, empty, which the
	// next walk fills (no other reference to them remains).
	httpSpare   []hostEntry[*dag.VirtualHost, *vhostEntry]
	secureSpare []hostEntry[*dag.SecureVirtualHost, *secureEntry]

	// clusters holds the clusters in use, one entry per name; order holds the same
	// entries sorted by name. byCluster finds the entry from any of the graph's copies of
	// a cluster without hashing the name.
	clusters  map[string]*clusterEntry
	order     []*clusterEntry
	byCluster map[*dag.Cluster]*clusterUse

	// lastClusters and lastEndpoints are the lists the last call returned. They are
	// returned again while their elements stay the same, and never modified: the server
	// keeps them.
	lastClusters  []types.Resource
	lastEndpoints []types.Resource

	httpListener  *listenerv3.Listener
	httpsShell    *listenerv3.Listener // the HTTPS listener without filter chains
	httpRoutes    *routev3.RouteConfiguration
	httpsListener *listenerv3.Listener

	// gateways are the translations of the last graph's Gateways, by name
	// (incremental_gateway.go).
	gateways map[k8stypes.NamespacedName]*gatewayEntry

	// pre holds the call's translations made ahead, in parallel, when many hosts or
	// clusters are new (nil otherwise, and between calls).
	pre *pretranslated

	// listenerClusters are the clusters the connection managers' filters use (the
	// rate limit service's), held for as long as t; listenerUses is their use, nil
	// after forget.
	listenerClusters []*dag.Cluster
	listenerUses     []*clusterUse
	// httpAddr is the plain listener's address; extensionUses are the use of the
	// clusters of opts.extensions (the graph's), nil after forget.
	httpAddr      hostPort
	extensionUses []*clusterUse

	// clientSource is the graph's client certificate that clientSecret translates
	// (clientcert_upstream.go): kept while the graph's is the same.
	clientSource *dag.Secret
	clientSecret *tlsv3.Secret

	// Retranslated counts the virtual hosts, secure virtual hosts and clusters translated
	// by the last call (not reused), for tests and benchmarks.
	Retranslated int
}

// hostEntry is one host of the previous graph and its translation.
type hostEntry[H any, E any] struct {
	host  H
	entry E
}

type vhostEntry struct {
	fallback *dag.VirtualHost
	out      *routev3.VirtualHost
	uses     []*clusterUse
}

type secureEntry struct {
	routes *routev3.RouteConfiguration // nil unless the host serves HTTP
	chain  *listenerv3.FilterChain     // nil when the host has no filter chain
	secret *tlsv3.Secret               // nil unless the host terminates TLS
	more   []*tlsv3.Secret             // a Gateway listener's further certificates
	uses   []*clusterUse
}

type clusterEntry struct {
	name    string
	cluster *clusterv3.Cluster
	cla     *endpointv3.ClusterLoadAssignment
	refs    int // routes (and TCP proxies) of the current hosts using it
}

// clusterUse ties one graph's cluster to the entry of its name.
type clusterUse struct {
	src   *dag.Cluster
	entry *clusterEntry
	refs  int
}

// NewIncremental returns a translator for opts. It fails when the listener addresses
// are invalid, as Translate would on every call.
func NewIncremental(opts Options) (*Incremental, error) {
	opts = opts.withDefaults()
	if err := CheckMaxRequestHeadersKB(opts.MaxRequestHeadersKB); err != nil {
		return nil, err
	}
	if err := CheckRateLimitService(opts.RateLimit); err != nil {
		return nil, err
	}
	httpAddr, err := socketAddress(opts.HTTPAddress)
	if err != nil {
		return nil, fmt.Errorf("http address: %w", err)
	}
	httpsAddr, err := socketAddress(opts.HTTPSAddress)
	if err != nil {
		return nil, fmt.Errorf("https address: %w", err)
	}
	t := &Incremental{opts: opts, httpAddr: httpAddr}
	if c := rateLimitCluster(opts.RateLimit); c != nil {
		t.listenerClusters = []*dag.Cluster{c}
	}
	t.forget()
	err = recoverInvalid(func() error {
		t.httpListener = httpListener(httpAddr, opts)
		t.httpsShell = httpsListener(httpsAddr, opts.Global)
		return validateAll(t.httpListener, t.httpsShell, routeConfiguration(RouteHTTP, nil, opts.Global))
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// setExtensions makes ext the installation's extensions. When the connection
// managers' filters change with them (a timeout of the ExtensionService, one created),
// everything is translated again: every connection manager has those filters. Changes
// rare enough (an operator's edit) not to deserve finer work.
func (t *Incremental) setExtensions(ext *dag.Extensions) error {
	next := t.opts
	next.extensions = ext
	if !sameFilters(httpFilterChain(nil, t.opts), httpFilterChain(nil, next)) {
		l := httpListener(t.httpAddr, next)
		if err := validateAll(l); err != nil {
			return err
		}
		t.forget()
		t.httpListener = l
	} else if t.extensionUses != nil {
		t.release(t.extensionUses)
		t.extensionUses = nil
	}
	t.opts = next
	return nil
}

// sameFilters reports whether two connection managers' filters are the same.
func sameFilters(a, b []*hcmv3.HttpFilter) bool {
	return slices.EqualFunc(a, b, func(x, y *hcmv3.HttpFilter) bool { return proto.Equal(x, y) })
}

// forget drops every translation, so that the next call translates everything.
func (t *Incremental) forget() {
	t.http, t.secure, t.order = nil, nil, nil
	t.lastClusters, t.lastEndpoints = nil, nil
	t.httpSpare, t.secureSpare = nil, nil
	t.clusters, t.byCluster = map[string]*clusterEntry{}, map[*dag.Cluster]*clusterUse{}
	t.httpRoutes, t.httpsListener = nil, nil
	t.gateways = nil
	t.listenerUses = nil
	t.extensionUses = nil
}

// Translate converts g, as Translate(g, opts) does.
func (t *Incremental) Translate(g *dag.Graph) (res *Resources, err error) {
	t.Retranslated = 0
	defer func() { t.pre = nil }()
	if name := clientSecretName(g); name != t.opts.clientSecret {
		// Every cluster with upstream TLS starts or stops naming it.
		t.forget()
		t.opts.clientSecret = name
	}
	err = recoverInvalid(func() error {
		if g.Extensions != t.opts.extensions {
			if err := t.setExtensions(g.Extensions); err != nil {
				return err
			}
		}
		var err error
		if t.pre, err = t.pretranslate(g); err != nil {
			return err
		}
		if t.listenerUses == nil && len(t.listenerClusters) > 0 {
			t.listenerUses = t.use(t.listenerClusters)
		}
		if t.extensionUses == nil {
			t.extensionUses = t.use(g.Extensions.Clusters())
		}
		res = &Resources{Listeners: []types.Resource{t.httpListener}}
		routes, err := t.httpRouteConfig(g.HTTP)
		if err != nil {
			return err
		}
		res.Routes = append(res.Routes, routes)
		if err := t.secureHosts(g.HTTPS, res); err != nil {
			return err
		}
		if err := t.gatewayResources(g.Gateways, res); err != nil {
			return err
		}
		t.clusterResources(res)
		m, err := t.clientCertificate(g.UpstreamClientCertificate)
		if err != nil {
			return err
		}
		addClientSecret(res, m)
		return nil
	})
	if err != nil {
		// A failed call leaves the entries half updated: start again from nothing.
		t.forget()
		return nil, err
	}
	return res, nil
}

// recoverInvalid runs f, turning mustAny's panic on an invalid packed message (and any
// other translator panic) into an error, as Translate does.
func recoverInvalid(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if p, ok := r.(*parallel.Panic); ok {
				r = p.Value // a step of a parallel translation
			}
			switch inv := r.(type) {
			case invalidPacked:
				err = fmt.Errorf("translator produced an invalid %T: %w", inv.msg, inv.err)
				return
			case invalidResource:
				err = inv.err
				return
			}
			err = fmt.Errorf("translator bug (please report it): %v", r)
		}
	}()
	return f()
}

// invalidResource is the panic value for a resource that does not validate, where the
// error cannot be returned; err is validateAll's.
type invalidResource struct{ err error }

func validateAll(msgs ...validatable) error {
	for _, m := range msgs {
		if err := m.ValidateAll(); err != nil {
			return fmt.Errorf("translator produced an invalid %T: %w", m, err)
		}
	}
	return nil
}

// walkHosts matches hosts (ordered by name) with the previous call's entries: a host
// that is the same pointer keeps its entry when keep says so, any other is made by build,
// given the previous entry of the same name if there is one (old, else the zero E);
// previous entries left over are released. It returns the new entries, in hosts' order,
// in spare's array when it is large enough (spare must not share prev's).
func walkHosts[H interface{ comparable }, E any](prev, spare []hostEntry[H, E], hosts []H, name func(H) string,
	keep func(H, E) bool, build func(h H, old E) (E, error), release func(E)) ([]hostEntry[H, E], error) {
	out := spare[:0]
	if cap(out) < len(hosts) {
		out = make([]hostEntry[H, E], 0, len(hosts)+len(hosts)/8)
	}
	j := 0
	for _, h := range hosts {
		for j < len(prev) && name(prev[j].host) < name(h) {
			release(prev[j].entry)
			j++
		}
		if j < len(prev) && prev[j].host == h && keep(h, prev[j].entry) {
			out = append(out, prev[j])
			j++
			continue
		}
		// The new entry is made before the old one of the same name is released, so that
		// the clusters they share stay in use and keep their published resources.
		var old E
		sameName := j < len(prev) && name(prev[j].host) == name(h)
		if sameName {
			old = prev[j].entry
		}
		e, err := build(h, old)
		if err != nil {
			return nil, err
		}
		if sameName {
			release(old)
			j++
		}
		out = append(out, hostEntry[H, E]{host: h, entry: e})
	}
	for ; j < len(prev); j++ {
		release(prev[j].entry)
	}
	return out, nil
}

// keepVirtualHost says whether a host's entry can be kept: its translation depends on
// the catch-all host too.
func keepVirtualHost(fallback *dag.VirtualHost) func(*dag.VirtualHost, *vhostEntry) bool {
	return func(_ *dag.VirtualHost, e *vhostEntry) bool { return e.fallback == fallback }
}

func keepSecureHost(*dag.SecureVirtualHost, *secureEntry) bool { return true }

func vhostName(vh *dag.VirtualHost) string         { return vh.Name }
func secureName(svh *dag.SecureVirtualHost) string { return svh.Name }

func (t *Incremental) httpRouteConfig(hosts []*dag.VirtualHost) (*routev3.RouteConfiguration, error) {
	fallback := catchAllVirtualHost(hosts)
	next, err := walkHosts(t.http, t.httpSpare, hosts, vhostName,
		keepVirtualHost(fallback),
		func(vh *dag.VirtualHost, old *vhostEntry) (*vhostEntry, error) {
			tr := t.pre.vhost(vh)
			if tr == nil {
				tr = virtualHost(vh, fallback, t.opts)
				if err := validateAll(tr); err != nil {
					return nil, err
				}
			}
			t.Retranslated++
			// A host rebuilt for a change that did not reach its routes (its Service's
			// endpoints moved) keeps the virtual host already published, and so the route
			// configuration: nothing is sent for it.
			if old != nil && proto.Equal(old.out, tr) {
				tr = old.out
			}
			return &vhostEntry{fallback: fallback, out: tr, uses: t.use(routeClusters(vh.Routes))}, nil
		},
		func(e *vhostEntry) { t.release(e.uses) })
	if err != nil {
		return nil, err
	}
	t.http, t.httpSpare = next, recycle(t.http)
	if !sameVirtualHosts(t.httpRoutes, next) {
		out := make([]*routev3.VirtualHost, len(next))
		for i, h := range next {
			out[i] = h.entry.out
		}
		t.httpRoutes = routeConfiguration(RouteHTTP, out, t.opts.Global)
	}
	return t.httpRoutes, nil
}

// sameVirtualHosts reports whether rc, published before, holds the translations of
// hosts already: then it is published again as it is.
func sameVirtualHosts(rc *routev3.RouteConfiguration, hosts []hostEntry[*dag.VirtualHost, *vhostEntry]) bool {
	if rc == nil || len(rc.VirtualHosts) != len(hosts) {
		return false
	}
	for i, h := range hosts {
		if rc.VirtualHosts[i] != h.entry.out {
			return false
		}
	}
	return true
}

// recycle empties a list of entries no longer used, keeping its array for the next
// walk: the walk over 10,000 hosts then allocates nothing.
func recycle[H any, E any](entries []hostEntry[H, E]) []hostEntry[H, E] {
	clear(entries) // drop the references to released entries
	return entries[:0]
}

func routeClusters(routes []*dag.Route) []*dag.Cluster {
	var out []*dag.Cluster
	for _, r := range routes {
		for _, wc := range r.Clusters {
			out = append(out, wc.Cluster)
		}
		for _, m := range r.Mirrors {
			out = append(out, m.Cluster)
		}
	}
	return out
}

func (t *Incremental) secureHosts(hosts []*dag.SecureVirtualHost, res *Resources) error {
	next, err := walkHosts(t.secure, t.secureSpare, hosts, secureName,
		keepSecureHost,
		t.secureEntry,
		func(e *secureEntry) { t.release(e.uses) })
	if err != nil {
		return err
	}
	t.secure, t.secureSpare = next, recycle(t.secure)
	if len(hosts) == 0 {
		return nil // no HTTPS listener, as in Translate
	}
	chains := make([]*listenerv3.FilterChain, 0, len(next))
	secrets := map[string]bool{}
	for _, h := range next {
		e := h.entry
		if e.routes != nil {
			res.Routes = append(res.Routes, e.routes)
		}
		if e.secret != nil && !secrets[e.secret.Name] {
			secrets[e.secret.Name] = true
			res.Secrets = append(res.Secrets, e.secret)
		}
		if e.chain != nil {
			chains = append(chains, e.chain)
		}
	}
	if t.httpsListener == nil || !slices.Equal(chains, t.httpsListener.FilterChains) {
		l := proto.Clone(t.httpsShell).(*listenerv3.Listener)
		l.FilterChains = chains
		t.httpsListener = l
	}
	res.Listeners = append(res.Listeners, t.httpsListener)
	return nil
}

func (t *Incremental) secureEntry(svh *dag.SecureVirtualHost, old *secureEntry) (*secureEntry, error) {
	h, ok := t.pre.secureHost(svh)
	if !ok {
		var err error
		if h, err = translateSecureHost(svh, t.opts); err != nil {
			return nil, err
		}
	}
	return t.newSecureEntry(svh, h, old), nil
}

// newSecureEntry is the entry of svh, translated as h: its resources equal to old's are
// old's, and the clusters of its routes (its other hosts' too) and TCP proxy are in use.
func (t *Incremental) newSecureEntry(svh *dag.SecureVirtualHost, h secureHost, old *secureEntry) *secureEntry {
	e := &secureEntry{routes: h.routes, chain: h.chain, secret: h.secret, more: h.more}
	if old != nil {
		e.routes = keepEqual(old.routes, e.routes)
		e.chain = keepEqual(old.chain, e.chain)
		e.secret = keepEqual(old.secret, e.secret)
		if slices.EqualFunc(old.more, e.more, func(a, b *tlsv3.Secret) bool { return proto.Equal(a, b) }) {
			e.more = old.more
		}
	}
	clusters := routeClusters(svh.Routes)
	for _, vh := range svh.Also {
		clusters = append(clusters, routeClusters(vh.Routes)...)
	}
	if svh.TCPProxy != nil {
		for _, wc := range svh.TCPProxy.Clusters {
			clusters = append(clusters, wc.Cluster)
		}
	}
	if a := svh.Authorization; a != nil {
		clusters = append(clusters, a.Cluster)
	}
	clusters = append(clusters, svh.JWKSClusters()...)
	e.uses = t.use(clusters)
	t.Retranslated++
	return e
}

// keepEqual returns old when it is equal to next, so that an unchanged resource stays
// the same pointer; next otherwise.
func keepEqual[M interface {
	comparable
	proto.Message
}](old, next M) M {
	var zero M
	if old != zero && next != zero && proto.Equal(old, next) {
		return old
	}
	return next
}

// use counts one more reference to each cluster, translating those not in use yet.
// A cluster whose translation errs is a translator bug: clusterEntry panics with
// invalidResource, which recoverInvalid reports.
func (t *Incremental) use(clusters []*dag.Cluster) []*clusterUse {
	out := make([]*clusterUse, 0, len(clusters))
	for _, c := range clusters {
		u := t.byCluster[c]
		if u == nil {
			u = &clusterUse{src: c, entry: t.clusterEntry(c)}
			t.byCluster[c] = u
		}
		u.refs++
		u.entry.refs++
		out = append(out, u)
	}
	return out
}

// release undoes use.
func (t *Incremental) release(uses []*clusterUse) {
	for _, u := range uses {
		u.refs--
		if u.refs == 0 {
			delete(t.byCluster, u.src)
		}
		e := u.entry
		e.refs--
		if e.refs == 0 && t.clusters[e.name] == e {
			delete(t.clusters, e.name)
			t.order = removeSorted(t.order, e)
		}
	}
}

// clusterEntry returns the entry of c's name, translating c. When the name is in use
// with the same translation, that entry is kept: another graph's copy of an unchanged
// cluster keeps the resources already published, so nothing is sent for it.
func (t *Incremental) clusterEntry(c *dag.Cluster) *clusterEntry {
	tc, ok := t.pre.cluster(c)
	if !ok {
		var err error
		if tc, err = clusterAndEndpoints(c, t.opts.Global); err != nil {
			// use has no error to return: recoverInvalid reports this one.
			panic(invalidResource{err})
		}
	}
	next := &clusterEntry{name: c.Name, cluster: tc.cluster, cla: tc.cla}
	t.Retranslated++
	prev := t.clusters[c.Name]
	if prev != nil && proto.Equal(prev.cluster, next.cluster) && (prev.cla == nil) == (next.cla == nil) &&
		(prev.cla == nil || proto.Equal(prev.cla, next.cla)) {
		return prev
	}
	if prev != nil && proto.Equal(prev.cluster, next.cluster) {
		next.cluster = prev.cluster
	}
	if prev != nil {
		t.order = removeSorted(t.order, prev)
	}
	t.clusters[c.Name] = next
	t.order = insertSorted(t.order, next)
	return next
}

func byName(a, b *clusterEntry) int { return strings.Compare(a.name, b.name) }

func insertSorted(order []*clusterEntry, e *clusterEntry) []*clusterEntry {
	i, _ := slices.BinarySearchFunc(order, e, byName)
	return slices.Insert(order, i, e)
}

func removeSorted(order []*clusterEntry, e *clusterEntry) []*clusterEntry {
	i, found := slices.BinarySearchFunc(order, e, byName)
	if found && order[i] == e {
		return slices.Delete(order, i, i+1)
	}
	return order
}

// clusterResources adds the clusters in use and their load assignments, by name. A
// list whose every element is the previous call's is the previous call's slice: a
// change that reaches no cluster, or only endpoints, does not copy 10,000 entries, and
// the xDS server sees the type unchanged by comparing the slices.
func (t *Incremental) clusterResources(res *Resources) {
	if !sameOrder(t.lastClusters, t.order, clusterOf) {
		t.lastClusters = make([]types.Resource, 0, len(t.order))
		for _, e := range t.order {
			t.lastClusters = append(t.lastClusters, e.cluster)
		}
	}
	if !sameOrder(t.lastEndpoints, t.order, loadAssignmentOf) {
		t.lastEndpoints = make([]types.Resource, 0, len(t.order))
		for _, e := range t.order {
			if e.cla != nil {
				t.lastEndpoints = append(t.lastEndpoints, e.cla)
			}
		}
	}
	res.Clusters, res.Endpoints = t.lastClusters, t.lastEndpoints
}

// sameOrder reports whether list holds exactly the non-nil resources of order, in order.
func sameOrder(list []types.Resource, order []*clusterEntry, of func(*clusterEntry) types.Resource) bool {
	i := 0
	for _, e := range order {
		r := of(e)
		if r == nil {
			continue
		}
		if i >= len(list) || list[i] != r {
			return false
		}
		i++
	}
	return i == len(list)
}

func clusterOf(e *clusterEntry) types.Resource { return e.cluster }

func loadAssignmentOf(e *clusterEntry) types.Resource {
	if e.cla == nil {
		return nil // not a nil pointer in an interface
	}
	return e.cla
}
