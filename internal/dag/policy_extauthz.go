package dag

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	contourv1alpha1 "github.com/portico-dev/portico/apis/projectcontour/v1alpha1"
	"github.com/portico-dev/portico/internal/store"
)

// KindExtensionService is the kind of projectcontour.io/v1alpha1 ExtensionServices.
const KindExtensionService = "ExtensionService"

// problemAuth is the status sub-condition type of authorization problems, as
// HTTPProxy users know it.
const problemAuth = "AuthError"

// extensionAPIVersion is the only apiVersion an extensionRef may name.
var extensionAPIVersion = contourv1alpha1.SchemeGroupVersion.String()

// Authorization is a secure virtual host's external authorization (HTTPProxy's
// virtualhost.authorization): the requests of its routes whose RouteAuthorization
// enables it are checked, before the router, by the server of Cluster over Envoy's
// ext_authz gRPC v3 protocol, or as plain HTTP requests when HTTP is set.
type Authorization struct {
	// Cluster is the ExtensionService's cluster (ExtensionClusterName).
	Cluster *Cluster
	// Timeout bounds each check; nil means the data plane's default (200ms, Envoy's),
	// 0 none.
	Timeout *time.Duration
	// FailOpen lets requests through when the server cannot be asked or does not
	// answer in time; otherwise they get 403.
	FailOpen bool
	// HTTP, when set, makes the server an HTTP one (serviceType: http).
	HTTP *HTTPAuthorization
	// Body, when set, sends the start of each request's body with the check
	// (withRequestBody).
	Body *AuthorizationBody
}

// HTTPAuthorization is how an HTTP authorization server is asked (httpSettings).
type HTTPAuthorization struct {
	// PathPrefix goes before the request's path in the check's.
	PathPrefix string
	// AllowedAuthorizationHeaders are the client's headers sent with the check,
	// besides Host, Method, Path, Content-Length and Authorization.
	AllowedAuthorizationHeaders []HeaderNameMatch
	// AllowedUpstreamHeaders are the headers of an allowing answer that the
	// upstream request gets (replacing the client's of that name); none without.
	AllowedUpstreamHeaders []HeaderNameMatch
}

// HeaderNameMatch matches header names (compared in lower case) by Kind:
// MatchExact, MatchPrefix, MatchSuffix or MatchContains.
type HeaderNameMatch struct {
	Kind       StringMatchKind
	Value      string
	IgnoreCase bool
}

// AuthorizationBody is how much of a request's body goes with its check.
type AuthorizationBody struct {
	// MaxRequestBytes is the most sent; a longer body is refused with 413
	// unless AllowPartialMessage, which sends its first MaxRequestBytes.
	MaxRequestBytes     uint32
	AllowPartialMessage bool
	// PackAsBytes sends it as raw bytes (gRPC's raw_body) instead of text.
	PackAsBytes bool
}

// defaultMaxRequestBytes is withRequestBody's maxRequestBytes when it is not set
// (HTTPProxy's default).
const defaultMaxRequestBytes = 1024

// RouteAuthorization is how the requests of one route of an authorized host are
// checked: the host's policy, with the route's over it.
type RouteAuthorization struct {
	// Disabled lets the route's requests through unchecked.
	Disabled bool
	// Context is sent with each check (Envoy's context_extensions): the host's
	// entries, overridden by the route's.
	Context map[string]string
}

// ExtensionClusterName is the cluster of the ExtensionService namespace/name: one per
// ExtensionService, whatever its fields, so that an edit changes the cluster in place.
func ExtensionClusterName(namespace, name string) string {
	return "extension/" + namespace + "/" + name
}

// extension is an ExtensionService checked and resolved once per build.
type extension struct {
	cluster *Cluster
	// timeout is spec.timeoutPolicy.response: the checks' timeout when the HTTPProxy
	// sets no responseTimeout.
	timeout *time.Duration
	check   proxyCheck
}

