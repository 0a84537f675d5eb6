package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/testutil"
)

// End-to-end tests of projectcontour.io/v1 HTTPProxy (seed 004, issue 9): real manifests,
// the run pipeline, the embedded proxy and real requests to real backends. This file has
// seed 004's routing examples, conditions and precedence, and includes; the multi-team use
// cases and permitInsecure are in httpproxy_teams_test.go, upstream protocols and
// failurePolicy in httpproxy_upstream_test.go, tcpproxy in httpproxy_tcp_test.go and route
// policies in httpproxy_policies_test.go.

// hpReq is one request of a table and what must answer it.
type hpReq struct {
	path   string
	header []string // name, value, name, value...
	status int
	from   string // "namespace/service" of the echo backend that must answer; "" when none may
}

// expectRequests sends every request to host over plain HTTP and reports each answer that
// differs from the table's.
func (e *env) expectRequests(host string, reqs []hpReq) {
	e.t.Helper()
	for _, q := range reqs {
		r := e.get(host, q.path, q.header...)
		if got := answeredBy(r); r.status != q.status || got != q.from {
			e.t.Errorf("GET %s%s %q: %d from %q, want %d from %q", host, q.path, q.header, r.status, got, q.status, q.from)
		}
	}
}

// answeredBy is "namespace/service" of the echo backend that answered r, or "".
func answeredBy(r result) string {
	if r.service() == "" {
		return ""
	}
	return r.echo.Namespace + "/" + r.service()
}

// proxyStatuses runs the offline check on dir and returns the HTTPProxies' statuses by
// "namespace/name".
func proxyStatuses(t *testing.T, dir string, opts dag.Options) map[string]*dag.Status {
	t.Helper()
	return checkStatuses(t, dir, opts, dag.KindHTTPProxy)
}

// findProblem returns the problem of ps with the reason whose message contains every one
// of texts.
func findProblem(ps []dag.Problem, reason string, texts ...string) (dag.Problem, bool) {
	for _, p := range ps {
		if p.Reason != reason {
			continue
		}
		ok := true
		for _, s := range texts {
			ok = ok && strings.Contains(p.Message, s)
		}
		if ok {
			return p, true
		}
	}
	return dag.Problem{}, false
}

// wantStatus reports when the object's status is not want, or lacks a problem (an error
// for invalid objects, a warning otherwise) with the reason and texts, when reason is set.
func wantStatus(t *testing.T, st map[string]*dag.Status, obj string, want dag.StatusValue, reason string, texts ...string) {
	t.Helper()
	s, ok := st[obj]
	if !ok {
		t.Errorf("%s: no status", obj)
		return
	}
	if s.Status != want {
		t.Errorf("%s: %s (%s), want %s", obj, s.Status, s.Description, want)
	}
	if reason == "" {
		return
	}
	if want == dag.StatusOrphaned {
		// An orphan's one problem is its description (the Valid condition's error).
		for _, text := range texts {
			if !strings.Contains(s.Description, text) {
				t.Errorf("%s: the description %q does not say %q", obj, s.Description, text)
			}
		}
		return
	}
	ps := s.Warnings
	if want == dag.StatusInvalid {
		ps = s.Errors
	}
	if _, ok := findProblem(ps, reason, texts...); !ok {
		t.Errorf("%s: no %s problem mentioning %q among %+v", obj, reason, texts, ps)
	}
}

// TestHTTPProxySeedPathMatchWithHeaders is seed 004's "Path Match with Headers": two
// routes on /foo for x-header a and b, and one for /foo without a header condition.
func TestHTTPProxySeedPathMatchWithHeaders(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "backend-a", "backend-b", "backend-default"),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: headers}
spec:
  virtualhost: {fqdn: headers.example.com}
  routes:
  - conditions:
    - prefix: /foo
    - header: {name: x-header, exact: a}
    services: [{name: backend-a, port: 80}]
  - conditions:
    - prefix: /foo
    - header: {name: x-header, exact: b}
    services: [{name: backend-b, port: 80}]
  - conditions:
    - prefix: /foo
    services: [{name: backend-default, port: 80}]
