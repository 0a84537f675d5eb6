package gatewayapi

import (
	"regexp"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
)

// GRPCRoutes are HTTPRoutes of a narrower shape: a gRPC call is an HTTP/2 POST to
// "/<service>/<method>", so a method match is a path match, and the rest (parents,
// hostnames, header matches and filters, backends, status) follows HTTPRoute's rules.

// The grammar the API server's schema gives service and method names (run mode reads
// unchecked manifests).
var (
	grpcServiceName = regexp.MustCompile(`^(?i)\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$`)
	grpcMethodName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z_0-9]*$`)
)

// grpcSupportedFilters names the filters GRPCRoute rules may have, for messages;
// grpcFilterTypes are those the HTTPRoute filter functions take (an ExtensionRef is
// answered 500 as on HTTPRoutes).
const grpcSupportedFilters = "RequestHeaderModifier, ResponseHeaderModifier"

var grpcFilterTypes = map[gatewayv1.GRPCRouteFilterType]bool{
	gatewayv1.GRPCRouteFilterRequestHeaderModifier:  true,
	gatewayv1.GRPCRouteFilterResponseHeaderModifier: true,
	gatewayv1.GRPCRouteFilterExtensionRef:           true,
}

// processGRPCRoute turns a GRPCRoute's rules into graph routes, one per match.
func processGRPCRoute(p *dag.Processing, grants grantIndex, gr *gatewayv1.GRPCRoute) *routeResult {
	res := &routeResult{ref: dag.ObjectRef{Kind: dag.KindGRPCRoute, Namespace: gr.Namespace, Name: gr.Name}, created: gr.CreationTimestamp.Time}
	return res.processRules(gr.Spec.Hostnames, len(gr.Spec.Rules), func(i int) ([]routeEntry, *condError) {
		return processGRPCRule(p, grants, gr, i, gr.Spec.Rules[i], res)
	})
}

// processGRPCRule returns the routes of one GRPCRule. As for HTTPRoute, an
// unsupported filter or an invalid match refuses the route; a backend that cannot be
// used has its share of the calls answered 500.
func processGRPCRule(p *dag.Processing, grants grantIndex, gr *gatewayv1.GRPCRoute, index int, rule gatewayv1.GRPCRouteRule, res *routeResult) ([]routeEntry, *condError) {
	for _, f := range rule.Filters {
		if !grpcFilterTypes[f.Type] {
			return nil, unsupported("filter type %q is not supported by Portico on GRPCRoutes (supported: %s); remove it", f.Type, grpcSupportedFilters)
		}
	}
	filters, err := processFiltersOf(httpFilters(rule.Filters), grpcSupportedFilters)
	if err != nil {
		return nil, err
	}
	if rule.SessionPersistence != nil {
		return nil, unsupported("sessionPersistence is not supported yet: remove it")
	}
	// Streams may last as long as the client wants: no route timeout (the client's
	// deadline applies).
	noTimeout := time.Duration(0)
	base := dag.Route{Source: res.ref, Timeouts: &dag.TimeoutPolicy{Request: &noTimeout}}
	filters.apply(&base)
	refs := make([]gatewayv1.HTTPBackendRef, len(rule.BackendRefs))
	for j, ref := range rule.BackendRefs {
		refs[j] = gatewayv1.HTTPBackendRef{BackendRef: ref.BackendRef, Filters: httpFilters(ref.Filters)}
	}
	res.useBackends(&base, index, processBackendRefs(p, grants, grpcRouteKind, gr.Namespace, refs))
	res.refuseUnresolved(&base, filters)
	matches := rule.Matches
	if len(matches) == 0 {
		matches = []gatewayv1.GRPCRouteMatch{{}}
	}
	out := make([]routeEntry, 0, len(matches))
	for j, m := range matches {
		r := base
		e := routeEntry{route: &r, created: gr.CreationTimestamp.Time, ns: gr.Namespace, name: gr.Name, rule: index, match: j, grpc: true}
		if err := processGRPCMatch(&e, m); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// processGRPCMatch sets a route's conditions from one GRPCRouteMatch: the method as
// the path, only POST (a gRPC call is one), the headers as HTTPRoute's.
func processGRPCMatch(e *routeEntry, m gatewayv1.GRPCRouteMatch) *condError {
	r := e.route
	r.Path = dag.PathMatch{Kind: dag.PathPrefix, Value: "/"}
	if mm := m.Method; mm != nil {
		path, err := grpcMethodPath(mm)
		if err != nil {
			return err
		}
		r.Path = path
		e.serviceLen, e.methodLen = len(deref(mm.Service)), len(deref(mm.Method))
	}
	headers := make([]gatewayv1.HTTPHeaderMatch, len(m.Headers))
	for i, h := range m.Headers {
		headers[i] = gatewayv1.HTTPHeaderMatch{Name: gatewayv1.HTTPHeaderName(h.Name), Value: h.Value}
		if h.Type != nil {
			t := gatewayv1.HeaderMatchType(*h.Type)
			headers[i].Type = &t
		}
	}
	if err := processHeaderMatches(r, headers); err != nil {
		return err
	}
	r.Headers = append(r.Headers, dag.HeaderMatch{Name: ":method", Kind: dag.MatchExact, Value: "POST"})
	return nil
}

// grpcMethodPath is the path condition of a method match: "/<service>/<method>"
// exactly, or the paths of a service's methods, or of a method of any service; a
// RegularExpression match is the expressions in their places. A path that is a
// regular expression is held to the data planes' size limit as a whole.
func grpcMethodPath(mm *gatewayv1.GRPCMethodMatch) (dag.PathMatch, *condError) {
	path, err := grpcMethodCondition(mm)
	if err == nil && path.Kind == dag.PathRegex {
		if err = checkRegex("method match (as the path "+path.Value+")", path.Value); err != nil {
			err.Message += "; shorten the service or method expression, or name the service exactly"
		}
	}
	return path, err
}

func grpcMethodCondition(mm *gatewayv1.GRPCMethodMatch) (dag.PathMatch, *condError) {
	service, method := deref(mm.Service), deref(mm.Method)
	if service == "" && method == "" {
		return dag.PathMatch{}, unsupported("a method match needs a service or a method (or both)")
	}
	if mm.Type != nil && *mm.Type == gatewayv1.GRPCMethodMatchRegularExpression {
		for _, part := range [][2]string{{"service", service}, {"method", method}} {
			if part[1] == "" {
				continue
			}
			if err := checkRegex("method match "+part[0], part[1]); err != nil {
				return dag.PathMatch{}, err
			}
		}
		return dag.PathMatch{Kind: dag.PathRegex, Value: "/" + orAny(service) + "/" + orAny(method)}, nil
	}
	if mm.Type != nil && *mm.Type != gatewayv1.GRPCMethodMatchExact {
		return dag.PathMatch{}, unsupported("method match type %q is not supported (Exact, RegularExpression)", *mm.Type)
	}
	if service != "" && !grpcServiceName.MatchString(service) {
		return dag.PathMatch{}, unsupported("method match service %q is not a gRPC service name such as helloworld.Greeter", service)
	}
	if method != "" && !grpcMethodName.MatchString(method) {
		return dag.PathMatch{}, unsupported("method match method %q is not a gRPC method name such as SayHello", method)
	}
	switch {
	case method == "":
		return dag.PathMatch{Kind: dag.PathStringPrefix, Value: "/" + service + "/"}, nil
	case service == "":
		return dag.PathMatch{Kind: dag.PathRegex, Value: "/[^/]+/" + regexp.QuoteMeta(method)}, nil
	}
	return dag.PathMatch{Kind: dag.PathExact, Value: "/" + service + "/" + method}, nil
}

// orAny is a service or method expression, or any name when empty.
func orAny(re string) string {
	if re == "" {
		return "[^/]+"
	}
	return "(?:" + re + ")"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// httpFilters are GRPCRoute filters as the HTTPRoute filters of the same types (the
// filter functions are shared).
func httpFilters(fs []gatewayv1.GRPCRouteFilter) []gatewayv1.HTTPRouteFilter {
	if fs == nil {
		return nil
	}
	out := make([]gatewayv1.HTTPRouteFilter, len(fs))
	for i, f := range fs {
		out[i] = gatewayv1.HTTPRouteFilter{
			Type:                   gatewayv1.HTTPRouteFilterType(f.Type),
			RequestHeaderModifier:  f.RequestHeaderModifier,
			ResponseHeaderModifier: f.ResponseHeaderModifier,
			RequestMirror:          f.RequestMirror,
			ExtensionRef:           f.ExtensionRef,
		}
	}
	return out
}
