package dag

import (
	"cmp"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"

	"github.com/portico-dev/portico/internal/parallel"
	"github.com/portico-dev/portico/internal/store"
)

// Defaults for Options.
const (
	DefaultIngressClassName = "portico"
	// ControllerName is the spec.controller value of IngressClasses that Portico implements.
	ControllerName = "portico.dev/ingress-controller"
)

// Options configure a build.
type Options struct {
	// IngressClassNames are the classes Portico serves (default "portico" alone), as
	// Contour's comma-separated --ingress-class-name.
	IngressClassNames []string
	// DisableIngress turns Ingress processing off.
	DisableIngress bool
	// DefaultHeaders are the installation's headers policies of HTTPProxy services.
	DefaultHeaders DefaultHeaders
	// DisablePermitInsecure ignores HTTPProxy routes' permitInsecure: a TLS host's
	// plain HTTP requests are all redirected to HTTPS (Contour's disablePermitInsecure).
	DisablePermitInsecure bool
	// AllowExternalName lets routes use Services of type ExternalName (never to loopback,
	// link-local or other namespaces' cluster names). Off by default: in a shared cluster
	// it lets a team send traffic anywhere the proxy can reach.
	AllowExternalName bool
	// RootNamespaces, when not empty, are the only namespaces where root IngressRoutes
	// (those that own a virtual host) are accepted.
	RootNamespaces []string
	// FallbackCertificate, when set, is the kubernetes.io/tls Secret presented to
	// clients that send no server name (or an unknown one), for the HTTPProxy roots
	// that enable it (tls.enableFallbackCertificate).
	FallbackCertificate *types.NamespacedName
	// ClientCertificate, when set, is the kubernetes.io/tls Secret presented to backends
	// over TLS (--envoy-client-certificate). When it cannot be used, the HTTPProxies
	// with services that speak TLS to their backends are invalid, as in Contour, and the
	// Ingresses with such backends get a warning.
	ClientCertificate *types.NamespacedName
	// RateLimitService says that a global rate limit service is configured; without
	// one, HTTPProxies' global rate limit policies get a warning that they are not
	// enforced.
	RateLimitService bool
	// DefaultGlobalRateLimit, when set, is the global rate limit policy of HTTPProxy
	// roots whose virtual host has none (ParseDefaultGlobalRateLimit).
	DefaultGlobalRateLimit *GlobalRateLimit
	// GlobalAuthorization, when set, checks the requests of every HTTPProxy host
	// without an authorization server of its own (ParseGlobalAuthorization).
	GlobalAuthorization *GlobalAuthorization
	// RateLimitExtension, when set, is the ExtensionService of the rate limit
	// service (Graph.Extensions).
	RateLimitExtension *types.NamespacedName
	// Processors build the APIs kept in packages of their own (Gateway API); each
	// adds its data planes and statuses after the APIs above.
	Processors []Processor
	// coreOnly builds the routing objects alone, without even dag's own processors
	// (the incremental builder runs every processor apart).
	coreOnly bool
}

func (o Options) withDefaults() Options {
	if len(o.IngressClassNames) == 0 {
		o.IngressClassNames = []string{DefaultIngressClassName}
	}
	return o
}

// Build compiles the objects in s into a graph. It never fails: an object that cannot be
// served is left out of the graph and given a status that says why. The APIs of
// opts.Processors (Gateway API) are built last, apart: their objects have data planes
// of their own and never compete for the other APIs' hosts.
func Build(s *store.Store, opts Options) *Graph {
	// Sized for one host, one cluster and one status per routing object, the common
	// shape: growing them from nothing costs more than the guess when it is wrong.
	b := newBuilder(s, opts.withDefaults(), len(s.Ingresses)+len(s.IngressRoutes)+len(s.HTTPProxies))
	// IngressRoute roots and Ingresses may want the same host: the older keeps it, so the
	// roots' hosts are known before Ingresses are processed.
	irs := b.ingressRouteGraph()
	proxies := b.proxyGraph()
	irRoots := b.candidateRoots(irs)
	proxyRoots := b.candidateProxyRoots(proxies)
	holders := append(b.hostHoldingRoots(irs), b.proxyHoldingRoots(proxies)...)
	if !b.opts.DisableIngress {
		b.processIngresses(rootHostsByName(holders))
	}
	roots := make([]hostRoot, 0, len(irRoots)+len(proxyRoots))
	for _, r := range irRoots {
		roots = append(roots, r)
	}
	for _, r := range proxyRoots {
		roots = append(roots, r)
	}
	b.checkRootHosts(roots, holders)
	b.processIngressRoutes(irs, irRoots)
	b.processHTTPProxies(proxies, proxyRoots)
	g := withProcessed(b.graph(), runProcessors(s, opts, builtinProcessors(s, opts)...))
	if opts.coreOnly {
		return g
	}
	return withExtensions(g, s, opts, nil)
}

