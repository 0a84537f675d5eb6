// Package dag compiles the objects in a store into one validated routing graph: virtual
// hosts, their ordered routes, the clusters they send to, and a status for every routing
// object. The graph is the single source of truth for translation and status.
package dag

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Graph is the result of one build.
type Graph struct {
	// HTTP are the virtual hosts served on the plain HTTP listener, ordered by name.
	HTTP []*VirtualHost
	// HTTPS are the virtual hosts served on the TLS listener, one per server name, ordered by name.
	HTTPS []*SecureVirtualHost
	// Statuses holds one entry per routing object (Ingress, ...), ordered by kind, namespace, name.
	Statuses []Status
}

// Clusters returns every cluster referenced by the graph's routes, once each, in order of
// first reference.
func (g *Graph) Clusters() []*Cluster {
	seen := map[string]bool{}
	var out []*Cluster
	visit := func(vh *VirtualHost) {
		for _, r := range vh.Routes {
			for _, wc := range r.Clusters {
				if !seen[wc.Cluster.Name] {
					seen[wc.Cluster.Name] = true
					out = append(out, wc.Cluster)
				}
			}
		}
	}
	for _, vh := range g.HTTP {
		visit(vh)
	}
	for _, svh := range g.HTTPS {
		visit(&svh.VirtualHost)
	}
	return out
}

// VirtualHost is a set of routes for one host name.
type VirtualHost struct {
	// Name is a precise host ("foo.com"), a single-label wildcard ("*.foo.com"), or "*"
	// (requests whose host no other virtual host matches).
	Name string
	// Routes in match order: the first route that matches a request serves it.
	Routes []*Route
}

// IsWildcard reports whether the virtual host's name is a "*.suffix" wildcard.
func (vh *VirtualHost) IsWildcard() bool { return len(vh.Name) > 2 && vh.Name[:2] == "*." }

// SecureVirtualHost is a virtual host served over TLS for the server name in its Name.
type SecureVirtualHost struct {
	VirtualHost
	Secret *Secret
	// MinTLSVersion is "1.1", "1.2" or "1.3"; empty means the default (1.2).
	MinTLSVersion string
	// Also are the virtual hosts of precise names that a wildcard certificate covers and
	// that have no certificate of their own: connections for them arrive on this
	// certificate and must reach their own routes.
	Also []*VirtualHost
}

// PathMatchKind says how a route's path is compared with the request path.
type PathMatchKind int

const (
	// PathPrefix matches element-wise: the path equals Value or continues with "/" after it.
	// Value "/" matches every path.
	PathPrefix PathMatchKind = iota
	// PathExact matches only a path equal to Value.
	PathExact
	// PathStringPrefix matches every path that starts with Value, character by character
	// ("/app" matches "/apple"): the prefix match of IngressRoute.
	PathStringPrefix
)

func (k PathMatchKind) String() string {
	switch k {
	case PathExact:
		return "Exact"
	case PathStringPrefix:
		return "StringPrefix"
	default:
		return "Prefix"
	}
}

// PathMatch is a route's path condition.
type PathMatch struct {
	Kind  PathMatchKind
	Value string
}

// Route sends requests matching its conditions to its clusters, or answers them itself
// (HTTPSRedirect, DirectStatus).
type Route struct {
	Path PathMatch
	// Clusters receive the traffic, split by Weight. Empty when the route answers itself.
	Clusters []*WeightedCluster
	// Source is the object that declared the route.
	Source ObjectRef
	// PrefixRewrite, when set, replaces the matched prefix before the request goes upstream.
	PrefixRewrite string
	// Timeouts are nil when the proxy defaults apply.
	Timeouts *TimeoutPolicy
	// Retry is nil when failed requests are not retried.
	Retry *RetryPolicy
	// HTTPSRedirect answers 301 with the same URL on https instead of forwarding.
	HTTPSRedirect bool
	// DirectStatus, when non-zero, answers every request with this status (a delegated
	// prefix whose delegate cannot be served gets 503).
	DirectStatus uint32
}

// TimeoutPolicy holds a route's timeouts. A nil field means the proxy's default; a zero
// duration means no timeout at all.
type TimeoutPolicy struct {
	// Request bounds the time from the end of the request to the end of the response.
	Request *time.Duration
	// Idle bounds the time a request may see no activity.
	Idle *time.Duration
}

// RetryPolicy says when a failed request is tried again.
type RetryPolicy struct {
	// NumRetries is the most retries after the first attempt.
	NumRetries uint32
	// OnStatusCodes are the upstream response codes retried.
	OnStatusCodes []uint32
	// PerTryTimeout bounds each attempt; 0 leaves only the route's request timeout.
	PerTryTimeout time.Duration
}

// WeightedCluster is one destination of a route.
type WeightedCluster struct {
	Cluster *Cluster
	Weight  uint32
}

// Cluster is a Service port that routes send to, with its resolved endpoints.
type Cluster struct {
	// Name is unique per Service port: namespace/service/port.
	Name    string
	Service types.NamespacedName
	// Port is the Service port number; PortName its name ("" when unnamed).
	Port     int32
	PortName string
	// ExternalName is set for Services of type ExternalName: the DNS name to resolve.
	ExternalName string
	// Endpoints are the ready addresses behind the port. Empty means requests get 503.
	Endpoints []Endpoint
	// SkippedEndpoints counts addresses left out because they cannot be connected to.
	SkippedEndpoints int
	// LoadBalancer is the strategy for picking an endpoint; "" means round robin.
	LoadBalancer LoadBalancer
	// HealthCheck, when set, is an active HTTP health check of every endpoint.
	HealthCheck *HealthCheck
}

// LoadBalancer is a load-balancing strategy (seed 003).
type LoadBalancer string

const (
	LBRoundRobin           LoadBalancer = "RoundRobin"
	LBWeightedLeastRequest LoadBalancer = "WeightedLeastRequest"
	LBRingHash             LoadBalancer = "RingHash"
	LBMaglev               LoadBalancer = "Maglev"
	LBRandom               LoadBalancer = "Random"
)

// HealthCheck is an active HTTP health check with every field defaulted.
type HealthCheck struct {
	Path               string
	Host               string
	Interval           time.Duration
	Timeout            time.Duration
	UnhealthyThreshold uint32
	HealthyThreshold   uint32
}

// Endpoint is one backend address.
type Endpoint struct {
	Address string
	Port    int32
}

// Secret is a validated TLS certificate and key.
type Secret struct {
	// Name is namespace/name.
	Name string
	Cert []byte
	Key  []byte
}

// ObjectRef names a routing object.
type ObjectRef struct {
	Kind      string
	Namespace string
	Name      string
}

func (r ObjectRef) String() string { return r.Kind + " " + r.Namespace + "/" + r.Name }

// StatusValue is the outcome of processing an object.
type StatusValue string

const (
	StatusValid    StatusValue = "valid"
	StatusInvalid  StatusValue = "invalid"
	StatusOrphaned StatusValue = "orphaned"
	// StatusIgnored marks objects that belong to another ingress class.
	StatusIgnored StatusValue = "ignored"
)

// Status is the outcome of processing one object, with a description a user can act on.
type Status struct {
	Object      ObjectRef
	Status      StatusValue
	Description string
	// Root is set for IngressRoutes with a virtualhost.
	Root bool
	// Hosts are the virtual hosts the object serves routes on, sorted.
	Hosts []string
}

// Same reports whether two statuses say the same thing about the same object: what a
// status writer compares before writing again.
func (s Status) Same(o Status) bool {
	return s.Object == o.Object && s.Status == o.Status && s.Description == o.Description
}
