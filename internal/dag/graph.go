// Package dag compiles the objects in a store into one validated routing graph: virtual
// hosts, their ordered routes, the clusters they send to, and a status for every routing
// object. The graph is the single source of truth for translation and status.
package dag

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// Graph is the result of one build.
type Graph struct {
	// HTTP are the virtual hosts served on the plain HTTP listener, ordered by name.
	HTTP []*VirtualHost
	// HTTPS are the virtual hosts served on the TLS listener, one per server name, ordered by name.
	HTTPS []*SecureVirtualHost
	// Gateways are the Gateway API Gateways served, each with a data plane of its own,
	// ordered by namespace/name.
	Gateways []*Gateway
	// UpstreamClientCertificate, when set, is the certificate presented to backends
	// over TLS (Contour's tls.envoy-client-certificate; see WithClientCertificate).
	UpstreamClientCertificate *Secret
	// Statuses holds one entry per routing object (Ingress, ...), ordered by kind, namespace, name.
	// A status is never modified once in a graph: graphs built incrementally share the
	// unchanged ones.
	Statuses []*Status
	// Extensions are the installation's own ExtensionServices (global authorization,
	// the rate limit service), nil without any.
	Extensions *Extensions
}

// Clusters returns every cluster referenced by the graph's routes, once each, in order of
// first reference.
func (g *Graph) Clusters() []*Cluster {
	seen := map[string]bool{}
	var out []*Cluster
	add := func(c *Cluster) {
		if !seen[c.Name] {
			seen[c.Name] = true
			out = append(out, c)
		}
	}
	visit := func(vh *VirtualHost) {
		for _, r := range vh.Routes {
			for _, wc := range r.Clusters {
				add(wc.Cluster)
			}
			for _, m := range r.Mirrors {
				add(m.Cluster)
			}
		}
	}
	visitAll := func(http []*VirtualHost, https []*SecureVirtualHost) {
		for _, vh := range http {
			visit(vh)
		}
		for _, svh := range https {
			visit(&svh.VirtualHost)
			// A shared listener's Also hosts are among its HTTP hosts too, a
			// Gateway's need not be (an HTTPS-only Gateway): their routes are
			// served under this server name and their clusters must be published.
			for _, vh := range svh.Also {
				visit(vh)
			}
			if a := svh.Authorization; a != nil {
				add(a.Cluster)
			}
			for _, c := range svh.JWKSClusters() {
				add(c)
			}
			if svh.TCPProxy != nil {
				for _, wc := range svh.TCPProxy.Clusters {
					add(wc.Cluster)
				}
			}
		}
	}
	visitAll(g.HTTP, g.HTTPS)
	for _, c := range g.Extensions.Clusters() {
		add(c)
	}
	for _, gw := range g.Gateways {
		for _, p := range gw.Ports {
			visitAll(p.HTTP, p.HTTPS)
		}
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
	// IPFilter and CORS, when set, apply to every route without its own.
	IPFilter *IPFilter
	CORS     *CORSPolicy
	// RateLimit limits the requests of the routes that have none of their own.
	RateLimit *RateLimitPolicy
}

// IsWildcard reports whether the virtual host's name is a "*.suffix" wildcard.
func (vh *VirtualHost) IsWildcard() bool { return len(vh.Name) > 2 && vh.Name[:2] == "*." }

// SecureVirtualHost is a virtual host served over TLS for the server name in its Name.
type SecureVirtualHost struct {
	VirtualHost
	Secret *Secret
	// MoreSecrets are further certificates for the same connections (a Gateway API
	// listener with several certificateRefs): the data plane presents the one whose
	// names match the SNI the client sent, Secret when none does. Only Gateways' hosts
	// have them.
	MoreSecrets []*Secret
	// MinTLSVersion is "1.1", "1.2" or "1.3"; empty means the default (1.2).
	MinTLSVersion string
	// MaxTLSVersion is "1.2" or "1.3"; empty means the default (1.3).
	MaxTLSVersion string
	// Passthrough forwards the TLS connection undecrypted to TCPProxy, chosen by SNI
	// alone; Secret is nil then.
	Passthrough bool
	// TCPProxy, when set, makes the connections for this server name a TCP stream to its
	// clusters (after TLS termination unless Passthrough) instead of HTTP routing.
	TCPProxy *TCPProxy
	// Also are the virtual hosts of precise names that a wildcard certificate covers and
	// that have no certificate of their own: connections for them arrive on this
	// certificate and must reach their own routes.
	Also []*VirtualHost
	// Authorization, when set, checks the requests of the routes whose Authorization
	// enables it with an external server (policy_extauthz.go).
	Authorization *Authorization
	// ClientValidation, when set, asks clients for a certificate and checks it.
	ClientValidation *ClientValidation
	// HTTPVersions are the HTTP versions its clients may speak, HTTP1 and HTTP2;
	// empty: both (HTTPProxy spec.httpVersions).
	HTTPVersions []HTTPVersion
	// JWTProviders verify the tokens its routes require (policy_jwt.go).
	JWTProviders []JWTProvider
}

// HTTPVersion is an HTTP version a TLS host offers its clients.
type HTTPVersion int

// The HTTP versions.
const (
	HTTP1 HTTPVersion = iota + 1
	HTTP2
)

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
	// PathRegex matches a path that the RE2 expression in Value matches whole.
	PathRegex
)

