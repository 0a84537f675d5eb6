package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// The route features Gateway API's HTTPRoute needs, as the graph carries them, through
// the translator and the embedded proxy to real backends: the cases of the Gateway API
// specification and its conformance suite.

func vhost(name string, routes ...*dag.Route) *dag.VirtualHost {
	return &dag.VirtualHost{Name: name, Routes: routes}
}

func rewriting(r *dag.Route, prefix, full string) *dag.Route {
	r.PrefixRewrite, r.PathRewrite = prefix, full
	return r
}

// TestPathRewritesAsGatewayAPI: ReplacePrefixMatch replaces whole path elements (the
// table of HTTPPathModifier's ReplacePrefixMatch), ReplaceFullPath the whole path; the
// query string is kept.
func TestPathRewritesAsGatewayAPI(t *testing.T) {
	web := echoCluster(t, "web")
	long := "/" + strings.Repeat("a", 120)
	ge := serveGraph(t, &dag.Graph{HTTP: []*dag.VirtualHost{
		vhost("xyz.test", rewriting(to("/foo", web), "/xyz", "")),
		vhost("xyz-slash.test", rewriting(to("/foo", web), "/xyz/", "")),
		vhost("strip.test", rewriting(to("/foo", web), "/", "")),
		vhost("root.test", rewriting(to("/", web), "/xyz", "")),
		vhost("full.test", rewriting(to("/full", web), "", "/one")),
		// Too long for a regular expression Envoy accepts: a twin route does it.
		vhost("long.test", rewriting(to(long, web), "/", "")),
	}})
	for _, tc := range []struct{ host, path, want string }{
		{"xyz.test", "/foo/bar", "/xyz/bar"},
		{"xyz-slash.test", "/foo/bar", "/xyz/bar"},
		{"xyz.test", "/foo", "/xyz"},
		{"xyz.test", "/foo/", "/xyz/"},
		{"strip.test", "/foo/bar", "/bar"},
		{"strip.test", "/foo/", "/"},
		{"strip.test", "/foo", "/"},
		{"xyz.test", "/foo/bar?x=1", "/xyz/bar?x=1"},
		{"strip.test", "/foo?x=1", "/?x=1"},
		{"root.test", "/a/b", "/xyz/a/b"},
		{"root.test", "/", "/xyz/"},
		{"full.test", "/full/one/two?q=1", "/one?q=1"},
		{"full.test", "/full", "/one"},
		{"long.test", long + "/x?y=1", "/x?y=1"},
		{"long.test", long, "/"},
	} {
		r := ge.get(tc.host, tc.path)
		if got := pathAndQuery(r); r.status != http.StatusOK || got != tc.want {
			t.Errorf("%s%s: %d, the backend saw %q, want %q", tc.host, tc.path, r.status, got, tc.want)
		}
	}
}

