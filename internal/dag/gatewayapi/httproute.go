package gatewayapi

import (
	"fmt"
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
	// tcp are a TLSRoute's backends (entries is empty then), created when.
	tcp []*dag.WeightedCluster
	// reencrypted, when set, are the backends for connections a listener terminates:
	// tcp's, in TLS where a BackendTLSPolicy targets their Service (applyPolicies).
	reencrypted []*dag.WeightedCluster
	created     time.Time
	// hostnames are its own, in lower case: the one that matches a host decides its
	// rules' precedence there (hostnameRank).
	hostnames []string
}

// processHTTPRoute turns an HTTPRoute's rules into graph routes, one per match.
func processHTTPRoute(p *dag.Processing, grants grantIndex, hr *gatewayv1.HTTPRoute) *routeResult {
	res := &routeResult{ref: dag.ObjectRef{Kind: dag.KindHTTPRoute, Namespace: hr.Namespace, Name: hr.Name}, created: hr.CreationTimestamp.Time}
	return res.processRules(hr.Spec.Hostnames, len(hr.Spec.Rules), func(i int) ([]routeEntry, *condError) {
		return processRule(p, grants, hr, i, hr.Spec.Rules[i], res)
	})
}

// processRules checks a route's hostnames and collects the entries of its rules, rule
// i's from rule(i); a rule's error refuses the whole route (Accepted False).
func (res *routeResult) processRules(hostnames []gatewayv1.Hostname, rules int, rule func(i int) ([]routeEntry, *condError)) *routeResult {
	if err := checkHostnames(hostnames); err != nil {
		res.accepted = err
		return res
	}
	for _, h := range hostnames {
		res.hostnames = append(res.hostnames, strings.ToLower(string(h)))
	}
	for i := range rules {
		entries, err := rule(i)
		if err != nil {
			err.Message = fmt.Sprintf("spec.rules[%d]: %s", i, err.Message)
			res.accepted, res.entries = err, nil
			return res
		}
		res.entries = append(res.entries, entries...)
	}
	return res
}

// useBackends sends r to rule index's backends: with none that can be used, it
// answers 500, as the spec says; with some, the share of those that cannot is
// answered 500, never sent to the others. The first problem is the route's
// ResolvedRefs condition.
func (res *routeResult) useBackends(r *dag.Route, index int, be backends) {
	if be.err != nil && res.resolved == nil {
		be.err.Message = fmt.Sprintf("spec.rules[%d].%s", index, be.err.Message)
		res.resolved = be.err
	}
	r.Clusters, r.Websocket = be.clusters, be.websocket
	if len(r.Clusters) == 0 {
		r.DirectStatus = 500
	} else {
		r.InvalidBackendWeight = be.invalidWeight
	}
}

