package v1

// TimeoutPolicy holds a route's timeouts. Each is a Go duration ("300ms", "5s", "1m"),
// or "infinity" (also "infinite") for none; "0s" is none too. Unset, the default
// applies.
type TimeoutPolicy struct {
	// Response is the time allowed for the whole response, from the end of the
	// request; default 15s.
	// +optional
	// +kubebuilder:validation:Pattern=`^(((\d*(\.\d*)?h)|(\d*(\.\d*)?m)|(\d*(\.\d*)?s)|(\d*(\.\d*)?ms)|(\d*(\.\d*)?us)|(\d*(\.\d*)?µs)|(\d*(\.\d*)?ns))+|infinity|infinite)$`
	Response string `json:"response,omitempty"`
	// Idle is the time a request (an HTTP/2 stream) may see no activity; an idle
	// HTTP/1.1 connection between requests does not count. Default 5m.
	// +optional
	// +kubebuilder:validation:Pattern=`^(((\d*(\.\d*)?h)|(\d*(\.\d*)?m)|(\d*(\.\d*)?s)|(\d*(\.\d*)?ms)|(\d*(\.\d*)?us)|(\d*(\.\d*)?µs)|(\d*(\.\d*)?ns))+|infinity|infinite)$`
	Idle string `json:"idle,omitempty"`
	// IdleConnection is how long an upstream connection without requests is kept;
	// default 1h.
	// +optional
	// +kubebuilder:validation:Pattern=`^(((\d*(\.\d*)?h)|(\d*(\.\d*)?m)|(\d*(\.\d*)?s)|(\d*(\.\d*)?ms)|(\d*(\.\d*)?us)|(\d*(\.\d*)?µs)|(\d*(\.\d*)?ns))+|infinity|infinite)$`
	IdleConnection string `json:"idleConnection,omitempty"`
}

// RetryOn is a condition under which a request is retried, as Envoy names it
// (x-envoy-retry-on and x-envoy-retry-grpc-on). Portico refuses reset-before-request,
// envoy-ratelimited, http3-post-connect-failure and retriable-headers (which needs
// header matchers HTTPProxy cannot express): they make the object invalid.
// +kubebuilder:validation:Enum="5xx";gateway-error;reset;reset-before-request;connect-failure;envoy-ratelimited;retriable-4xx;refused-stream;retriable-status-codes;retriable-headers;http3-post-connect-failure;cancelled;deadline-exceeded;internal;resource-exhausted;unavailable
type RetryOn string

// RetryPolicy retries failed requests.
type RetryPolicy struct {
	// NumRetries is the most retries of a request: -1 disables retries, 0 means the
	// default of 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=-1
	NumRetries int64 `json:"count"`
	// PerTryTimeout bounds each attempt, the first and every retry; unset, an attempt
	// is bounded only by the route's response timeout.
	// +optional
	// +kubebuilder:validation:Pattern=`^(((\d*(\.\d*)?h)|(\d*(\.\d*)?m)|(\d*(\.\d*)?s)|(\d*(\.\d*)?ms)|(\d*(\.\d*)?us)|(\d*(\.\d*)?µs)|(\d*(\.\d*)?ns))+|infinity|infinite)$`
	PerTryTimeout string `json:"perTryTimeout,omitempty"`
	// RetryOn are the conditions retried; default 5xx.
	// +optional
	RetryOn []RetryOn `json:"retryOn,omitempty"`
	// RetriableStatusCodes are the status codes retried under the
	// retriable-status-codes condition.
	// +optional
	RetriableStatusCodes []uint32 `json:"retriableStatusCodes,omitempty"`
}