// TestRedirectsAsGatewayAPI: RequestRedirect's status codes, and its scheme, host, port
// and path as the conformance suite checks them on listeners of port 80 and 8080.
func TestRedirectsAsGatewayAPI(t *testing.T) {
	redirect := func(path string, rd dag.Redirect) *dag.Route {
		return &dag.Route{Path: dag.PathMatch{Kind: dag.PathPrefix, Value: path}, Redirect: &rd}
	}
	var routes []*dag.Route
	for _, code := range []uint32{301, 302, 303, 307, 308} {
		routes = append(routes, redirect(fmt.Sprintf("/status-%d", code), dag.Redirect{Hostname: "example.org", StatusCode: code}))
	}
	// What a Gateway listener on port 8080 (plain HTTP) gives each combination.
	routes = append(routes,
		redirect("/scheme-nil-and-port-nil", dag.Redirect{Scheme: "http", Hostname: "example.org", Port: 8080, StatusCode: 302}),
		redirect("/scheme-nil-and-port-80", dag.Redirect{Scheme: "http", Hostname: "example.org", Port: 80, StatusCode: 302}),
		redirect("/scheme-https-and-port-nil", dag.Redirect{Scheme: "https", Hostname: "example.org", Port: 443, StatusCode: 302}),
		redirect("/scheme-https-and-port-8443", dag.Redirect{Scheme: "https", Hostname: "example.org", Port: 8443, StatusCode: 302}),
		redirect("/scheme-only", dag.Redirect{Scheme: "https", StatusCode: 302}),
		redirect("/prefix", dag.Redirect{Prefix: "/replacement-prefix", StatusCode: 302}),
		redirect("/strip", dag.Redirect{Prefix: "/", StatusCode: 302}),
		redirect("/full", dag.Redirect{Path: "/full-path-replacement", StatusCode: 301}),
	)
	ge := serveGraph(t, &dag.Graph{HTTP: []*dag.VirtualHost{vhost("r.test", routes...)}})
	for _, tc := range []struct {
		path     string
		status   int
		location string
	}{
		{"/status-301", 301, "http://example.org/status-301"},
		{"/status-302", 302, "http://example.org/status-302"},
		{"/status-303", 303, "http://example.org/status-303"},
		{"/status-307", 307, "http://example.org/status-307"},
		{"/status-308", 308, "http://example.org/status-308"},
		{"/scheme-nil-and-port-nil", 302, "http://example.org:8080/scheme-nil-and-port-nil"},
		{"/scheme-nil-and-port-80", 302, "http://example.org/scheme-nil-and-port-80"},
		{"/scheme-https-and-port-nil", 302, "https://example.org/scheme-https-and-port-nil"},
		{"/scheme-https-and-port-8443", 302, "https://example.org:8443/scheme-https-and-port-8443"},
		// The request's port (the Host's) is not kept: the scheme's default port is meant.
		{"/scheme-only/a?b=c", 302, "https://r.test/scheme-only/a?b=c"},
		{"/prefix/lemon", 302, "http://r.test/replacement-prefix/lemon"},
		{"/strip/lemon", 302, "http://r.test/lemon"},
		{"/strip", 302, "http://r.test/"},
		{"/full/path/original", 301, "http://r.test/full-path-replacement"},
	} {
		r := ge.get("r.test:8080", tc.path)
		if r.status != tc.status || r.header.Get("Location") != tc.location {
			t.Errorf("%s: %d Location %q, want %d %q", tc.path, r.status, r.header.Get("Location"), tc.status, tc.location)
		}
	}
}

// TestHeaderModifiersAsGatewayAPI: RequestHeaderModifier and ResponseHeaderModifier with
// set, add and remove, on a rule and on a backend.
func TestHeaderModifiersAsGatewayAPI(t *testing.T) {
	web := echoCluster(t, "web")
	r := to("/", web)
	r.RequestHeaders = &dag.HeadersPolicy{
		Set: []dag.HeaderValue{{Name: "X-Header-Set", Value: "set-overwrites-values"}},
		Add: []dag.HeaderValue{{Name: "X-Header-Add", Value: "header-val-1"}, {Name: "X-Header-Add-Append", Value: "header-val-2"},
			{Name: "X-Percent", Value: "100%%"}},
		Remove: []string{"X-Header-Remove"},
	}
	r.ResponseHeaders = &dag.HeadersPolicy{Add: []dag.HeaderValue{{Name: "X-Response-Add", Value: "rule"}}}
	r.Clusters[0].RequestHeaders = &dag.HeadersPolicy{Add: []dag.HeaderValue{{Name: "X-Backend-Add", Value: "web"}}}
	r.Clusters[0].ResponseHeaders = &dag.HeadersPolicy{Add: []dag.HeaderValue{{Name: "X-Response-Add", Value: "backend"}}}
	ge := serveGraph(t, &dag.Graph{HTTP: []*dag.VirtualHost{vhost("h.test", r)}})
	got := ge.get("h.test", "/", "X-Header-Set", "some-other-value", "X-Header-Add-Append", "append-val-1", "X-Header-Remove", "val")
	for name, want := range map[string][]string{
		"X-Header-Set":        {"set-overwrites-values"},
		"X-Header-Add":        {"header-val-1"},
		"X-Header-Add-Append": {"append-val-1", "header-val-2"},
		"X-Header-Remove":     nil,
		"X-Backend-Add":       {"web"},
		"X-Percent":           {"100%"},
	} {
		if v := got.echo.Headers[name]; !slices.Equal(v, want) {
			t.Errorf("the backend saw %s %q, want %q", name, v, want)
		}
	}
	// The backend's changes come first, then the rule's: both values are added.
	if v := got.header.Values("X-Response-Add"); !slices.Equal(v, []string{"backend", "rule"}) {
		t.Errorf("the client saw X-Response-Add %q, want [backend rule]", v)
	}
}

