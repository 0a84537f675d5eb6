package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HTTPProxy is one document of the routing graph: a root when it has a virtualhost,
// otherwise a part of a root's request space that the root (or a part of it) includes.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,path=httpproxies,singular=httpproxy,shortName=proxy;proxies
// +kubebuilder:printcolumn:name="FQDN",type=string,JSONPath=`.spec.virtualhost.fqdn`,description="Host name the root serves"
// +kubebuilder:printcolumn:name="TLS Secret",type=string,JSONPath=`.spec.virtualhost.tls.secretName`,description="Secret holding the certificate"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.currentStatus`,description="valid, invalid or orphaned"
// +kubebuilder:printcolumn:name="Status Description",type=string,JSONPath=`.status.description`,description="Why, and what to do about it"
type HTTPProxy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HTTPProxySpec `json:"spec"`
	// Status is written by the controller. The default is what a new object shows
	// until a controller has looked at it.
	// +optional
	// +kubebuilder:default={currentStatus: "NotReconciled", description: "Waiting for controller"}
	Status HTTPProxyStatus `json:"status,omitempty"`
}

// HTTPProxyList is a list of HTTPProxies.
//
// +kubebuilder:object:root=true
type HTTPProxyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HTTPProxy `json:"items"`
}

// HTTPProxySpec is the routing an HTTPProxy asks for.
type HTTPProxySpec struct {
	// VirtualHost makes the object a root: it owns this host name.
	// +optional
	VirtualHost *VirtualHost `json:"virtualhost,omitempty"`
	// Routes send the requests matching their conditions to services. When TCPProxy
	// is set, they are served on plain HTTP only (redirected to HTTPS unless
	// permitInsecure): the TLS connections go to the tcpproxy.
	// +optional
	Routes []Route `json:"routes,omitempty"`
	// TCPProxy forwards the virtual host's TLS connections as TCP streams instead of
	// routing HTTP requests.
	// +optional
	TCPProxy *TCPProxy `json:"tcpproxy,omitempty"`
	// Includes hand the requests matching their conditions to other HTTPProxies,
	// possibly in other namespaces.
	// +optional
	Includes []Include `json:"includes,omitempty"`
	// IngressClassName says which controller serves the object. It takes precedence
	// over the kubernetes.io/ingress.class annotation (and projectcontour.io/ and
	// contour.heptio.com/ingress.class); an object with neither is Portico's.
	// +optional
	IngressClassName string `json:"ingressClassName,omitempty"`
	// HTTPVersions are the HTTP versions offered to the HTTPS clients of a root's
	// virtual host (ALPN); empty means both. Plain HTTP is not affected.
	// Portico: not in Contour's schema (Contour sets it for every host at once).
	// +optional
	HTTPVersions []HTTPVersionType `json:"httpVersions,omitempty"`
}

// HTTPVersionType names an HTTP version, spelled as Contour spells it in its
// configuration.
// +kubebuilder:validation:Enum="HTTP/1.1";"HTTP/2"
type HTTPVersionType string

// The HTTP versions.
const (
	HTTPVersion1 HTTPVersionType = "HTTP/1.1"
	HTTPVersion2 HTTPVersionType = "HTTP/2"
)

// Include hands the requests that match Conditions to another HTTPProxy, whose own
// conditions are added to these.
type Include struct {
	// Name of the included HTTPProxy.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Namespace of the included HTTPProxy; default the including object's namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Conditions select the requests handed over. At most one prefix; exact and
	// regex path conditions are not allowed here. The requests they select belong to
	// the included object: those none of its routes match get 404, they are never
	// passed to another route of the including object.
	// +optional
	Conditions []MatchCondition `json:"conditions,omitempty"`
	// PermitInsecure lets the included routes that ask for it be served over plain
	// HTTP on a TLS virtual host. A route is only served so when every include on its
	// way from the root grants it: no object below the root can widen what the root
	// allows.
	// Portico: not in Contour's schema.
	// +optional
	PermitInsecure bool `json:"permitInsecure,omitempty"`
}