// FailurePolicy is seed 004's answer to failing upstreams: it retries failed requests
// (as RetryPolicy does) and, unless told not to, ejects endpoints that keep failing
// (a passive health check, Envoy's outlier detection). Pointers tell an unset field,
// which gets the default given, from a zero one.
// Portico: not in Contour's schema.
type FailurePolicy struct {
	// Count is the most retries of a request, 0 to 100; 0 means none; default 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Count *int64 `json:"count,omitempty"`
	// PerTryTimeout bounds each attempt.
	// +optional
	// +kubebuilder:validation:Pattern=`^(((\d*(\.\d*)?h)|(\d*(\.\d*)?m)|(\d*(\.\d*)?s)|(\d*(\.\d*)?ms)|(\d*(\.\d*)?us)|(\d*(\.\d*)?µs)|(\d*(\.\d*)?ns))+|infinity|infinite)$`
	PerTryTimeout string `json:"perTryTimeout,omitempty"`
	// RetryOn are the conditions retried; default 5xx.
	// +optional
	RetryOn []RetryOn `json:"retryOn,omitempty"`
	// RetryPolicyEnabled false turns the retries off; default true.
	// +optional
	RetryPolicyEnabled *bool `json:"retryPolicyEnabled,omitempty"`
	// PassiveHealthCheckEnabled false turns the ejection of failing endpoints off;
	// default true.
	// +optional
	PassiveHealthCheckEnabled *bool `json:"passiveHealthCheckEnabled,omitempty"`
	// Consecutive5xx responses (or connection failures) eject an endpoint; default 5.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Consecutive5xx *int64 `json:"consecutive5xx,omitempty"`
	// Interval between ejection sweeps; default 10s.
	// +optional
	// +kubebuilder:validation:Pattern=`^(((\d*(\.\d*)?h)|(\d*(\.\d*)?m)|(\d*(\.\d*)?s)|(\d*(\.\d*)?ms)|(\d*(\.\d*)?us)|(\d*(\.\d*)?µs)|(\d*(\.\d*)?ns))+)$`
	Interval string `json:"interval,omitempty"`
	// BaseEjectionTime an endpoint stays ejected, multiplied by the number of times
	// it was; default 30s.
	// +optional
	// +kubebuilder:validation:Pattern=`^(((\d*(\.\d*)?h)|(\d*(\.\d*)?m)|(\d*(\.\d*)?s)|(\d*(\.\d*)?ms)|(\d*(\.\d*)?us)|(\d*(\.\d*)?µs)|(\d*(\.\d*)?ns))+)$`
	BaseEjectionTime string `json:"baseEjectionTime,omitempty"`
	// MaxEjectionPercent of a service's endpoints may be ejected at once (one
	// endpoint always may); default 50.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxEjectionPercent *int64 `json:"maxEjectionPercent,omitempty"`
}

// HTTPHealthCheckPolicy is an active HTTP health check of a route's endpoints.
type HTTPHealthCheckPolicy struct {
	// Path is requested on every endpoint.
	Path string `json:"path"`
	// Host is the Host header of the checks; default "contour-envoy-healthcheck".
	// +optional
	Host string `json:"host,omitempty"`
	// IntervalSeconds between checks; 0 means the default, 5.
	// +optional
	IntervalSeconds int64 `json:"intervalSeconds"`
	// TimeoutSeconds to wait for an answer; 0 means the default, 2.
	// +optional
	TimeoutSeconds int64 `json:"timeoutSeconds"`
	// UnhealthyThresholdCount failed checks mark an endpoint unhealthy; 0 means the
	// default, 3.
	// +optional
	// +kubebuilder:validation:Minimum=0
	UnhealthyThresholdCount int64 `json:"unhealthyThresholdCount"`
	// HealthyThresholdCount passed checks mark it healthy again; 0 means the
	// default, 2.
	// +optional
	// +kubebuilder:validation:Minimum=0
	HealthyThresholdCount int64 `json:"healthyThresholdCount"`
	// ExpectedStatuses are the statuses that count as healthy; default 200 only.
	// +optional
	ExpectedStatuses []StatusRange `json:"expectedStatuses,omitempty"`
}

// StatusRange is the HTTP statuses from Start to End, End excluded.
type StatusRange struct {
	// Start is the first status of the range.
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=599
	Start int64 `json:"start"`
	// End is the status after the last one of the range.
	// +kubebuilder:validation:Minimum=101
	// +kubebuilder:validation:Maximum=600
	End int64 `json:"end"`
}

// TCPHealthCheckPolicy is an active TCP health check: a connection is attempted.
type TCPHealthCheckPolicy struct {
	// IntervalSeconds between checks; 0 means the default, 5.
	// +optional
	IntervalSeconds int64 `json:"intervalSeconds"`
	// TimeoutSeconds to wait for the connection; 0 means the default, 2.
	// +optional
	TimeoutSeconds int64 `json:"timeoutSeconds"`
	// UnhealthyThresholdCount failed checks mark an endpoint unhealthy; 0 means the
	// default, 3.
	// +optional
	UnhealthyThresholdCount uint32 `json:"unhealthyThresholdCount"`
	// HealthyThresholdCount passed checks mark it healthy again; 0 means the
	// default, 2.
	// +optional
	HealthyThresholdCount uint32 `json:"healthyThresholdCount"`
}

// LoadBalancerPolicy chooses among the endpoints of a service.
type LoadBalancerPolicy struct {
	// Strategy is RoundRobin (the default), Random, WeightedLeastRequest, Cookie or
	// RequestHash; another name makes the object invalid.
	// +optional
	Strategy string `json:"strategy,omitempty"`
	// RequestHashPolicies say what RequestHash hashes; an invalid entry makes the
	// object invalid. Without any, RequestHash hashes the client's address (with a
	// warning).
	// +optional
	RequestHashPolicies []RequestHashPolicy `json:"requestHashPolicies,omitempty"`
}

