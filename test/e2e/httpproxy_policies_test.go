package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/dag"
)

// HTTPProxy route policies through the proxy, seen by real backends and clients: headers
// policies, Host rewrite, path rewrite, redirects, direct responses, WebSocket upgrades,
// cookie session affinity and service weights.

// wsBackend accepts WebSocket upgrades and then echoes every byte; plain requests get 426.
type wsBackend struct {
	addr     string
	upgrades atomic.Int64
}

func startWSBackend(t *testing.T) *wsBackend {
	t.Helper()
	b := &wsBackend{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "websocket only", http.StatusUpgradeRequired)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		b.upgrades.Add(1)
		_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Path: "+r.URL.Path+"\r\n\r\n")
		_, _ = io.Copy(conn, brw.Reader)
	}))
	t.Cleanup(srv.Close)
	b.addr = srv.Listener.Addr().String()
	return b
}

// upgrade sends a WebSocket upgrade request for host and path to the HTTP listener and
// returns the response and, after a 101, the connection (caller closes).
func upgrade(t *testing.T, e *env, host, path string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", e.httpAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path, host)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		t.Fatalf("upgrade %s%s: %v", host, path, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		conn.Close()
		return resp, nil, nil
	}
	return resp, conn, br
}

const policiesProxy = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: policies, namespace: pol}
spec:
  virtualhost: {fqdn: pol.example.com}
  routes:
  - conditions: [{prefix: /headers}]
    services:
    - name: app
      port: 80
      requestHeadersPolicy:
        set: [{name: X-Service, value: "%CONTOUR_SERVICE_NAME%:%CONTOUR_SERVICE_PORT%"}]
    requestHeadersPolicy:
      set:
      - {name: X-Added, value: "yes"}
      - {name: X-Replaced, value: new}
      - {name: X-Namespace, value: "%CONTOUR_NAMESPACE%"}
      - {name: X-Copied, value: "%REQ(X-Orig)%"}
      remove: [X-Secret]
    responseHeadersPolicy:
      set: [{name: X-Resp, value: r}]
  - conditions: [{prefix: /resp}]
    services:
    - name: hdr
      port: 80
      responseHeadersPolicy:
        set: [{name: X-Service-Resp, value: "%CONTOUR_SERVICE_NAME%"}]
    responseHeadersPolicy:
      set: [{name: X-Backend-Keep, value: replaced}]
      remove: [X-Backend-Secret]
  - conditions: [{prefix: /host}]
    services: [{name: app, port: 80}]
    requestHeadersPolicy:
      set: [{name: Host, value: internal.example.com}]
  - conditions: [{prefix: /svchost}]
    services:
    - name: app
      port: 80
      requestHeadersPolicy:
        set: [{name: Host, value: service.internal}]
  - conditions: [{prefix: /timeout}]
    services: [{name: app, port: 80}]
    timeoutPolicy: {response: 500ms}
  - conditions: [{prefix: /api}]
    services: [{name: app, port: 80}]
    pathRewritePolicy:
      replacePrefix: [{prefix: /api, replacement: /}]
  - conditions: [{prefix: /v0}]
    services: [{name: app, port: 80}]
    pathRewritePolicy:
      replacePrefix: [{replacement: /v1}]
  - conditions: [{prefix: /old}]
    requestRedirectPolicy: {scheme: https, hostname: new.example.com, port: 8443, statusCode: 301, path: /new}
  - conditions: [{prefix: /moved}]
    requestRedirectPolicy: {prefix: /moved-here}
  - conditions: [{prefix: /permanent}]
    requestRedirectPolicy: {statusCode: 308, prefix: /}
  - conditions: [{prefix: /teapot}]
    directResponsePolicy: {statusCode: 418, body: "short and stout\n"}
  - conditions: [{prefix: /ws}]
    enableWebsockets: true
    services: [{name: ws, port: 80}]
  - conditions: [{prefix: /nows}]
    services: [{name: ws, port: 80}]
  - conditions: [{prefix: /sticky}]
    loadBalancerPolicy: {strategy: Cookie}
    services: [{name: pair, port: 80}]
  - conditions: [{prefix: /hash}]
    loadBalancerPolicy:
      strategy: RequestHash
      requestHashPolicies: [{headerHashOptions: {headerName: X-User}}]
    services: [{name: pair, port: 80}]
  - conditions: [{prefix: /weights}]
    services: [{name: zero, port: 80, weight: 0}, {name: app, port: 80, weight: 1}]
  - conditions: [{prefix: /split}]
    services: [{name: zero, port: 80, weight: 1}, {name: app, port: 80, weight: 1}]