// extension resolves the ExtensionService es: its cluster (its Services' ready
// endpoints together), with its problems. read, when set, is told every Service and
// Secret used (dependency keys), for the processor that reports its status.
func (b *builder) extension(es *contourv1alpha1.ExtensionService, read func(key string)) *extension {
	key := types.NamespacedName{Namespace: es.Namespace, Name: es.Name}
	if e, ok := b.extensions[key]; ok && read == nil {
		return e
	}
	if read == nil {
		read = func(string) {}
	}
	e := &extension{}
	spec := &es.Spec
	validateExtensionService(spec, &e.check)
	protocol := "h2"
	if spec.Protocol != nil && *spec.Protocol != "" {
		protocol = *spec.Protocol
	}
	if protocol == "http/1.1" {
		protocol = "" // the cluster's HTTP/1.1
	}
	c := &Cluster{Name: ExtensionClusterName(es.Namespace, es.Name), Service: key, PortName: "extension", Protocol: protocol}
	var checked proxyCheck // validateExtensionService reported these problems
	if lb := spec.LoadBalancerPolicy; lb != nil && lb.Strategy != "Cookie" && lb.Strategy != "RequestHash" {
		c.LoadBalancer, _ = proxyLoadBalancer(lb, "spec.loadBalancerPolicy", &checked)
	}
	if tp := spec.TimeoutPolicy; tp != nil {
		e.timeout = proxyDuration(tp.Response, "spec.timeoutPolicy.response", &checked)
	}
	if v := spec.UpstreamValidation; v != nil && protocol == "h2" {
		read(secretRefKey(es.Namespace, v.CACertificate))
		c.UpstreamValidation = b.extensionValidation(es.Namespace, v, &e.check)
	}
	for i, t := range spec.Services {
		svcKey := types.NamespacedName{Namespace: es.Namespace, Name: t.Name}
		read(svcKeyPrefix + nsName(svcKey.Namespace, svcKey.Name))
		eps, problem := b.extensionEndpoints(svcKey, t.Port)
		if problem != "" {
			e.check.fail(problemService, "ServiceUnresolvedReference", "spec.services[%d]: %s", i, problem)
			continue
		}
		c.Endpoints = append(c.Endpoints, eps...)
	}
	c.Endpoints = sortedUniqueEndpoints(c.Endpoints)
	e.cluster = c
	if b.extensions == nil {
		b.extensions = map[types.NamespacedName]*extension{}
	}
	b.extensions[key] = e
	return e
}

// extensionEndpoints are the ready endpoints of port of the Service key, or why there
// can be none.
func (b *builder) extensionEndpoints(key types.NamespacedName, port int) ([]Endpoint, string) {
	svc := b.store.Services[key]
	switch {
	case svc == nil:
		return nil, fmt.Sprintf("Service %s not found: create it, or name a Service of namespace %s", key, key.Namespace)
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return nil, fmt.Sprintf("Service %s is of type ExternalName, which an ExtensionService cannot use: point it at a Service with endpoints", key)
	}
	sp, ok := servicePort(svc, networkingv1.ServiceBackendPort{Number: int32(port)})
	if !ok {
		return nil, fmt.Sprintf("Service %s has no port %d", key, port)
	}
	eps, _ := b.endpoints(key, sp.Name)
	return eps, ""
}

// extensionValidation resolves the CA of an ExtensionService's certificate validation.
func (b *builder) extensionValidation(namespace string, v *contourv1.UpstreamValidation, c *proxyCheck) *UpstreamValidation {
	if len(upstreamValidationProblems(v)) > 0 {
		return nil // validateExtensionService said so
	}
	key := types.NamespacedName{Namespace: namespace, Name: v.CACertificate}
	if ns, name, ok := strings.Cut(v.CACertificate, "/"); ok {
		key = types.NamespacedName{Namespace: ns, Name: name}
		if ns != namespace && !b.certificateDelegated(key, namespace) {
			c.fail(problemTLS, "CACertificateNotDelegated", "spec.validation.caSecret %q: namespace %s does not delegate Secret %s to namespace %s; add a TLSCertificateDelegation in %s listing it", v.CACertificate, ns, name, namespace, ns)
			return nil
		}
	}
	ca, msg := b.caSecret(key)
	if msg != "" {
		c.fail(problemTLS, "CASecretInvalid", "spec.validation.caSecret: %s", msg)
		return nil
	}
	return &UpstreamValidation{CAName: key.String(), CACert: ca, SubjectNames: slices.Clone(subjectNames(v))}
}

