package bench

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testutil"
)

// runKind is the API of TestRunScale's applications (PORTICO_KIND): one file per
// application, with its own host, Service and Endpoints, answering on one path.
type runKind struct {
	name string
	// shared writes what the applications share (Gateways, ReferenceGrants), if any.
	shared func(t *testing.T, sc *runScenario, dir string, n int)
	// manifest is application i, in namespace group g (i/10 for the first n, 0 for
	// those added), answering on path.
	manifest func(sc *runScenario, i, g int, path string) string
	// gateways is how many Gateways it has (listeners on ports of their own).
	gateways int
}

// runScenario is one kind's applications, with the backend they send to and the local
// addresses of its Gateways' listeners.
type runScenario struct {
	kind     runKind
	backend  string
	gateways []string
}

func newRunScenario(t *testing.T, kind runKind, backend string) *runScenario {
	sc := &runScenario{kind: kind, backend: backend}
	for range kind.gateways {
		sc.gateways = append(sc.gateways, testutil.FreeAddr(t))
	}
	return sc
}

// addr is where application i is served: run's HTTP address, or its Gateway's.
func (sc *runScenario) addr(p process, i int) string {
	if len(sc.gateways) == 0 {
		return p.httpAddr()
	}
	return sc.gateways[i%len(sc.gateways)]
}

func (sc *runScenario) manifest(i, g int, path string) string {
	return sc.kind.manifest(sc, i, g, path)
}

// backendParts are the host and port of the backend every application sends to.
func (sc *runScenario) backendParts() (string, string) {
	host, port, _ := net.SplitHostPort(sc.backend)
	return host, port
}

// runKinds are the kinds PORTICO_KIND names.
var runKinds = map[string]runKind{
	"ingress":   {name: "ingress", manifest: ingressApp},
	"httpproxy": {name: "httpproxy", manifest: httpProxyApp},
	"httproute": {name: "httproute", manifest: httpRouteApp, shared: gatewaysAndGrants, gateways: gatewayCount},
}

// ingressApp is an Ingress with its own host and one Exact path, its Service and
// Endpoints.
func ingressApp(sc *runScenario, i, _ int, path string) string {
	host, port := sc.backendParts()
	return fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: app-%[1]d, namespace: team-%[2]d}
spec:
  rules:
  - host: %[3]s
    http: {paths: [{path: %[4]s, pathType: Exact, backend: {service: {name: app-%[1]d, port: {name: http}}}}]}
`, i, i/10, appHost(i), path) + serviceManifest(fmt.Sprintf("team-%d", i/10), fmt.Sprintf("app-%d", i), host, port)
}

// httpProxyApp is a root HTTPProxy with its own host and one route on a path prefix,
// its Service and Endpoints.
func httpProxyApp(sc *runScenario, i, g int, path string) string {
	host, port := sc.backendParts()
	return fmt.Sprintf(`apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: app-%[1]d, namespace: team-%[2]d}
spec:
  virtualhost: {fqdn: %[3]s}
  routes: [{conditions: [{prefix: %[4]s}], services: [{name: app-%[1]d, port: 80}]}]
`, i, g, appHost(i), path) + serviceManifest(fmt.Sprintf("team-%d", g), fmt.Sprintf("app-%d", i), host, port)
}

// httpRouteApp is an HTTPRoute with its own host and one PathPrefix match, on Gateway
// i%gatewayCount, sending to a Service of namespace backends-<g> (which a ReferenceGrant
// opens to team-<g>'s HTTPRoutes), with the Service and Endpoints.
func httpRouteApp(sc *runScenario, i, g int, path string) string {
	host, port := sc.backendParts()
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app-%[1]d, namespace: team-%[2]d}
spec:
  parentRefs: [{name: gw-%[3]d, namespace: infra}]
  hostnames: [%[4]s]
  rules:
  - matches: [{path: {type: PathPrefix, value: %[5]s}}]
    backendRefs: [{name: app-%[1]d, namespace: backends-%[2]d, port: 80}]
`, i, g, i%gatewayCount, appHost(i), path) + serviceManifest(fmt.Sprintf("backends-%d", g), fmt.Sprintf("app-%d", i), host, port)
}

// serviceManifest is a Service with port http (80) and its Endpoints: ip:port.
func serviceManifest(ns, name, ip, port string) string {
	return fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: %[2]s, namespace: %[1]s}
subsets:
- addresses: [{ip: %[3]s}]
  ports: [{name: http, port: %[4]s}]
`, ns, name, ip, port)
}

// gatewaysAndGrants writes the GatewayClass and the Gateways (one HTTP listener each,
// on the port of its local address: run serves it there with --gateway-port-offset 0),
// and a ReferenceGrant per namespace group.
func gatewaysAndGrants(t *testing.T, sc *runScenario, dir string, n int) {
	var b strings.Builder
	b.WriteString("apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: portico}\nspec: {controllerName: portico.dev/gateway-controller}\n")
	for g, addr := range sc.gateways {
		_, port, _ := net.SplitHostPort(addr)
		fmt.Fprintf(&b, `---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw-%d, namespace: infra}
spec:
  gatewayClassName: portico
  listeners: [{name: http, port: %s, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]
`, g, port)
	}
	writeOld(t, filepath.Join(dir, "infra/gateways.yaml"), b.String())
	for g := range (n + 9) / 10 {
		writeOld(t, filepath.Join(dir, fmt.Sprintf("backends-%d/grant.yaml", g)), fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: routes, namespace: backends-%[1]d}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: team-%[1]d}]
  to: [{group: "", kind: Service}]
`, g))
	}
}

// writeOld writes a file an hour old, as a directory of manifests usually is.
func writeOld(t *testing.T, path, content string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}