// RequestHashPolicy is one input of the RequestHash strategy; exactly one of the
// options is set.
type RequestHashPolicy struct {
	// Terminal stops at this policy when its input is present.
	// +optional
	Terminal bool `json:"terminal,omitempty"`
	// HeaderHashOptions hash a request header.
	// +optional
	HeaderHashOptions *HeaderHashOptions `json:"headerHashOptions,omitempty"`
	// QueryParameterHashOptions hash a query parameter.
	// +optional
	QueryParameterHashOptions *QueryParameterHashOptions `json:"queryParameterHashOptions,omitempty"`
	// HashSourceIP hashes the client's address.
	// +optional
	HashSourceIP bool `json:"hashSourceIP,omitempty"`
}

// HeaderHashOptions name the request header hashed; no hash when it is absent.
type HeaderHashOptions struct {
	// HeaderName is the header.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	HeaderName string `json:"headerName,omitempty"`
}

// QueryParameterHashOptions name the query parameter hashed; no hash when it is
// absent.
type QueryParameterHashOptions struct {
	// ParameterName is the parameter.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	ParameterName string `json:"parameterName,omitempty"`
}

// PathRewritePolicy rewrites the path of a routed request; routing is not affected.
type PathRewritePolicy struct {
	// ReplacePrefix replaces the path prefix the request matched.
	// +optional
	ReplacePrefix []ReplacePrefix `json:"replacePrefix,omitempty"`
}

// ReplacePrefix replaces a matched path prefix.
type ReplacePrefix struct {
	// Prefix, when set, is the one prefix (as the includes make it) that is replaced,
	// so that an object included under several prefixes can treat each its own way;
	// unset, any matched prefix is.
	// +optional
	// +kubebuilder:validation:MinLength=1
	Prefix string `json:"prefix,omitempty"`
	// Replacement takes the prefix's place; it starts with "/". Replacing a prefix
	// such as "/api" with one ending in "/" sends "/api/x" as ".../x", not "...//x".
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Replacement string `json:"replacement"`
}

// HeadersPolicy edits headers. Host can be set on requests only, to a literal host
// name; it cannot be removed. Headers the data plane writes itself cannot be named:
// pseudo-headers (":path"), hop-by-hop headers (Connection, Keep-Alive,
// Proxy-Connection, Transfer-Encoding, Upgrade, TE, Trailer), Content-Length,
// X-Request-Id, and Date in a response's remove list. Server in a response policy is
// decided per route: a service may change it only as every service of its route does.
type HeadersPolicy struct {
	// Set adds these headers, replacing any of the same name.
	// +optional
	Set []HeaderValue `json:"set,omitempty"`
	// Remove removes the headers of these names.
	// +optional
	Remove []string `json:"remove,omitempty"`
}

// HeaderValue is a header.
type HeaderValue struct {
	// Name of the header.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Value of the header: text, with the dynamic values Contour documents (Envoy's
	// %REQ(Header-Name)%, %DOWNSTREAM_REMOTE_ADDRESS%, %DOWNSTREAM_PEER_SUBJECT%,
	// %PROTOCOL%, %HOSTNAME%, %RESPONSE_FLAGS% and the others the HTTPProxy guide
	// lists), and %CONTOUR_NAMESPACE%, %CONTOUR_SERVICE_NAME% and
	// %CONTOUR_SERVICE_PORT% (these two in a service's policy only); any other "%" is
	// sent as it is.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Value string `json:"value"`
}

// HTTPRequestRedirectPolicy answers with a redirect; each part of the Location not set
// here is the request's.
type HTTPRequestRedirectPolicy struct {
	// Scheme of the Location.
	// +optional
	// +kubebuilder:validation:Enum=http;https
	Scheme *string `json:"scheme,omitempty"`
	// Hostname of the Location, without wildcards.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Hostname *string `json:"hostname,omitempty"`
	// Port of the Location.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`
	// StatusCode of the redirect: 301, 302, 303, 307 or 308.
	// +optional
	// +kubebuilder:default=302
	// +kubebuilder:validation:Enum=301;302;303;307;308
	// +kubebuilder:validation:Format=int32
	StatusCode *int `json:"statusCode,omitempty"`
	// Path replaces the whole path. Not together with Prefix.
	// +optional
	// +kubebuilder:validation:Pattern=`^\/.*$`
	Path *string `json:"path,omitempty"`
	// Prefix replaces the matched prefix (or path). Not together with Path.
	// +optional
	// +kubebuilder:validation:Pattern=`^\/.*$`
	Prefix *string `json:"prefix,omitempty"`
}