`,
	})
	e.expectRequests("headers.example.com", []hpReq{
		// The seed's request list.
		{"/foo", []string{"x-header", "a"}, 200, "default/backend-a"},
		{"/foo", []string{"x-header", "b"}, 200, "default/backend-b"},
		{"/foo", nil, 200, "default/backend-default"},
		// Around it: header names are case-insensitive, values are not; other values and
		// longer paths under /foo get the route without a header condition.
		{"/foo/bar", []string{"X-Header", "a"}, 200, "default/backend-a"},
		{"/foo", []string{"x-header", "A"}, 200, "default/backend-default"},
		{"/foo/bar", []string{"x-header", "c"}, 200, "default/backend-default"},
		{"/foo", []string{"x-header", "ab"}, 200, "default/backend-default"},
		// Nothing else is routed: /foobar is not under the prefix /foo, / has no route.
		{"/foobar", []string{"x-header", "a"}, 404, ""},
		{"/", []string{"x-header", "a"}, 404, ""},
	})
}

// TestHTTPProxySeedPathMatchWithCookie is seed 004's "Path Match with Cookie": a cookie
// condition matches a cookie of that name and value among others in the Cookie header,
// never a substring of another cookie.
func TestHTTPProxySeedPathMatchWithCookie(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "cookiebackend"),
		"secret.yaml":   tlsSecretManifest("cookie-tls", testutil.SelfSigned("cookie.example.com")),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: cookie}
spec:
  virtualhost: {fqdn: cookie.example.com, tls: {secretName: cookie-tls}}
  routes:
  - conditions:
    - prefix: /foo
    - cookie: user=test
    services: [{name: cookiebackend, port: 80}]
    permitInsecure: true
`,
	})
	yes, no := "default/cookiebackend", ""
	e.expectRequests("cookie.example.com", []hpReq{
		{"/foo", []string{"Cookie", "user=test"}, 200, yes},
		{"/foo", []string{"Cookie", "a=b; user=test"}, 200, yes},
		{"/foo/x", []string{"Cookie", "user=test; a=b"}, 200, yes},
		{"/foo", []string{"Cookie", "a=b; user=test; c=d"}, 200, yes},
		{"/foo", []string{"Cookie", "xuser=test"}, 404, no},
		{"/foo", []string{"Cookie", "user=testy"}, 404, no},
		{"/foo", []string{"Cookie", "a=b; user=testy"}, 404, no},
		{"/foo", []string{"Cookie", "a=user=test"}, 404, no},
		{"/foo", []string{"Cookie", "user=tes"}, 404, no},
		{"/foo", []string{"Cookie", "User=test"}, 404, no},
		{"/foo", []string{"X-Cookie", "user=test"}, 404, no},
		{"/foo", nil, 404, no},
		{"/bar", []string{"Cookie", "user=test"}, 404, no},
	})
	// Over HTTP/2 a client may send its cookies as separate header fields (crumbs, RFC
	// 9113 8.2.3; Go's client does): they are one Cookie header to match against.
	for _, cookie := range []string{"user=test", "a=b; user=test", "a=b; user=test; c=d"} {
		req, _ := http.NewRequest(http.MethodGet, "https://cookie.example.com/foo", nil)
		req.Header.Set("Cookie", cookie)
		tr := httpsTransport(e, "cookie.example.com")
		tr.ForceAttemptHTTP2 = true
		r := e.do(req, &http.Client{Transport: tr, Timeout: 10 * time.Second})
		tr.CloseIdleConnections()
		if r.proto != "HTTP/2.0" || r.status != 200 || answeredBy(r) != yes {
			t.Errorf("GET https://cookie.example.com/foo over %s with Cookie %q: %d from %q, want 200 from %s", r.proto, cookie, r.status, answeredBy(r), yes)
		}
	}
}

// TestHTTPProxySeedHeaderDelegation is seed 004's "Header Delegation": /foo with x-header a
// is handed to team-a's object, /foo with x-header b from Chrome to team-b's, and the root
// serves the rest of /foo itself. Each team's Service of the same name answers.
func TestHTTPProxySeedHeaderDelegation(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "root/backend-default", "root/backend-a", "team-a/backend-a", "team-b/backend-b"),
		"root.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: root}
spec:
  virtualhost: {fqdn: delegation.example.com}
  includes:
  - name: headera-ir
    namespace: team-a
    conditions:
    - prefix: /foo
    - header: {name: x-header, exact: a}
  - name: headerb-ir
    namespace: team-b
    conditions:
    - prefix: /foo
    - header: {name: x-header, exact: b}
    - userAgent: Chrome
  routes:
  - conditions: [{prefix: /foo}]
    services: [{name: backend-default, port: 80}]
`,
		"teams.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: headera-ir, namespace: team-a}
spec:
  routes:
  - services: [{name: backend-a, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: headerb-ir, namespace: team-b}
spec:
  routes:
  - services: [{name: backend-b, port: 80}]
`,
	})
	chrome := "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_14_5) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/74.0.3729.169 Safari/537.36"
	firefox := "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0"
	e.expectRequests("delegation.example.com", []hpReq{
		// The seed's request list (team-b's include also requires Chrome).
		{"/foo", []string{"x-header", "a"}, 200, "team-a/backend-a"},
		{"/foo", []string{"x-header", "b", "User-Agent", chrome}, 200, "team-b/backend-b"},
		{"/foo", nil, 200, "root/backend-default"},
		// x-header b from another browser is not team-b's.
		{"/foo", []string{"x-header", "b", "User-Agent", firefox}, 200, "root/backend-default"},
		{"/foo/bar", []string{"x-header", "a", "User-Agent", chrome}, 200, "team-a/backend-a"},
		{"/foo/bar", []string{"x-header", "b", "User-Agent", chrome}, 200, "team-b/backend-b"},
		// Outside /foo nothing is delegated, and the root has no route.
		{"/bar", []string{"x-header", "a"}, 404, ""},
	})
	st := proxyStatuses(t, e.dir, dag.Options{})
	wantStatus(t, st, "root/root", dag.StatusValid, "")
	wantStatus(t, st, "team-a/headera-ir", dag.StatusValid, "")
	wantStatus(t, st, "team-b/headerb-ir", dag.StatusValid, "")
	if d := st["team-b/headerb-ir"].Description; !strings.Contains(d, `included by HTTPProxy root/root on delegation.example.com`) || !strings.Contains(d, `"Chrome"`) {
		t.Errorf("team-b's status does not say who includes it under which conditions: %q", d)
	}
}

// TestHTTPProxySeedHeadersWithoutPath is seed 004's "Path Match with Headers (no path)":
// routes with only header conditions match every path.
func TestHTTPProxySeedHeadersWithoutPath(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "backend-a", "backend-b"),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: nopath}
spec:
  virtualhost: {fqdn: nopath.example.com}
  routes:
  - conditions:
    - header: {name: x-header, exact: a}
    services: [{name: backend-a, port: 80}]
  - conditions:
    - header: {name: x-header, exact: b}
    services: [{name: backend-b, port: 80}]