// refuseUnresolved answers 500 for a rule with a filter Portico cannot resolve,
// rather than skipping the filter.
func (res *routeResult) refuseUnresolved(r *dag.Route, filters *ruleFilters) {
	if filters.unresolved == nil {
		return
	}
	if res.resolved == nil {
		res.resolved = filters.unresolved
	}
	r.Clusters, r.Redirect, r.DirectStatus, r.InvalidBackendWeight = nil, nil, 500, 0
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
	if rule.SessionPersistence != nil {
		return nil, unsupported("sessionPersistence is not supported yet: remove it")
	}
	base := dag.Route{Source: res.ref}
	filters.apply(&base)
	if base.Redirect == nil {
		res.useBackends(&base, index, processBackendRefs(p, grants, httpRouteKind, hr.Namespace, rule.BackendRefs))
		base.Mirrors = resolveMirrors(p, grants, hr.Namespace, filters.mirrors, res)
	}
	res.refuseUnresolved(&base, filters)
	if err := processTimeoutsAndRetry(&base, rule.Timeouts, rule.Retry); err != nil {
		return nil, err
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
		e := routeEntry{route: &r, pathLen: len(r.Path.Value), created: hr.CreationTimestamp.Time, ns: hr.Namespace, name: hr.Name, rule: index, match: j, method: method,
			listenerPort: r.Redirect != nil && filters.listenerPort}
		if twin := replacePrefix(&r); twin != nil {
			// First: it takes the paths below the prefix, the route the prefix itself.
			t := e
			t.route = twin
			out = append(out, t)
		}
		out = append(out, e)
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
		if typ != gatewayv1.PathMatchRegularExpression && !validPath(value) {
			return false, unsupported("path %q must start with / and hold no control characters", value)
		}
		switch typ {
		case gatewayv1.PathMatchExact:
			r.Path = dag.PathMatch{Kind: dag.PathExact, Value: value}
		case gatewayv1.PathMatchPathPrefix:
			r.Path = prefixMatch(value)
		case gatewayv1.PathMatchRegularExpression:
			if err := checkRegex("path", value); err != nil {
				return false, err
			}
			r.Path = dag.PathMatch{Kind: dag.PathRegex, Value: value}
		default:
			return false, unsupported("path match type %q is not supported", typ)
		}
	}
	if err := processHeaderMatches(r, m.Headers); err != nil {
		return false, err
	}
	r.Query = nil
	seenQ := map[string]bool{}
	for _, q := range m.QueryParams {
		name := string(q.Name)
		if name == "" || !validValue(name) || !validValue(q.Value) {
			return false, unsupported("query parameter match %q: %q is not a valid name and value", q.Name, q.Value)
		}
		if seenQ[name] {
			continue
		}
		seenQ[name] = true
		qm := dag.QueryMatch{Name: name, Kind: dag.MatchExact, Value: q.Value}
		if q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression {
			if err := checkRegex("query parameter "+name, q.Value); err != nil {
				return false, err
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

// processHeaderMatches sets a route's header conditions: names lower case, and of
// matches of one name only the first counts, as the spec says.
func processHeaderMatches(r *dag.Route, headers []gatewayv1.HTTPHeaderMatch) *condError {
	seen := map[string]bool{}
	r.Headers = nil
	for _, h := range headers {
		name := strings.ToLower(string(h.Name))
		if !validHeaderName(name) || !validValue(h.Value) {
			return unsupported("header match %q: %q is not a valid header name and value", h.Name, h.Value)
		}
		if seen[name] {
			continue // the spec: only the first match of a header name counts
		}
		seen[name] = true
		hm := dag.HeaderMatch{Name: name, Kind: dag.MatchExact, Value: h.Value}
		if h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression {
			if err := checkRegex("header "+name, h.Value); err != nil {
				return err
			}
			hm.Kind = dag.MatchRegex
		} else if h.Type != nil && *h.Type != gatewayv1.HeaderMatchExact {
			return unsupported("header match type %q is not supported", *h.Type)
		}
		r.Headers = append(r.Headers, hm)
	}
	return nil
}

// replacePrefix makes a ReplacePrefixMatch (of a rewrite or a redirect) replace whole
// segments, as the spec says: "/foo" replaced by "/" turns "/foo/bar" into "/bar", not
// "//bar", and "/foo/" replaced by "/bar" turns "/foo/x" into "/bar/x". The data planes
// replace the matched characters: a replacement ending in "/" on a segment prefix needs
// a second route for the paths below the prefix ("/foo/"), returned; a prefix ending in
// "/" (and "/" itself) needs a replacement ending in "/".
func replacePrefix(r *dag.Route) *dag.Route {
	repl := &r.PrefixRewrite
	if r.Redirect != nil {
		repl = &r.Redirect.Prefix
	}
	if *repl == "" {
		return nil
	}
	if strings.HasSuffix(r.Path.Value, "/") {
		if !strings.HasSuffix(*repl, "/") {
			if r.Redirect != nil {
				rd := *r.Redirect
				r.Redirect, repl = &rd, &rd.Prefix
			}
			*repl += "/"
		}
		return nil
	}
	if !strings.HasSuffix(*repl, "/") {
		return nil
	}
	twin := *r
	twin.Path = dag.PathMatch{Kind: dag.PathStringPrefix, Value: r.Path.Value + "/"}
	return &twin
}

// prefixMatch is a PathPrefix match: element-wise, "/foo" matching "/foo" and
// "/foo/bar" but not "/foobar". A trailing "/" is ignored, as the spec says: "/foo/"
// matches "/foo" too.
func prefixMatch(value string) dag.PathMatch {
	if trimmed := strings.TrimRight(value, "/"); trimmed != "" {
		value = trimmed
	} else {
		value = "/"
	}
	return dag.PathMatch{Kind: dag.PathPrefix, Value: value}
}

// checkRegex refuses a regular expression the data planes cannot take: not RE2, or
// over dag.MaxRegexProgramSize, which Envoy would refuse with every other route of
// the configuration.
func checkRegex(what, re string) *condError {
	if p := dag.RegexProblem(re); p != "" {
		return unsupported("%s regular expression %s", what, p)
	}
	return nil
}

// checkHostnames refuses a route hostname that is not one (run mode only: the API
// server refuses them).
func checkHostnames(hostnames []gatewayv1.Hostname) *condError {
	for _, h := range hostnames {
		if msg := hostnameProblem(string(h)); msg != "" {
			return unsupported("spec.hostnames: %q is not a hostname: %s", h, msg)
		}
	}
	return nil
}

func unsupported(format string, args ...any) *condError {
	return newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonUnsupportedValue), format, args...)
}

// processTimeoutsAndRetry sets a route's timeouts and retries. request bounds the
// whole request, retries included; backendRequest each request to a backend. Without
// retries they bound the same thing: the route's timeout is the smaller. "0s" turns a
// timeout off.
//
// A retry is made on the listed codes and on failures where the backend cannot have
// seen the request (it refused the connection or the stream), never on a reset after the
// request was sent; attempts defaults to 1, and 0 turns retries off. The data planes
// back off between attempts (25 ms base, exponential with jitter); a backoff of its own
// is not supported.
func processTimeoutsAndRetry(r *dag.Route, t *gatewayv1.HTTPRouteTimeouts, retry *gatewayv1.HTTPRouteRetry) *condError {
	var request, backend *time.Duration
	if t != nil {
		var err *condError
		if request, err = parseTimeout(t.Request); err != nil {
			return err
		}
		if backend, err = parseTimeout(t.BackendRequest); err != nil {
			return err
		}
	}
	if retry != nil && retry.Backoff != nil {
		return unsupported("retry.backoff is not supported (the data planes back off from 25 ms): remove it")
	}
	attempts := 1
	if retry != nil && retry.Attempts != nil {
		attempts = *retry.Attempts
	}
	if retry == nil || attempts <= 0 {
		if bound := shorter(request, backend); bound != nil {
			r.Timeouts = &dag.TimeoutPolicy{Request: bound}
		}
		return nil
	}
	rp := &dag.RetryPolicy{NumRetries: uint32(attempts), RetryOn: []string{"connect-failure", "refused-stream"}}
	for _, c := range retry.Codes {
		rp.OnStatusCodes = append(rp.OnStatusCodes, uint32(c))
	}
	if backend != nil {
		rp.PerTryTimeout = *backend
	}
	r.Retry = rp
	if request != nil {
		r.Timeouts = &dag.TimeoutPolicy{Request: request}
	}
	return nil
}

func parseTimeout(d *gatewayv1.Duration) (*time.Duration, *condError) {
	if d == nil {
		return nil, nil
	}
	v, err := time.ParseDuration(string(*d))
	if err != nil || v < 0 {
		return nil, unsupported("timeout %q is not a duration such as 10s or 1m", *d)
	}
	return &v, nil
}

// shorter returns the shorter of two timeouts, where 0 (none) is the longest.
func shorter(a, b *time.Duration) *time.Duration {
	switch {
	case a == nil || (b != nil && *b != 0 && (*a == 0 || *b < *a)):
		return b
	}
	return a
}
