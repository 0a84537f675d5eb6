package v1

// VirtualHost is the host a root HTTPProxy serves, and what applies to every request
// of it.
type VirtualHost struct {
	// Fqdn is the host name; "*." followed by a name makes it a wildcard.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern="^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	Fqdn string `json:"fqdn"`
	// TLS serves the host over HTTPS (SNI is Fqdn); plain-HTTP requests are
	// redirected unless their route permits insecure requests (a route of an included
	// object only when every include on its way permits them too).
	// +optional
	TLS *TLS `json:"tls,omitempty"`
	// Authorization asks an external server whether each request may pass. It needs
	// TLS; a client certificate, when validated, is sent along.
	// +optional
	Authorization *AuthorizationServer `json:"authorization,omitempty"`
	// CORSPolicy answers cross-origin requests.
	// +optional
	CORSPolicy *CORSPolicy `json:"corsPolicy,omitempty"`
	// RateLimitPolicy limits the host's request rate.
	// Portico: local is enforced by each proxy; global by the rate limit service of
	// --rate-limit-service.
	// +optional
	RateLimitPolicy *RateLimitPolicy `json:"rateLimitPolicy,omitempty"`
	// JWTProviders verify JSON Web Tokens of requests; routes say which they require.
	// +optional
	JWTProviders []JWTProvider `json:"jwtProviders,omitempty"`
	// IPAllowFilterPolicy only lets requests from these addresses through, unless a
	// route sets its own filter. Not together with IPDenyFilterPolicy.
	// +optional
	IPAllowFilterPolicy []IPFilterPolicy `json:"ipAllowPolicy,omitempty"`
	// IPDenyFilterPolicy refuses requests from these addresses, unless a route sets
	// its own filter. Not together with IPAllowFilterPolicy.
	// +optional
	IPDenyFilterPolicy []IPFilterPolicy `json:"ipDenyPolicy,omitempty"`
}

// TLS is how a virtual host's TLS connections are handled: terminated with a
// certificate, or passed through to a tcpproxy.
type TLS struct {
	// SecretName is a kubernetes.io/tls Secret whose certificate covers Fqdn: in the
	// root's namespace, or "namespace/name" of a Secret whose namespace delegates it
	// with a TLSCertificateDelegation. Set either this or Passthrough.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// MinimumProtocolVersion is the oldest TLS version accepted: "1.2" (the default)
	// or "1.3".
	// +optional
	MinimumProtocolVersion string `json:"minimumProtocolVersion,omitempty"`
	// MaximumProtocolVersion is the newest TLS version accepted: "1.2" or "1.3" (the
	// default).
	// +optional
	MaximumProtocolVersion string `json:"maximumProtocolVersion,omitempty"`
	// Passthrough hands the connection, still encrypted, to the tcpproxy's services.
	// +optional
	Passthrough bool `json:"passthrough,omitempty"`
	// ClientValidation asks clients for a certificate, and says how to check it.
	// +optional
	ClientValidation *DownstreamValidation `json:"clientValidation,omitempty"`
	// EnableFallbackCertificate also serves clients that send no SNI (or an unknown
	// one) with the controller's fallback certificate (--fallback-certificate).
	// +optional
	EnableFallbackCertificate bool `json:"enableFallbackCertificate,omitempty"`
}

// DownstreamValidation is how client certificates are checked.
type DownstreamValidation struct {
	// CACertificate is a Secret with a ca.crt bundle that client certificates must
	// chain to ("namespace/name" when delegated).
	// +optional
	// +kubebuilder:validation:MinLength=1
	CACertificate string `json:"caSecret,omitempty"`
	// SkipClientCertValidation requests a certificate without verifying it, for an
	// authorization server that does. With CACertificate set, a certificate is still
	// required.
	// +optional
	SkipClientCertValidation bool `json:"skipClientCertValidation"`
	// ForwardClientCertificate passes parts of the client certificate upstream in
	// the x-forwarded-client-cert header.
	// +optional
	ForwardClientCertificate *ClientCertificateDetails `json:"forwardClientCertificate,omitempty"`
	// CertificateRevocationList is a Secret with crl.pem, the revocation lists of
	// every CA of the chain ("namespace/name" when delegated).
	// +optional
	// +kubebuilder:validation:MinLength=1
	CertificateRevocationList string `json:"crlSecret,omitempty"`
	// OnlyVerifyLeafCertCrl checks revocation of the client's own certificate only.
	// +optional
	OnlyVerifyLeafCertCrl bool `json:"crlOnlyVerifyLeafCert"`
	// OptionalClientCertificate lets clients without a certificate in; one that is
	// sent is still checked.
	// +optional
	OptionalClientCertificate bool `json:"optionalClientCertificate"`
}