`

// TestHTTPProxyRoutePolicies: every route policy, through the proxy.
func TestHTTPProxyRoutePolicies(t *testing.T) {
	t.Parallel()
	ws := startWSBackend(t)
	a, b := startEcho(t, "pol", "pair"), startEcho(t, "pol", "pair")
	hdr := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend-Secret", "s3cret")
		w.Header().Set("X-Backend-Keep", "original")
		w.Header().Set("Content-Type", "text/x-hdr")
		_, _ = io.WriteString(w, "hdr")
	}))
	t.Cleanup(hdr.Close)
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "pol/app", "pol/zero") + "---\n" + serviceManifest("pol", "ws", ws.addr) + "---\n" + serviceManifest("pol", "pair", a, b) +
			"---\n" + serviceManifest("pol", "hdr", hdr.Listener.Addr().String()),
		"proxy.yaml": policiesProxy,
	})
	const host = "pol.example.com"
	st := proxyStatuses(t, e.dir, dag.Options{})
	wantStatus(t, st, "pol/policies", dag.StatusValid, "")
	if w := st["pol/policies"].Warnings; len(w) != 0 {
		t.Errorf("warnings: %+v", w)
	}

	// headers
	func() {
		r := e.get(host, "/headers", "X-Replaced", "old", "X-Secret", "s3cret", "X-Orig", "from-client")
		if r.status != 200 {
			t.Fatalf("GET /headers: %d %s", r.status, r.body)
		}
		for name, want := range map[string]string{
			"X-Added": "yes", "X-Replaced": "new", "X-Namespace": "pol", "X-Copied": "from-client", "X-Service": "app:80",
		} {
			if got := r.echo.Headers[name]; len(got) != 1 || got[0] != want {
				t.Errorf("the backend saw %s: %q, want %q", name, got, want)
			}
		}
		if got, ok := r.echo.Headers["X-Secret"]; ok {
			t.Errorf("the backend saw the removed X-Secret: %q", got)
		}
		if got := r.header.Get("X-Resp"); got != "r" {
			t.Errorf("the client saw X-Resp %q, want r", got)
		}
		// Response headers the backend sets: removed, replaced, added.
		r = e.get(host, "/resp")
		if r.status != 200 || r.body != "hdr" {
			t.Fatalf("GET /resp: %d %q", r.status, r.body)
		}
		if got := r.header.Values("X-Backend-Secret"); len(got) != 0 {
			t.Errorf("the client saw the removed X-Backend-Secret %q", got)
		}
		if got := r.header.Values("X-Backend-Keep"); len(got) != 1 || got[0] != "replaced" {
			t.Errorf("the client saw X-Backend-Keep %q, want [replaced]", got)
		}
		if got := r.header.Get("X-Service-Resp"); got != "hdr" {
			t.Errorf("the client saw X-Service-Resp %q, want hdr (the service's policy)", got)
		}
		if got := r.header.Get("Content-Type"); got != "text/x-hdr" {
			t.Errorf("the client saw Content-Type %q, want the backend's text/x-hdr", got)
		}
	}()

	// host rewrite
	func() {
		if r := e.get(host, "/host/x"); r.status != 200 || r.echo.Host != "internal.example.com" {
			t.Errorf("GET /host/x: %d, the backend saw Host %q, want internal.example.com", r.status, r.echo.Host)
		}
		if r := e.get(host, "/svchost/x"); r.status != 200 || r.echo.Host != "service.internal" {
			t.Errorf("GET /svchost/x: %d, the backend saw Host %q, want service.internal (the service's policy)", r.status, r.echo.Host)
		}
		if r := e.get(host, "/api/x"); r.echo.Host != host {
			t.Errorf("without a Host rewrite the backend saw Host %q", r.echo.Host)
		}
	}()

	// path rewrite
	func() {
		for path, want := range map[string]string{
			"/api/x":     "/x",
			"/api/x/y":   "/x/y",
			"/api":       "/",
			"/api/":      "/",
			"/api?q=1":   "/",
			"/v0/users":  "/v1/users",
			"/v0":        "/v1",
			"/api/a%2Fb": "/a%2Fb",
		} {
			r := e.get(host, path)
			if r.status != 200 || r.echo.Path != want {
				t.Errorf("GET %s: %d, the backend saw path %q, want %q", path, r.status, r.echo.Path, want)
			}
		}
		if r := e.get(host, "/api/x?q=1"); r.echo.Query != "q=1" {
			t.Errorf("the rewrite lost the query: %q", r.echo.Query)
		}
		// Routing is not affected: /apix is not under /api.
		if r := e.get(host, "/apix"); r.status != 404 {
			t.Errorf("GET /apix: %d from %q, want 404", r.status, answeredBy(r))
		}
	}()

	// redirects
	func() {
		for path, want := range map[string]struct {
			status   int
			location string
		}{
			"/old":         {301, "https://new.example.com:8443/new"},
			"/old/x?q=1":   {301, "https://new.example.com:8443/new?q=1"},
			"/moved":       {302, "http://pol.example.com/moved-here"},
			"/moved/x?q=1": {302, "http://pol.example.com/moved-here/x?q=1"},
			// 308 keeps the method; the prefix "/" drops the matched one, slash and all.
			"/permanent/x?q=1": {308, "http://pol.example.com/x?q=1"},
		} {
			r := e.get(host, path)
			if r.status != want.status || r.header.Get("Location") != want.location || r.service() != "" {
				t.Errorf("GET %s: %d to %q (from %q), want %d to %s", path, r.status, r.header.Get("Location"), r.service(), want.status, want.location)
			}
		}
	}()

	// response timeout: a backend answering after a minute gets 504 from the proxy
	func() {
		if r := e.get(host, "/timeout", "X-Echo-Delay", "60s"); r.status != http.StatusGatewayTimeout || r.service() != "" {
			t.Errorf("GET /timeout (response: 500ms, backend 60s): %d from %q, want 504", r.status, r.service())
		}
		if r := e.get(host, "/timeout"); r.status != 200 {
			t.Errorf("GET /timeout (answered at once): %d", r.status)
		}
	}()

	// direct response
	func() {
		if r := e.get(host, "/teapot/x"); r.status != 418 || r.body != "short and stout\n" {
			t.Errorf("GET /teapot/x: %d %q", r.status, r.body)
		}
	}()

	// websockets
	func() {
		resp, conn, br := upgrade(t, e, host, "/ws/chat")
		if conn == nil {
			t.Fatalf("upgrade on a route with enableWebsockets: %d, want 101", resp.StatusCode)
		}
		defer conn.Close()
		if resp.Header.Get("X-Path") != "/ws/chat" || !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") {
			t.Errorf("101 headers: %v", resp.Header)
		}
		for _, msg := range []string{"ping\n", "a second message\n"} {
			if _, err := io.WriteString(conn, msg); err != nil {
				t.Fatal(err)
			}
			if got, err := br.ReadString('\n'); err != nil || got != msg {
				t.Fatalf("through the upgraded connection: sent %q, got %q (%v)", msg, got, err)
			}
		}
		// Without enableWebsockets the upgrade is refused and never reaches the backend.
		before := ws.upgrades.Load()
		resp, conn2, _ := upgrade(t, e, host, "/nows/chat")
		if conn2 != nil {
			conn2.Close()
			t.Fatalf("upgrade on a route without enableWebsockets: 101")
		}
		if resp.StatusCode != http.StatusForbidden || ws.upgrades.Load() != before {
			t.Errorf("upgrade on a route without enableWebsockets: %d, backend upgrades %d→%d; want 403 and none", resp.StatusCode, before, ws.upgrades.Load())
		}
	}()

	// cookie affinity
	func() {
		first := e.get(host, "/sticky")
		var cookie *http.Cookie
		for _, c := range (&http.Response{Header: first.header}).Cookies() {
			if c.Name == "X-Contour-Session-Affinity" {
				cookie = c
			}
		}
		if first.status != 200 || cookie == nil || cookie.Value == "" {
			t.Fatalf("GET /sticky without a cookie: %d, Set-Cookie %q; want an X-Contour-Session-Affinity cookie", first.status, first.header.Values("Set-Cookie"))
		}
		if cookie.Path != "/" {
			t.Errorf("the affinity cookie's path is %q, want /", cookie.Path)
		}
		for i := 0; i < 20; i++ {
			r := e.get(host, "/sticky", "Cookie", cookie.Name+"="+cookie.Value)
			if r.status != 200 || r.echo.Endpoint != first.echo.Endpoint {
				t.Fatalf("request %d with the affinity cookie: %d from endpoint %q, want %q", i, r.status, r.echo.Endpoint, first.echo.Endpoint)
			}
			if len(r.header.Values("Set-Cookie")) != 0 {
				t.Errorf("a request with the affinity cookie got a new one: %q", r.header.Values("Set-Cookie"))
			}
		}
		// New clients (no cookie) are spread over both endpoints.
		seen := map[string]int{}
		for i := 0; i < 40 && len(seen) < 2; i++ {
			seen[e.get(host, "/sticky").echo.Endpoint]++
		}
		if len(seen) != 2 {
			t.Errorf("clients without a cookie all went to %v", seen)
		}
	}()

	// request hash
	func() {
		endpointOf := map[string]string{}
		for round := 0; round < 5; round++ {
			for i := 0; i < 10; i++ {
				user := fmt.Sprintf("user-%d", i)
				r := e.get(host, "/hash", "X-User", user)
				if r.status != 200 {
					t.Fatalf("GET /hash as %s: %d", user, r.status)
				}
				if prev, ok := endpointOf[user]; ok && prev != r.echo.Endpoint {
					t.Errorf("RequestHash on X-User: %s went to %s, then to %s", user, prev, r.echo.Endpoint)
				}
				endpointOf[user] = r.echo.Endpoint
			}
		}
		// Many users are spread over both endpoints.
		seen := map[string]bool{}
		for i := 0; i < 64 && len(seen) < 2; i++ {
			seen[e.get(host, "/hash", "X-User", fmt.Sprintf("spread-%d", i)).echo.Endpoint] = true
		}
		if len(seen) != 2 {
			t.Errorf("64 users all hashed to %v", seen)
		}
	}()

	// weights
	func() {
		if got := e.tally(host, "/weights", 40); got["app"] != 40 {
			t.Errorf("weights 0 and 1: %v, want all 40 to app", got)
		}
		if got := e.tally(host, "/split", 60); got["app"] == 0 || got["zero"] == 0 || got["app"]+got["zero"] != 60 {
			t.Errorf("weights 1 and 1: %v, want both used", got)
		}
	}()
}

// TestHTTPProxyPathRewriteUnderIncludes: an object included under several prefixes
// rewrites each its own way (the replacePrefix entry whose prefix is the route's merged
// prefix, else the one without prefix); the rewrite replaces the whole merged prefix.
func TestHTTPProxyPathRewriteUnderIncludes(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "team/app"),
		"proxies.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: platform}
spec:
  virtualhost: {fqdn: rewrite.example.com}
  includes:
  - {name: app, namespace: team, conditions: [{prefix: /v1}]}
  - {name: app, namespace: team, conditions: [{prefix: /legacy/api}]}
  - {name: app, namespace: team, conditions: [{prefix: /other}]}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: app, namespace: team}
spec:
  routes:
  - services: [{name: app, port: 80}]
    pathRewritePolicy:
      replacePrefix:
      - {prefix: /v1, replacement: /}
      - {prefix: /legacy/api, replacement: /api}
      - {replacement: /fallback}
`,
	})
	for path, want := range map[string]string{
		"/v1":              "/",
		"/v1/users":        "/users",
		"/v1/users/7":      "/users/7",
		"/legacy/api":      "/api",
		"/legacy/api/x":    "/api/x",
		"/other/thing":     "/fallback/thing",
		"/other":           "/fallback",
		"/v1/users?page=2": "/users",
	} {
		r := e.get("rewrite.example.com", path)
		if r.status != 200 || answeredBy(r) != "team/app" || r.echo.Path != want {
			t.Errorf("GET %s: %d from %q, the backend saw %q, want %q", path, r.status, answeredBy(r), r.echo.Path, want)
		}
	}
	for _, path := range []string{"/v10", "/legacy", "/legacy/apis"} {
		if r := e.get("rewrite.example.com", path); r.status != 404 {
			t.Errorf("GET %s: %d from %q, want 404", path, r.status, answeredBy(r))
		}
	}
}