// TestMatchesAsGatewayAPI: a method match, query parameters (exact and regular
// expression, on the first value, names case-sensitive) and headers (names
// case-insensitive, values exact).
func TestMatchesAsGatewayAPI(t *testing.T) {
	v1, v2, v3 := echoCluster(t, "v1"), echoCluster(t, "v2"), echoCluster(t, "v3")
	withConds := func(r *dag.Route, hs []dag.HeaderMatch, qs []dag.QueryMatch) *dag.Route {
		r.Headers, r.Query = hs, qs
		return r
	}
	ge := serveGraph(t, &dag.Graph{HTTP: []*dag.VirtualHost{vhost("m.test",
		withConds(to("/method", v1), []dag.HeaderMatch{{Name: ":method", Kind: dag.MatchExact, Value: "POST"}}, nil),
		withConds(to("/method", v2), []dag.HeaderMatch{{Name: ":method", Kind: dag.MatchExact, Value: "GET"}}, nil),
		withConds(to("/", v1), nil, []dag.QueryMatch{{Name: "animal", Kind: dag.MatchExact, Value: "whale"}}),
		withConds(to("/", v2), nil, []dag.QueryMatch{{Name: "animal", Kind: dag.MatchRegex, Value: "dol[a-z]+"}}),
		withConds(to("/", v3), []dag.HeaderMatch{{Name: "version", Kind: dag.MatchExact, Value: "one"}}, nil),
	)}})
	for _, tc := range []struct {
		method, path string
		header       []string
		want         string // the backend, or "404"
	}{
		{"POST", "/method", nil, "v1"},
		{"GET", "/method", nil, "v2"},
		{"HEAD", "/method", nil, "404"},
		{"GET", "/?animal=whale", nil, "v1"},
		{"GET", "/?animal=whale&animal=dolphin", nil, "v1"}, // the first value counts
		{"GET", "/?animal=dolphin&animal=whale", nil, "v2"},
		{"GET", "/?ANIMAL=whale", nil, "404"}, // names are case-sensitive
		{"GET", "/?animal=Whale", nil, "404"},
		{"GET", "/?animal=whaledolphin", nil, "404"},
		{"GET", "/?animal=dolphins", nil, "v2"},
		{"GET", "/?animal=xdolphin", nil, "404"}, // a regular expression matches the whole value
		{"GET", "/", []string{"VERSION", "one"}, "v3"},
		{"GET", "/", []string{"version", "One"}, "404"},
	} {
		r := ge.request(tc.method, "m.test", tc.path, tc.header...)
		got := r.service()
		if r.status == http.StatusNotFound {
			got = "404"
		}
		if got != tc.want {
			t.Errorf("%s %s %v: answered by %q (%d), want %q", tc.method, tc.path, tc.header, got, r.status, tc.want)
		}
	}
}