func (k PathMatchKind) String() string {
	switch k {
	case PathExact:
		return "Exact"
	case PathStringPrefix:
		return "StringPrefix"
	case PathRegex:
		return "Regex"
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
	// Headers and Query are further conditions, all of which must hold (HTTPProxy).
	Headers []HeaderMatch
	Query   []QueryMatch
	// Clusters receive the traffic, split by Weight. Empty when the route answers itself.
	Clusters []*WeightedCluster
	// InvalidBackendWeight, when non-zero, is the weight of backends that cannot be
	// used: that share of the requests (InvalidBackendWeight out of it plus the
	// clusters' weights) is answered 500, as Gateway API asks of a rule some of whose
	// backendRefs are invalid. Only with Clusters; with none, DirectStatus says it all.
	InvalidBackendWeight uint32
	// Source is the object that declared the route.
	Source ObjectRef
	// PrefixRewrite, when set, replaces the matched prefix before the request goes upstream.
	// On a PathPrefix route it replaces whole path elements, as Gateway API's
	// ReplacePrefixMatch does: with the prefix "/foo", "/bar" sends "/foo/x" as "/bar/x"
	// and "/foo" as "/bar"; a replacement ending in "/" never doubles the slash after it
	// ("/bar/" sends "/foo/x" as "/bar/x" and "/foo" as "/bar/"), and "/" drops the prefix
	// ("/foo/x" goes as "/x", "/foo" as "/"). On the PathPrefix "/", "/bar" sends "/x" as
	// "/bar/x". Other path kinds replace the characters matched: a PathStringPrefix's, or
	// the whole path of PathExact and PathRegex routes.
	PrefixRewrite string
	// PathRewrite, when set, replaces the whole path (not the query) before the request
	// goes upstream: Gateway API's ReplaceFullPath. At most one of PrefixRewrite and
	// PathRewrite is set.
	PathRewrite string
	// Timeouts are nil when the proxy defaults apply.
	Timeouts *TimeoutPolicy
	// Retry is nil when failed requests are not retried.
	Retry *RetryPolicy
	// HTTPSRedirect answers 301 with the same URL on https instead of forwarding.
	HTTPSRedirect bool
	// DirectStatus, when non-zero, answers every request with this status (a delegated
	// prefix whose delegate cannot be served gets 503), and DirectBody as the body.
	DirectStatus uint32
	DirectBody   string
	// Redirect, when set, answers with a redirect instead of forwarding.
	Redirect *Redirect
	// RequestHeaders and ResponseHeaders change the headers of every request forwarded
	// and every response returned on this route.
	RequestHeaders  *HeadersPolicy
	ResponseHeaders *HeadersPolicy
	// HostRewrite, when set, is the Host the upstream sees.
	HostRewrite string
	// HostRewriteHeader, when set, names the request header whose value (when present
	// and not empty) becomes the Host the upstream sees.
	HostRewriteHeader string
	// Websocket lets requests upgrade to WebSocket on this route.
	Websocket bool
	// HashPolicies say what a request is hashed on for consistent-hashing clusters (and
	// cookie affinity). Empty means the client's address when the clusters hash.
	HashPolicies []HashPolicy
	// Authorization is set on the routes of a host with an Authorization: whether
	// and with what context their requests are checked (policy_extauthz.go).
	Authorization *RouteAuthorization
	// Mirrors get a copy of (a share of) the requests the route forwards.
	Mirrors []*Mirror
	// CookieRewrites change the cookies its backends set (HTTPProxy route
	// cookieRewritePolicies); a cluster's own come first (WeightedCluster).
	CookieRewrites []CookieRewrite
	// IPFilter and CORS, when set, replace the virtual host's.
	IPFilter *IPFilter
	CORS     *CORSPolicy
	// JWT is the token the route requires (policy_jwt.go).
	JWT JWTRequirement
	// RateLimit, when set, replaces the virtual host's.
	RateLimit *RateLimitPolicy
	// InternalRedirect, when set, follows the route's upstream redirects in the proxy.
	InternalRedirect *InternalRedirect
}

// StringMatchKind says how a header or query parameter value is compared.
type StringMatchKind int

const (
	// MatchPresent holds when the header or parameter is present, whatever its value.
	MatchPresent StringMatchKind = iota
	MatchExact
	MatchPrefix
	MatchSuffix
	MatchContains
	// MatchRegex holds when the RE2 expression matches the whole value.
	MatchRegex
)

// HeaderMatch is one condition on a request header. Names are compared
// case-insensitively; repeated headers are matched as one value, joined by ",".
// The pseudo-headers ":method", ":path", ":authority" and ":scheme" are conditions on the
// request line: {Name: ":method", Kind: MatchExact, Value: "GET"} matches GET requests
// (Gateway API's method match).
type HeaderMatch struct {
	// Name is the header name, lower case.
	Name  string
	Kind  StringMatchKind
	Value string
	// Invert negates the condition: "notpresent", "notexact", "notcontains".
	Invert     bool
	IgnoreCase bool
	// TreatMissingAsEmpty compares a missing header as the empty string instead of
	// failing the condition.
	TreatMissingAsEmpty bool
}

// QueryMatch is one condition on a query parameter: the first value of the parameter
// named exactly Name (case-sensitive), as it appears in the query string (not
// percent-decoded). A request without the parameter never matches.
type QueryMatch struct {
	Name       string
	Kind       StringMatchKind
	Value      string
	IgnoreCase bool
}

// HeadersPolicy sets, adds and removes headers. Removals come first; then Set values
// replace any existing value, and Add values are appended to the existing ones (a header
// without one gets the value).
type HeadersPolicy struct {
	Set    []HeaderValue
	Add    []HeaderValue
	Remove []string
}

// HeaderValue is one header to set or add; Name is canonical ("X-Foo"). Value is in
// Envoy's header format: "%%" is a literal "%", and "%REQ(X-Foo)%" and the other operators
// the data planes know are evaluated per request; a literal value (Gateway API's) has its
// "%" doubled.
type HeaderValue struct {
	Name  string
	Value string
}

// Redirect describes a redirect answer; empty fields keep the request's value.
//
// The Location has no port unless Port is set, and a Scheme without a Port means that
// scheme's default port: on the shared listeners the request's Host loses its port
// before routing (the connection manager's strip_any_host_port), so a redirect never
// keeps it. A Port that is the default port of Scheme (80 for http, 443 for https) is
// left out too. A Gateway's listeners keep the Host's port; the translator names the
// default port where clients send another (translate/gateway.go gatewayHostsOn).
// Gateway API's redirect without a port or scheme, which keeps the listener's port, is
// Port set to the listener's port.
type Redirect struct {
	Scheme   string
	Hostname string
	Port     uint32
	// Path replaces the whole path; Prefix replaces the matched prefix, as
	// Route.PrefixRewrite does. At most one is set.
	Path   string
	Prefix string
	// StatusCode is 301, 302, 303, 307 or 308; 0 means 301.
	StatusCode uint32
}

// HashPolicy is one input to a request's hash. Exactly one of the fields is set.
type HashPolicy struct {
	Header         string
	QueryParameter string
	SourceIP       bool
	// Cookie, when set, hashes the named cookie. With CookieGenerate the proxy creates the
	// cookie when the request has none (cookie affinity), with CookieTTL as its lifetime
	// (0: a session cookie).
	Cookie         string
	CookieGenerate bool
	CookieTTL      time.Duration
	CookiePath     string
	Terminal       bool
}

// TCPProxy sends a connection's bytes to one of its clusters.
type TCPProxy struct {
	Clusters []*WeightedCluster
	// Source is the object that declared it.
	Source ObjectRef
}

// TimeoutPolicy holds a route's timeouts. A nil field means the proxy's default; a zero
// duration means no timeout at all.
type TimeoutPolicy struct {
	// Request bounds the time from the end of the request to the end of the response,
	// retries included (Gateway API's timeouts.request; its timeouts.backendRequest is
	// RetryPolicy.PerTryTimeout). Default 15s.
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
	// PerTryTimeout bounds each attempt, from when it has its connection and the
	// request is complete to its response headers; 0 leaves only the route's request
	// timeout. A policy with NumRetries 0 and a PerTryTimeout bounds the one attempt.
	PerTryTimeout time.Duration
	// RetryOn are Envoy retry conditions ("5xx", "gateway-error", "reset", ...) used
	// instead of the status-code rule above when not empty; OnStatusCodes then adds
	// "retriable-status-codes".
	RetryOn []string
	// Backoff is the base interval between attempts (Gateway API's retry backoff): the
	// wait before retry n is random, below (2^n - 1) times Backoff, and at most ten times
	// Backoff. 0 means 25ms.
	Backoff time.Duration
}

// WeightedCluster is one destination of a route.
type WeightedCluster struct {
	Cluster *Cluster
	Weight  uint32
	// RequestHeaders and ResponseHeaders apply only to requests sent to this cluster.
	RequestHeaders  *HeadersPolicy
	ResponseHeaders *HeadersPolicy
	// CookieRewrites change the cookies this cluster's answers set, before the route's
	// (an HTTPProxy service's cookieRewritePolicies).
	CookieRewrites []CookieRewrite
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
	// DNSLookupFamily restricts ExternalName's addresses: "v4", "v6", "all", or "auto"
	// (IPv6 when the name has one); "" is the data plane's default.
	DNSLookupFamily string
	// Endpoints are the ready addresses behind the port. Empty means requests get 503.
	Endpoints []Endpoint
	// SkippedEndpoints counts addresses left out because they cannot be connected to.
	SkippedEndpoints int
	// LoadBalancer is the strategy for picking an endpoint; "" means round robin.
	LoadBalancer LoadBalancer
	// HealthCheck, when set, is an active health check of every endpoint.
	HealthCheck *HealthCheck
	// Protocol is how the proxy speaks to the endpoints: "" (HTTP/1.1), "h2c" (HTTP/2 in
	// clear text), "h2" (HTTP/2 over TLS) or "tls" (HTTP/1.1 over TLS).
	Protocol string
	// UpstreamValidation, when set, verifies the endpoints' certificates (TLS protocols
	// only); without it the connection is encrypted but not verified.
	UpstreamValidation *UpstreamValidation
	// Outlier, when set, ejects endpoints that keep failing (passive health check).
	Outlier *OutlierDetection
	// IdleConnectionTimeout, when set, closes upstream connections idle this long.
	IdleConnectionTimeout *time.Duration
	// SlowStart, when set, ramps up the share of endpoints that join the cluster.
	SlowStart *SlowStart
	// CircuitBreakers are what the Service's annotations set (service_breakers.go).
	CircuitBreakers CircuitBreakers
}

// UpstreamValidation is how an upstream certificate is verified.
type UpstreamValidation struct {
	// CAName is the namespace/name of the Secret holding CACert, for names and messages.
	CAName string
	// CACert is what the certificate must chain to; without it the certificate is not
	// verified and only ServerName is used (a JWT key set without validation).
	CACert []byte
	// SubjectNames are accepted DNS subject alternative names; the first is sent as
	// SNI unless ServerName is set.
	SubjectNames []string
	// SubjectURIs are accepted URI subject alternative names (SPIFFE IDs, say),
	// compared exactly. A certificate carrying any one of SubjectNames or
	// SubjectURIs is accepted.
	SubjectURIs []string
	// ServerName, when set, is sent as SNI instead (Gateway API's BackendTLSPolicy:
	// its hostname is the SNI even when its subjectAltNames authenticate).
	ServerName string
}

// OutlierDetection ejects an endpoint after Consecutive5xx consecutive 5xx answers, for
// BaseEjectionTime times the number of times it has been ejected.
type OutlierDetection struct {
	Consecutive5xx     uint32
	Interval           time.Duration
	BaseEjectionTime   time.Duration
	MaxEjectionPercent uint32
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

// HealthCheck is an active health check with every field defaulted: HTTP unless TCP.
type HealthCheck struct {
	// TCP checks only that a connection can be opened; Path and Host are unused then.
	TCP bool
	// ExpectedStatuses are the HTTP answers that count as healthy, [Start, End) each;
	// empty means 200 only.
	ExpectedStatuses   []StatusRange
	Path               string
	Host               string
	Interval           time.Duration
	Timeout            time.Duration
	UnhealthyThreshold uint32
	HealthyThreshold   uint32
}

// StatusRange is the HTTP statuses from Start up to but not including End.
type StatusRange struct {
	Start, End int64
}

// Endpoint is one backend address.
type Endpoint struct {
	Address string
	Port    int32
	// HealthPort, when not 0, is the port its active health checks go to
	// (HTTPProxy's healthPort): the address's port of the Service's health port.
	HealthPort int32
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
	// Root is set for IngressRoutes and HTTPProxies with a virtualhost.
	Root bool
	// Warnings are remarks on an object that is served anyway (HTTPProxy status
	// conditions list them apart from the description).
	Warnings []Problem
	// Noted: the object is valid, and its description carries remarks (for an
	// HTTPProxy, its Warnings): part of it is not served as written (a missing Service
	// answers 503, an include or delegation is not followed, a field is ignored). What
	// the log shows at WARN, with invalid and orphaned objects.
	Noted bool
	// Errors are the reasons an invalid object is not served, one per problem.
	Errors []Problem
	// Hosts are the virtual hosts the object serves routes on, sorted.
	Hosts []string
	// GatewayAPI is set for Gateway API objects: the conditions their status subresource
	// carries (Status, Description, Errors and Warnings sum them up for `portico check`).
	GatewayAPI *GatewayAPIStatus
}

// Problem is one error or warning about an object, as HTTPProxy status sub-conditions
// carry them: Type is the area ("IncludeError", "ServiceError", ...), Reason a CamelCase
// cause ("NotFound"), Message what is wrong and how to fix it.
type Problem struct {
	Type    string
	Reason  string
	Message string
}

// Same reports whether two statuses say the same thing about the same object: what a
// status writer compares before writing again.
func (s *Status) Same(o *Status) bool {
	return s.Object == o.Object && s.Status == o.Status && s.Description == o.Description &&
		slices.Equal(s.Warnings, o.Warnings) && slices.Equal(s.Errors, o.Errors) &&
		equality.Semantic.DeepEqual(s.GatewayAPI, o.GatewayAPI)
}
