package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/proxy/internal/xdstest"
)

// named is a route that answers with its own name (a direct_response), so
// that a test sees which route a real request matched.
func named(name string, m *routev3.RouteMatch) *routev3.Route {
	return &routev3.Route{Name: name, Match: m, Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
		Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: name}}}}}
}

func strExactM(v string, ignoreCase bool) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}, IgnoreCase: ignoreCase}
}

func strRegexM(re string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: re}}}
}

func withQuery(m *routev3.RouteMatch, qs ...*routev3.QueryParameterMatcher) *routev3.RouteMatch {
	m.QueryParameters = append(m.QueryParameters, qs...)
	return m
}

func queryString(name string, sm *matcherv3.StringMatcher) *routev3.QueryParameterMatcher {
	return &routev3.QueryParameterMatcher{Name: name, QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: sm}}
}

func queryPresent(name string) *routev3.QueryParameterMatcher {
	return &routev3.QueryParameterMatcher{Name: name, QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}}
}

// TestQueryParameterAndHeaderMatching sends real requests through routes
// that match on query parameters, headers and the Cookie header.
func TestQueryParameterAndHeaderMatching(t *testing.T) {
	cp := startControlPlane(t)
	cookieRe := `^(.*;\s*)?user=test(;.*)?$`
	presentFalse := &routev3.HeaderMatcher{Name: "x-deny", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: false}}
	inverted := headerString("x-env", strExactM("prod", false))
	inverted.InvertMatch = true
	missingEmpty := headerString("x-opt", strExactM("", false))
	missingEmpty.TreatMissingHeaderAsEmpty = true
	vh := vhost("*",
		named("exact", withQuery(prefixMatch("/q"), queryString("v", strExactM("Yes", false)))),
		named("ci-prefix", withQuery(prefixMatch("/q"), queryString("p", &matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "ab"}, IgnoreCase: true}))),
		named("suffix", withQuery(prefixMatch("/q"), queryString("s", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: ".json"}}))),
		named("contains", withQuery(prefixMatch("/q"), queryString("c", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "mid"}}))),
		named("regex", withQuery(prefixMatch("/q"), queryString("r", strRegexM("[0-9]+")))),
		named("present", withQuery(prefixMatch("/q"), queryPresent("flag"))),
		named("absent", withQuery(prefixMatch("/q/absent"), &routev3.QueryParameterMatcher{Name: "debug",
			QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: false}})),
		named("no-specifier", withQuery(prefixMatch("/q/nospec"), &routev3.QueryParameterMatcher{Name: "any"})),
		named("raw", withQuery(prefixMatch("/q"), queryString("e", strExactM("a%20b", false)))),
		named("empty", withQuery(prefixMatch("/q"), queryString("z", strExactM("", false)))),
		named("both", withQuery(prefixMatch("/q"), queryString("x", strExactM("1", false)), queryString("y", strExactM("2", false)))),
		named("cookie", withHeaders(prefixMatch("/c"), headerString("cookie", strRegexM(cookieRe)))),
		named("suffix-ci", withHeaders(prefixMatch("/h/suffix"), headerString("x-file", &matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: ".JSON"}, IgnoreCase: true}))),
		named("not-prod", withHeaders(prefixMatch("/h/invert"), inverted)),
		named("no-deny", withHeaders(prefixMatch("/h/absent"), presentFalse)),
		named("opt-empty", withHeaders(prefixMatch("/h/empty"), missingEmpty)),
		named("none", prefixMatch("/")),
	)
	cp.set("v1", resources{listeners: []*listenerv3.Listener{httpListener(t)}, routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vh)}})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()

	for _, tc := range []struct{ target, want string }{
		{"/q?v=Yes", "exact"},
		{"/q?v=yes", "none"},
		{"/q?v=Yes&v=no", "exact"}, // the first value counts
		{"/q?v=no&v=Yes", "none"},
		{"/q?a=1&v=Yes", "exact"},
		{"/q?v", "none"},
		{"/q?p=ABcd", "ci-prefix"},
		{"/q?p=xab", "none"},
		{"/q?s=data.json", "suffix"},
		{"/q?s=data.jsonx", "none"},
		{"/q?c=xmidx", "contains"},
		{"/q?r=123", "regex"},
		{"/q?r=12a", "none"}, // a regex matches the whole value
		{"/q?flag", "present"},
		{"/q?flag=", "present"},
		{"/q?flag=0", "present"},
		{"/q?flags=1", "none"},
		{"/q?e=a%20b", "raw"}, // raw, not percent-decoded
		{"/q?e=a+b", "none"},
		{"/q?z=", "empty"},
		{"/q", "none"}, // a missing parameter never matches a string_match, even exact ""
		{"/q?x=1&y=2", "both"},
		{"/q?x=1", "none"},
		{"/q/absent", "absent"}, // present_match: false requires the parameter to be absent
		{"/q/absent?debug", "none"},
		{"/q/absent?debug=1", "none"},
		{"/q/nospec?any=", "no-specifier"},
		{"/q/nospec", "none"},
	} {
		if r := get(t, c, p.httpURL(t, tc.target), "q.example.com", nil); r.Body != tc.want {
			t.Errorf("%s matched %q, want %q", tc.target, r.Body, tc.want)
		}
	}

	for _, tc := range []struct {
		path    string
		headers map[string]string
		want    string
	}{
		{"/h/suffix", map[string]string{"X-File": "A.Json"}, "suffix-ci"},
		{"/h/suffix", map[string]string{"X-File": "A.Jsonx"}, "none"},
		{"/h/invert", map[string]string{"X-Env": "dev"}, "not-prod"},
		{"/h/invert", map[string]string{"X-Env": "prod"}, "none"},
		{"/h/invert", nil, "none"}, // an absent header fails a string match, inverted or not (Envoy)
		{"/h/absent", nil, "no-deny"},
		{"/h/absent", map[string]string{"X-Deny": "1"}, "none"},
		{"/h/empty", nil, "opt-empty"},
		{"/h/empty", map[string]string{"X-Opt": "v"}, "none"},
	} {
		if r := get(t, c, p.httpURL(t, tc.path), "h.example.com", tc.headers); r.Body != tc.want {
			t.Errorf("%s %v matched %q, want %q", tc.path, tc.headers, r.Body, tc.want)
		}
	}

	// Envoy matches the Cookie header as one value: several Cookie lines
	// (HTTP/1.1) or cookie crumbs (HTTP/2) are joined by "; ".
	cookieGet := func(client *http.Client, cookies ...string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, p.httpURL(t, "/c"), nil)
		req.Host = "c.example.com"
		req.Header["Cookie"] = cookies
		return do(t, client, req).Body
	}
	for _, tc := range []struct {
		cookies []string
		want    string
	}{
		{[]string{"a=b; user=test"}, "cookie"},
		{[]string{"user=test"}, "cookie"},
		{[]string{"user=test; a=b"}, "cookie"},
		{[]string{"a=b; xuser=test"}, "none"},
		{[]string{"user=testy"}, "none"},
		{[]string{"a=b; user=testy; c=d"}, "none"},
		{[]string{"a=b", "user=test"}, "cookie"}, // two Cookie lines
		{[]string{"user=test", "a=b"}, "cookie"},
		{[]string{"a=b", "xuser=test"}, "none"},
	} {
		if got := cookieGet(c, tc.cookies...); got != tc.want {
			t.Errorf("HTTP/1.1 Cookie %q matched %q, want %q", tc.cookies, got, tc.want)
		}
	}
	h2 := h2cClient()
	for cookie, want := range map[string]string{"a=b; user=test": "cookie", "a=b; xuser=test": "none", "user=testy; a=b": "none", "a=b; user=test; c=d": "cookie"} {
		if got := cookieGet(h2, cookie); got != want {
			t.Errorf("HTTP/2 Cookie %q (sent as crumbs) matched %q, want %q", cookie, got, want)
		}
	}
}