// newBuilder returns the builder of one build, sized for objects routing objects.
func newBuilder(s *store.Store, opts Options, objects int) *builder {
	return &builder{
		store:    s,
		opts:     opts,
		vhosts:   make(map[string]*VirtualHost, objects),
		svhosts:  map[string]*SecureVirtualHost{},
		clusters: make(map[clusterKey]*Cluster, objects),
		statuses: make([]Status, 0, objects),
	}
}

// builder holds the state of one build.
type builder struct {
	store    *store.Store
	opts     Options
	vhosts   map[string]*VirtualHost
	svhosts  map[string]*SecureVirtualHost
	clusters map[clusterKey]*Cluster
	statuses []Status
	// secrets and delegationsByNS are computed once per build, on first use.
	secrets         secretCache
	delegationsByNS map[string][]*ingressroutev1.TLSCertificateDelegation
	// alsoChanged says that IngressRoute hosts were added to wildcard certificates' Also.
	alsoChanged bool
	// extensions are the ExtensionServices resolved so far (policy_extauthz.go).
	extensions map[types.NamespacedName]*extension
	// globalAuth is Options.GlobalAuthorization resolved, and why it is not usable
	// (policy_globalauth.go).
	globalAuth        *Authorization
	globalAuthProblem string
}

func (b *builder) vhost(name string) *VirtualHost {
	vh := b.vhosts[name]
	if vh == nil {
		vh = &VirtualHost{Name: name}
		b.vhosts[name] = vh
	}
	return vh
}

func (b *builder) setStatus(ref ObjectRef, v StatusValue, desc string) {
	b.statuses = append(b.statuses, Status{Object: ref, Status: v, Description: desc})
}

func (b *builder) graph() *Graph {
	g := &Graph{Statuses: statusPointers(b.statuses)}
	g.HTTP, g.HTTPS = values(b.vhosts), values(b.svhosts)
	// Each host's routes are its own: they are sorted in parallel on a large graph.
	_ = parallel.Do(len(g.HTTP), func(i int) error { sortRoutes(g.HTTP[i].Routes); return nil })
	_ = parallel.Do(len(g.HTTPS), func(i int) error {
		svh := g.HTTPS[i]
		sortRoutes(svh.Routes)
		if b.alsoChanged {
			sort.Slice(svh.Also, func(i, j int) bool { return svh.Also[i].Name < svh.Also[j].Name })
		}
		return nil
	})
	slices.SortFunc(g.HTTP, func(a, c *VirtualHost) int { return strings.Compare(a.Name, c.Name) })
	slices.SortFunc(g.HTTPS, func(a, c *SecureVirtualHost) int { return strings.Compare(a.Name, c.Name) })
	slices.SortStableFunc(g.Statuses, func(a, c *Status) int { return CompareObjectRefs(a.Object, c.Object) })
	return g
}

// values returns m's values in no particular order, nil if there are none.
func values[K comparable, V any](m map[K]V) []V {
	if len(m) == 0 {
		return nil
	}
	return slices.AppendSeq(make([]V, 0, len(m)), maps.Values(m))
}

// statusPointers points at each of statuses, which the graph then shares with the
// graphs built incrementally after it: those copy only pointers, not the statuses.
func statusPointers(statuses []Status) []*Status {
	if len(statuses) == 0 {
		return nil
	}
	out := make([]*Status, len(statuses))
	for i := range statuses {
		out[i] = &statuses[i]
	}
	return out
}

// sortRoutes puts routes in match order: Exact before regexes before prefixes (the
// Ingress spec prefers an exact match), and among prefixes the longest first, so that
// the first match is the longest matching prefix. Among routes with the same path, more
// header conditions come first, then more query conditions: the more specific route
// wins (seed 004's header routing). Ties are broken by value to keep the output
// deterministic.
func sortRoutes(routes []*Route) {
	rank := func(k PathMatchKind) int {
		switch k {
		case PathExact:
			return 0
		case PathRegex:
			return 1
		}
		return 2
	}
	if len(routes) < 2 {
		return
	}
	slices.SortStableFunc(routes, func(a, c *Route) int {
		if ra, rc := rank(a.Path.Kind), rank(c.Path.Kind); ra != rc {
			return cmp.Compare(ra, rc)
		}
		if len(a.Path.Value) != len(c.Path.Value) {
			return cmp.Compare(len(c.Path.Value), len(a.Path.Value))
		}
		if a.Path.Value != c.Path.Value {
			return strings.Compare(a.Path.Value, c.Path.Value)
		}
		if len(a.Headers) != len(c.Headers) {
			return cmp.Compare(len(c.Headers), len(a.Headers))
		}
		return cmp.Compare(len(c.Query), len(a.Query))
	})
}