// validateExtensionService finds what makes an ExtensionService unusable on its own,
// and what of it is ignored.
func validateExtensionService(spec *contourv1alpha1.ExtensionServiceSpec, c *proxyCheck) {
	if len(spec.Services) == 0 {
		c.fail(problemSpec, "NoServices", "spec.services needs at least one Service: the endpoints that serve the extension")
	}
	weights := map[uint32]bool{}
	for i, t := range spec.Services {
		if t.Name == "" {
			c.fail(problemService, "ServiceNameMissing", "spec.services[%d].name is required", i)
		}
		if t.Port < 1 || t.Port > 65535 {
			c.fail(problemService, "PortInvalid", "spec.services[%d].port %d must be 1-65535", i, t.Port)
		}
		weights[t.Weight] = true
	}
	if len(weights) > 1 {
		c.warn(problemUnsupported, "NotImplemented", "spec.services[].weight is not implemented by Portico yet and is ignored: checks are spread evenly over the endpoints of every Service listed")
	}
	protocol := "h2"
	if spec.Protocol != nil && *spec.Protocol != "" {
		protocol = *spec.Protocol
	}
	if protocol != "h2" && protocol != "h2c" && protocol != "http/1.1" {
		c.fail(problemSpec, "ProtocolInvalid", "spec.protocol %q: use h2 (HTTP/2 over TLS, the default), h2c (HTTP/2 in clear text) or http/1.1 (HTTP/1.1 in clear text, for an HTTP authorization server only)", protocol)
	}
	if v := spec.ProtocolVersion; v != "" && v != contourv1alpha1.SupportProtocolVersion3 {
		c.fail(problemSpec, "ProtocolVersionInvalid", "spec.protocolVersion %q: only v3 is served; remove the field or set v3", v)
	}
	if v := spec.UpstreamValidation; v != nil {
		if protocol != "h2" {
			c.fail(problemSpec, "InconsistentProtocol", "spec.validation needs protocol h2: only a TLS connection has a certificate to verify")
		}
		for _, msg := range upstreamValidationProblems(v) {
			c.fail(problemTLS, "ValidationInvalid", "spec.validation.%s", msg)
		}
	}
	if lb := spec.LoadBalancerPolicy; lb != nil {
		if lb.Strategy == "Cookie" || lb.Strategy == "RequestHash" {
			c.warn(problemSpec, "IgnoredField", "spec.loadBalancerPolicy.strategy %s is ignored: checks carry no cookie or request to hash on; round robin is used", lb.Strategy)
		} else {
			proxyLoadBalancer(lb, "spec.loadBalancerPolicy", c)
		}
	}
	if tp := spec.TimeoutPolicy; tp != nil {
		proxyDuration(tp.Response, "spec.timeoutPolicy.response", c)
	}
	if tp := spec.TimeoutPolicy; tp != nil && tp.Idle != "" {
		c.warn(problemSpec, "IgnoredField", "spec.timeoutPolicy.idle is ignored: a check has a response timeout only (spec.timeoutPolicy.response, or the HTTPProxy's responseTimeout)")
	}
	if tp := spec.TimeoutPolicy; tp != nil && tp.IdleConnection != "" {
		c.warn(problemSpec, "IgnoredField", "spec.timeoutPolicy.idleConnection is ignored for ExtensionServices")
	}
}

// validateProxyAuthorization checks a root's virtualhost.authorization on its own:
// what it needs (TLS, an ExtensionService reference) and what Portico does not do yet.
func validateProxyAuthorization(vh *contourv1.VirtualHost, c *proxyCheck) {
	a := vh.Authorization
	if a == nil {
		return
	}
	const field = "spec.virtualhost.authorization"
	if (vh.TLS == nil || vh.TLS.Passthrough) && a.ExtensionServiceRef.Name != "" {
		c.fail(problemAuth, "AuthNotPermitted", "%s needs spec.virtualhost.tls with a secretName: requests are authorized on the HTTPS connections Portico terminates (their credentials must not cross the network in clear text); add tls, or remove authorization", field)
	}
	if vh.TLS != nil && vh.TLS.EnableFallbackCertificate {
		c.fail(problemAuth, "AuthIncompatibleWithFallback", "%s and spec.virtualhost.tls.enableFallbackCertificate cannot be combined: clients without a server name would reach the host's routes on the fallback certificate's connections, which are not authorized; remove one of them", field)
	}
	ref := a.ExtensionServiceRef
	switch {
	case ref.Name == "":
		// The host's policy over the installation's server (globalExtAuth): the
		// build checks that there is one.
		return
	case ref.APIVersion != "" && ref.APIVersion != extensionAPIVersion:
		c.fail(problemAuth, "AuthBadResourceVersion", "%s.extensionRef.apiVersion %q is not supported: use %s (or leave it out)", field, ref.APIVersion, extensionAPIVersion)
	}
	if a.ResponseTimeout != "" {
		if _, ok := authTimeout(a.ResponseTimeout); !ok {
			c.fail(problemAuth, "AuthResponseTimeoutInvalid", "%s.responseTimeout %q is not a duration (e.g. \"500ms\", \"2s\", or \"infinity\")", field, a.ResponseTimeout)
		}
	}
	validateAuthorizationHTTP(a, field, c)
}

