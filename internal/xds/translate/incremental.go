package translate

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"

	"github.com/portico-dev/portico/internal/dag"
)

// Incremental translates a sequence of graphs, translating again only the parts of
// each graph that are new: a virtual host, secure virtual host or cluster that is the
// same pointer as in the previous graph (dag.Incremental keeps them so) reuses its
// translation. A resource whose content did not change is returned as the same pointer
// as before, which lets the xDS server find what changed without comparing everything.
// The result is always what Translate returns for the same graph (the property test in
// incremental_test.go checks it); only the work differs.
//
// Not safe for concurrent use.
type Incremental struct {
	opts   Options
	gen    uint64
	vhosts map[*dag.VirtualHost]*vhostEntry
	secure map[*dag.SecureVirtualHost]*secureEntry
	// clusters holds one entry per cluster name; byCluster finds it from any of the
	// graph's copies of that cluster without hashing the name (the common case).
	clusters  map[string]*clusterEntry
	byCluster map[*dag.Cluster]*clusterUse

	httpListener  *listenerv3.Listener
	httpsShell    *listenerv3.Listener // the HTTPS listener without filter chains
	httpRoutes    *routev3.RouteConfiguration
	httpsListener *listenerv3.Listener

	// lastClusters and lastEndpoints size the next call's lists.
	lastClusters, lastEndpoints int

	// Retranslated counts the virtual hosts, secure virtual hosts and clusters translated
	// by the last call (not reused), for tests and benchmarks.
	Retranslated int
}

type vhostEntry struct {
	fallback *dag.VirtualHost
	out      *routev3.VirtualHost
	gen      uint64
}

type secureEntry struct {
	routes *routev3.RouteConfiguration // nil unless the host serves HTTP
	chain  *listenerv3.FilterChain     // nil when the host has no filter chain
	secret *tlsv3.Secret               // nil unless the host terminates TLS
	gen    uint64
}

type clusterEntry struct {
	cluster *clusterv3.Cluster
	cla     *endpointv3.ClusterLoadAssignment
	gen     uint64 // the last call that emitted it
}

// clusterUse ties one graph's cluster to the entry of its name.
type clusterUse struct {
	entry *clusterEntry
	gen   uint64
}