`,
	})
	var reqs []hpReq
	for _, path := range []string{"/", "/foo", "/a/b/c", "/index.html?x=1", "/%2Fencoded"} {
		reqs = append(reqs,
			hpReq{path, []string{"x-header", "a"}, 200, "default/backend-a"},
			hpReq{path, []string{"x-header", "b"}, 200, "default/backend-b"},
			hpReq{path, []string{"x-header", "c"}, 404, ""},
			hpReq{path, nil, 404, ""},
		)
	}
	e.expectRequests("nopath.example.com", reqs)
}

// TestHTTPProxyQueryParameterConditions: queryParameter conditions with exact, prefix,
// suffix, contains, regex (the whole value) and present, with and without ignoreCase, on
// the first value of the parameter.
func TestHTTPProxyQueryParameterConditions(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "q/exact", "q/prefix", "q/suffix", "q/contains", "q/regex", "q/present", "q/nocase", "q/none"),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: query, namespace: q}
spec:
  virtualhost: {fqdn: query.example.com}
  routes:
  - conditions: [{prefix: /exact}, {queryParameter: {name: v, exact: one}}]
    services: [{name: exact, port: 80}]
  - conditions: [{prefix: /prefix}, {queryParameter: {name: v, prefix: pre}}]
    services: [{name: prefix, port: 80}]
  - conditions: [{prefix: /suffix}, {queryParameter: {name: v, suffix: fix}}]
    services: [{name: suffix, port: 80}]
  - conditions: [{prefix: /contains}, {queryParameter: {name: v, contains: mid}}]
    services: [{name: contains, port: 80}]
  - conditions: [{prefix: /regex}, {queryParameter: {name: v, regex: "[0-9]+"}}]
    services: [{name: regex, port: 80}]
  - conditions: [{prefix: /present}, {queryParameter: {name: flag, present: true}}]
    services: [{name: present, port: 80}]
  - conditions: [{prefix: /nocase}, {queryParameter: {name: v, exact: One, ignoreCase: true}}]
    services: [{name: nocase, port: 80}]
  - services: [{name: none, port: 80}]
`,
	})
	hit := func(path, svc string) hpReq { return hpReq{path, nil, 200, "q/" + svc} }
	miss := func(path string) hpReq { return hpReq{path, nil, 200, "q/none"} }
	e.expectRequests("query.example.com", []hpReq{
		hit("/exact?v=one", "exact"),
		hit("/exact/x?a=1&v=one", "exact"),
		miss("/exact?v=one1"),
		miss("/exact?v=One"),
		miss("/exact?V=one"), // parameter names are case-sensitive
		miss("/exact?w=one"),
		miss("/exact?v=two&v=one"), // the first value counts
		miss("/exact"),
		miss("/exact?v=o%6Ee"), // as written in the URL, not percent-decoded
		hit("/prefix?v=prefix", "prefix"),
		hit("/prefix?v=pre", "prefix"),
		miss("/prefix?v=xpre"),
		hit("/suffix?v=affix", "suffix"),
		miss("/suffix?v=fixed"),
		hit("/contains?v=amidb", "contains"),
		miss("/contains?v=mi"),
		hit("/regex?v=123", "regex"),
		miss("/regex?v=123a"), // the whole value must match
		miss("/regex?v=a123"),
		miss("/regex?v="),
		hit("/present?flag", "present"),
		hit("/present?flag=", "present"),
		hit("/present?x=1&flag=no", "present"),
		miss("/present?flags=1"),
		miss("/present"),
		hit("/nocase?v=one", "nocase"),
		hit("/nocase?v=ONE", "nocase"),
		miss("/nocase?v=ones"),
	})
}