// ClientCertificateDetails are the parts of a client certificate forwarded upstream.
type ClientCertificateDetails struct {
	// Subject of the certificate.
	// +optional
	Subject bool `json:"subject"`
	// Cert is the certificate itself, URL-encoded PEM.
	// +optional
	Cert bool `json:"cert"`
	// Chain is the whole chain, leaf first, URL-encoded PEM.
	// +optional
	Chain bool `json:"chain"`
	// DNS are the certificate's DNS subject alternative names.
	// +optional
	DNS bool `json:"dns"`
	// URI is the certificate's URI subject alternative name.
	// +optional
	URI bool `json:"uri"`
}

// ExtensionServiceReference names an ExtensionService (projectcontour.io/v1alpha1).
type ExtensionServiceReference struct {
	// APIVersion of the referent; default projectcontour.io/v1alpha1.
	// +optional
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion,omitempty"`
	// Namespace of the referent; default the referring object's.
	// +optional
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace,omitempty"`
	// Name of the referent.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name,omitempty"`
}

// AuthorizationServiceType is the protocol of an external authorization server.
type AuthorizationServiceType string

// The protocols of external authorization servers.
const (
	AuthorizationGRPCService AuthorizationServiceType = "grpc"
	AuthorizationHTTPService AuthorizationServiceType = "http"
)

// AuthorizationServer is an external server that authorizes each request, over Envoy's
// v3 external authorization protocol (gRPC) or plain HTTP.
// +kubebuilder:validation:XValidation:message="httpSettings can only be set when serviceType is 'http'",rule="!has(self.httpSettings) || self.serviceType == 'http'"
type AuthorizationServer struct {
	// ExtensionServiceRef is the server.
	// +optional
	ExtensionServiceRef ExtensionServiceReference `json:"extensionRef,omitempty"`
	// ServiceType is the protocol the server speaks: grpc (Envoy's ext_authz v3,
	// ExtensionService protocol h2 or h2c) or http (ExtensionService protocol
	// http/1.1).
	// +optional
	// +kubebuilder:validation:Enum=http;grpc
	// +kubebuilder:default=grpc
	ServiceType AuthorizationServiceType `json:"serviceType,omitempty"`
	// HTTPServerSettings configure an HTTP server.
	// +optional
	HTTPServerSettings *HTTPAuthorizationServerSettings `json:"httpSettings,omitempty"`
	// AuthPolicy is the policy of routes that set none.
	// +optional
	AuthPolicy *AuthorizationPolicy `json:"authPolicy,omitempty"`
	// ResponseTimeout bounds the wait for the server's answer: a duration, or
	// "infinity".
	// +optional
	// +kubebuilder:validation:Pattern=`^(((\d*(\.\d*)?h)|(\d*(\.\d*)?m)|(\d*(\.\d*)?s)|(\d*(\.\d*)?ms)|(\d*(\.\d*)?us)|(\d*(\.\d*)?µs)|(\d*(\.\d*)?ns))+|infinity|infinite)$`
	ResponseTimeout string `json:"responseTimeout,omitempty"`
	// FailOpen lets requests through when the server does not answer: only meant for
	// migrating to external authorization.
	// +optional
	FailOpen bool `json:"failOpen,omitempty"`
	// WithRequestBody sends the request body to the server too.
	// +optional
	WithRequestBody *AuthorizationServerBufferSettings `json:"withRequestBody,omitempty"`
}

// HTTPAuthorizationServerSettings configure an HTTP authorization server.
type HTTPAuthorizationServerSettings struct {
	// PathPrefix is put before the path of the authorization requests.
	// +optional
	PathPrefix string `json:"pathPrefix,omitempty"`
	// AllowedAuthorizationHeaders are the client's request headers sent to the
	// server, besides Host, Method, Path, Content-Length and Authorization.
	// +optional
	AllowedAuthorizationHeaders []HTTPAuthorizationServerAllowedHeaders `json:"allowedAuthorizationHeaders,omitempty"`
	// AllowedUpstreamHeaders are the server's response headers added to the request
	// sent upstream.
	// +optional
	AllowedUpstreamHeaders []HTTPAuthorizationServerAllowedHeaders `json:"allowedUpstreamHeaders,omitempty"`
}

