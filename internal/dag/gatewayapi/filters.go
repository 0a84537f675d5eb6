package gatewayapi

import (
	"net/http"
	"strconv"
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
	// mirrors are the RequestMirror filters, their backends resolved by the rule
	// (resolveMirrors).
	mirrors []*gatewayv1.HTTPRequestMirrorFilter
}

// processFilters applies an HTTPRoute rule's filters, one function per type. An error
// is the route's Accepted condition: a filter type Portico does not implement
// (UnsupportedValue), or RequestRedirect with URLRewrite (IncompatibleFilters).
func processFilters(filters []gatewayv1.HTTPRouteFilter) (*ruleFilters, *condError) {
	return processFiltersOf(filters, "RequestHeaderModifier, ResponseHeaderModifier, RequestRedirect, URLRewrite, RequestMirror")
}

// processFiltersOf is processFilters for a route kind whose supported filters are
// listed in supported (for the message).
func processFiltersOf(filters []gatewayv1.HTTPRouteFilter, supported string) (*ruleFilters, *condError) {
	out := &ruleFilters{}
	var rewrite bool
	for _, f := range filters {
		switch f.Type {
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
			var err *condError
			if out.request, err = headerModifier(f.RequestHeaderModifier); err != nil {
				return nil, err
			}
		case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
			var err *condError
			if out.response, err = headerModifier(f.ResponseHeaderModifier); err != nil {
				return nil, err
			}
		case gatewayv1.HTTPRouteFilterRequestRedirect:
			var err *condError
			if out.redirect, err = processRedirectFilter(f.RequestRedirect, out); err != nil {
				return nil, err
			}
		case gatewayv1.HTTPRouteFilterURLRewrite:
			rewrite = true
			if err := processURLRewriteFilter(f.URLRewrite, out); err != nil {
				return nil, err
			}
		case gatewayv1.HTTPRouteFilterRequestMirror:
			if err := checkMirrorFilter(f.RequestMirror); err != nil {
				return nil, err
			}
			out.mirrors = append(out.mirrors, f.RequestMirror)
		case gatewayv1.HTTPRouteFilterExtensionRef:
			name := ""
			if f.ExtensionRef != nil {
				name = string(f.ExtensionRef.Group) + "/" + string(f.ExtensionRef.Kind) + " " + string(f.ExtensionRef.Name)
			}
			out.unresolved = newError(string(gatewayv1.RouteConditionResolvedRefs), string(gatewayv1.RouteReasonInvalidKind),
				"filter ExtensionRef %s: Portico has no extension filters; its requests are answered 500 until it is removed", name)
		default:
			return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonUnsupportedValue),
				"filter type %q is not supported by Portico (supported: %s); remove it", f.Type, supported)
		}
	}
	if rewrite && out.redirect != nil {
		return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonIncompatibleFilters),
			"a rule cannot have both RequestRedirect and URLRewrite filters: keep one")
	}
	return out, nil
}

// checkMirrorFilter refuses a RequestMirror filter whose share cannot be drawn.
func checkMirrorFilter(f *gatewayv1.HTTPRequestMirrorFilter) *condError {
	switch {
	case f == nil:
		return unsupported("filter RequestMirror needs requestMirror")
	case f.Percent != nil && f.Fraction != nil:
		return unsupported("filter RequestMirror: set percent or fraction, not both")
	case f.Percent != nil && (*f.Percent < 0 || *f.Percent > 100):
		return unsupported("filter RequestMirror: percent %d must be 0-100", *f.Percent)
	case f.Fraction != nil && f.Fraction.Denominator != nil && *f.Fraction.Denominator < 1:
		return unsupported("filter RequestMirror: fraction.denominator must be at least 1")
	case f.Fraction != nil && (f.Fraction.Numerator < 0 || f.Fraction.Numerator > mirrorDenominator(f.Fraction)):
		return unsupported("filter RequestMirror: fraction.numerator %d must be 0-%d (the denominator)", f.Fraction.Numerator, mirrorDenominator(f.Fraction))
	}
	return nil
}

func mirrorDenominator(f *gatewayv1.Fraction) int32 {
	if f.Denominator != nil {
		return *f.Denominator
	}
	return 100
}

// resolveMirrors turns a rule's RequestMirror filters into mirrors of its routes. A
// backend that cannot be used is left out (the route's ResolvedRefs says why): the
// requests are still served, only not copied there.
func resolveMirrors(p *dag.Processing, grants grantIndex, routeNS string, filters []*gatewayv1.HTTPRequestMirrorFilter, res *routeResult) []*dag.Mirror {
	var out []*dag.Mirror
	for i, f := range filters {
		cluster, _, err := resolveBackend(p, grants, httpRouteKind, routeNS, f.BackendRef, "filter RequestMirror #"+strconv.Itoa(i)+" backendRef")
		if err != nil {
			if res.resolved == nil {
				res.resolved = err
			}
			continue
		}
		m := &dag.Mirror{Cluster: cluster}
		switch {
		case f.Percent != nil:
			m.Numerator, m.Denominator = uint32(*f.Percent), 100
		case f.Fraction != nil:
			m.Numerator, m.Denominator = uint32(f.Fraction.Numerator), uint32(mirrorDenominator(f.Fraction))
		}
		out = append(out, m)
	}
	return out
}