// upgradeBackend accepts "Upgrade: websocket" requests with 101 Switching
// Protocols, then upper-cases the bytes it receives.
func upgradeBackend(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "not an upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Backend: up\r\n\r\n")
		_ = brw.Flush()
		buf := make([]byte, 64)
		for {
			n, err := brw.Read(buf)
			if n > 0 {
				_, _ = conn.Write([]byte(strings.ToUpper(string(buf[:n]))))
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// upgrade sends an "Upgrade: websocket" request on a new connection and
// returns the response; on 101 it also sends "ping" and returns the answer.
func upgrade(t *testing.T, addr, path string) (*http.Response, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: ws.example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", path)
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		_, _ = io.Copy(io.Discard, res.Body)
		return res, ""
	}
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(br, got); err != nil {
		t.Fatalf("%s: reading from the upgraded connection: %v", path, err)
	}
	return res, string(got)
}

// TestRouteUpgradeConfigs: a route's upgrade_configs allow an upgrade the
// connection manager does not list, and refuse one it does.
func TestRouteUpgradeConfigs(t *testing.T) {
	cp := startControlPlane(t)
	ws := upgradeBackend(t)
	upgrades := func(enabled *wrapperspb.BoolValue) func(a *routev3.RouteAction) {
		return func(a *routev3.RouteAction) {
			a.UpgradeConfigs = []*routev3.RouteAction_UpgradeConfig{{UpgradeType: "WebSocket", Enabled: enabled}}
		}
	}
	enabled := withAction(toCluster("ws", prefixMatch("/on")), upgrades(nil))
	enabled.ResponseHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-route", "on")}
	disabled := withAction(toCluster("ws", prefixMatch("/off")), upgrades(wrapperspb.Bool(false)))
	disabled.ResponseHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-route", "off")}
	routes := []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
		enabled,
		withAction(toCluster("ws", prefixMatch("/explicit")), upgrades(wrapperspb.Bool(true))),
		disabled,
		toCluster("ws", prefixMatch("/")),
	))}
	res := resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes:    routes,
		clusters:  []*clusterv3.Cluster{edsCluster("ws")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("ws", ws.Listener.Addr().String())},
	}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	addr := p.ListenerAddr("ingress_http")

	check := func(path string, want int) {
		t.Helper()
		r, echoed := upgrade(t, addr, path)
		if r.StatusCode != want {
			t.Fatalf("%s: status %d, want %d", path, r.StatusCode, want)
		}
		if path == "/off" && r.Header.Get("X-Route") != "off" {
			t.Errorf("the 403 of a refused upgrade lacks the route's response headers: %v", r.Header)
		}
		if want == http.StatusSwitchingProtocols && echoed != "PING" {
			t.Errorf("%s: upgraded connection answered %q, want PING", path, echoed)
		}
	}
	// The HCM lists no upgrade.
	check("/on", http.StatusSwitchingProtocols)
	check("/explicit", http.StatusSwitchingProtocols)
	check("/off", http.StatusForbidden)
	check("/other", http.StatusForbidden)
	if r, _ := upgrade(t, addr, "/on"); r.Header.Get("X-Route") != "on" || r.Header.Get("X-Backend") != "up" {
		t.Errorf("101 headers: x-route %q x-backend %q, want the route's response headers with the upstream's", r.Header.Get("X-Route"), r.Header.Get("X-Backend"))
	}

	// The HCM enables websocket: a route's enabled: false still refuses it.
	l := modifyHCM(t, func(h *hcmv3.HttpConnectionManager) {
		h.UpgradeConfigs = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}}
	})
	res.listeners = []*listenerv3.Listener{l}
	cp.set("v2", res)
	p.waitVersion(t, "v2")
	check("/other", http.StatusSwitchingProtocols)
	check("/on", http.StatusSwitchingProtocols)
	check("/off", http.StatusForbidden)
	// A plain request on a route with upgrade_configs is a plain request.
	if r := get(t, noRedirectClient(), p.httpURL(t, "/off"), "ws.example.com", nil); r.Status != http.StatusBadRequest {
		t.Errorf("plain request: status %d, want the backend's 400", r.Status)
	}
}