// NewIncremental returns a translator for opts. It fails when the listener addresses
// are invalid, as Translate would on every call.
func NewIncremental(opts Options) (*Incremental, error) {
	opts = opts.withDefaults()
	if err := CheckMaxRequestHeadersKB(opts.MaxRequestHeadersKB); err != nil {
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
	t := &Incremental{
		opts:      opts,
		vhosts:    map[*dag.VirtualHost]*vhostEntry{},
		secure:    map[*dag.SecureVirtualHost]*secureEntry{},
		clusters:  map[string]*clusterEntry{},
		byCluster: map[*dag.Cluster]*clusterUse{},
	}
	err = recoverInvalid(func() error {
		t.httpListener = httpListener(httpAddr, opts)
		t.httpsShell = httpsListener(httpsAddr, nil, opts)
		return validateAll(t.httpListener, t.httpsShell, &routev3.RouteConfiguration{Name: RouteHTTP})
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Translate converts g, as Translate(g, opts) does.
func (t *Incremental) Translate(g *dag.Graph) (res *Resources, err error) {
	t.gen++
	t.Retranslated = 0
	err = recoverInvalid(func() error {
		res = &Resources{
			Listeners: []types.Resource{t.httpListener},
			Clusters:  make([]types.Resource, 0, t.lastClusters),
			Endpoints: make([]types.Resource, 0, t.lastEndpoints),
		}
		routes, err := t.httpRouteConfig(g.HTTP)
		if err != nil {
			return err
		}
		res.Routes = append(res.Routes, routes)
		if len(g.HTTPS) > 0 {
			if err := t.secureHosts(g.HTTPS, res); err != nil {
				return err
			}
		}
		return t.clusterResources(g, res)
	})
	if err != nil {
		// A failed call may have stored translations of this generation only: drop them
		// all, so the next call cannot reuse anything half made.
		t.vhosts, t.secure = map[*dag.VirtualHost]*vhostEntry{}, map[*dag.SecureVirtualHost]*secureEntry{}
		t.clusters, t.byCluster = map[string]*clusterEntry{}, map[*dag.Cluster]*clusterUse{}
		t.httpRoutes, t.httpsListener = nil, nil
		return nil, err
	}
	t.sweep()
	t.lastClusters, t.lastEndpoints = len(res.Clusters), len(res.Endpoints)
	return res, nil
}

// recoverInvalid runs f, turning mustAny's panic on an invalid packed message (and any
// other translator panic) into an error, as Translate does.
func recoverInvalid(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if inv, ok := r.(invalidPacked); ok {
				err = fmt.Errorf("translator produced an invalid %T: %w", inv.msg, inv.err)
				return
			}
			err = fmt.Errorf("translator bug (please report it): %v", r)
		}
	}()
	return f()
}

func validateAll(msgs ...validatable) error {
	for _, m := range msgs {
		if err := m.ValidateAll(); err != nil {
			return fmt.Errorf("translator produced an invalid %T: %w", m, err)
		}
	}
	return nil
}

func (t *Incremental) httpRouteConfig(hosts []*dag.VirtualHost) (*routev3.RouteConfiguration, error) {
	fallback := catchAllVirtualHost(hosts)
	out := make([]*routev3.VirtualHost, len(hosts))
	same := t.httpRoutes != nil && len(t.httpRoutes.VirtualHosts) == len(hosts)
	for i, vh := range hosts {
		e := t.vhosts[vh]
		if e == nil || e.fallback != fallback {
			tr := virtualHost(vh, fallback, t.opts)
			if err := validateAll(tr); err != nil {
				return nil, err
			}
			e = &vhostEntry{fallback: fallback, out: tr}
			t.vhosts[vh] = e
			t.Retranslated++
		}
		e.gen = t.gen
		out[i] = e.out
		same = same && t.httpRoutes.VirtualHosts[i] == e.out
	}
	if same {
		return t.httpRoutes, nil
	}
	t.httpRoutes = &routev3.RouteConfiguration{Name: RouteHTTP, VirtualHosts: out}
	return t.httpRoutes, nil
}

func (t *Incremental) secureHosts(hosts []*dag.SecureVirtualHost, res *Resources) error {
	chains := make([]*listenerv3.FilterChain, 0, len(hosts))
	same := t.httpsListener != nil
	secrets := map[string]bool{}
	for _, svh := range hosts {
		e, err := t.secureEntry(svh)
		if err != nil {
			return err
		}
		if e.routes != nil {
			res.Routes = append(res.Routes, e.routes)
		}
		if e.secret != nil && !secrets[e.secret.Name] {
			secrets[e.secret.Name] = true
			res.Secrets = append(res.Secrets, e.secret)
		}
		if e.chain != nil {
			same = same && len(chains) < len(t.httpsListener.FilterChains) && t.httpsListener.FilterChains[len(chains)] == e.chain
			chains = append(chains, e.chain)
		}
	}
	if !same || len(chains) != len(t.httpsListener.FilterChains) {
		l := proto.Clone(t.httpsShell).(*listenerv3.Listener)
		l.FilterChains = chains
		t.httpsListener = l
	}
	res.Listeners = append(res.Listeners, t.httpsListener)
	return nil
}

func (t *Incremental) secureEntry(svh *dag.SecureVirtualHost) (*secureEntry, error) {
	if e := t.secure[svh]; e != nil {
		e.gen = t.gen
		return e, nil
	}
	e := &secureEntry{gen: t.gen, chain: secureFilterChain(svh, t.opts)}
	if servesHTTP(svh) {
		e.routes = httpsRouteConfig(svh, t.opts)
		if err := validateAll(e.routes); err != nil {
			return nil, err
		}
	}
	if terminatesTLS(svh) {
		e.secret = secret(svh.Secret)
		if err := validateAll(e.secret); err != nil {
			return nil, err
		}
	}
	if e.chain != nil {
		if err := validateAll(e.chain); err != nil {
			return nil, err
		}
	}
	t.secure[svh] = e
	t.Retranslated++
	return e, nil
}

// clusterResources adds the clusters of g and their load assignments in the order
// Graph.Clusters gives.
func (t *Incremental) clusterResources(g *dag.Graph, res *Resources) error {
	var err error
	visit := func(wcs []*dag.WeightedCluster) {
		for _, wc := range wcs {
			if err != nil {
				return
			}
			err = t.addCluster(wc.Cluster, res)
		}
	}
	for _, vh := range g.HTTP {
		for _, r := range vh.Routes {
			visit(r.Clusters)
		}
	}
	for _, svh := range g.HTTPS {
		for _, r := range svh.Routes {
			visit(r.Clusters)
		}
		if svh.TCPProxy != nil {
			visit(svh.TCPProxy.Clusters)
		}
	}
	return err
}

func (t *Incremental) addCluster(c *dag.Cluster, res *Resources) error {
	use := t.byCluster[c]
	if use == nil {
		e, err := t.clusterEntry(c)
		if err != nil {
			return err
		}
		use = &clusterUse{entry: e}
		t.byCluster[c] = use
	}
	use.gen = t.gen
	e := use.entry
	if e.gen == t.gen {
		return nil // already added by an earlier route
	}
	e.gen = t.gen
	res.Clusters = append(res.Clusters, e.cluster)
	if e.cla != nil {
		res.Endpoints = append(res.Endpoints, e.cla)
	}
	return nil
}

// clusterEntry translates a cluster the translator has not seen. When its name is
// known and the translation is the same, the known entry is reused: another graph's copy
// of an unchanged cluster keeps the resources already published, so nothing is sent.
func (t *Incremental) clusterEntry(c *dag.Cluster) (*clusterEntry, error) {
	next := &clusterEntry{cluster: cluster(c, t.opts.ConnectTimeout)}
	if c.ExternalName == "" {
		next.cla = loadAssignment(c)
	}
	if err := validateAll(next.cluster); err != nil {
		return nil, err
	}
	if next.cla != nil {
		if err := validateAll(next.cla); err != nil {
			return nil, err
		}
	}
	t.Retranslated++
	prev := t.clusters[c.Name]
	if prev != nil && proto.Equal(prev.cluster, next.cluster) && (prev.cla == nil) == (next.cla == nil) &&
		(prev.cla == nil || proto.Equal(prev.cla, next.cla)) {
		return prev, nil
	}
	if prev != nil && prev.gen == t.gen {
		// Two clusters of one name with different contents in one graph: the first one
		// wins, as in Translate.
		return prev, nil
	}
	if prev != nil && proto.Equal(prev.cluster, next.cluster) {
		next.cluster = prev.cluster
	}
	t.clusters[c.Name] = next
	return next, nil
}

// sweep forgets the translations the last graph did not use.
func (t *Incremental) sweep() {
	sweepMap(t.vhosts, func(e *vhostEntry) bool { return e.gen == t.gen })
	sweepMap(t.secure, func(e *secureEntry) bool { return e.gen == t.gen })
	sweepMap(t.clusters, func(e *clusterEntry) bool { return e.gen == t.gen })
	sweepMap(t.byCluster, func(u *clusterUse) bool { return u.gen == t.gen })
}

func sweepMap[K comparable, V any](m map[K]V, used func(V) bool) {
	for k, v := range m {
		if !used(v) {
			delete(m, k)
		}
	}
}