// validateAuthorizationHTTP checks serviceType, httpSettings and what an HTTP server
// cannot be given.
func validateAuthorizationHTTP(a *contourv1.AuthorizationServer, field string, c *proxyCheck) {
	isHTTP := a.ServiceType == contourv1.AuthorizationHTTPService
	switch a.ServiceType {
	case "", contourv1.AuthorizationGRPCService, contourv1.AuthorizationHTTPService:
	default:
		c.fail(problemAuth, "AuthServiceTypeInvalid", "%s.serviceType %q is not a protocol of authorization servers: use grpc (the default) or http", field, a.ServiceType)
	}
	if a.HTTPServerSettings != nil && !isHTTP {
		c.fail(problemAuth, "AuthHTTPSettingsNotHTTP", "%s.httpSettings can only be set when serviceType is http: set serviceType: http, or remove httpSettings", field)
	}
	if isHTTP && a.AuthPolicy != nil && len(a.AuthPolicy.Context) > 0 {
		c.fail(problemAuth, "AuthContextForHTTP", "%s.authPolicy.context is only sent to gRPC authorization servers (serviceType grpc); an HTTP server gets no context: remove it, or use a gRPC server", field)
	}
	if hs := a.HTTPServerSettings; hs != nil {
		if hs.PathPrefix != "" && !strings.HasPrefix(hs.PathPrefix, "/") {
			c.fail(problemAuth, "AuthPathPrefixInvalid", "%s.httpSettings.pathPrefix %q must start with \"/\" (it goes before the request's path)", field, hs.PathPrefix)
		}
		validateAllowedHeaders(hs.AllowedAuthorizationHeaders, field+".httpSettings.allowedAuthorizationHeaders", c)
		validateAllowedHeaders(hs.AllowedUpstreamHeaders, field+".httpSettings.allowedUpstreamHeaders", c)
	}
}

// validateAllowedHeaders checks header name matchers: exactly one of exact, prefix,
// suffix and contains each. A name with capitals never matches without ignoreCase
// (names are compared in lower case, as HTTP/2 sends them): a warning says so.
func validateAllowedHeaders(hs []contourv1.HTTPAuthorizationServerAllowedHeaders, field string, c *proxyCheck) {
	for i := range hs {
		m, n := headerNameMatch(&hs[i])
		switch {
		case n == 0:
			c.fail(problemAuth, "AuthBadAllowedHeader", "%s[%d] matches nothing: set one of exact, prefix, suffix or contains", field, i)
		case n > 1:
			c.fail(problemAuth, "AuthBadAllowedHeader", "%s[%d] sets more than one of exact, prefix, suffix and contains: keep one (list several entries to match several ways)", field, i)
		case !m.IgnoreCase && m.Value != strings.ToLower(m.Value):
			c.warn(problemAuth, "AllowedHeaderNeverMatches", "%s[%d] %q has capitals, but header names are compared in lower case: it matches nothing; write it in lower case, or set ignoreCase: true", field, i, m.Value)
		}
	}
}

// headerNameMatch converts a matcher, with the number of kinds it sets (1 when valid).
func headerNameMatch(h *contourv1.HTTPAuthorizationServerAllowedHeaders) (HeaderNameMatch, int) {
	out, n := HeaderNameMatch{IgnoreCase: h.IgnoreCase}, 0
	for _, k := range []struct {
		kind  StringMatchKind
		value string
	}{{MatchExact, h.Exact}, {MatchPrefix, h.Prefix}, {MatchSuffix, h.Suffix}, {MatchContains, h.Contains}} {
		if k.value != "" {
			if n == 0 {
				out.Kind, out.Value = k.kind, k.value
			}
			n++
		}
	}
	return out, n
}

func headerNameMatches(hs []contourv1.HTTPAuthorizationServerAllowedHeaders) []HeaderNameMatch {
	var out []HeaderNameMatch
	for i := range hs {
		m, _ := headerNameMatch(&hs[i])
		out = append(out, m)
	}
	return out
}