// TestCookieAndQueryHashPolicies: a client that replays the cookie the
// proxy generated reaches the same endpoint of a RING_HASH cluster every time.
func TestCookieAndQueryHashPolicies(t *testing.T) {
	cp := startControlPlane(t)
	var addrs []string
	for i := range 4 {
		addrs = append(addrs, startBackend(t, fmt.Sprintf("s%d", i)).addr())
	}
	cookie := func(name string, ttl *durationpb.Duration, path string) *routev3.RouteAction_HashPolicy {
		return &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_Cookie_{
			Cookie: &routev3.RouteAction_HashPolicy_Cookie{Name: name, Ttl: ttl, Path: path}}}
	}
	query := &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_QueryParameter_{
		QueryParameter: &routev3.RouteAction_HashPolicy_QueryParameter{Name: "u"}}}
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			hashRoute("sticky", "/ttl", cookie("route", durationpb.New(90*time.Second), "/ttl")),
			hashRoute("sticky", "/session", cookie("route", durationpb.New(0), "")),
			hashRoute("sticky", "/nottl", cookie("route", nil, "")),
			hashRoute("sticky", "/q", query),
		))},
		clusters:  []*clusterv3.Cluster{lbCluster("sticky", clusterv3.Cluster_RING_HASH)},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("sticky", addrs...)},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	fresh := func() *http.Client { // a new connection for every request
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	}
	send := func(c *http.Client, path, cookie string) result {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, p.httpURL(t, path), nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		r := do(t, c, req)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: status %d", path, r.Status)
		}
		return r
	}

	t.Run("generated cookie", func(t *testing.T) {
		keepAlive := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
		first := send(keepAlive, "/ttl", "")
		setCookie := first.Header.Get("Set-Cookie")
		m := regexp.MustCompile(`^route="([0-9a-f]{16})"; Max-Age=90; Path=/ttl; HttpOnly$`).FindStringSubmatch(setCookie)
		if m == nil {
			t.Fatalf("Set-Cookie %q, want Envoy's route=\"<16 hex digits>\"; Max-Age=90; Path=/ttl; HttpOnly", setCookie)
		}
		// The value depends on the connection only: a second request on it gets the same.
		if again := send(keepAlive, "/ttl", "").Header.Get("Set-Cookie"); again != setCookie {
			t.Errorf("same connection, Set-Cookie %q then %q", setCookie, again)
		}
		for i := range 12 {
			cookie := `route="` + m[1] + `"`
			if i%2 == 1 {
				cookie = "other=1; route=" + m[1] // unquoted, among others
			}
			r := send(fresh(), "/ttl", cookie)
			if r.Backend != first.Backend {
				t.Fatalf("replayed cookie %q reached %s, the first request %s", cookie, r.Backend, first.Backend)
			}
			if sc := r.Header.Get("Set-Cookie"); sc != "" {
				t.Errorf("a client with the cookie got Set-Cookie %q", sc)
			}
		}
		if sc := send(fresh(), "/session", "").Header.Get("Set-Cookie"); !regexp.MustCompile(`^route="[0-9a-f]{16}"; HttpOnly$`).MatchString(sc) {
			t.Errorf("ttl 0: Set-Cookie %q, want a session cookie (no Max-Age, no Path)", sc)
		}
	})

	t.Run("cookie values spread over endpoints", func(t *testing.T) {
		seen := map[string]bool{}
		for i := range 40 {
			seen[send(fresh(), "/nottl", fmt.Sprintf("route=v%d", i)).Backend] = true
		}
		if len(seen) < 2 {
			t.Errorf("40 cookie values all reached %v", seen)
		}
	})

	t.Run("no ttl: an absent cookie gives no hash and no cookie", func(t *testing.T) {
		seen := map[string]bool{}
		for range 40 {
			r := send(fresh(), "/nottl", "")
			if sc := r.Header.Get("Set-Cookie"); sc != "" {
				t.Fatalf("Set-Cookie %q without a ttl", sc)
			}
			seen[r.Backend] = true
		}
		if len(seen) < 2 {
			t.Errorf("40 requests without a hash all reached %v, want random picks", seen)
		}
	})

	t.Run("query parameter", func(t *testing.T) {
		want := send(fresh(), "/q?u=alice", "").Backend
		for range 10 {
			if got := send(fresh(), "/q?x=1&u=alice&u=bob", "").Backend; got != want {
				t.Fatalf("u=alice reached %s then %s", want, got)
			}
		}
		seen := map[string]bool{}
		for i := range 40 {
			seen[send(fresh(), fmt.Sprintf("/q?u=user%d", i), "").Backend] = true
		}
		if len(seen) < 2 {
			t.Errorf("40 values of u all reached %v", seen)
		}
	})
}

