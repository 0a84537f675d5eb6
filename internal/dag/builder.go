package dag

import (
	"sort"

	"k8s.io/apimachinery/pkg/types"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"

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
	// IngressClassName is the class Portico serves (default "portico").
	IngressClassName string
	// DisableIngress turns Ingress processing off.
	DisableIngress bool
	// AllowExternalName lets routes use Services of type ExternalName (never to loopback,
	// link-local or other namespaces' cluster names). Off by default: in a shared cluster
	// it lets a team send traffic anywhere the proxy can reach.
	AllowExternalName bool
	// RootNamespaces, when not empty, are the only namespaces where root IngressRoutes
	// (those that own a virtual host) are accepted.
	RootNamespaces []string
}

func (o Options) withDefaults() Options {
	if o.IngressClassName == "" {
		o.IngressClassName = DefaultIngressClassName
	}
	return o
}

// Build compiles the objects in s into a graph. It never fails: an object that cannot be
// served is left out of the graph and given a status that says why.
func Build(s *store.Store, opts Options) *Graph {
	b := &builder{
		store:    s,
		opts:     opts.withDefaults(),
		vhosts:   map[string]*VirtualHost{},
		svhosts:  map[string]*SecureVirtualHost{},
		clusters: map[string]*Cluster{},
	}
	// IngressRoute roots and Ingresses may want the same host: the older keeps it, so the
	// roots' hosts are known before Ingresses are processed.
	irs := b.ingressRouteGraph()
	roots := b.candidateRoots(irs)
	holders := b.hostHoldingRoots(irs)
	if !b.opts.DisableIngress {
		b.processIngresses(rootHostsByName(holders))
	}
	b.processIngressRoutes(irs, roots, holders)
	return b.graph()
}

// builder holds the state of one build.
type builder struct {
	store    *store.Store
	opts     Options
	vhosts   map[string]*VirtualHost
	svhosts  map[string]*SecureVirtualHost
	clusters map[string]*Cluster
	statuses []Status
	// secrets and delegationsByNS are computed once per build, on first use.
	secrets         map[types.NamespacedName]checkedSecret
	delegationsByNS map[string][]*ingressroutev1.TLSCertificateDelegation
	// alsoChanged says that IngressRoute hosts were added to wildcard certificates' Also.
	alsoChanged bool
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
	g := &Graph{Statuses: b.statuses}
	for _, vh := range b.vhosts {
		sortRoutes(vh.Routes)
		g.HTTP = append(g.HTTP, vh)
	}
	for _, svh := range b.svhosts {
		sortRoutes(svh.Routes)
		if b.alsoChanged {
			sort.Slice(svh.Also, func(i, j int) bool { return svh.Also[i].Name < svh.Also[j].Name })
		}
		g.HTTPS = append(g.HTTPS, svh)
	}
	sort.Slice(g.HTTP, func(i, j int) bool { return g.HTTP[i].Name < g.HTTP[j].Name })
	sort.Slice(g.HTTPS, func(i, j int) bool { return g.HTTPS[i].Name < g.HTTPS[j].Name })
	sort.SliceStable(g.Statuses, func(i, j int) bool {
		a, c := g.Statuses[i].Object, g.Statuses[j].Object
		if a.Kind != c.Kind {
			return a.Kind < c.Kind
		}
		if a.Namespace != c.Namespace {
			return a.Namespace < c.Namespace
		}
		return a.Name < c.Name
	})
	return g
}

// sortRoutes puts routes in match order: Exact before prefixes (the Ingress spec prefers
// an exact match), and among prefixes the longest first, so that the first match is the
// longest matching prefix. Ties are broken by value to keep the output deterministic.
func sortRoutes(routes []*Route) {
	sort.SliceStable(routes, func(i, j int) bool {
		a, c := routes[i].Path, routes[j].Path
		if (a.Kind == PathExact) != (c.Kind == PathExact) {
			return a.Kind == PathExact
		}
		if len(a.Value) != len(c.Value) {
			return len(a.Value) > len(c.Value)
		}
		return a.Value < c.Value
	})
}
