package gatewayapi

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
)

// routeResult is a route's rules as graph routes, and what stops them from being
// served, before it is attached to its parents.
type routeResult struct {
	ref     dag.ObjectRef
	entries []routeEntry
	// accepted is nil, or why the route cannot be served anywhere (Accepted False).
	accepted *condError
	// resolved is nil, or the first reference that cannot be used (ResolvedRefs
	// False): the rules concerned answer 500, the others are served.
	resolved *condError
}

// processHTTPRoute turns an HTTPRoute's rules into graph routes, one per match.
func processHTTPRoute(p *dag.Processing, grants grantIndex, hr *gatewayv1.HTTPRoute) *routeResult {
	res := &routeResult{ref: dag.ObjectRef{Kind: dag.KindHTTPRoute, Namespace: hr.Namespace, Name: hr.Name}}
	for i, rule := range hr.Spec.Rules {
		entries, err := processRule(p, grants, hr, i, rule, res)
		if err != nil {
			err.Message = fmt.Sprintf("spec.rules[%d]: %s", i, err.Message)
			res.accepted, res.entries = err, nil
			return res
		}
		res.entries = append(res.entries, entries...)
	}
	return res
}

// processRule returns the routes of one rule. A rule is refused whole (the route's
// Accepted False) for what the spec says makes a route unacceptable: an unsupported
// filter, incompatible filters, an invalid regular expression, a prefix replacement
// without a prefix match.
func processRule(p *dag.Processing, grants grantIndex, hr *gatewayv1.HTTPRoute, index int, rule gatewayv1.HTTPRouteRule, res *routeResult) ([]routeEntry, *condError) {
	filters, err := processFilters(rule.Filters)
	if err != nil {
		return nil, err
	}
	base := dag.Route{Source: res.ref}
	filters.apply(&base)
	if base.Redirect == nil {
		be := processBackendRefs(p, grants, hr.Namespace, rule.BackendRefs)
		if be.err != nil && res.resolved == nil {
			be.err.Message = fmt.Sprintf("spec.rules[%d].%s", index, be.err.Message)
			res.resolved = be.err
		}
		base.Clusters, base.Websocket = be.clusters, be.websocket
		if len(base.Clusters) == 0 {
			// No backend to send to (none listed, all invalid or of weight 0): 500, as
			// the spec says.
			base.DirectStatus = 500
		}
	}
	if filters.unresolved != nil {
		if res.resolved == nil {
			res.resolved = filters.unresolved
		}
		base.Clusters, base.Redirect, base.DirectStatus = nil, nil, 500
	}
	if t, err := processTimeouts(rule.Timeouts); err != nil {
		return nil, err
	} else {
		base.Timeouts = t
	}
	matches := rule.Matches
	if len(matches) == 0 {
		matches = []gatewayv1.HTTPRouteMatch{{}}
	}
	out := make([]routeEntry, 0, len(matches))
	for j, m := range matches {
		r := base
		method, err := processMatch(&r, m)
		if err != nil {
			return nil, err
		}
		if filters.prefixMatchOnly && r.Path.Kind == dag.PathExact || filters.prefixMatchOnly && r.Path.Kind == dag.PathRegex {
			return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonUnsupportedValue),
				"ReplacePrefixMatch needs a PathPrefix match: match %d has another path type", j)
		}
		out = append(out, routeEntry{route: &r, created: hr.CreationTimestamp.Time, ns: hr.Namespace, name: hr.Name, rule: index, match: j, method: method})
	}
	return out, nil
}