// RedirectResponseCode is a redirect status.
// +kubebuilder:validation:Enum=301;302;303;307;308
type RedirectResponseCode uint32

// HTTPInternalRedirectPolicy follows an upstream's redirects inside the proxy.
type HTTPInternalRedirectPolicy struct {
	// MaxInternalRedirects a request may have followed before a redirect is returned
	// to the client instead.
	// +optional
	MaxInternalRedirects uint32 `json:"maxInternalRedirects,omitempty"`
	// RedirectResponseCodes are followed; default 302 only.
	// +optional
	RedirectResponseCodes []RedirectResponseCode `json:"redirectResponseCodes,omitempty"`
	// AllowCrossSchemeRedirect follows redirects to another scheme: Always, Never, or
	// SafeOnly (from HTTPS to either, from HTTP to HTTP only).
	// +optional
	// +kubebuilder:validation:Enum=Always;Never;SafeOnly
	// +kubebuilder:default=Never
	AllowCrossSchemeRedirect string `json:"allowCrossSchemeRedirect,omitempty"`
	// DenyRepeatedRouteRedirect refuses a redirect to a route the request has already
	// been redirected from.
	// +optional
	DenyRepeatedRouteRedirect bool `json:"denyRepeatedRouteRedirect,omitempty"`
}

// HTTPDirectResponsePolicy answers with a fixed response.
type HTTPDirectResponsePolicy struct {
	// StatusCode of the response.
	// +kubebuilder:validation:Minimum=200
	// +kubebuilder:validation:Maximum=599
	StatusCode int `json:"statusCode"`
	// Body of the response; none when unset. At most 4096 bytes.
	// +optional
	Body string `json:"body,omitempty"`
}

// CookieRewritePolicy rewrites attributes of the Set-Cookie headers of one cookie.
type CookieRewritePolicy struct {
	// Name of the cookie.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^[^()<>@,;:\\"\/[\]?={} \t\x7f\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f]+$`
	Name string `json:"name"`
	// PathRewrite sets the Path attribute.
	// +optional
	PathRewrite *CookiePathRewrite `json:"pathRewrite,omitempty"`
	// DomainRewrite sets the Domain attribute.
	// +optional
	DomainRewrite *CookieDomainRewrite `json:"domainRewrite,omitempty"`
	// Secure sets or clears the Secure attribute.
	// +optional
	Secure *bool `json:"secure,omitempty"`
	// SameSite sets the SameSite attribute.
	// +optional
	// +kubebuilder:validation:Enum=Strict;Lax;None
	SameSite *string `json:"sameSite,omitempty"`
}

// CookiePathRewrite is a new Path attribute.
type CookiePathRewrite struct {
	// Value of the attribute.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^[^;\x7f\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f]+$`
	Value string `json:"value"`
}

// CookieDomainRewrite is a new Domain attribute.
type CookieDomainRewrite struct {
	// Value of the attribute.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	Value string `json:"value"`
}

// SlowStartPolicy ramps up the traffic of a new endpoint over a window; only with the
// RoundRobin and WeightedLeastRequest strategies.
type SlowStartPolicy struct {
	// Window is the duration of the ramp.
	// +kubebuilder:validation:Pattern=`^(((\d*(\.\d*)?h)|(\d*(\.\d*)?m)|(\d*(\.\d*)?s)|(\d*(\.\d*)?ms)|(\d*(\.\d*)?us)|(\d*(\.\d*)?µs)|(\d*(\.\d*)?ns))+)$`
	Window string `json:"window"`
	// Aggression shapes the ramp: 1.0 is linear, more is faster; above 0.
	// +optional
	// +kubebuilder:default=`1.0`
	// +kubebuilder:validation:Pattern=`^([0-9]+([.][0-9]+)?|[.][0-9]+)$`
	Aggression string `json:"aggression"`
	// MinimumWeightPercent is the share of its weight a new endpoint starts with, so
	// that it is not starved at first.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MinimumWeightPercent uint32 `json:"minWeightPercent"`
}

// UpstreamValidation verifies the certificate of a TLS upstream.
// +kubebuilder:validation:XValidation:message="subjectNames[0] must equal subjectName if set",rule="has(self.subjectNames) ? self.subjectNames[0] == self.subjectName : true"
type UpstreamValidation struct {
	// CACertificate is a Secret with a ca.crt bundle the certificate must chain to
	// ("namespace/name" when delegated).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	CACertificate string `json:"caSecret"`
	// SubjectName must be among the certificate's subject alternative names, and is
	// sent as SNI. It predates SubjectNames, whose first entry must equal it when both
	// are set.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=250
	SubjectName string `json:"subjectName"`
	// SubjectNames: at least one must be among the certificate's subject alternative
	// names.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	SubjectNames []string `json:"subjectNames"`
}