// authorizationBody is withRequestBody, with its default size.
func authorizationBody(b *contourv1.AuthorizationServerBufferSettings) *AuthorizationBody {
	if b == nil {
		return nil
	}
	out := &AuthorizationBody{MaxRequestBytes: b.MaxRequestBytes, AllowPartialMessage: b.AllowPartialMessage, PackAsBytes: b.PackAsBytes}
	if out.MaxRequestBytes == 0 {
		// Left out (0 cannot be told apart from it): the schema's default.
		out.MaxRequestBytes = defaultMaxRequestBytes
	}
	return out
}

// httpRouteContext leaves out the context of route i (ra, from policy) when the
// host's server speaks HTTP, which gets none, with a warning when the route set one.
func httpRouteContext(auth *Authorization, ra *RouteAuthorization, policy *contourv1.AuthorizationPolicy, i int, c *proxyCheck) {
	if auth == nil || auth.HTTP == nil {
		return
	}
	ra.Context = nil
	if policy != nil && !policy.Disabled && len(policy.Context) > 0 {
		c.warn(problemAuth, "AuthContextIgnored", "spec.routes[%d].authPolicy.context is ignored: the host's authorization server speaks HTTP (serviceType: http), which gets no context; remove it", i)
	}
}

// authTimeout parses a responseTimeout: a duration, or "infinity" for none (0).
func authTimeout(v string) (time.Duration, bool) {
	if v == "infinity" || v == "infinite" {
		return 0, true
	}
	d, err := time.ParseDuration(v)
	return d, err == nil && d >= 0
}

// proxyAuthorization resolves a valid root's authorization; ok is false when the root
// cannot be served (its ExtensionService is missing or unusable: the host must not be
// served without the authorization it asks for).
func (b *builder) proxyAuthorization(root *proxyNode) (*Authorization, bool) {
	a := root.p.Spec.VirtualHost.Authorization
	if a == nil || a.ExtensionServiceRef.Name == "" {
		return b.proxyGlobalAuthorization(root)
	}
	key := types.NamespacedName{Namespace: defaultString(a.ExtensionServiceRef.Namespace, root.p.Namespace), Name: a.ExtensionServiceRef.Name}
	es := b.store.ExtensionServices[key]
	if es == nil {
		root.check.fail(problemAuth, "ExtensionServiceNotFound", "spec.virtualhost.authorization.extensionRef: ExtensionService %s not found; create it (projectcontour.io/v1alpha1), or name an existing one", key)
		return nil, false
	}
	ext := b.extension(es, nil)
	if len(ext.check.errors) > 0 {
		root.check.fail(problemAuth, "ExtensionServiceInvalid", "spec.virtualhost.authorization.extensionRef: ExtensionService %s is invalid: %s", key, ext.check.errors[0].Message)
		return nil, false
	}
	if msg := protocolMismatch(a.ServiceType, ext.cluster.Protocol); msg != "" {
		root.check.fail(problemAuth, "AuthProtocolMismatch", "spec.virtualhost.authorization.extensionRef: ExtensionService %s %s", key, msg)
		return nil, false
	}
	out := &Authorization{Cluster: ext.cluster, Timeout: ext.timeout, FailOpen: a.FailOpen, Body: authorizationBody(a.WithRequestBody)}
	if a.ServiceType == contourv1.AuthorizationHTTPService {
		out.HTTP = httpAuthorization(a.HTTPServerSettings)
	}
	if a.ResponseTimeout != "" {
		d, _ := authTimeout(a.ResponseTimeout) // validateProxyAuthorization checked it
		out.Timeout = &d
	}
	return out, true
}

// protocolMismatch says why an ExtensionService whose cluster speaks protocol
// ("" is HTTP/1.1) cannot serve an authorization server of serviceType. An HTTP
// server may speak any of them (Contour's ExtensionServices know only h2 and
// h2c: an HTTP server behind one speaks HTTP/2); gRPC needs HTTP/2.
func protocolMismatch(serviceType contourv1.AuthorizationServiceType, protocol string) string {
	if serviceType != contourv1.AuthorizationHTTPService && protocol == "" {
		return "speaks http/1.1, but a gRPC authorization server needs HTTP/2: set the ExtensionService's protocol to h2 or h2c, or set serviceType: http"
	}
	return ""
}