// TestRedirectsAndDirectResponses covers the redirect fields and
// direct_response bodies.
func TestRedirectsAndDirectResponses(t *testing.T) {
	cp := startControlPlane(t)
	redirect := func(prefix string, ra *routev3.RedirectAction) *routev3.Route {
		return &routev3.Route{Match: prefixMatch(prefix), Action: &routev3.Route_Redirect{Redirect: ra}}
	}
	direct := func(path string, status uint32, ds *corev3.DataSource) *routev3.Route {
		return &routev3.Route{Match: exactMatch(path), Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: status, Body: ds}}}
	}
	inline := func(s string) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: s}}
	}
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			redirect("/scheme", &routev3.RedirectAction{SchemeRewriteSpecifier: &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: "HTTPS"}, PortRedirect: 8443}),
			redirect("/hostport", &routev3.RedirectAction{HostRedirect: "h2.example.com", PortRedirect: 9000, ResponseCode: routev3.RedirectAction_FOUND}),
			redirect("/pathq", &routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PathRedirect{PathRedirect: "/new?y=2"},
				StripQuery: true, ResponseCode: routev3.RedirectAction_SEE_OTHER}),
			redirect("/strip", &routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PathRedirect{PathRedirect: "/p2"},
				StripQuery: true, ResponseCode: routev3.RedirectAction_TEMPORARY_REDIRECT}),
			redirect("/keep", &routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PathRedirect{PathRedirect: "/p3"},
				ResponseCode: routev3.RedirectAction_PERMANENT_REDIRECT}),
			redirect("/old/", &routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: "/v2/"}}),
			direct("/maintenance", 503, inline("down for maintenance\n")),
			direct("/bytes", 200, &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte("raw")}}),
			direct("/created", 201, nil),
			direct("/found", 302, inline("see elsewhere")),
		))},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	for _, tc := range []struct {
		target       string
		wantStatus   int
		wantLocation string
		wantBody     string
	}{
		{"/scheme/a?x=1", 301, "https://r.example.com:8443/scheme/a?x=1", ""},
		{"/hostport", 302, "http://h2.example.com:9000/hostport", ""},
		{"/pathq?x=1", 303, "http://r.example.com/new?y=2", ""}, // the path_redirect's query stays, strip_query or not
		{"/strip?x=1", 307, "http://r.example.com/p2", ""},
		{"/keep?x=1", 308, "http://r.example.com/p3?x=1", ""},
		{"/old/a/b?c=d", 301, "http://r.example.com/v2/a/b?c=d", ""},
		{"/maintenance", 503, "", "down for maintenance\n"},
		{"/bytes", 200, "", "raw"},
		// Envoy gives a 201 or 3xx direct response the request's URL as Location.
		{"/created?q=1", 201, "http://r.example.com/created?q=1", ""},
		{"/found", 302, "http://r.example.com/found", "see elsewhere"},
	} {
		r := get(t, c, p.httpURL(t, tc.target), "r.example.com:8080", nil)
		if r.Status != tc.wantStatus || r.Header.Get("Location") != tc.wantLocation || r.Body != tc.wantBody {
			t.Errorf("%s: got %d Location %q body %q, want %d %q %q", tc.target, r.Status, r.Header.Get("Location"), r.Body,
				tc.wantStatus, tc.wantLocation, tc.wantBody)
		}
		if tc.wantBody != "" && r.Header.Get("Content-Type") != "text/plain" {
			t.Errorf("%s: Content-Type %q, want text/plain", tc.target, r.Header.Get("Content-Type"))
		}
	}
}