// TestHTTPProxyHeaderConditions: header conditions present, notpresent, exact, notexact,
// contains, notcontains, regex (the whole value), ignoreCase and treatMissingAsEmpty,
// each on its own path with a route without conditions beside it. On an absent header
// only notpresent holds, and notexact/notcontains hold with treatMissingAsEmpty, as
// Envoy answers Contour's translation.
func TestHTTPProxyHeaderConditions(t *testing.T) {
	t.Parallel()
	routes := []struct{ path, cond string }{
		{"/present", "{name: x-a, present: true}"},
		{"/notpresent", "{name: x-a, notpresent: true}"},
		{"/exact", "{name: x-a, exact: Value}"},
		{"/notexact", "{name: x-a, notexact: bad}"},
		{"/contains", "{name: x-a, contains: Mid}"},
		{"/notcontains", "{name: x-a, notcontains: bad}"},
		{"/regex", `{name: x-a, regex: "v[0-9]+"}`},
		{"/joined", "{name: x-a, exact: \"a,b\"}"},
		{"/nocase", "{name: x-a, exact: Hello, ignoreCase: true}"},
		{"/nocase-contains", "{name: x-a, contains: abc, ignoreCase: true}"},
		{"/nocase-regex", `{name: x-a, regex: "v[0-9]+", ignoreCase: true}`},
		{"/missing-empty", `{name: x-a, regex: "(|none)", treatMissingAsEmpty: true}`},
		{"/notexact-missing", "{name: x-a, notexact: bad, treatMissingAsEmpty: true}"},
		{"/notcontains-missing", "{name: x-a, notcontains: bad, treatMissingAsEmpty: true}"},
	}
	proxy := "apiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {name: headers, namespace: h}\nspec:\n  virtualhost: {fqdn: h.example.com}\n  routes:\n"
	for _, r := range routes {
		proxy += fmt.Sprintf("  - conditions: [{prefix: %s}, {header: %s}]\n    services: [{name: hit, port: 80}]\n", r.path, r.cond)
	}
	proxy += "  - services: [{name: miss, port: 80}]\n"
	e := start(t, map[string]string{"backends.yaml": backends(t, "h/hit", "h/miss"), "proxy.yaml": proxy})
	hit := func(path string, header ...string) hpReq { return hpReq{path, header, 200, "h/hit"} }
	miss := func(path string, header ...string) hpReq { return hpReq{path, header, 200, "h/miss"} }
	e.expectRequests("h.example.com", []hpReq{
		hit("/present", "x-a", ""),
		hit("/present", "X-A", "anything"),
		miss("/present"),
		miss("/present", "x-ab", "1"),

		hit("/notpresent"),
		hit("/notpresent", "x-b", "1"),
		miss("/notpresent", "x-a", ""),
		miss("/notpresent", "x-a", "1"),

		hit("/exact", "x-a", "Value"),
		miss("/exact", "x-a", "value"),
		miss("/exact", "x-a", "Value2"),
		miss("/exact"),

		hit("/notexact", "x-a", "good"),
		miss("/notexact"), // an absent header fails an inverted match, as in Envoy and Contour
		miss("/notexact", "x-a", "bad"),
		hit("/notexact", "x-a", "Bad"),

		hit("/contains", "x-a", "aMidb"),
		miss("/contains", "x-a", "amidb"),
		miss("/contains"),

		hit("/notcontains", "x-a", "good"),
		hit("/notcontains", "x-a", ""),
		miss("/notcontains"),
		miss("/notcontains", "x-a", "very bad"),

		hit("/regex", "x-a", "v12"),
		miss("/regex", "x-a", "xv12"), // the whole value must match (seed 004)
		miss("/regex", "x-a", "v12x"),
		miss("/regex", "x-a", "V12"),
		miss("/regex"),

		hit("/joined", "x-a", "a", "x-a", "b"), // several headers of one name are joined with ","
		miss("/joined", "x-a", "a"),

		hit("/nocase", "x-a", "hello"),
		hit("/nocase", "x-a", "HELLO"),
		miss("/nocase", "x-a", "hello!"),
		hit("/nocase-contains", "x-a", "xxABCxx"),
		miss("/nocase-contains", "x-a", "ab"),
		hit("/nocase-regex", "x-a", "V12"),
		miss("/nocase-regex", "x-a", "V12x"),

		hit("/missing-empty"),
		hit("/missing-empty", "x-a", "none"),
		miss("/missing-empty", "x-a", "some"),

		// treatMissingAsEmpty: an absent header is "", which is not "bad".
		hit("/notexact-missing"),
		hit("/notexact-missing", "x-a", "good"),
		miss("/notexact-missing", "x-a", "bad"),
		hit("/notcontains-missing"),
		miss("/notcontains-missing", "x-a", "very bad"),
	})
}

// TestHTTPProxyPrecedence: the first matching route serves a request, in this order: exact
// paths, regex paths, longer prefixes; then more header conditions; then more query
// conditions. The routes are written in the opposite order, so write order cannot explain
// the answers.
func TestHTTPProxyPrecedence(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "p/exact", "p/regex", "p/long", "p/short",
			"p/header", "p/two-headers", "p/query", "p/header-query", "p/plain"),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: precedence, namespace: p}
spec:
  virtualhost: {fqdn: precedence.example.com}
  routes:
  - conditions: [{prefix: /p}]
    services: [{name: short, port: 80}]
  - conditions: [{prefix: /p/x}]
    services: [{name: long, port: 80}]
  - conditions: [{regex: "/p/.*"}]
    services: [{name: regex, port: 80}]
  - conditions: [{exact: /p/x}]
    services: [{name: exact, port: 80}]
  - conditions: [{prefix: /z}]
    services: [{name: plain, port: 80}]
  - conditions: [{prefix: /z}, {queryParameter: {name: q, present: true}}]
    services: [{name: query, port: 80}]
  - conditions: [{prefix: /z}, {header: {name: x-h, present: true}}]
    services: [{name: header, port: 80}]
  - conditions: [{prefix: /z}, {header: {name: x-h, present: true}}, {queryParameter: {name: q, present: true}}]
    services: [{name: header-query, port: 80}]
  - conditions: [{prefix: /z}, {header: {name: x-h, present: true}}, {header: {name: x-i, present: true}}]
    services: [{name: two-headers, port: 80}]
  - conditions: [{prefix: /z/long}]
    services: [{name: long, port: 80}]
