package dag

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

func proxy(t testing.TB, doc string) *contourv1.HTTPProxy {
	return fromYAML[contourv1.HTTPProxy](t, doc)
}

func proxyDelegation(t testing.TB, doc string) *contourv1.TLSCertificateDelegation {
	return fromYAML[contourv1.TLSCertificateDelegation](t, doc)
}

// proxyStatus returns the status of an HTTPProxy, failing the test unless there is
// exactly one.
func proxyStatus(t testing.TB, g *Graph, namespace, name string) Status {
	t.Helper()
	var found []Status
	for _, s := range g.Statuses {
		if s.Object == (ObjectRef{Kind: KindHTTPProxy, Namespace: namespace, Name: name}) {
			found = append(found, *s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("HTTPProxy %s/%s has %d statuses, want 1: %+v", namespace, name, len(found), found)
	}
	return found[0]
}

// wantProxy checks an HTTPProxy's status value and that its description contains every
// one of parts.
func wantProxy(t testing.TB, g *Graph, namespace, name string, want StatusValue, parts ...string) Status {
	t.Helper()
	s := proxyStatus(t, g, namespace, name)
	if s.Status != want {
		t.Errorf("%s/%s: status = %s (%q), want %s", namespace, name, s.Status, s.Description, want)
	}
	for _, p := range parts {
		if !strings.Contains(s.Description, p) {
			t.Errorf("%s/%s: description %q does not contain %q", namespace, name, s.Description, p)
		}
	}
	return s
}

// wantProblem checks that problems hold one of type typ and reason (any reason when
// empty) whose message contains every one of parts.
func wantProblem(t testing.TB, what string, problems []Problem, typ, reason string, parts ...string) {
	t.Helper()
	for _, p := range problems {
		if p.Type != typ || (reason != "" && p.Reason != reason) {
			continue
		}
		ok := true
		for _, part := range parts {
			ok = ok && strings.Contains(p.Message, part)
		}
		if ok {
			return
		}
	}
	t.Errorf("%s: no %s/%s problem containing %q in %+v", what, typ, reason, parts, problems)
}

// wantClean checks that an HTTPProxy is valid without errors or warnings.
func wantClean(t testing.TB, g *Graph, namespace, name string) Status {
	t.Helper()
	s := wantProxy(t, g, namespace, name, StatusValid)
	if len(s.Errors) > 0 || len(s.Warnings) > 0 {
		t.Errorf("%s/%s: errors %+v, warnings %+v, want none", namespace, name, s.Errors, s.Warnings)
	}
	return s
}

// wantInvalid checks that an HTTPProxy is invalid with a problem of typ and reason
// whose message contains every one of parts, and that the description says so too.
func wantInvalid(t testing.TB, g *Graph, namespace, name, typ, reason string, parts ...string) Status {
	t.Helper()
	s := wantProxy(t, g, namespace, name, StatusInvalid, "not served: ")
	wantProblem(t, namespace+"/"+name+" errors", s.Errors, typ, reason, parts...)
	for _, p := range parts {
		if !strings.Contains(s.Description, p) {
			t.Errorf("%s/%s: description %q does not contain %q", namespace, name, s.Description, p)
		}
	}
	return s
}

// wantWarning checks that an HTTPProxy is valid with a warning of typ and reason whose
// message contains every one of parts; the description repeats it.
func wantWarning(t testing.TB, g *Graph, namespace, name, typ, reason string, parts ...string) Status {
	t.Helper()
	s := wantProxy(t, g, namespace, name, StatusValid, parts...)
	if len(s.Errors) > 0 {
		t.Errorf("%s/%s: errors %+v on a valid object", namespace, name, s.Errors)
	}
	wantProblem(t, namespace+"/"+name+" warnings", s.Warnings, typ, reason, parts...)
	return s
}

// viewProxyRoutes renders routes one line each, in match order:
//
//	Prefix /foo h:x-header=a q:v~^1 -> team-a/backend-a/80
//
// Conditions: h:NAME then "=" exact, "^" prefix, "$" suffix, "~" contains, "=~" regex,
// "?" present, "!" before the operator when inverted, "/i" ignoreCase, "/e"
// treatMissingAsEmpty; q: the same for query parameters. Targets: clusters
// ("name=weight" when several or weighted), "503" and other direct statuses, "https"
// (redirect to HTTPS), "redirect".
func viewProxyRoutes(routes []*Route) []string {
	var out []string
	for _, r := range routes {
		out = append(out, viewProxyRoute(r))
	}
	return out
}

func viewProxyRoute(r *Route) string {
	parts := []string{r.Path.Kind.String() + " " + r.Path.Value}
	for _, h := range r.Headers {
		parts = append(parts, "h:"+h.Name+matchView(h.Kind, h.Invert, h.IgnoreCase, h.TreatMissingAsEmpty, h.Value))
	}
	for _, q := range r.Query {
		parts = append(parts, "q:"+q.Name+matchView(q.Kind, false, q.IgnoreCase, false, q.Value))
	}
	return strings.Join(parts, " ") + " -> " + routeTarget(r)
}

func matchView(k StringMatchKind, invert, ignoreCase, missingEmpty bool, v string) string {
	op := map[StringMatchKind]string{MatchPresent: "?", MatchExact: "=", MatchPrefix: "^", MatchSuffix: "$", MatchContains: "~", MatchRegex: "=~"}[k]
	if invert {
		op = "!" + op
	}
	s := op + v
	if ignoreCase {
		s += "/i"
	}
	if missingEmpty {
		s += "/e"
	}
	return s
}

func routeTarget(r *Route) string {
	switch {
	case r.HTTPSRedirect:
		return "https"
	case r.Redirect != nil:
		return "redirect"
	case r.DirectStatus != 0:
		return fmt.Sprint(r.DirectStatus)
	case len(r.Clusters) == 1 && r.Clusters[0].Weight == 1:
		return r.Clusters[0].Cluster.Name
	}
	var parts []string
	for _, wc := range r.Clusters {
		parts = append(parts, fmt.Sprintf("%s=%d", wc.Cluster.Name, wc.Weight))
	}
	return strings.Join(parts, " ")
}

// proxyHTTP and proxyHTTPS are the routes of a host on each listener, rendered.
func proxyHTTP(g *Graph, host string) []string {
	if vh := httpHost(g, host); vh != nil {
		return viewProxyRoutes(vh.Routes)
	}
	return nil
}

func proxyHTTPS(g *Graph, host string) []string {
	if svh := httpsHost(g, host); svh != nil {
		return viewProxyRoutes(svh.Routes)
	}
	return nil
}

// request is what route matching looks at.
type request struct {
	path    string
	headers map[string]string // lower-case names
	query   string
}

// req parses "GET /path?query" with headers as "name: value" strings.
func req(target string, headers ...string) request {
	r := request{path: target, headers: map[string]string{}}
	r.path, r.query, _ = strings.Cut(target, "?")
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		r.headers[strings.ToLower(strings.TrimSpace(name))] = strings.TrimSpace(value)
	}
	return r
}

// firstMatch is the route that serves r: the first that matches, as the proxy picks it.
func firstMatch(t testing.TB, routes []*Route, r request) *Route {
	t.Helper()
	for _, route := range routes {
		if routeMatches(t, route, r) {
			return route
		}
	}
	return nil
}

// served names what answers r among routes: the service name of the first cluster
// ("backend-a" or "team-a/backend-a" outside namespace default), a status, or "none".
func served(t testing.TB, routes []*Route, r request) string {
	t.Helper()
	route := firstMatch(t, routes, r)
	switch {
	case route == nil:
		return "none"
	case len(route.Clusters) > 0 && !route.HTTPSRedirect:
		s := route.Clusters[0].Cluster.Service
		if s.Namespace == "default" {
			return s.Name
		}
		return s.String()
	}
	return routeTarget(route)
}

func routeMatches(t testing.TB, route *Route, r request) bool {
	t.Helper()
	if !pathMatches(t, route.Path, r.path) {
		return false
	}
	for _, h := range route.Headers {
		v, ok := r.headers[h.Name]
		if !ok && h.TreatMissingAsEmpty {
			v, ok = "", true
		}
		if stringMatches(t, h.Kind, h.Value, h.IgnoreCase, v, ok) == h.Invert {
			return false
		}
	}
	q, err := url.ParseQuery(r.query)
	if err != nil {
		t.Fatalf("query %q: %v", r.query, err)
	}
	for _, m := range route.Query {
		_, ok := q[m.Name]
		if !stringMatches(t, m.Kind, m.Value, m.IgnoreCase, q.Get(m.Name), ok) {
			return false
		}
	}
	return true
}

func pathMatches(t testing.TB, m PathMatch, path string) bool {
	switch m.Kind {
	case PathExact:
		return path == m.Value
	case PathStringPrefix:
		return strings.HasPrefix(path, m.Value)
	case PathRegex:
		return mustFullRegex(t, m.Value).MatchString(path)
	}
	if m.Value == "/" || strings.HasSuffix(m.Value, "/") {
		return strings.HasPrefix(path, m.Value)
	}
	return path == m.Value || strings.HasPrefix(path, m.Value+"/")
}

func stringMatches(t testing.TB, k StringMatchKind, want string, ignoreCase bool, got string, present bool) bool {
	if !present {
		return false
	}
	if ignoreCase && k != MatchRegex {
		want, got = strings.ToLower(want), strings.ToLower(got)
	}
	switch k {
	case MatchPresent:
		return true
	case MatchExact:
		return got == want
	case MatchPrefix:
		return strings.HasPrefix(got, want)
	case MatchSuffix:
		return strings.HasSuffix(got, want)
	case MatchContains:
		return strings.Contains(got, want)
	}
	if ignoreCase {
		want = "(?i)" + want
	}
	return mustFullRegex(t, want).MatchString(got)
}

// mustFullRegex compiles re as the proxy uses it: it must match the whole value.
func mustFullRegex(t testing.TB, re string) *regexp.Regexp {
	t.Helper()
	c, err := regexp.Compile("^(?:" + re + ")$")
	if err != nil {
		t.Fatalf("regex %q does not compile: %v", re, err)
	}
	return c
}

// servedBy checks which backend answers each request, "GET path" plus headers.
type expectation struct {
	req  request
	want string
}

func checkServed(t testing.TB, routes []*Route, exps ...expectation) {
	t.Helper()
	for _, e := range exps {
		if got := served(t, routes, e.req); got != e.want {
			t.Errorf("%s %v ?%s -> %s, want %s", e.req.path, e.req.headers, e.req.query, got, e.want)
		}
	}
}

func routesOfHost(t testing.TB, g *Graph, host string) []*Route {
	t.Helper()
	vh := httpHost(g, host)
	if vh == nil {
		t.Fatalf("no HTTP virtual host %s; hosts %v", host, g.HTTP)
	}
	return vh.Routes
}