// processMatch sets a route's conditions from one HTTPRouteMatch, reporting whether it
// matches the method.
func processMatch(r *dag.Route, m gatewayv1.HTTPRouteMatch) (bool, *condError) {
	r.Path = dag.PathMatch{Kind: dag.PathPrefix, Value: "/"}
	if pm := m.Path; pm != nil {
		value := "/"
		if pm.Value != nil {
			value = *pm.Value
		}
		typ := gatewayv1.PathMatchPathPrefix
		if pm.Type != nil {
			typ = *pm.Type
		}
		switch typ {
		case gatewayv1.PathMatchExact:
			r.Path = dag.PathMatch{Kind: dag.PathExact, Value: value}
		case gatewayv1.PathMatchPathPrefix:
			r.Path = prefixMatch(value)
		case gatewayv1.PathMatchRegularExpression:
			if _, err := regexp.Compile(value); err != nil {
				return false, unsupported("path regular expression %q: %v", value, err)
			}
			r.Path = dag.PathMatch{Kind: dag.PathRegex, Value: value}
		default:
			return false, unsupported("path match type %q is not supported", typ)
		}
	}
	seen := map[string]bool{}
	r.Headers = nil
	for _, h := range m.Headers {
		name := strings.ToLower(string(h.Name))
		if seen[name] {
			continue // the spec: only the first match of a header name counts
		}
		seen[name] = true
		hm := dag.HeaderMatch{Name: name, Kind: dag.MatchExact, Value: h.Value}
		if h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression {
			if _, err := regexp.Compile(h.Value); err != nil {
				return false, unsupported("header %s regular expression %q: %v", h.Name, h.Value, err)
			}
			hm.Kind = dag.MatchRegex
		} else if h.Type != nil && *h.Type != gatewayv1.HeaderMatchExact {
			return false, unsupported("header match type %q is not supported", *h.Type)
		}
		r.Headers = append(r.Headers, hm)
	}
	r.Query = nil
	seenQ := map[string]bool{}
	for _, q := range m.QueryParams {
		name := string(q.Name)
		if seenQ[name] {
			continue
		}
		seenQ[name] = true
		qm := dag.QueryMatch{Name: name, Kind: dag.MatchExact, Value: q.Value}
		if q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression {
			if _, err := regexp.Compile(q.Value); err != nil {
				return false, unsupported("query parameter %s regular expression %q: %v", q.Name, q.Value, err)
			}
			qm.Kind = dag.MatchRegex
		} else if q.Type != nil && *q.Type != gatewayv1.QueryParamMatchExact {
			return false, unsupported("query parameter match type %q is not supported", *q.Type)
		}
		r.Query = append(r.Query, qm)
	}
	if m.Method != nil {
		// The method is the :method pseudo-header, which Envoy and the embedded proxy
		// both match as a header.
		r.Headers = append(r.Headers, dag.HeaderMatch{Name: ":method", Kind: dag.MatchExact, Value: string(*m.Method)})
		return true, nil
	}
	return false, nil
}

// prefixMatch is a PathPrefix match: element-wise, "/foo" matching "/foo" and
// "/foo/bar" but not "/foobar". A value ending in "/" matches the paths under it,
// which a plain string prefix does element-wise already.
func prefixMatch(value string) dag.PathMatch {
	if value != "/" && strings.HasSuffix(value, "/") {
		return dag.PathMatch{Kind: dag.PathStringPrefix, Value: value}
	}
	return dag.PathMatch{Kind: dag.PathPrefix, Value: value}
}

func unsupported(format string, args ...any) *condError {
	return newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonUnsupportedValue), format, args...)
}

// processTimeouts: request bounds the whole request; backendRequest each request to a
// backend, which without retries is the same bound, so the route's timeout is the
// smaller of the two. "0s" turns the timeout off.
func processTimeouts(t *gatewayv1.HTTPRouteTimeouts) (*dag.TimeoutPolicy, *condError) {
	if t == nil || (t.Request == nil && t.BackendRequest == nil) {
		return nil, nil
	}
	var bound *time.Duration
	for _, d := range []*gatewayv1.Duration{t.Request, t.BackendRequest} {
		if d == nil {
			continue
		}
		v, err := time.ParseDuration(string(*d))
		if err != nil || v < 0 {
			return nil, unsupported("timeout %q is not a duration such as 10s or 1m", *d)
		}
		if bound == nil || (v != 0 && (*bound == 0 || v < *bound)) {
			bound = &v
		}
	}
	return &dag.TimeoutPolicy{Request: bound}, nil
}