`,
	})
	h := []string{"x-h", "1"}
	hi := []string{"x-h", "1", "x-i", "1"}
	e.expectRequests("precedence.example.com", []hpReq{
		{"/p/x", nil, 200, "p/exact"},        // exact beats regex and both prefixes
		{"/p/x/y", nil, 200, "p/regex"},      // regex beats the longer prefix
		{"/p/y", nil, 200, "p/regex"},        // and the shorter one
		{"/p/x/1", nil, 200, "p/regex"},      //
		{"/p", nil, 200, "p/short"},          // the regex needs "/p/" and more
		{"/p/", nil, 200, "p/regex"},         // ".*" matches nothing too
		{"/z/long/a", hi, 200, "p/long"},     // a longer prefix beats header conditions
		{"/z/a", hi, 200, "p/two-headers"},   // two headers beat one
		{"/z/a?q", hi, 200, "p/two-headers"}, // more headers beat more query conditions
		{"/z/a?q", h, 200, "p/header-query"}, // same headers: more query conditions
		{"/z/a", h, 200, "p/header"},
		{"/z/a?q=1", nil, 200, "p/query"},
		{"/z/a", nil, 200, "p/plain"},
		{"/z/a", []string{"x-i", "1"}, 200, "p/plain"},
	})
}

// includeProblems is a root whose includes go wrong in every way: an include of an object
// that does not exist, of an invalid object, of a root, into a cycle; and a followed
// include of an object with routes for only part of what it is given.
const includeProblems = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: root}
spec:
  virtualhost: {fqdn: inc.example.com}
  routes:
  - services: [{name: web, port: 80}]
  - conditions: [{prefix: /team/root-owned}]
    services: [{name: web, port: 80}]
  - conditions: [{prefix: /shared}]
    services: [{name: web, port: 80}]
  includes:
  - name: nothere
    namespace: team
    conditions: [{prefix: /missing}]
  - name: broken
    namespace: team
    conditions: [{prefix: /invalid}]
  - name: other
    namespace: root
    conditions: [{prefix: /rooted}]
  - name: a
    namespace: loop
    conditions: [{prefix: /cycle}]
  - name: team
    namespace: team
    conditions: [{prefix: /team}]
  - name: borrow
    namespace: team
    conditions: [{prefix: /borrow}]
  - name: team
    namespace: team
    conditions: [{header: {name: x-team, exact: "yes"}}]
  - name: team
    namespace: team
    conditions: [{prefix: /shared}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: other, namespace: root}
spec:
  virtualhost: {fqdn: other.example.com}
  routes:
  - services: [{name: web, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: broken, namespace: team}
spec:
  routes:
  - conditions: [{regex: "/v[0-9+"}]
    services: [{name: app, port: 80}]
  - services: [{name: app, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: team, namespace: team}
spec:
  routes:
  - conditions: [{prefix: /known}]
    services: [{name: app, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: borrow, namespace: team}
spec:
  routes:
  - services: [{name: web, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: a, namespace: loop}
spec:
  routes:
  - conditions: [{prefix: /a}]
    services: [{name: app, port: 80}]
  includes:
  - name: b
    conditions: [{prefix: /b}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: b, namespace: loop}
spec:
  routes:
  - services: [{name: app, port: 80}]
  includes:
  - name: a
    conditions: [{prefix: /again}]
`

// TestHTTPProxyIncludeProblems: an include that cannot be followed answers 503 under its
// conditions, never a shorter route of the root; a followed include seals its conditions
// (what the included object has no route for gets 404); Services resolve only in the
// object's own namespace. Each object's status says why.
func TestHTTPProxyIncludeProblems(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "root/web", "team/app", "loop/app"),
		"proxies.yaml":  includeProblems,
	})
	e.expectRequests("inc.example.com", []hpReq{
		{"/", nil, 200, "root/web"},
		{"/elsewhere", nil, 200, "root/web"},
		// Refused includes: 503, not the root's "/".
		{"/missing", nil, 503, ""},
		{"/missing/x", nil, 503, ""},
		{"/invalid", nil, 503, ""},
		{"/invalid/v1", nil, 503, ""},
		{"/rooted/x", nil, 503, ""},
		// The cycle: root → loop/a → loop/b → loop/a. loop/b closes it and is invalid, so
		// loop/a's include of it answers 503; loop/a itself is served.
		{"/cycle/a", nil, 200, "loop/app"},
		{"/cycle/b", nil, 503, ""},
		{"/cycle/b/again/a", nil, 503, ""},
		// Prefixes match whole segments: /missingx is not under /missing.
		{"/missingx", nil, 200, "root/web"},
		// A followed include seals its conditions: team/team has a route for /known only.
		{"/team/known", nil, 200, "team/app"},
		{"/team/known/x", nil, 200, "team/app"},
		{"/team", nil, 404, ""},
		{"/team/other", nil, 404, ""},
		{"/teamx", nil, 200, "root/web"},
		// The seal covers the include's conditions, no more: a longer route of the root
		// inside them still wins.
		{"/team/root-owned/x", nil, 200, "root/web"},
		// The includer's own route on exactly the include's conditions replaces the seal.
		{"/shared/known", nil, 200, "team/app"},
		{"/shared/other", nil, 200, "root/web"},
		// The same for header conditions: x-team: yes belongs to team/team, on every path.
		{"/known", []string{"x-team", "yes"}, 200, "team/app"},
		{"/", []string{"x-team", "yes"}, 404, ""},
		{"/elsewhere", []string{"x-team", "yes"}, 404, ""},
		{"/elsewhere", []string{"x-team", "no"}, 200, "root/web"},
		// loop/a's own unrouted requests are sealed as well.
		{"/cycle", nil, 404, ""},
		{"/cycle/z", nil, 404, ""},
		// team/borrow names Service "web": there is none in team, and root's is never used.
		{"/borrow", nil, 503, ""},
		{"/borrow/x", nil, 503, ""},
	})

	st := proxyStatuses(t, e.dir, dag.Options{})
	wantStatus(t, st, "root/root", dag.StatusValid, "IncludeNotFound", "spec.includes[0]", "team/nothere", "503")
	wantStatus(t, st, "root/root", dag.StatusValid, "IncludeInvalid", "spec.includes[1]", "team/broken")
	wantStatus(t, st, "root/root", dag.StatusValid, "RootIncludesRoot", "spec.includes[2]", "root/other")
	wantStatus(t, st, "team/broken", dag.StatusInvalid, "")
	if d := st["team/broken"].Description; !strings.Contains(d, `"/v[0-9+" is not a valid RE2 regular expression`) {
		t.Errorf("team/broken's status does not name the bad regex: %q", d)
	}
	wantStatus(t, st, "loop/b", dag.StatusInvalid, "")
	if d := st["loop/b"].Description; !strings.Contains(d, "cycle") || !strings.Contains(d, "loop/a") {
		t.Errorf("loop/b's status does not name the cycle: %q", d)
	}
	wantStatus(t, st, "loop/a", dag.StatusValid, "IncludeInvalid", `spec.includes[0] (prefix "/cycle/b") is not followed`, "loop/b is invalid")
	wantStatus(t, st, "team/team", dag.StatusValid, "")
	wantStatus(t, st, "team/borrow", dag.StatusValid, "ServiceUnresolved", "web")
	wantStatus(t, st, "root/other", dag.StatusValid, "")
}