// headerModifier turns a header filter into a headers policy, names canonical and
// values literal (a "%" doubled: dag.HeaderValue is in Envoy's header format). As the
// spec says, of the entries of one list with the same name (in any case) the first
// counts, and a name in two of set, add and remove is refused. Host and pseudo-headers
// are refused: the data planes cannot modify them (URLRewrite's hostname changes Host).
func headerModifier(f *gatewayv1.HTTPHeaderFilter) (*dag.HeadersPolicy, *condError) {
	if f == nil {
		return nil, nil
	}
	p := &dag.HeadersPolicy{}
	action := map[string]string{} // canonical name -> the list that has it
	use := func(list, name string) (bool, *condError) {
		if err := checkModifiedHeader(name); err != nil {
			return false, err
		}
		key := http.CanonicalHeaderKey(name)
		switch prev, ok := action[key]; {
		case !ok:
			action[key] = list
			return true, nil
		case prev == list:
			return false, nil
		default:
			return false, unsupported("header %s is both in %s and in %s: a header name may have one action only; keep one", key, prev, list)
		}
	}
	values := func(list string, hs []gatewayv1.HTTPHeader) ([]dag.HeaderValue, *condError) {
		var out []dag.HeaderValue
		for _, h := range hs {
			if !validValue(h.Value) {
				return nil, unsupported("header %q: %q is not a valid header value", h.Name, h.Value)
			}
			first, err := use(list, string(h.Name))
			if err != nil {
				return nil, err
			}
			if first {
				out = append(out, dag.HeaderValue{Name: http.CanonicalHeaderKey(string(h.Name)), Value: strings.ReplaceAll(h.Value, "%", "%%")})
			}
		}
		return out, nil
	}
	var err *condError
	if p.Set, err = values("set", f.Set); err != nil {
		return nil, err
	}
	if p.Add, err = values("add", f.Add); err != nil {
		return nil, err
	}
	for _, name := range f.Remove {
		first, err := use("remove", name)
		if err != nil {
			return nil, err
		}
		if first {
			p.Remove = append(p.Remove, http.CanonicalHeaderKey(name))
		}
	}
	return p, nil
}

// checkModifiedHeader refuses a header name a modifier cannot have.
func checkModifiedHeader(name string) *condError {
	switch {
	case strings.EqualFold(name, "host") || strings.HasPrefix(name, ":"):
		return unsupported("header %q cannot be modified by a header filter: to change the Host the backend sees, use a URLRewrite filter's hostname", name)
	case !validHeaderName(name):
		return unsupported("header %q is not a valid header name", name)
	}
	return nil
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
		if msg := hostnameProblem(rd.Hostname); msg != "" || strings.HasPrefix(rd.Hostname, "*") {
			return nil, unsupported("requestRedirect.hostname %q is not a precise hostname", rd.Hostname)
		}
	}
	if rd.Scheme != "" && rd.Scheme != "http" && rd.Scheme != "https" {
		return nil, unsupported("requestRedirect.scheme %q: use http or https", rd.Scheme)
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
	full, prefix, err := pathModifier("requestRedirect", f.Path)
	if err != nil {
		return nil, err
	}
	if full != nil {
		rd.Path = *full
	}
	if prefix != nil {
		rd.Prefix = *prefix
		out.prefixMatchOnly = true
	}
	return rd, nil
}

// pathModifier returns the full path or the prefix a path modifier replaces with.
func pathModifier(filter string, p *gatewayv1.HTTPPathModifier) (full, prefix *string, err *condError) {
	if p == nil {
		return nil, nil, nil
	}
	switch {
	case p.Type == gatewayv1.FullPathHTTPPathModifier && p.ReplaceFullPath != nil:
		full = p.ReplaceFullPath
	case p.Type == gatewayv1.PrefixMatchHTTPPathModifier && p.ReplacePrefixMatch != nil:
		prefix = p.ReplacePrefixMatch
		if *prefix == "" {
			// The spec: an empty replacement removes the prefix, leaving "/" at least.
			root := "/"
			prefix = &root
		}
	default:
		return nil, nil, unsupported("%s.path: type %q needs its field (replaceFullPath or replacePrefixMatch)", filter, p.Type)
	}
	for _, v := range []*string{full, prefix} {
		if v != nil && !validPath(*v) {
			return nil, nil, unsupported("%s.path: %q must start with / and hold no control characters", filter, *v)
		}
	}
	return full, prefix, nil
}

// processURLRewriteFilter: the Host and the path the backend sees.
func processURLRewriteFilter(f *gatewayv1.HTTPURLRewriteFilter, out *ruleFilters) *condError {
	if f == nil {
		return nil
	}
	if f.Hostname != nil {
		out.hostRewrite = string(*f.Hostname)
		if msg := hostnameProblem(out.hostRewrite); msg != "" || strings.HasPrefix(out.hostRewrite, "*") {
			return unsupported("urlRewrite.hostname %q is not a precise hostname", out.hostRewrite)
		}
	}
	var err *condError
	if out.fullPath, out.prefix, err = pathModifier("urlRewrite", f.Path); err != nil {
		return err
	}
	out.prefixMatchOnly = out.prefix != nil
	return nil
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