// TestHTTPProxyNoContentTypeAdded: a response without Content-Type (the backend sent
// none, or responseHeadersPolicy removed it) reaches the client without one, as from
// Envoy, which never adds a Content-Type to an upstream response.
func TestHTTPProxyNoContentTypeAdded(t *testing.T) {
	t.Parallel()
	raw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil // no sniffing here: the backend sends no Content-Type
		_, _ = io.WriteString(w, `{"a":1}`)
	}))
	t.Cleanup(raw.Close)
	e := start(t, map[string]string{
		"backends.yaml": serviceManifest("default", "raw", raw.Listener.Addr().String()) + "---\n" + backends(t, "app"),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: ctype}
spec:
  virtualhost: {fqdn: ctype.example.com}
  routes:
  - conditions: [{prefix: /raw}]
    services: [{name: raw, port: 80}]
  - conditions: [{prefix: /removed}]
    services: [{name: app, port: 80}]
    responseHeadersPolicy: {remove: [Content-Type]}
`,
	})
	for _, path := range []string{"/raw", "/removed"} {
		added := 0
		var example []string
		for i := 0; i < 100; i++ {
			r := e.get("ctype.example.com", path)
			if got := r.header.Values("Content-Type"); r.status == 200 && len(got) > 0 {
				added++
				example = got
			}
		}
		if added > 0 {
			t.Errorf("GET %s: %d of 100 responses got a Content-Type (%q), want none", path, added, example)
		}
	}
}

// TestHTTPProxyPrefixRewriteTable: the table of docs/httpproxy.md's pathRewritePolicy:
// whole path elements are replaced, and a slash is never doubled or lost.
func TestHTTPProxyPrefixRewriteTable(t *testing.T) {
	t.Parallel()
	rewrite := func(host, prefix, replacement string) string {
		return fmt.Sprintf(`
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: %s, namespace: team}
spec:
  virtualhost: {fqdn: %s.example.com}
  routes:
  - conditions: [{prefix: %s}]
    services: [{name: app, port: 80}]
    pathRewritePolicy:
      replacePrefix: [{replacement: %s}]
---`, host, host, prefix, replacement)
	}
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "team/app"),
		"proxies.yaml": rewrite("v1", "/api", "/v1") + rewrite("v1slash", "/api", "/v1/") + rewrite("strip", "/api", "/") +
			rewrite("root", "/", "/v1") + rewrite("string", "/api/", "/v1/"),
	})
	for _, tc := range []struct{ host, path, want string }{
		{"v1", "/api/users?q=1", "/v1/users?q=1"},
		{"v1", "/api", "/v1"},
		{"v1slash", "/api/users", "/v1/users"},
		{"strip", "/api/users", "/users"},
		{"strip", "/api", "/"},
		{"root", "/users", "/v1/users"},
		{"string", "/api/users", "/v1/users"},
	} {
		r := e.get(tc.host+".example.com", tc.path)
		if got := pathAndQuery(r); r.status != 200 || got != tc.want {
			t.Errorf("%s%s: %d, the backend saw %q, want %q", tc.host, tc.path, r.status, got, tc.want)
		}
	}
}