// TestHTTPProxyIncludeEditedLive: renaming an included object makes its include
// unfollowable (503, the object orphaned); renaming it back serves it again. A second
// root including the same object serves it on its host too.
func TestHTTPProxyIncludeEditedLive(t *testing.T) {
	t.Parallel()
	team := `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: NAME, namespace: team}
spec:
  routes:
  - services: [{name: app, port: 80}]
`
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "platform/web", "team/app"),
		"root.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: platform}
spec:
  virtualhost: {fqdn: live.example.com}
  routes:
  - services: [{name: web, port: 80}]
  includes:
  - name: app
    namespace: team
    conditions: [{prefix: /team}, {header: {name: User-Agent, contains: Android}}]
`,
		"team.yaml": strings.ReplaceAll(team, "NAME", "app"),
	})
	android := []string{"User-Agent", "Mozilla/5.0 (Linux; Android 14)"}
	e.expectRequests("live.example.com", []hpReq{
		{"/team/x", android, 200, "team/app"},
		{"/team/x", nil, 200, "platform/web"},
	})

	e.write("team.yaml", strings.ReplaceAll(team, "NAME", "app2"))
	e.eventually(5*time.Second, "the renamed object's include to answer 503", func() bool {
		return e.get("live.example.com", "/team/x", android...).status == 503
	})
	e.expectRequests("live.example.com", []hpReq{
		{"/team/x", android, 503, ""},
		{"/team", android, 503, ""},
		{"/team/x", nil, 200, "platform/web"},
		{"/other", android, 200, "platform/web"},
	})
	st := proxyStatuses(t, e.dir, dag.Options{})
	wantStatus(t, st, "platform/root", dag.StatusValid, "IncludeNotFound", "team/app does not exist", "requests matching its conditions get 503")
	wantStatus(t, st, "team/app2", dag.StatusOrphaned, "Orphaned", "not included by any root")

	e.write("team.yaml", strings.ReplaceAll(team, "NAME", "app"))
	e.eventually(5*time.Second, "the include to be served again", func() bool {
		return answeredBy(e.get("live.example.com", "/team/x", android...)) == "team/app"
	})
	st = proxyStatuses(t, e.dir, dag.Options{})
	wantStatus(t, st, "platform/root", dag.StatusValid, "")
	if w := st["platform/root"].Warnings; len(w) != 0 {
		t.Errorf("platform/root still has warnings after the fix: %+v", w)
	}
	wantStatus(t, st, "team/app", dag.StatusValid, "")
}

// TestHTTPProxyInvalidEditKeepsLastValidVersion: in run mode an edit that makes a served
// HTTPProxy invalid (a root's, or an included object's) leaves its last valid version
// serving, and its status says so; the fix is served.
func TestHTTPProxyInvalidEditKeepsLastValidVersion(t *testing.T) {
	t.Parallel()
	root := `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: platform}
spec:
  virtualhost: {fqdn: keep.example.com}
  routes:
  - conditions: [{PATH}]
    services: [{name: web, port: 80}]
  includes:
  - name: api
    namespace: org
    conditions: [{prefix: /api}]
`
	api := `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: api, namespace: org}
spec:
  routes:
  - conditions: [{COND}]
    services: [{name: SERVICE, port: 80}]
