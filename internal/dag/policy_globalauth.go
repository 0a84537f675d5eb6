package dag

import (
	"errors"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/store"
)

// GlobalAuthorization is the installation's external authorization (Contour's
// globalExtAuth): every HTTPProxy host without an authorization server of its own is
// checked by this one, over plain HTTP and HTTPS, and so is every other request of
// the plain HTTP listener (Ingress hosts, requests that match no host), as in Contour.
type GlobalAuthorization struct {
	// ExtensionService names the authorization server.
	ExtensionService types.NamespacedName
	// Timeout is responseTimeout: nil for the ExtensionService's
	// timeoutPolicy.response, else the data plane's default (200ms).
	Timeout  *time.Duration
	FailOpen bool
	// HTTP, when set, makes the server an HTTP one (serviceType: http).
	HTTP *HTTPAuthorization
	Body *AuthorizationBody
	// Disabled and Context are authPolicy's: what a host says of its own overrides
	// them, and a route's overrides the host's.
	Disabled bool
	Context  map[string]string
}

// globalAuthField names the setting in messages, as an operator knows it.
const globalAuthField = "globalExtAuth"

// ParseGlobalAuthorization checks and converts the installation's authorization (an
// HTTPProxy authorization whose extensionRef names its namespace); the error says
// what is wrong, field by field.
func ParseGlobalAuthorization(a *contourv1.AuthorizationServer) (*GlobalAuthorization, error) {
	var c proxyCheck
	ref := a.ExtensionServiceRef
	switch {
	case ref.Name == "" || ref.Namespace == "":
		c.fail(problemAuth, "ExtensionServiceRefMissing", "%s.extensionRef needs the namespace and name of the authorization server's ExtensionService", globalAuthField)
	case ref.APIVersion != "" && ref.APIVersion != extensionAPIVersion:
		c.fail(problemAuth, "AuthBadResourceVersion", "%s.extensionRef.apiVersion %q is not supported: use %s (or leave it out)", globalAuthField, ref.APIVersion, extensionAPIVersion)
	}
	var timeout *time.Duration
	if a.ResponseTimeout != "" {
		d, ok := authTimeout(a.ResponseTimeout)
		if !ok {
			c.fail(problemAuth, "AuthResponseTimeoutInvalid", "%s.responseTimeout %q is not a duration (e.g. \"500ms\", \"2s\", or \"infinity\")", globalAuthField, a.ResponseTimeout)
		}
		timeout = &d
	}
	validateAuthorizationHTTP(a, globalAuthField, &c)
	if len(c.errors) > 0 {
		errs := make([]error, len(c.errors))
		for i, p := range c.errors {
			errs[i] = errors.New(p.Message)
		}
		return nil, errors.Join(errs...)
	}
	out := &GlobalAuthorization{
		ExtensionService: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name},
		Timeout:          timeout,
		FailOpen:         a.FailOpen,
		Body:             authorizationBody(a.WithRequestBody),
	}
	if a.ServiceType == contourv1.AuthorizationHTTPService {
		out.HTTP = httpAuthorization(a.HTTPServerSettings)
	}
	if p := a.AuthPolicy; p != nil {
		out.Disabled, out.Context = p.Disabled, maps.Clone(p.Context)
	}
	return out, nil
}

// httpAuthorization is how an HTTP authorization server is asked (httpSettings).
func httpAuthorization(hs *contourv1.HTTPAuthorizationServerSettings) *HTTPAuthorization {
	out := &HTTPAuthorization{}
	if hs != nil {
		out.PathPrefix = hs.PathPrefix
		out.AllowedAuthorizationHeaders = headerNameMatches(hs.AllowedAuthorizationHeaders)
		out.AllowedUpstreamHeaders = headerNameMatches(hs.AllowedUpstreamHeaders)
	}
	return out
}

