package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/app"
)

// httpRouteManifest is an HTTPRoute on Gateway gw with one host, each path prefix sent
// to its Service.
func httpRouteManifest(name, host string, paths []pathRule) string {
	out := fmt.Sprintf("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: %s}\nspec:\n  parentRefs: [{name: gw}]\n  hostnames: [%s]\n  rules:\n", name, host)
	for _, p := range paths {
		out += fmt.Sprintf("  - matches: [{path: {type: PathPrefix, value: %s}}]\n    backendRefs: [{name: %s, port: 80}]\n", p.path, p.service)
	}
	return out
}

// TestManyHTTPRoutesOneEdit is TestManyFilesOneEdit with HTTPRoutes on a Gateway: an
// edited route answers with its new rules, the others keep answering, and the edit
// reaches the embedded proxy as the one host it changed (VHDS), not as the Gateway
// port's route configuration holding every host; an added route answers, a removed one
// no longer does.
func TestManyHTTPRoutesOneEdit(t *testing.T) {
	const n = 40
	files := map[string]string{
		"backends.yaml": backends(t, "blue", "green"),
		"gateway.yaml": `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: portico
  listeners: [{name: http, port: 80, protocol: HTTP}]
`,
	}
	for i := range n {
		name := fmt.Sprintf("route-%02d", i)
		files["routes/"+name+".yaml"] = httpRouteManifest(name, name+".test", []pathRule{{"Prefix", "/", "blue"}})
	}
	local := freeLocalPort(t)
	e := startWith(t, files, app.RunOptions{GatewayPortOffset: local - 80})
	get := func(host, path string) result {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(local)+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		r, err := fetch(req, e.client)
		if err != nil {
			return result{} // the Gateway's listener is not open yet
		}
		return r
	}
	waitFor := func(host, path, service string, status int) {
		t.Helper()
		e.eventually(5*time.Second, fmt.Sprintf("%s%s to be answered by %q with %d", host, path, service, status), func() bool {
			r := get(host, path)
			return r.status == status && r.service() == service
		})
	}
	waitFor("route-00.test", "/", "blue", 200)
	answersAll := func(skip string) {
		t.Helper()
		for i := range n {
			name := fmt.Sprintf("route-%02d", i)
			if name == skip {
				continue
			}
			if r := get(name+".test", "/"); r.service() != "blue" {
				t.Errorf("%s.test: %d from %q, want blue", name, r.status, r.service())
			}
		}
	}
	answersAll("")

	updates := func(typ string) float64 {
		v, _ := metricSample(e.adminMetrics(), "portico_proxy_xds_updates_total", map[string]string{"type": typ, "result": "ack"})
		return v
	}
	routesBefore, hostsBefore := updates("RouteConfiguration"), updates("VirtualHost")
	e.write("routes/route-17.yaml", httpRouteManifest("route-17", "route-17.test", []pathRule{{"Prefix", "/", "green"}, {"Prefix", "/new", "blue"}}))
	waitFor("route-17.test", "/", "green", 200)
	if routes, hosts := updates("RouteConfiguration"), updates("VirtualHost"); routes != routesBefore || hosts <= hostsBefore {
		t.Errorf("one HTTPRoute edited: %v route configuration and %v VirtualHost updates, want none and at least one", routes-routesBefore, hosts-hostsBefore)
	}
	if r := get("route-17.test", "/new"); r.service() != "blue" {
		t.Errorf("route-17.test/new: %d from %q, want blue", r.status, r.service())
	}
	answersAll("route-17")

	e.write("routes/added.yaml", httpRouteManifest("added", "added.test", []pathRule{{"Prefix", "/", "green"}}))
	waitFor("added.test", "/", "green", 200)
	e.remove("routes/route-23.yaml")
	waitFor("route-23.test", "/", "", 404)
	if r := get("route-17.test", "/"); r.service() != "green" {
		t.Errorf("route-17.test after another route's removal: %d from %q", r.status, r.service())
	}
}