// proxyGlobalAuthorization is the installation's authorization of a root without a
// server of its own (nil without one); ok is false when the root cannot be served: it
// relies on the installation's server, which is not usable, or it names none and the
// installation has none either.
func (b *builder) proxyGlobalAuthorization(root *proxyNode) (*Authorization, bool) {
	a := root.p.Spec.VirtualHost.Authorization
	g := b.opts.GlobalAuthorization
	hostDisabled := a != nil && a.AuthPolicy != nil && a.AuthPolicy.Disabled
	if g == nil {
		if a != nil && !hostDisabled {
			root.check.fail(problemAuth, "ExtensionServiceRefMissing", "spec.virtualhost.authorization names no extensionRef, and this installation has no global external authorization (globalExtAuth, --global-ext-auth) to use instead: name the ExtensionService of the authorization server, or remove authorization")
			return nil, false
		}
		if hostDisabled {
			root.check.warn(problemAuth, "GlobalAuthorizationNotConfigured", "spec.virtualhost.authorization only disables authorization, and this installation has no global external authorization (globalExtAuth, --global-ext-auth) to disable: the host's requests are not authorized, as written")
		}
		return nil, true
	}
	auth, problem := b.globalAuthorization(nil)
	if problem != "" && !hostDisabled {
		root.check.fail(problemAuth, "GlobalExtAuthInvalid", "the installation's global external authorization cannot be used: %s; the host is not served without it (set spec.virtualhost.authorization.authPolicy.disabled: true to serve it unchecked)", problem)
		return nil, false
	}
	if auth.HTTP != nil && a != nil && a.AuthPolicy != nil && len(a.AuthPolicy.Context) > 0 {
		root.check.warn(problemAuth, "AuthContextIgnored", "spec.virtualhost.authorization.authPolicy.context is ignored: the installation's authorization server speaks HTTP, which gets no context; remove it")
	}
	return auth, true
}

// routeAuthorization is how a route of root's host is authorized: nil when neither the
// host nor the installation (global) asks for authorization. The route's policy, when
// it has one, decides whether it is disabled, and its context entries override the
// host's; a host's policy (its authorization, even without a server of its own)
// replaces the installation's, as in Contour.
func routeAuthorization(global *GlobalAuthorization, root *contourv1.HTTPProxy, policy *contourv1.AuthorizationPolicy) *RouteAuthorization {
	a := root.Spec.VirtualHost.Authorization
	out := &RouteAuthorization{}
	var hostContext map[string]string
	switch {
	case a != nil:
		if a.AuthPolicy != nil {
			out.Disabled = a.AuthPolicy.Disabled
			hostContext = a.AuthPolicy.Context
		}
	case global != nil:
		out.Disabled, hostContext = global.Disabled, global.Context
	default:
		return nil
	}
	if policy == nil {
		if !out.Disabled {
			out.Context = hostContext
		}
		return out
	}
	out.Disabled = policy.Disabled
	switch {
	case out.Disabled:
		out.Context = nil // nothing is sent
	case len(policy.Context) == 0:
		out.Context = hostContext
	case len(hostContext) == 0:
		out.Context = policy.Context
	default:
		out.Context = maps.Clone(hostContext)
		maps.Copy(out.Context, policy.Context)
	}
	return out
}

// extensionStatuses is the built-in processor of ExtensionServices: a status for each,
// from the same checks an HTTPProxy referring to it gets. Their clusters are in the
// graph through the HTTPProxies that use them.
type extensionStatuses struct{}

func (extensionStatuses) Kinds() []store.Kind { return []store.Kind{store.KindExtensionService} }

func (extensionStatuses) Process(p *Processing) {
	all := p.Store().ExtensionServices
	keys := slices.SortedFunc(maps.Keys(all), func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	for _, k := range keys {
		e := p.b.extension(all[k], p.read)
		p.AddStatus(extensionStatus(all[k], &e.check))
	}
}

// extensionStatus is the status of an ExtensionService with the problems of c.
func extensionStatus(es *contourv1alpha1.ExtensionService, c *proxyCheck) Status {
	st := Status{Object: ObjectRef{Kind: KindExtensionService, Namespace: es.Namespace, Name: es.Name}}
	st.Warnings = cappedProblems(c.warnings)
	if len(c.errors) > 0 {
		st.Errors = cappedProblems(c.errors)
		st.Status, st.Description = StatusInvalid, "not usable: "+strings.Join(problemMessages(st.Errors), "; ")
		return st
	}
	warnings := problemMessages(st.Warnings)
	st.Status, st.Description, st.Noted = StatusValid, withNotes("valid ExtensionService", warnings), len(warnings) > 0
	return st
}