// TestTimeoutsAndRetriesAsGatewayAPI: timeouts.request bounds the whole request,
// timeouts.backendRequest each attempt, retries follow their codes and attempts, and a
// connection error is retried on another endpoint.
func TestTimeoutsAndRetriesAsGatewayAPI(t *testing.T) {
	web := echoCluster(t, "web")
	refused := testutil.RefusedAddr(t)
	ep := web.Endpoints[0]
	half := clusterAt("half", refused, net.JoinHostPort(ep.Address, strconv.Itoa(int(ep.Port))))
	// Timeouts long enough for a loaded machine to answer a request without delay.
	timeout := 3 * time.Second
	requestTimeout := to("/request-timeout", web)
	requestTimeout.Timeouts = &dag.TimeoutPolicy{Request: &timeout}
	backendTimeout := to("/backend-timeout", web)
	backendTimeout.Retry = &dag.RetryPolicy{PerTryTimeout: timeout}
	retries := to("/retry", web)
	retries.Retry = &dag.RetryPolicy{NumRetries: 2, OnStatusCodes: []uint32{500}, Backoff: 10 * time.Millisecond}
	connErrors := to("/connection-error", half)
	connErrors.Retry = &dag.RetryPolicy{NumRetries: 5, RetryOn: []string{"connect-failure", "refused-stream"}}
	ge := serveGraph(t, &dag.Graph{HTTP: []*dag.VirtualHost{vhost("t.test", requestTimeout, backendTimeout, retries, connErrors)}})

	// The delays are far longer than the timeouts: the answer can only be the timeout's.
	for _, path := range []string{"/request-timeout", "/backend-timeout"} {
		if r := ge.get("t.test", path, "X-Echo-Delay", "60s"); r.status != http.StatusGatewayTimeout {
			t.Errorf("%s with a backend answering after 60s: %d, want 504", path, r.status)
		}
		if r := ge.get("t.test", path); r.status != http.StatusOK {
			t.Errorf("%s: %d, want 200", path, r.status)
		}
	}
	for _, tc := range []struct {
		status       string
		wantAttempts int
	}{{"500", 3}, {"503", 1}} {
		r := ge.get("t.test", "/retry", "X-Echo-Status", tc.status)
		if r.header.Get("X-Request-Id") == "" {
			t.Fatal("no X-Request-Id in the response")
		}
		if got := ge.attempts(r.header.Get("X-Request-Id")); strconv.Itoa(r.status) != tc.status || got != tc.wantAttempts {
			t.Errorf("/retry answering %s: %d after %d attempts, want %s after %d", tc.status, r.status, got, tc.status, tc.wantAttempts)
		}
	}
	for i := range 10 {
		if r := ge.get("t.test", "/connection-error"); r.status != http.StatusOK {
			t.Fatalf("request %d to a cluster with a refusing endpoint: %d, want 200 (a connection error is retried)", i, r.status)
		}
	}
}

// TestBackendProtocolsWithRouteFeatures: an h2c backend and a WebSocket route with
// rewrites and header additions.
func TestBackendProtocolsWithRouteFeatures(t *testing.T) {
	h2c := echoCluster(t, "grpcish")
	h2c.Protocol = "h2c"
	ws := startWSBackend(t)
	h2cRoute := rewriting(to("/h2c", h2c), "/", "")
	h2cRoute.RequestHeaders = &dag.HeadersPolicy{Add: []dag.HeaderValue{{Name: "X-Added", Value: "yes"}}}
	wsRoute := rewriting(to("/ws", clusterAt("ws", ws.addr)), "", "/socket")
	wsRoute.Websocket = true
	wsRoute.RequestHeaders = &dag.HeadersPolicy{Add: []dag.HeaderValue{{Name: "X-Added", Value: "yes"}}}
	ge := serveGraph(t, &dag.Graph{HTTP: []*dag.VirtualHost{vhost("p.test", h2cRoute, wsRoute)}})

	r := ge.get("p.test", "/h2c/a")
	if r.status != http.StatusOK || r.echo.Proto != "HTTP/2.0" || r.echo.Path != "/a" || !slices.Equal(r.echo.Headers["X-Added"], []string{"yes"}) {
		t.Errorf("h2c backend saw %s %q X-Added %q (status %d), want HTTP/2.0 \"/a\" [yes]", r.echo.Proto, r.echo.Path, r.echo.Headers["X-Added"], r.status)
	}

	conn, err := net.DialTimeout("tcp", ge.proxy.ListenerAddr(translate.ListenerHTTP), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "GET /ws/chat HTTP/1.1\r\nHost: p.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("X-Path") != "/socket" {
		t.Fatalf("upgrade: %d, the backend saw path %q, want 101 and /socket", resp.StatusCode, resp.Header.Get("X-Path"))
	}
	if _, err := io.WriteString(conn, "ping"); err != nil {
		t.Fatal(err)
	}
	echoed := make([]byte, 4)
	if _, err := io.ReadFull(br, echoed); err != nil || string(echoed) != "ping" {
		t.Errorf("the upgraded connection answered %q (%v), want ping", echoed, err)
	}
}
