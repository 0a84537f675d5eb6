package e2e

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/app"
)

// TestGatewayAPIHostKeepsItsPort: a Gateway's listeners choose the host by the Host's
// name, whatever its port, and forward the Host as the client sent it (the conformance
// suite's HTTPRouteListenerPortMatching and HTTPRouteHostnameIntersection), while an
// HTTPProxy on the shared listener still sees its Host without the port.
func TestGatewayAPIHostKeepsItsPort(t *testing.T) {
	t.Parallel()
	local := freeLocalPort(t)
	e := startWith(t, map[string]string{
		"backends.yaml": backends(t, "foo", "specific", "app"),
		"gateway.yaml": `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: portico
  listeners:
  - {name: foo, port: 8090, protocol: HTTP, hostname: foo.com}
  - {name: bar, port: 8090, protocol: HTTP, hostname: bar.com}
  - {name: any, port: 8090, protocol: HTTP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: foo}
spec:
  parentRefs: [{name: gw, sectionName: foo}]
  rules:
  - backendRefs: [{name: foo, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /secure}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: https}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: specific}
spec:
  parentRefs: [{name: gw, sectionName: any}]
  hostnames: [very.specific.com]
  rules: [{backendRefs: [{name: specific, port: 80}]}]
`,
		"httpproxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: app}
spec:
  virtualhost: {fqdn: app.example.com}
  routes: [{services: [{name: app, port: 80}]}]
`,
	}, app.RunOptions{GatewayPortOffset: local - 8090})
	gateway := "127.0.0.1:" + strconv.Itoa(local)

	e.eventually(10*time.Second, "the Gateway's listener to serve foo.com", func() bool {
		r, err := fetch(hostRequest(t, gateway, "foo.com", "/"), e.client)
		return err == nil && r.service() == "foo"
	})
	for _, tc := range []struct {
		addr, host string
		status     int
		service    string
		sawHost    string
	}{
		{gateway, "foo.com:8090", 200, "foo", "foo.com:8090"},
		{gateway, "foo.com", 200, "foo", "foo.com"},
		{gateway, "very.specific.com:1234", 200, "specific", "very.specific.com:1234"},
		// bar.com is its own listener's, which no route attaches to.
		{gateway, "bar.com:8090", 404, "", ""},
		{e.httpAddr(), "app.example.com:8080", 200, "app", "app.example.com"},
	} {
		r := e.do(hostRequest(t, tc.addr, tc.host, "/"), e.client)
		if r.status != tc.status || r.service() != tc.service || r.echo.Host != tc.sawHost {
			t.Errorf("Host %s: %d from %q, which saw Host %q; want %d from %q, which sees %q",
				tc.host, r.status, r.service(), r.echo.Host, tc.status, tc.service, tc.sawHost)
		}
	}
	// A redirect to https without a port goes to 443, not to the port the client sent.
	r := e.do(hostRequest(t, gateway, "foo.com:8090", "/secure/x"), e.client)
	if want := "https://foo.com:443/secure/x"; r.status != http.StatusFound || r.header.Get("Location") != want {
		t.Errorf("/secure/x: %d Location %q, want 302 %q", r.status, r.header.Get("Location"), want)
	}
}

// hostRequest is a GET of http://addr<path> with Host host.
func hostRequest(t *testing.T, addr, host, path string) *http.Request {
	t.Helper()
	req := mustRequest(t, "http://"+addr+path)
	req.Host = host
	return req
}