`
	apiWith := func(cond, svc string) string {
		return strings.NewReplacer("COND", cond, "SERVICE", svc).Replace(api)
	}
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "platform/web", "org/api", "org/api-v2"),
		"root.yaml":     strings.ReplaceAll(root, "PATH", "prefix: /"),
		"api.yaml":      apiWith("prefix: /", "api"),
	})
	e.expectRequests("keep.example.com", []hpReq{
		{"/", nil, 200, "platform/web"},
		{"/api/orders", nil, 200, "org/api"},
	})

	// The included object gets a bad regex and another Service: the old version serves.
	e.write("api.yaml", apiWith(`regex: "/v[0-9+"`, "api-v2"))
	e.eventually(5*time.Second, "org/api's invalid edit to be reported", func() bool {
		return statusLogged(e, "HTTPProxy", "org", "api", "previous valid version of this object is still served")
	})
	if line := proxyStatusLine(e, "HTTPProxy", "org", "api", "previous valid version"); !strings.Contains(line, `is not a valid RE2 regular expression`) {
		t.Errorf("the status does not say what is wrong: %s", line)
	}
	for i := 0; i < 5; i++ {
		e.expectRequests("keep.example.com", []hpReq{{"/api/orders", nil, 200, "org/api"}})
	}
	// The root gets a path without "/": its old version serves.
	e.write("root.yaml", strings.ReplaceAll(root, "PATH", "prefix: nope"))
	e.eventually(5*time.Second, "platform/root's invalid edit to be reported", func() bool {
		return statusLogged(e, "HTTPProxy", "platform", "root", "previous valid version of this object is still served")
	})
	e.expectRequests("keep.example.com", []hpReq{
		{"/", nil, 200, "platform/web"},
		{"/api/orders", nil, 200, "org/api"},
	})

	// Fixed: the new versions are served.
	e.write("api.yaml", apiWith("prefix: /", "api-v2"))
	e.eventually(5*time.Second, "org/api's fix to be served", func() bool {
		return answeredBy(e.get("keep.example.com", "/api/orders")) == "org/api-v2"
	})
	e.write("root.yaml", strings.ReplaceAll(root, "PATH", "prefix: /web"))
	e.eventually(5*time.Second, "platform/root's fix to be served", func() bool {
		return e.get("keep.example.com", "/").status == 404
	})
	e.expectRequests("keep.example.com", []hpReq{
		{"/web/x", nil, 200, "platform/web"},
		{"/api/orders", nil, 200, "org/api-v2"},
	})
}

// TestHTTPProxyConditionsMergeDownIncludes: conditions add up along a chain of includes
// (paths joined, header, query, cookie and User-Agent conditions all required), across
// three namespaces; a request missing any of them is not the leaf's.
func TestHTTPProxyConditionsMergeDownIncludes(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "root/web", "mid/app", "leaf/app"),
		"proxies.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: root}
spec:
  virtualhost: {fqdn: chain.example.com}
  routes:
  - services: [{name: web, port: 80}]
  includes:
  - name: mid
    namespace: mid
    conditions: [{prefix: /a/}, {header: {name: x-h, exact: "1"}}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: mid, namespace: mid}
spec:
  routes:
  - services: [{name: app, port: 80}]
  includes:
  - name: leaf
    namespace: leaf
    conditions: [{prefix: /b}, {queryParameter: {name: q, present: true}}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: leaf, namespace: leaf}
spec:
  routes:
  - conditions: [{prefix: /c}, {cookie: session=s1}, {userAgent: Firefox}]
    services: [{name: app, port: 80}]
  - conditions: [{exact: /exact}]
    services: [{name: app, port: 80}]
`,
	})
	all := []string{"x-h", "1", "Cookie", "session=s1", "User-Agent", "Firefox/125.0"}
	e.expectRequests("chain.example.com", []hpReq{
		{"/a/b/c?q", all, 200, "leaf/app"},
		{"/a/b/c/d?q=1", all, 200, "leaf/app"},
		{"/a/b/exact?q", []string{"x-h", "1"}, 200, "leaf/app"}, // exact paths are relative to the includes' prefix
		// Without q, mid's include of leaf does not apply: mid's own route serves it.
		{"/a/b/c", all, 200, "mid/app"},
		{"/a/x?q", all, 200, "mid/app"},
		// Without x-h nothing is included: the root serves it.
		{"/a/b/c?q", all[2:], 200, "root/web"},
		// "/a/" is a string prefix, and /ab is not under it.
		{"/ab/b/c?q", all, 200, "root/web"},
		// Under leaf's include but matching none of its routes: sealed (404).
		{"/a/b/c?q", all[:4], 404, ""},
		{"/a/b/c?q", []string{"x-h", "1", "Cookie", "session=s2", "User-Agent", "Firefox"}, 404, ""},
		{"/a/b/exact/x?q", []string{"x-h", "1"}, 404, ""},
		{"/a/b?q", all, 404, ""},
	})
}

// TestHTTPProxyWildcardFQDN: a root for *.example.com serves every host one label below
// example.com; a root for a precise name wins over it, and deeper or shallower names are
// not served.
func TestHTTPProxyWildcardFQDN(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "wild", "precise"),
		"proxies.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: wild}
spec:
  virtualhost: {fqdn: "*.wild.example.com"}
  routes:
  - services: [{name: wild, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: precise}
spec:
  virtualhost: {fqdn: www.wild.example.com}
  routes:
  - services: [{name: precise, port: 80}]
`,
	})
	for host, want := range map[string]string{
		"a.wild.example.com":      "default/wild",
		"B.Wild.Example.com":      "default/wild",
		"a.wild.example.com:8080": "default/wild",
		"www.wild.example.com":    "default/precise",
		"a.b.wild.example.com":    "",
		"wild.example.com":        "",
		"awild.example.com":       "",
	} {
		r := e.get(host, "/x")
		status := 200
		if want == "" {
			status = 404
		}
		if got := answeredBy(r); r.status != status || got != want {
			t.Errorf("GET %s/x: %d from %q, want %d from %q", host, r.status, got, status, want)
		}
	}
}

// TestHTTPProxySecurityFieldsFailClosed: a security field that cannot be honoured as
// written (authorization, here with the request body, on a host without TLS) makes its
// object invalid, and its host is not served at all rather than served without the
// protection; a field without effect is a warning and the object is served.
func TestHTTPProxySecurityFieldsFailClosed(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "app"),
		"proxies.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: allow}
spec:
  virtualhost:
    fqdn: allow.example.com
    authorization:
      extensionRef: {name: auth}
      withRequestBody: {maxRequestBytes: 1024}
  routes:
  - services: [{name: app, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: slow}
spec:
  virtualhost:
    fqdn: slow.example.com
  routes:
  - services: [{name: app, port: 80, healthPort: 8081}]
`,
	})
	e.expectRequests("allow.example.com", []hpReq{{"/", nil, 404, ""}})
	e.expectRequests("slow.example.com", []hpReq{{"/", nil, 200, "default/app"}})
	st := proxyStatuses(t, e.dir, dag.Options{})
	wantStatus(t, st, "default/allow", dag.StatusInvalid, "AuthNotPermitted", "authorization needs spec.virtualhost.tls")
	wantStatus(t, st, "default/slow", dag.StatusValid, "HealthPortUnused", "healthPort has no effect without a healthCheckPolicy")
}