// MatchCondition is one condition a request must meet. Conditions of a route or an
// include all have to hold. One of the fields is set.
type MatchCondition struct {
	// Prefix matches the start of the path by whole segments ("/api" matches "/api"
	// and "/api/x", not "/apix"); a prefix ending in "/" matches every path that
	// starts with it.
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Exact matches the whole path; under an include it is relative to the include's
	// prefix ("/about" under "/blog" is "/blog/about"). Not allowed on includes.
	// +optional
	Exact string `json:"exact,omitempty"`
	// Regex matches the whole path against an RE2 regular expression; under an
	// include it is confined to the include's prefix. Not allowed on includes.
	// +optional
	Regex string `json:"regex,omitempty"`
	// Header matches a request header.
	// +optional
	Header *HeaderMatchCondition `json:"header,omitempty"`
	// QueryParameter matches a query parameter.
	// +optional
	QueryParameter *QueryParameterMatchCondition `json:"queryParameter,omitempty"`
	// Cookie, written NAME=VALUE, matches a request that carries that cookie with that
	// value (the Cookie header is parsed, not searched as text).
	// Portico: seed 004's cookie condition, not in Contour's schema.
	// +optional
	Cookie string `json:"cookie,omitempty"`
	// UserAgent matches a request whose User-Agent header contains this text.
	// Portico: seed 004's user-agent condition, not in Contour's schema.
	// +optional
	UserAgent string `json:"userAgent,omitempty"`
}

// HeaderMatchCondition matches the request header Name. One of Present, NotPresent,
// Contains, NotContains, Exact, NotExact and Regex is set.
type HeaderMatchCondition struct {
	// Name of the header, in any case.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Present holds when the header is there, whatever its value.
	// +optional
	Present bool `json:"present,omitempty"`
	// NotPresent holds when the header is absent.
	// +optional
	NotPresent bool `json:"notpresent,omitempty"`
	// Contains holds when the value contains this text.
	// +optional
	Contains string `json:"contains,omitempty"`
	// NotContains holds when the value does not contain this text.
	// +optional
	NotContains string `json:"notcontains,omitempty"`
	// IgnoreCase compares text without regard to case; a Regex gets "(?i)".
	// +optional
	IgnoreCase bool `json:"ignoreCase,omitempty"`
	// Exact holds when the value is this text.
	// +optional
	Exact string `json:"exact,omitempty"`
	// NotExact holds when the value is anything but this text.
	// +optional
	NotExact string `json:"notexact,omitempty"`
	// Regex holds when the whole value matches this RE2 regular expression.
	// +optional
	Regex string `json:"regex,omitempty"`
	// TreatMissingAsEmpty compares an absent header as the empty value, so that a
	// Regex matching "", NotExact and NotContains hold for it. Without it, no condition
	// but NotPresent holds for an absent header, as in Envoy. Not with Present
	// or NotPresent.
	// +optional
	TreatMissingAsEmpty bool `json:"treatMissingAsEmpty,omitempty"`
}

// QueryParameterMatchCondition matches the query parameter Name. One of Exact, Prefix,
// Suffix, Regex, Contains and Present is set.
type QueryParameterMatchCondition struct {
	// Name of the parameter.
	Name string `json:"name"`
	// Exact holds when the value is this text.
	// +optional
	Exact string `json:"exact,omitempty"`
	// Prefix holds when the value starts with this text.
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Suffix holds when the value ends with this text.
	// +optional
	Suffix string `json:"suffix,omitempty"`
	// Regex holds when the whole value matches this RE2 regular expression.
	// +optional
	Regex string `json:"regex,omitempty"`
	// Contains holds when the value contains this text.
	// +optional
	Contains string `json:"contains,omitempty"`
	// IgnoreCase compares text without regard to case; a Regex gets "(?i)".
	// +optional
	IgnoreCase bool `json:"ignoreCase,omitempty"`
	// Present holds when the parameter is there, whatever its value.
	// +optional
	Present bool `json:"present,omitempty"`
}

