package dag

import (
	"fmt"
	"slices"
	"strings"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// Types of HTTPProxy status sub-conditions, as HTTPProxy users filter on them.
const (
	problemSpec        = "SpecError"
	problemVirtualHost = "VirtualHostError"
	problemTLS         = "TLSError"
	problemRoute       = "RouteError"
	problemInclude     = "IncludeError"
	problemService     = "ServiceError"
	problemTCPProxy    = "TCPProxyError"
	problemUnsupported = "NotImplemented"
	problemInsecure    = "PermitInsecure"
	problemRootNS      = "RootNamespaceError"
)

// proxyCheck collects the problems of one HTTPProxy.
type proxyCheck struct {
	errors   []Problem
	warnings []Problem
}

func (c *proxyCheck) fail(typ, reason, format string, args ...any) {
	c.errors = append(c.errors, Problem{Type: typ, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func (c *proxyCheck) warn(typ, reason, format string, args ...any) {
	c.warnings = append(c.warnings, Problem{Type: typ, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// failAll records problems of one type and reason.
func (c *proxyCheck) failAll(typ, reason string, msgs []string) {
	for _, m := range msgs {
		c.fail(typ, reason, "%s", m)
	}
}

// validateHTTPProxy finds what makes p unusable on its own (errors) and what it asks for
// that Portico does not do (warnings), looking at nothing but p. The checks of the values
// that are translated (policies, services) happen where they are translated
// (httpproxy_route.go), and report through the same proxyCheck.
//
// It returns the conditions of the routes and includes, parsed (those with problems as
// far as they could be read), for the build to use.
func validateHTTPProxy(p *contourv1.HTTPProxy, c *proxyCheck) (routes, includes []conditions) {
	spec := &p.Spec
	if vh := spec.VirtualHost; vh != nil {
		validateProxyVirtualHost(vh, spec.TCPProxy != nil, c)
	}
	if spec.TCPProxy != nil {
		validateTCPProxy(spec.TCPProxy, "spec.tcpproxy", c)
	}
	if len(spec.Routes) == 0 && len(spec.Includes) == 0 && spec.TCPProxy == nil {
		c.fail(problemSpec, "NothingToRoute", "spec has no routes, includes or tcpproxy: an HTTPProxy must route something")
	}
	validateHTTPVersions(spec, c)
	includes = make([]conditions, len(spec.Includes))
	var seenIncludes map[string]int
	if len(spec.Includes) > 1 {
		seenIncludes = make(map[string]int, len(spec.Includes))
	}
	for i := range spec.Includes {
		inc := &spec.Includes[i]
		field := indexedField("spec.includes", i)
		if inc.Name == "" {
			c.fail(problemInclude, "NameMissing", "%s.name is required", field)
		}
		conds, errs := parseConditions(indexedField("spec.includes", i, ".conditions"), inc.Conditions, true)
		includes[i] = conds
		c.failAll(problemInclude, "InvalidCondition", errs)
		if reason, msg := conditionConflicts(indexedField("spec.includes", i, ".conditions"), inc.Conditions); msg != "" {
			c.fail(problemInclude, reason, "%s", msg)
		}
		if seenIncludes == nil {
			continue
		}
		k := conds.key()
		if j, dup := seenIncludes[k]; dup {
			c.fail(problemInclude, "DuplicateMatchConditions", "%s and spec.includes[%d] have the same conditions (%s): each include needs its own conditions, or requests could not tell them apart", field, j, conds.describe())
		} else {
			seenIncludes[k] = i
		}
	}
	routes = make([]conditions, len(spec.Routes))
	var seenRoutes map[string]int
	if len(spec.Routes) > 1 {
		seenRoutes = make(map[string]int, len(spec.Routes))
	}
	for i := range spec.Routes {
		r := &spec.Routes[i]
		field := indexedField("spec.routes", i)
		conds, errs := parseConditions(indexedField("spec.routes", i, ".conditions"), r.Conditions, false)
		routes[i] = conds
		c.failAll(problemRoute, "InvalidCondition", errs)
		if reason, msg := conditionConflicts(indexedField("spec.routes", i, ".conditions"), r.Conditions); msg != "" {
			c.fail(problemRoute, reason, "%s", msg)
		}
		if len(errs) == 0 && seenRoutes != nil {
			k := conds.key()
			if j, dup := seenRoutes[k]; dup {
				c.fail(problemRoute, "DuplicateMatchConditions", "%s and spec.routes[%d] have the same conditions (%s): merge them into one route", field, j, conds.describe())
			} else {
				seenRoutes[k] = i
			}
		}
		if spec.VirtualHost != nil {
			validateRouteJWT(r, field, spec.VirtualHost.JWTProviders, true, c)
		} else {
			validateRouteJWT(r, field, nil, false, c)
		}
		validateRouteUnsupported(r, field, c)
		actions := 0
		if len(r.Services) > 0 {
			actions++
		}
		if r.RequestRedirectPolicy != nil {
			actions++
		}
		if r.DirectResponsePolicy != nil {
			actions++
		}
		if actions != 1 {
			c.fail(problemRoute, "InvalidAction", "%s must have exactly one of services, requestRedirectPolicy, directResponsePolicy (it has %d)", field, actions)
		}
		if len(r.Services) > 0 && !slices.ContainsFunc(r.Services, func(s contourv1.Service) bool { return !s.Mirror }) {
			c.fail(problemService, "NoServices", "%s.services: every service is a mirror, which only gets copies of the requests; a route needs a service that answers them: add one without mirror: true", field)
		}
	}
	return routes, includes
}

// indexedFields holds the names of the first fields of lists: building a name is an
// allocation, and a build names every route although most are never mentioned.
var indexedFields = func() map[[2]string][]string {
	out := map[[2]string][]string{}
	for _, list := range []string{"spec.routes", "spec.includes"} {
		for _, suffix := range []string{"", ".conditions"} {
			names := make([]string, 16)
			for i := range names {
				names[i] = fmt.Sprintf("%s[%d]%s", list, i, suffix)
			}
			out[[2]string{list, suffix}] = names
		}
	}
	return out
}()

// indexedField is "list[i]suffix" (suffix is optional).
func indexedField(list string, i int, suffix ...string) string {
	sfx := ""
	if len(suffix) > 0 {
		sfx = suffix[0]
	}
	if names := indexedFields[[2]string{list, sfx}]; i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("%s[%d]%s", list, i, sfx)
}

// validateHTTPVersions checks spec.httpVersions, which chooses what a root's HTTPS
// clients may speak: plain HTTP is shared by every host of the listener, so a root
// without TLS, or an included object, cannot choose.
func validateHTTPVersions(spec *contourv1.HTTPProxySpec, c *proxyCheck) {
	if len(spec.HTTPVersions) == 0 {
		return
	}
	for i, v := range spec.HTTPVersions {
		if v != contourv1.HTTPVersion1 && v != contourv1.HTTPVersion2 {
			c.fail(problemSpec, "HTTPVersionInvalid", "spec.httpVersions[%d] %q must be %q or %q", i, v, contourv1.HTTPVersion1, contourv1.HTTPVersion2)
		}
	}
	switch vh := spec.VirtualHost; {
	case vh == nil:
		c.warn(problemSpec, "HTTPVersionsIgnored", "spec.httpVersions is ignored on an included HTTPProxy: the root's decides for its host")
	case vh.TLS == nil || vh.TLS.Passthrough:
		c.warn(problemSpec, "HTTPVersionsIgnored", "spec.httpVersions is ignored without TLS termination: it chooses what HTTPS clients negotiate (ALPN); plain HTTP is served as HTTP/1.1 and h2c to every host alike")
	}
}

// validateProxyVirtualHost checks a root's virtualhost. The security features Portico
// does not implement make the object invalid: serving it without them would expose what
// they protect.
func validateProxyVirtualHost(vh *contourv1.VirtualHost, hasTCPProxy bool, c *proxyCheck) {
	if msg := validateProxyFQDN(vh.Fqdn); msg != "" {
		c.fail(problemVirtualHost, "FQDNInvalid", "spec.virtualhost.fqdn: %s", msg)
	}
	validateProxyAuthorization(vh, c)
	proxyIPFilter(vh.IPAllowFilterPolicy, vh.IPDenyFilterPolicy, "spec.virtualhost", c)
	proxyCORS(vh.CORSPolicy, c)
	validateJWTProviders(vh, c)
	proxyRateLimit(vh.RateLimitPolicy, "spec.virtualhost.rateLimitPolicy", c)
	if vh.TLS != nil && vh.TLS.EnableFallbackCertificate && len(vh.JWTProviders) > 0 {
		// Contour refuses the two together too: a client without a server name would
		// reach the host's routes on the fallback certificate's connection.
		c.fail(problemTLS, "FallbackInvalid", "spec.virtualhost.tls.enableFallbackCertificate cannot be used with jwtProviders: remove one of them")
	}
	if t := vh.TLS; t != nil {
		validateProxyTLS(t, hasTCPProxy, c)
	} else if hasTCPProxy {
		c.fail(problemTCPProxy, "TLSMustBeConfigured", "spec.tcpproxy needs spec.virtualhost.tls (secretName or passthrough): the connection is chosen by the TLS server name")
	}
}

func validateProxyTLS(t *contourv1.TLS, hasTCPProxy bool, c *proxyCheck) {
	switch {
	case t.Passthrough && t.SecretName != "":
		c.fail(problemTLS, "TLSConfigInvalid", "spec.virtualhost.tls: passthrough and secretName are exclusive: with passthrough the backend terminates TLS with its own certificate")
	case t.Passthrough && !hasTCPProxy:
		c.fail(problemTLS, "TLSConfigInvalid", "spec.virtualhost.tls.passthrough needs spec.tcpproxy: it names where the TLS connections go")
	case !t.Passthrough && t.SecretName == "":
		c.fail(problemTLS, "TLSConfigInvalid", "spec.virtualhost.tls needs secretName (or passthrough: true)")
	}
	if t.SecretName != "" {
		if msg := validateSecretRef(t.SecretName); msg != "" {
			c.fail(problemTLS, "SecretNameInvalid", "spec.virtualhost.tls.secretName: %s", msg)
		}
	}
	for _, v := range []struct{ field, value string }{
		{"minimumProtocolVersion", t.MinimumProtocolVersion},
		{"maximumProtocolVersion", t.MaximumProtocolVersion},
	} {
		if v.value != "" && v.value != "1.2" && v.value != "1.3" {
			c.fail(problemTLS, "TLSVersionInvalid", "spec.virtualhost.tls.%s %q must be \"1.2\" or \"1.3\"", v.field, v.value)
		}
	}
	if t.MinimumProtocolVersion == "1.3" && t.MaximumProtocolVersion == "1.2" {
		c.fail(problemTLS, "TLSVersionInvalid", "spec.virtualhost.tls: minimumProtocolVersion 1.3 is above maximumProtocolVersion 1.2")
	}
	if t.ClientValidation != nil {
		validateClientValidation(t.ClientValidation, t, c)
	}
	if t.EnableFallbackCertificate {
		if msg := fallbackProblem(t.ClientValidation != nil, t.Passthrough); msg != "" {
			c.fail(problemTLS, "FallbackInvalid", "spec.virtualhost.tls.enableFallbackCertificate %s", msg)
		}
	}
}

// validateProxyFQDN accepts a DNS name, or a wildcard "*.example.com" whose "*" stands
// for exactly one label.
func validateProxyFQDN(fqdn string) string {
	if fqdn == "" {
		return "required on a root (an HTTPProxy with spec.virtualhost)"
	}
	name, wildcard := strings.CutPrefix(fqdn, "*.")
	if name == "" || strings.Contains(name, "*") {
		return fmt.Sprintf("%q: a wildcard must be the whole first label (\"*.example.com\")", fqdn)
	}
	if msg := validateFQDN(name); msg != "" {
		if wildcard {
			return fmt.Sprintf("wildcard %q: %s", fqdn, msg)
		}
		return msg
	}
	return ""
}

func validateTCPProxy(tp *contourv1.TCPProxy, field string, c *proxyCheck) {
	inc := tp.Include
	if inc == nil {
		inc = tp.IncludesDeprecated
	}
	switch {
	case len(tp.Services) > 0 && inc != nil:
		c.fail(problemTCPProxy, "NoServicesAndInclude", "%s: services and include are exclusive", field)
	case len(tp.Services) == 0 && inc == nil:
		c.fail(problemTCPProxy, "NothingDefined", "%s needs services or include", field)
	}
	if tp.Include != nil && tp.IncludesDeprecated != nil {
		c.fail(problemTCPProxy, "IncludeDuplicated", "%s: include and includes are the same field (includes is its old name); keep include", field)
	}
	for i := range tp.Services {
		if tp.Services[i].Protocol != nil {
			c.fail(problemTCPProxy, "ProtocolInvalid", "%s.services[%d].protocol: a TCP proxy forwards bytes, it has no HTTP protocol; remove it", field, i)
		}
	}
	if len(tp.Services) > 0 && !slices.ContainsFunc(tp.Services, func(s contourv1.Service) bool { return !s.Mirror }) {
		c.fail(problemService, "NoServices", "%s.services: every service is a mirror, and a tcpproxy has no mirrors; it needs a service that receives its connections", field)
	}
	validateServicesUnsupported(tp.Services, field, true, c)
}

// validateRouteUnsupported warns about the fields of a route Portico ignores.
func validateRouteUnsupported(r *contourv1.Route, field string, c *proxyCheck) {
	validateCookieRewrites(r.CookieRewritePolicies, field, c)
	validateInternalRedirect(r.InternalRedirectPolicy, field, c)
	validateHeaderValuesSet(r.RequestHeadersPolicy, field, "requestHeadersPolicy", c)
	validateHeaderValuesSet(r.ResponseHeadersPolicy, field, "responseHeadersPolicy", c)
	validateServicesUnsupported(r.Services, field, false, c)
}

// validateServicesUnsupported warns about the fields of services Portico ignores, for a
// route's services or (tcp) a tcpproxy's, which have no HTTP requests to apply headers
// policies to.
func validateServicesUnsupported(services []contourv1.Service, field string, tcp bool, c *proxyCheck) {
	for i := range services {
		s := &services[i]
		headers := tcp && (s.RequestHeadersPolicy != nil || s.ResponseHeadersPolicy != nil)
		mirror := tcp && s.Mirror
		cookies := tcp && len(s.CookieRewritePolicies) > 0
		if !tcp {
			at := indexedField(field+".services", i)
			validateCookieRewrites(s.CookieRewritePolicies, at, c)
			validateHeaderValuesSet(s.RequestHeadersPolicy, at, "requestHeadersPolicy", c)
			validateHeaderValuesSet(s.ResponseHeadersPolicy, at, "responseHeadersPolicy", c)
		}
		if !mirror && !cookies && !headers {
			continue
		}
		at := indexedField(field+".services", i)
		if mirror {
			c.warn(problemUnsupported, "NotImplemented", "%s.mirror has no meaning on a tcpproxy (a connection cannot be copied): %s receives no traffic", at, s.Name)
		}
		if cookies {
			c.warn(problemUnsupported, "NotImplemented", "%s.cookieRewritePolicies has no meaning on a tcpproxy (it sees no HTTP headers) and is ignored", at)
		}
		for _, h := range []struct {
			name string
			set  bool
		}{{"requestHeadersPolicy", s.RequestHeadersPolicy != nil}, {"responseHeadersPolicy", s.ResponseHeadersPolicy != nil}} {
			if tcp && h.set {
				c.warn(problemUnsupported, "NotImplemented", "%s.%s is ignored: a TCP proxy forwards bytes, it sets and removes no headers", at, h.name)
			}
		}
	}
}

// proxyProtocols are the upstream protocols a service may name.
var proxyProtocols = []string{"h2", "h2c", "tls"}

func validProxyProtocol(p string) bool { return slices.Contains(proxyProtocols, p) }