// HTTPAuthorizationServerAllowedHeaders matches header names, by exactly one of Exact,
// Prefix, Suffix and Contains (no regular expressions).
// +kubebuilder:validation:XValidation:message="only one of prefix, suffix, exact, and contains should be set in the allowedHeader",rule="(has(self.exact) ? 1 : 0) + (has(self.prefix) ? 1 : 0) + (has(self.suffix) ? 1 : 0) + (has(self.contains) ? 1 : 0) == 1"
type HTTPAuthorizationServerAllowedHeaders struct {
	// Exact is the whole name.
	// +optional
	Exact string `json:"exact,omitempty"`
	// Prefix starts the name.
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Suffix ends the name.
	// +optional
	Suffix string `json:"suffix,omitempty"`
	// Contains is in the name.
	// +optional
	Contains string `json:"contains,omitempty"`
	// IgnoreCase compares without regard to case.
	// +optional
	IgnoreCase bool `json:"ignoreCase,omitempty"`
}

// AuthorizationServerBufferSettings say how much of the request body goes to the
// authorization server.
type AuthorizationServerBufferSettings struct {
	// MaxRequestBytes is the most of the body sent: a longer body gets 413 unless
	// AllowPartialMessage.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1024
	MaxRequestBytes uint32 `json:"maxRequestBytes,omitempty"`
	// AllowPartialMessage sends the first MaxRequestBytes of a longer body instead
	// of refusing the request.
	// +optional
	AllowPartialMessage bool `json:"allowPartialMessage,omitempty"`
	// PackAsBytes sends the body as raw bytes rather than as text (gRPC servers
	// only: an HTTP server gets it as its request's body).
	// +optional
	PackAsBytes bool `json:"packAsBytes,omitempty"`
}

// AuthorizationPolicy changes how the requests of a scope are authorized.
type AuthorizationPolicy struct {
	// Disabled lets the scope's requests through without asking the server.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
	// Context is sent to the server with each request; an inner scope's entries
	// override the outer scope's.
	// +optional
	Context map[string]string `json:"context,omitempty"`
}

// CORSHeaderValue is a header name or method of a CORS policy.
// +kubebuilder:validation:Pattern="^[a-zA-Z0-9!#$%&'*+.^_`|~-]+$"
type CORSHeaderValue string

// CORSPolicy is how a virtual host answers cross-origin requests.
type CORSPolicy struct {
	// AllowCredentials lets the browser send credentials.
	// +optional
	AllowCredentials bool `json:"allowCredentials,omitempty"`
	// AllowOrigin are the origins allowed: "*", an exact "scheme://host[:port]", or
	// a regular expression (not a glob: "*.example.com" is not what it seems).
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinItems=1
	AllowOrigin []string `json:"allowOrigin"`
	// AllowMethods is the access-control-allow-methods header.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinItems=1
	AllowMethods []CORSHeaderValue `json:"allowMethods"`
	// AllowHeaders is the access-control-allow-headers header.
	// +optional
	// +kubebuilder:validation:MinItems=1
	AllowHeaders []CORSHeaderValue `json:"allowHeaders,omitempty"`
	// ExposeHeaders is the access-control-expose-headers header.
	// +optional
	// +kubebuilder:validation:MinItems=1
	ExposeHeaders []CORSHeaderValue `json:"exposeHeaders,omitempty"`
	// MaxAge is how long a preflight answer may be cached: a duration; "0" disables
	// caching.
	// +optional
	// +kubebuilder:validation:Pattern=`^(((\d*(\.\d*)?h)|(\d*(\.\d*)?m)|(\d*(\.\d*)?s)|(\d*(\.\d*)?ms)|(\d*(\.\d*)?us)|(\d*(\.\d*)?µs)|(\d*(\.\d*)?ns))+|0)$`
	MaxAge string `json:"maxAge,omitempty"`
	// AllowPrivateNetwork answers private network access preflights.
	// +optional
	AllowPrivateNetwork bool `json:"allowPrivateNetwork,omitempty"`
}