// Route sends the requests that meet its conditions to its services, or answers them
// itself (redirect, direct response).
type Route struct {
	// Conditions all have to hold; at most one of them is a path condition (prefix,
	// exact or regex). Included routes get the includes' conditions added.
	// +optional
	Conditions []MatchCondition `json:"conditions,omitempty"`
	// Services receive the traffic, split by weight.
	// +optional
	Services []Service `json:"services,omitempty"`
	// EnableWebsockets lets requests of the route upgrade to WebSocket.
	// +optional
	EnableWebsockets bool `json:"enableWebsockets,omitempty"`
	// PermitInsecure serves the route over plain HTTP too on a TLS virtual host,
	// instead of redirecting to HTTPS. A route of an included object is served so
	// only when every include on its way from the root sets permitInsecure too.
	// +optional
	PermitInsecure bool `json:"permitInsecure,omitempty"`
	// AuthPolicy changes, for this route, the authorization the virtual host asks for.
	// +optional
	AuthPolicy *AuthorizationPolicy `json:"authPolicy,omitempty"`
	// TimeoutPolicy sets the route's timeouts.
	// +optional
	TimeoutPolicy *TimeoutPolicy `json:"timeoutPolicy,omitempty"`
	// RetryPolicy retries failed requests.
	// +optional
	RetryPolicy *RetryPolicy `json:"retryPolicy,omitempty"`
	// HealthCheckPolicy actively checks the route's services' endpoints.
	// +optional
	HealthCheckPolicy *HTTPHealthCheckPolicy `json:"healthCheckPolicy,omitempty"`
	// LoadBalancerPolicy chooses among the endpoints of each service.
	// +optional
	LoadBalancerPolicy *LoadBalancerPolicy `json:"loadBalancerPolicy,omitempty"`
	// PathRewritePolicy rewrites the path once the request has been routed.
	// +optional
	PathRewritePolicy *PathRewritePolicy `json:"pathRewritePolicy,omitempty"`
	// RequestHeadersPolicy edits the request headers sent upstream. Setting Host
	// rewrites the request's host: to the value as written, or, for a value with
	// %REQ(Header-Name)%, to that request header's value (the Host is kept when the
	// request lacks it). %CONTOUR_SERVICE_NAME% and %CONTOUR_SERVICE_PORT% are sent
	// as written here: only a service's policy has a service to name.
	// +optional
	RequestHeadersPolicy *HeadersPolicy `json:"requestHeadersPolicy,omitempty"`
	// ResponseHeadersPolicy edits the response headers; Host cannot be set. Server
	// (portico by default, replacing the upstream's) can be set or removed.
	// +optional
	ResponseHeadersPolicy *HeadersPolicy `json:"responseHeadersPolicy,omitempty"`
	// CookieRewritePolicies rewrite attributes of Set-Cookie headers of responses;
	// at most one per cookie name.
	// +optional
	CookieRewritePolicies []CookieRewritePolicy `json:"cookieRewritePolicies,omitempty"`
	// RateLimitPolicy limits the route's request rate.
	// Portico: local is enforced by each proxy; global by the rate limit service of
	// --rate-limit-service.
	// +optional
	RateLimitPolicy *RateLimitPolicy `json:"rateLimitPolicy,omitempty"`
	// RequestRedirectPolicy answers with a redirect instead of proxying.
	// +optional
	RequestRedirectPolicy *HTTPRequestRedirectPolicy `json:"requestRedirectPolicy,omitempty"`
	// DirectResponsePolicy answers with a fixed response instead of proxying.
	// +optional
	DirectResponsePolicy *HTTPDirectResponsePolicy `json:"directResponsePolicy,omitempty"`
	// InternalRedirectPolicy follows redirects of the upstream instead of returning
	// them to the client.
	// +optional
	InternalRedirectPolicy *HTTPInternalRedirectPolicy `json:"internalRedirectPolicy,omitempty"`
	// JWTVerificationPolicy chooses which of the virtual host's JWT providers the
	// route requires, if any.
	// +optional
	JWTVerificationPolicy *JWTVerificationPolicy `json:"jwtVerificationPolicy,omitempty"`
	// IPAllowFilterPolicy only lets requests from these addresses through; it
	// replaces the virtual host's filter. Not together with IPDenyFilterPolicy.
	// +optional
	IPAllowFilterPolicy []IPFilterPolicy `json:"ipAllowPolicy,omitempty"`
	// IPDenyFilterPolicy refuses requests from these addresses; it replaces the
	// virtual host's filter. Not together with IPAllowFilterPolicy.
	// +optional
	IPDenyFilterPolicy []IPFilterPolicy `json:"ipDenyPolicy,omitempty"`
	// FailurePolicy retries failed requests and ejects failing endpoints (a passive
	// health check).
	// Portico: seed 004's failurePolicy, not in Contour's schema.
	// +optional
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`
}

// TCPProxy forwards the TLS connections of a root's virtual host (decrypted, or passed
// through as they are) to services, or includes another HTTPProxy that does.
type TCPProxy struct {
	// LoadBalancerPolicy chooses among the endpoints; the Cookie and RequestHash
	// strategies need HTTP requests and make the object invalid here.
	// +optional
	LoadBalancerPolicy *LoadBalancerPolicy `json:"loadBalancerPolicy,omitempty"`
	// Services receive the connections, split by weight.
	// +optional
	Services []Service `json:"services"`
	// Include hands the connections to the tcpproxy of another HTTPProxy.
	// +optional
	Include *TCPProxyInclude `json:"include,omitempty"`
	// IncludesDeprecated is Include under the plural name the field first had; it is
	// kept so that manifests using it still apply.
	// +optional
	IncludesDeprecated *TCPProxyInclude `json:"includes,omitempty"`
	// HealthCheckPolicy actively checks the endpoints with TCP connections.
	// +optional
	HealthCheckPolicy *TCPHealthCheckPolicy `json:"healthCheckPolicy,omitempty"`
}

// TCPProxyInclude names the HTTPProxy whose tcpproxy handles the connections.
type TCPProxyInclude struct {
	// Name of the HTTPProxy.
	Name string `json:"name"`
	// Namespace of the HTTPProxy; default the including object's namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Service is a port of a Service in the HTTPProxy's namespace.
type Service struct {
	// Name of the Service.
	Name string `json:"name"`
	// Port is the Service's port number.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int `json:"port"`
	// HealthPort is the Service port health checks go to; default Port. Each endpoint
	// is checked on its own port for it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	HealthPort int `json:"healthPort,omitempty"`
	// Protocol spoken to the endpoints: h2 (HTTP/2 over TLS), h2c (HTTP/2 in clear
	// text) or tls (HTTP/1.1 over TLS). Unset: HTTP/1.1 in clear text (the Service's
	// annotations are not read). Not on a tcpproxy's services.
	// +optional
	// +kubebuilder:validation:Enum=h2;h2c;tls
	Protocol *string `json:"protocol,omitempty"`
	// Weight is the service's share of the traffic. When no service of the route
	// sets one, traffic is split evenly. For a mirror it is the percentage mirrored,
	// unset (or 0) meaning all of it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Weight int64 `json:"weight,omitempty"`
	// UpstreamValidation verifies the certificate of TLS endpoints.
	// +optional
	UpstreamValidation *UpstreamValidation `json:"validation,omitempty"`
	// Mirror sends the service a copy of the route's requests; its responses are
	// dropped.
	// +optional
	Mirror bool `json:"mirror,omitempty"`
	// RequestHeadersPolicy edits the request headers sent to this service; Host,
	// when set, must be a literal host name. Ignored (a warning) on a tcpproxy's
	// services.
	// +optional
	RequestHeadersPolicy *HeadersPolicy `json:"requestHeadersPolicy,omitempty"`
	// ResponseHeadersPolicy edits the headers of this service's responses; Host
	// cannot be set. Ignored (a warning) on a tcpproxy's services.
	// +optional
	ResponseHeadersPolicy *HeadersPolicy `json:"responseHeadersPolicy,omitempty"`
	// CookieRewritePolicies rewrite attributes of this service's Set-Cookie headers,
	// before the route's.
	// +optional
	CookieRewritePolicies []CookieRewritePolicy `json:"cookieRewritePolicies,omitempty"`
	// SlowStartPolicy ramps up the traffic sent to a new endpoint.
	// +optional
	SlowStartPolicy *SlowStartPolicy `json:"slowStartPolicy,omitempty"`
}

// HTTPProxyStatus is the controller's verdict on an HTTPProxy.
type HTTPProxyStatus struct {
	// CurrentStatus is "valid", "invalid" or "orphaned".
	// +optional
	CurrentStatus string `json:"currentStatus,omitempty"`
	// Description says why, and what to do about it.
	// +optional
	Description string `json:"description,omitempty"`
	// LoadBalancer holds the addresses the virtual host is reached at.
	// +optional
	LoadBalancer corev1.LoadBalancerStatus `json:"loadBalancer,omitempty"`
	// Conditions detail the verdict: the controller writes one condition, "Valid"
	// (status True when currentStatus is valid), with the errors and warnings behind
	// it. It replaces the whole list: conditions of other types are not kept.
	// +optional
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=type
	Conditions []DetailedCondition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}