// globalAuthorization resolves the installation's authorization once per build: the
// server to ask (never nil when one is configured: without a usable ExtensionService
// its cluster has no endpoints, so that checks fail closed) and, when it is not
// usable, why, for the status of the hosts that rely on it.
func (b *builder) globalAuthorization(read func(string)) (*Authorization, string) {
	g := b.opts.GlobalAuthorization
	if g == nil {
		return nil, ""
	}
	if b.globalAuth != nil && read == nil {
		return b.globalAuth, b.globalAuthProblem
	}
	key := g.ExtensionService
	out := &Authorization{Timeout: g.Timeout, FailOpen: g.FailOpen, HTTP: g.HTTP, Body: g.Body}
	problem := ""
	if read != nil {
		read(extKeyPrefix + nsName(key.Namespace, key.Name))
	}
	if es := b.store.ExtensionServices[key]; es == nil {
		out.Cluster = &Cluster{Name: ExtensionClusterName(key.Namespace, key.Name), Service: key, PortName: "extension", Protocol: "h2c"}
		problem = "ExtensionService " + key.String() + " not found: create it (projectcontour.io/v1alpha1), or name an existing one in the global authorization (globalExtAuth, --global-ext-auth)"
	} else {
		ext := b.extension(es, read)
		out.Cluster = ext.cluster
		if out.Timeout == nil {
			out.Timeout = ext.timeout
		}
		switch {
		case len(ext.check.errors) > 0:
			problem = "ExtensionService " + key.String() + " is invalid: " + ext.check.errors[0].Message
		case protocolMismatch(serviceType(g), ext.cluster.Protocol) != "":
			problem = "ExtensionService " + key.String() + " " + protocolMismatch(serviceType(g), ext.cluster.Protocol)
		}
	}
	b.globalAuth, b.globalAuthProblem = out, problem
	return out, problem
}

func serviceType(g *GlobalAuthorization) contourv1.AuthorizationServiceType {
	if g.HTTP != nil {
		return contourv1.AuthorizationHTTPService
	}
	return contourv1.AuthorizationGRPCService
}

// Extensions are the installation's own ExtensionServices, resolved in a build: what
// the listeners' filters use, whatever the hosts are.
type Extensions struct {
	// Authorization is the global authorization's server (Options.GlobalAuthorization),
	// nil without one.
	Authorization *Authorization
	// RateLimit is the rate limit service's ExtensionService
	// (Options.RateLimitExtension), nil without one.
	RateLimit *RateLimitExtension
}

// RateLimitExtension is the rate limit service reached through an ExtensionService.
type RateLimitExtension struct {
	Cluster *Cluster
	// Timeout is the ExtensionService's timeoutPolicy.response, nil without one.
	Timeout *time.Duration
}

// Clusters are the clusters of the installation's extensions.
func (e *Extensions) Clusters() []*Cluster {
	if e == nil {
		return nil
	}
	var out []*Cluster
	if e.Authorization != nil {
		out = append(out, e.Authorization.Cluster)
	}
	if e.RateLimit != nil {
		out = append(out, e.RateLimit.Cluster)
	}
	return out
}

// buildExtensions resolves the installation's extensions in s; nil without any.
func buildExtensions(s *store.Store, opts Options) *Extensions {
	if opts.GlobalAuthorization == nil && opts.RateLimitExtension == nil {
		return nil
	}
	b := newBuilder(s, opts.withDefaults(), 0)
	out := &Extensions{}
	out.Authorization, _ = b.globalAuthorization(nil)
	if key := opts.RateLimitExtension; key != nil {
		rl := &RateLimitExtension{Cluster: &Cluster{Name: ExtensionClusterName(key.Namespace, key.Name), Service: *key, PortName: "extension", Protocol: "h2c"}}
		if es := s.ExtensionServices[*key]; es != nil {
			ext := b.extension(es, nil)
			rl.Cluster, rl.Timeout = ext.cluster, ext.timeout
		}
		out.RateLimit = rl
	}
	return out
}

// withExtensions returns g with the installation's extensions resolved in s; prev, the
// previous graph's, when they are the same (so that a translator sees no change).
func withExtensions(g *Graph, s *store.Store, opts Options, prev *Extensions) *Graph {
	ext := buildExtensions(s, opts)
	if ext == nil {
		return g
	}
	if prev != nil && equality.Semantic.DeepEqual(prev, ext) {
		ext = prev
	}
	out := *g
	out.Extensions = ext
	return &out
}