// TestHTTPProxyCycleBlamesNewestObject: of an include cycle, the newest object is invalid,
// whichever object the root's include enters the cycle by; in run mode an object's age
// is its file's. Here loop/a, which the root includes, is the newer: the root's include
// answers 503, and loop/b, included only by the invalid loop/a, is orphaned.
func TestHTTPProxyCycleBlamesNewestObject(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "root/web", "loop/app"),
		"root.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: root}
spec:
  virtualhost: {fqdn: cycle.example.com}
  routes:
  - services: [{name: web, port: 80}]
  includes:
  - {name: a, namespace: loop, conditions: [{prefix: /cycle}]}
`,
		// Files are as old as their names' order: loop/b's is older than loop/a's.
		"loop-1-b.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: b, namespace: loop}
spec:
  routes:
  - services: [{name: app, port: 80}]
  includes:
  - {name: a, conditions: [{prefix: /again}]}
`,
		"loop-2-a.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: a, namespace: loop}
spec:
  routes:
  - conditions: [{prefix: /a}]
    services: [{name: app, port: 80}]
  includes:
  - {name: b, conditions: [{prefix: /b}]}
`,
	})
	e.expectRequests("cycle.example.com", []hpReq{
		{"/", nil, 200, "root/web"},
		{"/cycle", nil, 503, ""},
		{"/cycle/a", nil, 503, ""},
		{"/cycle/b", nil, 503, ""},
		{"/cyclex", nil, 200, "root/web"},
	})
	e.eventually(5*time.Second, "loop/a to be reported invalid as the newest object of the cycle", func() bool {
		return strings.Contains(proxyStatusLine(e, "HTTPProxy", "loop", "a", "status=invalid"), "it is the newest object on the cycle")
	})
	e.eventually(5*time.Second, "loop/b to be reported orphaned", func() bool {
		return statusLogged(e, "HTTPProxy", "loop", "b", "status=orphaned")
	})
}

// TestHTTPProxyHostClaimedAcrossKinds: when Ingresses, IngressRoutes and HTTPProxy roots
// claim one host, the oldest object keeps it (in run mode an object is as old as its
// file) and every newer one is invalid, naming the owner.
func TestHTTPProxyHostClaimedAcrossKinds(t *testing.T) {
	t.Parallel()
	proxy := func(name, host string) string {
		return fmt.Sprintf(`
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: %s}
spec:
  virtualhost: {fqdn: %s}
  routes:
  - services: [{name: %s, port: 80}]
`, name, host, name)
	}
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "ingress", "proxy", "later", "route", "three"),
		// Older files first.
		"1-ingress.yaml": ingressManifest("ingress", "one.example.com", []pathRule{{"Prefix", "/", "ingress"}}, ""),
		"2-proxy.yaml":   proxy("proxy", "two.example.com") + "---\n" + proxy("three", "three.example.com"),
		"5-ingress.yaml": ingressManifest("newer", "three.example.com", []pathRule{{"Prefix", "/", "ingress"}}, ""),
		"3-later.yaml":   strings.ReplaceAll(proxy("later", "one.example.com"), "fqdn: one.example.com", "fqdn: ONE.example.com") + "---\n" + proxy("later2", "two.example.com"),
		"4-route.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: route}
spec:
  virtualhost: {fqdn: two.example.com}
  routes: [{match: /, services: [{name: route, port: 80}]}]
`,
	})
	e.expectRequests("one.example.com", []hpReq{{"/", nil, 200, "default/ingress"}})
	e.expectRequests("two.example.com", []hpReq{{"/", nil, 200, "default/proxy"}})
	e.expectRequests("three.example.com", []hpReq{{"/", nil, 200, "default/three"}})
	e.eventually(5*time.Second, "the newer HTTPProxy roots to be refused", func() bool {
		return strings.Contains(proxyStatusLine(e, "HTTPProxy", "default", "later", "status=invalid"), "is already served by Ingress default/ingress") &&
			strings.Contains(proxyStatusLine(e, "HTTPProxy", "default", "later2", "status=invalid"), "belongs to the older HTTPProxy default/proxy")
	})
	e.eventually(5*time.Second, "the newer IngressRoute root to be refused", func() bool {
		return strings.Contains(proxyStatusLine(e, "IngressRoute", "default", "route", "status=invalid"), "belongs to the older HTTPProxy default/proxy")
	})
	e.eventually(5*time.Second, "the newer Ingress to be refused", func() bool {
		return strings.Contains(proxyStatusLine(e, "Ingress", "default", "newer", "status=invalid"), "belongs to HTTPProxy default/three")
	})
}

// proxyStatusLine returns the last status log line of the object that contains text, or "".
func proxyStatusLine(e *env, kind, ns, name, text string) string {
	var found string
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, "msg=status") && strings.Contains(line, "kind="+kind) &&
			strings.Contains(line, "namespace="+ns+" ") && strings.Contains(line, "name="+name+" ") &&
			strings.Contains(line, text) {
			found = line
		}
	}
	return found
}

func statusLogged(e *env, kind, ns, name, text string) bool {
	return proxyStatusLine(e, kind, ns, name, text) != ""
}

// httpsTransport is a transport to the HTTPS listener with SNI host, HTTP/1.1 only.
func httpsTransport(e *env, host string) *http.Transport {
	addr := e.httpsAddr()
	return &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{ServerName: host, InsecureSkipVerify: true}, // self-signed test certificates
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
}
