package gatewayapi

import (
	"net/http"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
)

// ruleFilters is what a rule's filters do to its routes.
type ruleFilters struct {
	request, response *dag.HeadersPolicy
	redirect          *dag.Redirect
	hostRewrite       string
	// fullPath and prefix are URLRewrite's (the redirect keeps its own in redirect).
	fullPath, prefix *string
	// prefixMatchOnly: a filter replaces the matched prefix, which only a PathPrefix
	// match has.
	prefixMatchOnly bool
	// unresolved says an ExtensionRef filter names nothing Portico knows: its requests
	// get 500, as the spec says, never skipping the filter.
	unresolved *condError
	// listenerPort: the redirect has neither scheme nor port, so it keeps the port of
	// the listener the request came in on (set per port in dataplane.go).
	listenerPort bool
}

// processFilters applies an HTTPRoute rule's filters, one function per type. An error
// is the route's Accepted condition: a filter type Portico does not implement
// (UnsupportedValue), or RequestRedirect with URLRewrite (IncompatibleFilters).
func processFilters(filters []gatewayv1.HTTPRouteFilter) (*ruleFilters, *condError) {
	out := &ruleFilters{}
	var rewrite bool
	for _, f := range filters {
		switch f.Type {
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
			out.request = headerModifier(f.RequestHeaderModifier)
		case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
			out.response = headerModifier(f.ResponseHeaderModifier)
		case gatewayv1.HTTPRouteFilterRequestRedirect:
			var err *condError
			if out.redirect, err = processRedirectFilter(f.RequestRedirect, out); err != nil {
				return nil, err
			}
		case gatewayv1.HTTPRouteFilterURLRewrite:
			rewrite = true
			processURLRewriteFilter(f.URLRewrite, out)
		case gatewayv1.HTTPRouteFilterExtensionRef:
			name := ""
			if f.ExtensionRef != nil {
				name = string(f.ExtensionRef.Group) + "/" + string(f.ExtensionRef.Kind) + " " + string(f.ExtensionRef.Name)
			}
			out.unresolved = newError(string(gatewayv1.RouteConditionResolvedRefs), string(gatewayv1.RouteReasonInvalidKind),
				"filter ExtensionRef %s: Portico has no extension filters; its requests are answered 500 until it is removed", name)
		default:
			return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonUnsupportedValue),
				"filter type %q is not supported by Portico (supported: RequestHeaderModifier, ResponseHeaderModifier, RequestRedirect, URLRewrite); remove it", f.Type)
		}
	}
	if rewrite && out.redirect != nil {
		return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonIncompatibleFilters),
			"a rule cannot have both RequestRedirect and URLRewrite filters: keep one")
	}
	return out, nil
}

// headerModifier turns a header filter into a headers policy, names canonical.
func headerModifier(f *gatewayv1.HTTPHeaderFilter) *dag.HeadersPolicy {
	if f == nil {
		return nil
	}
	p := &dag.HeadersPolicy{}
	for _, h := range f.Set {
		p.Set = append(p.Set, dag.HeaderValue{Name: http.CanonicalHeaderKey(string(h.Name)), Value: h.Value})
	}
	for _, h := range f.Add {
		p.Add = append(p.Add, dag.HeaderValue{Name: http.CanonicalHeaderKey(string(h.Name)), Value: h.Value})
	}
	for _, name := range f.Remove {
		p.Remove = append(p.Remove, http.CanonicalHeaderKey(name))
	}
	return p
}

// processRedirectFilter: scheme, hostname, port and path of the redirect, 302 unless
// statusCode says otherwise. Without a port, a new scheme's well-known port is used,
// else the listener's (the spec's rules).
func processRedirectFilter(f *gatewayv1.HTTPRequestRedirectFilter, out *ruleFilters) (*dag.Redirect, *condError) {
	rd := &dag.Redirect{StatusCode: 302}
	if f == nil {
		out.listenerPort = true
		return rd, nil
	}
	if f.Scheme != nil {
		rd.Scheme = strings.ToLower(*f.Scheme)
	}
	if f.Hostname != nil {
		rd.Hostname = string(*f.Hostname)
	}
	switch {
	case f.Port != nil:
		rd.Port = uint32(*f.Port)
	case rd.Scheme == "https":
		rd.Port = 443
	case rd.Scheme == "http":
		rd.Port = 80
	default:
		out.listenerPort = true
	}
	if f.StatusCode != nil {
		switch code := *f.StatusCode; code {
		case 301, 302, 303, 307, 308:
			rd.StatusCode = uint32(code)
		default:
			return nil, unsupported("requestRedirect.statusCode %d is not a redirect code Portico supports (301, 302, 303, 307, 308)", code)
		}
	}
	if p := f.Path; p != nil {
		switch {
		case p.Type == gatewayv1.FullPathHTTPPathModifier && p.ReplaceFullPath != nil:
			rd.Path = *p.ReplaceFullPath
		case p.Type == gatewayv1.PrefixMatchHTTPPathModifier && p.ReplacePrefixMatch != nil:
			rd.Prefix = *p.ReplacePrefixMatch
			out.prefixMatchOnly = true
		}
	}
	return rd, nil
}

// processURLRewriteFilter: the Host and the path the backend sees.
func processURLRewriteFilter(f *gatewayv1.HTTPURLRewriteFilter, out *ruleFilters) {
	if f == nil {
		return
	}
	if f.Hostname != nil {
		out.hostRewrite = string(*f.Hostname)
	}
	if p := f.Path; p != nil {
		switch {
		case p.Type == gatewayv1.FullPathHTTPPathModifier && p.ReplaceFullPath != nil:
			out.fullPath = p.ReplaceFullPath
		case p.Type == gatewayv1.PrefixMatchHTTPPathModifier && p.ReplacePrefixMatch != nil:
			out.prefix = p.ReplacePrefixMatch
			out.prefixMatchOnly = true
		}
	}
}

// apply sets the filters' effects on a route.
func (f *ruleFilters) apply(r *dag.Route) {
	r.RequestHeaders, r.ResponseHeaders = f.request, f.response
	r.HostRewrite = f.hostRewrite
	if f.fullPath != nil {
		r.PathRewrite = *f.fullPath
	}
	if f.prefix != nil {
		r.PrefixRewrite = *f.prefix
	}
	if f.redirect != nil {
		rd := *f.redirect
		r.Redirect = &rd
	}
}