// JWTProvider verifies JSON Web Tokens with keys from exactly one of RemoteJWKS and
// LocalJWKS.
// +kubebuilder:validation:XValidation:message="exactly one of remoteJWKS or localJWKS must be set",rule="(has(self.remoteJWKS) && !has(self.localJWKS)) || (!has(self.remoteJWKS) && has(self.localJWKS))"
type JWTProvider struct {
	// Name is unique among the virtual host's providers.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Default makes routes that name no provider require this one; at most one
	// provider is the default.
	// +optional
	Default bool `json:"default,omitempty"`
	// Issuer is required in the token's "iss" claim; unset, it is not checked.
	// +optional
	Issuer string `json:"issuer,omitempty"`
	// Audiences are accepted in the token's "aud" claim; unset, it is not checked.
	// +optional
	Audiences []string `json:"audiences,omitempty"`
	// RemoteJWKS fetches the keys over HTTP(S).
	// +optional
	RemoteJWKS RemoteJWKS `json:"remoteJWKS,omitzero"`
	// LocalJWKS reads the keys from a Secret.
	// +optional
	LocalJWKS LocalJWKS `json:"localJWKS,omitzero"`
	// ForwardJWT passes the verified token upstream (it is removed by default).
	// +optional
	ForwardJWT bool `json:"forwardJWT,omitempty"`
}

