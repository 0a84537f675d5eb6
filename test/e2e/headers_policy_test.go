package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/testutil"
)

// Headers policies on the headers that the data plane writes itself: Server is set and
// removed per route (and per service, when every service of the route agrees), over
// HTTP and HTTPS, on forwarded responses and on the route's own answers; headers that
// cannot be changed make the object invalid without touching anyone else's routes.

const serverProxy = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: server, namespace: srv}
spec:
  virtualhost: {fqdn: srv.example.com, tls: {secretName: srv-tls}}
  routes:
  - conditions: [{prefix: /default}]
    services: [{name: app, port: 80}]
    permitInsecure: true
  - conditions: [{prefix: /removed}]
    services: [{name: app, port: 80}]
    permitInsecure: true
    responseHeadersPolicy: {remove: [Server]}
  - conditions: [{prefix: /named}]
    services: [{name: app, port: 80}]
    permitInsecure: true
    responseHeadersPolicy:
      set: [{name: server, value: edge-1}]
  - conditions: [{prefix: /service-named}]
    services:
    - name: app
      port: 80
      responseHeadersPolicy:
        set: [{name: Server, value: "%CONTOUR_SERVICE_NAME%"}]
    permitInsecure: true
  - conditions: [{prefix: /split-removed}]
    services:
    - {name: app, port: 80, responseHeadersPolicy: {remove: [server]}}
    - {name: echo, port: 80, responseHeadersPolicy: {remove: [server]}}
    permitInsecure: true
  - conditions: [{prefix: /teapot}]
    directResponsePolicy: {statusCode: 418, body: "short and stout\n"}
    permitInsecure: true
    responseHeadersPolicy: {remove: [Server]}
  - conditions: [{prefix: /moved}]
    requestRedirectPolicy: {path: /elsewhere}
    permitInsecure: true
    responseHeadersPolicy:
      set: [{name: Server, value: redirector}]
  - conditions: [{prefix: /others}]
    services: [{name: echo, port: 80}]
    permitInsecure: true
    requestHeadersPolicy:
      set: [{name: Server, value: client-side}]
      remove: [X-Forwarded-For]
    responseHeadersPolicy:
      set: [{name: Date, value: "Fri, 01 Jan 2038 00:00:00 GMT"}]
`

const refusedProxies = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: hop, namespace: srv}
spec:
  virtualhost: {fqdn: hop.example.com}
  routes:
  - services: [{name: app, port: 80}]
    responseHeadersPolicy:
      set: [{name: Connection, value: close}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: split, namespace: srv}
spec:
  virtualhost: {fqdn: split.example.com}
  routes:
  - services:
    - {name: app, port: 80, responseHeadersPolicy: {remove: [Server]}}
    - {name: echo, port: 80}
`

func TestHTTPProxyServerAndManagedHeaders(t *testing.T) {
	t.Parallel()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "app/1.0")
		_, _ = io.WriteString(w, "app")
	}))
	t.Cleanup(app.Close)
	e := start(t, map[string]string{
		"backends.yaml": serviceManifest("srv", "app", app.Listener.Addr().String()) + "---\n" + backends(t, "srv/echo"),
		"secret.yaml":   tlsSecretManifestIn("srv", "srv-tls", testutil.SelfSigned("srv.example.com")),
		"proxy.yaml":    serverProxy,
		"refused.yaml":  refusedProxies,
	})
	const host = "srv.example.com"
	st := proxyStatuses(t, e.dir, dag.Options{})
	wantStatus(t, st, "srv/server", dag.StatusValid, "")
	wantStatus(t, st, "srv/hop", dag.StatusInvalid, "HeaderPolicyInvalid",
		"spec.routes[0].responseHeadersPolicy.set[0].name: Connection is a hop-by-hop header")
	wantStatus(t, st, "srv/split", dag.StatusInvalid, "HeaderPolicyInvalid",
		"the services of spec.routes[0] change the Server response header differently (services[0] removes it, services[1] leaves it)")

	const none = "(none)"
	server := func(r result) string {
		if vs, ok := r.header["Server"]; ok {
			return vs[0]
		}
		return none
	}
	for _, tc := range []struct {
		path, server string
		status       int
	}{
		{"/default", "portico", 200}, // the backend's app/1.0 replaced
		{"/removed", none, 200},
		{"/named", "edge-1", 200},
		{"/service-named", "app", 200},
		{"/split-removed", none, 200},
		{"/teapot", none, 418},
		{"/moved", "redirector", 302},
	} {
		for _, tls := range []bool{false, true} {
			var r result
			if tls {
				r = e.getTLS(host, tc.path, true)
			} else {
				r = e.get(host, tc.path)
			}
			if r.status != tc.status || server(r) != tc.server {
				t.Errorf("%s (TLS %t): status %d, Server %s; want %d, %s", tc.path, tls, r.status, server(r), tc.status, tc.server)
			}
		}
	}

	// Headers the data plane leaves to routes: Server and X-Forwarded-For on the way up,
	// Date on the way down.
	r := e.get(host, "/others", "X-Forwarded-For", "203.0.113.7")
	if got := r.echo.Headers["Server"]; len(got) != 1 || got[0] != "client-side" {
		t.Errorf("the backend saw Server %q, want client-side", got)
	}
	if got, ok := r.echo.Headers["X-Forwarded-For"]; ok {
		t.Errorf("the backend saw the removed X-Forwarded-For %q", got)
	}
	if got := r.header.Values("Date"); len(got) != 1 || got[0] != "Fri, 01 Jan 2038 00:00:00 GMT" {
		t.Errorf("the client saw Date %q, want the route's", got)
	}
	if server(r) != "portico" || r.header.Get("X-Request-Id") == "" {
		t.Errorf("Server %s, X-Request-Id %q: want portico and the request's id", server(r), r.header.Get("X-Request-Id"))
	}

	// A request that matches no route gets no route's headers: no Server.
	if r := e.get("unknown.example.com", "/"); r.status != 404 || server(r) != none {
		t.Errorf("unknown host: status %d, Server %s; want 404 without Server", r.status, server(r))
	}
	// The refused objects' hosts are not served; nothing else changed.
	for _, h := range []string{"hop.example.com", "split.example.com"} {
		if r := e.get(h, "/"); r.status != 404 {
			t.Errorf("%s (invalid): status %d, want 404", h, r.status)
		}
	}
}