// LocalJWKS is a key set in a Secret of the HTTPProxy's namespace.
type LocalJWKS struct {
	// SecretName is the Secret.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	SecretName string `json:"secretName"`
	// Key is the Secret's key holding the key set.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// RemoteJWKS is a key set fetched from a URI.
type RemoteJWKS struct {
	// URI of the key set.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	URI string `json:"uri"`
	// UpstreamValidation verifies the certificate of an https URI.
	// +optional
	UpstreamValidation *UpstreamValidation `json:"validation,omitempty"`
	// Timeout bounds a fetch; default 1s.
	// +optional
	// +kubebuilder:validation:Pattern=`^(((\d*(\.\d*)?h)|(\d*(\.\d*)?m)|(\d*(\.\d*)?s)|(\d*(\.\d*)?ms)|(\d*(\.\d*)?us)|(\d*(\.\d*)?µs)|(\d*(\.\d*)?ns))+)$`
	Timeout string `json:"timeout,omitempty"`
	// CacheDuration is how long fetched keys are used; default 10m.
	// +optional
	// +kubebuilder:validation:Pattern=`^(((\d*(\.\d*)?h)|(\d*(\.\d*)?m)|(\d*(\.\d*)?s)|(\d*(\.\d*)?ms)|(\d*(\.\d*)?us)|(\d*(\.\d*)?µs)|(\d*(\.\d*)?ns))+)$`
	CacheDuration string `json:"cacheDuration,omitempty"`
	// DNSLookupFamily restricts the addresses the URI's host resolves to: v4, v6,
	// all, or auto (IPv6 first, then IPv4); default the controller's setting.
	// +optional
	// +kubebuilder:validation:Enum=auto;v4;v6
	DNSLookupFamily string `json:"dnsLookupFamily,omitempty"`
}

// JWTVerificationPolicy is what a route requires of JSON Web Tokens. At most one
// field is set.
type JWTVerificationPolicy struct {
	// Require names the provider the route requires, instead of the default one.
	// +optional
	Require string `json:"require,omitempty"`
	// Disabled lets the route's requests through without a token.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// IPFilterSource is which address of a request a filter looks at.
// +kubebuilder:validation:Enum=Peer;Remote
type IPFilterSource string

// The addresses a filter can look at.
const (
	// IPFilterSourcePeer is the address of the connection.
	IPFilterSourcePeer IPFilterSource = "Peer"
	// IPFilterSourceRemote is the client's address, through PROXY protocol and
	// X-Forwarded-For.
	IPFilterSourceRemote IPFilterSource = "Remote"
)

// IPFilterPolicy is one rule of an address filter.
type IPFilterPolicy struct {
	// Source is which address is matched.
	Source IPFilterSource `json:"source"`
	// CIDR is an IPv4 or IPv6 block, or a single address.
	CIDR string `json:"cidr"`
}

// RateLimitPolicy limits a request rate, locally (each proxy on its own) or globally
// (through a rate limit service).
type RateLimitPolicy struct {
	// Local is enforced by each proxy instance on its own.
	// +optional
	Local *LocalRateLimitPolicy `json:"local,omitempty"`
	// Global sends descriptors to a rate limit service, which decides.
	// +optional
	Global *GlobalRateLimitPolicy `json:"global,omitempty"`
}

// LocalRateLimitPolicy is a token bucket kept by each proxy instance.
type LocalRateLimitPolicy struct {
	// Requests allowed per Unit.
	// +kubebuilder:validation:Minimum=1
	Requests uint32 `json:"requests"`
	// Unit is second, minute or hour.
	// +kubebuilder:validation:Enum=second;minute;hour
	Unit string `json:"unit"`
	// Burst requests more are allowed in a short period.
	// +optional
	Burst uint32 `json:"burst,omitempty"`
	// ResponseStatusCode answers limited requests; default 429.
	// +optional
	// +kubebuilder:validation:Minimum=400
	// +kubebuilder:validation:Maximum=599
	ResponseStatusCode uint32 `json:"responseStatusCode,omitempty"`
	// ResponseHeadersToAdd are set on the answers to limited requests.
	// +optional
	ResponseHeadersToAdd []HeaderValue `json:"responseHeadersToAdd,omitempty"`
}

// GlobalRateLimitPolicy is what is sent to the rate limit service.
type GlobalRateLimitPolicy struct {
	// Disabled opts out of the controller-wide default policy.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
	// Descriptors are sent with each request.
	// +optional
	// +kubebuilder:validation:MinItems=1
	Descriptors []RateLimitDescriptor `json:"descriptors,omitempty"`
}

// RateLimitDescriptor is a list of key-value entries.
type RateLimitDescriptor struct {
	// Entries make the descriptor.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinItems=1
	Entries []RateLimitDescriptorEntry `json:"entries,omitempty"`
}

// RateLimitDescriptorEntry makes one key-value entry; exactly one field is set.
type RateLimitDescriptorEntry struct {
	// GenericKey is a fixed key and value.
	// +optional
	GenericKey *GenericKeyDescriptor `json:"genericKey,omitempty"`
	// RequestHeader takes the value of a request header; no entry when it is absent.
	// +optional
	RequestHeader *RequestHeaderDescriptor `json:"requestHeader,omitempty"`
	// RequestHeaderValueMatch is a fixed value, present when the headers match.
	// +optional
	RequestHeaderValueMatch *RequestHeaderValueMatchDescriptor `json:"requestHeaderValueMatch,omitempty"`
	// RemoteAddress is the client's address, under the key "remote_address".
	// +optional
	RemoteAddress *RemoteAddressDescriptor `json:"remoteAddress,omitempty"`
}

// GenericKeyDescriptor is a fixed entry.
type GenericKeyDescriptor struct {
	// Key of the entry; default "generic_key".
	// +optional
	Key string `json:"key,omitempty"`
	// Value of the entry.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Value string `json:"value,omitempty"`
}

// RequestHeaderDescriptor is an entry whose value is a request header's.
type RequestHeaderDescriptor struct {
	// HeaderName is the header.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	HeaderName string `json:"headerName,omitempty"`
	// DescriptorKey is the entry's key.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	DescriptorKey string `json:"descriptorKey,omitempty"`
}

// RequestHeaderValueMatchDescriptor is an entry with the key "header_match", present
// when the request's headers match (or, with ExpectMatch false, do not).
type RequestHeaderValueMatchDescriptor struct {
	// Headers all have to match.
	// +kubebuilder:validation:MinItems=1
	Headers []HeaderMatchCondition `json:"headers,omitempty"`
	// ExpectMatch false makes the entry present when the headers do not match.
	// Portico: a pointer, so that a manifest read without an API server (portico run)
	// that leaves it out gets the default, true, as the API server would give it.
	// +kubebuilder:default=true
	ExpectMatch *bool `json:"expectMatch,omitempty"`
	// Value of the entry.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Value string `json:"value,omitempty"`
}

// RemoteAddressDescriptor is an entry holding the client's address; it has no settings.
type RemoteAddressDescriptor struct{}
