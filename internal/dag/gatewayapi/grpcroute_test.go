package gatewayapi

import (
	"strings"
	"testing"
)

// grpcRoute is a GRPCRoute named name with the given spec lines (indented two spaces,
// under spec:), created at created.
func grpcRoute(name, created, spec string) string {
	return `
---
kind: GRPCRoute
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: ` + name + `, namespace: default, creationTimestamp: "` + created + `"}
spec:
` + spec
}

const grpcOK = "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"

func TestGRPCRoute(t *testing.T) {
	toGRPC := "default/web/80/" + h2cSuffix(t) + "*1"
	runCases(t, []graphCase{{
		name: "grpcroute-method-matches",
		objects: base + httpGateway + grpcRoute("r", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  rules:
  - matches:
    - method: {service: helloworld.Greeter, method: SayHello}
    - method: {service: helloworld.Greeter}
      headers: [{name: X-Tenant, value: a}, {name: x-tenant, value: ignored}]
    - method: {method: Check}
    - method: {type: RegularExpression, service: "grpc\\.health\\..*", method: "Wa.*"}
    backendRefs: [{name: web, port: 80}]
  - backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1), "GRPCRoute default/r parent gw: " + grpcOK},
		// Every call is a POST; the method is the path; the service's port speaks h2c.
		routes: []string{
			"default/gw :80 http *: exact:/helloworld.Greeter/SayHello [:method=POST] -> " + toGRPC,
			"default/gw :80 http *: stringprefix:/helloworld.Greeter/ [x-tenant=a :method=POST] -> " + toGRPC,
			"default/gw :80 http *: regex:/[^/]+/Check [:method=POST] -> " + toGRPC,
			`default/gw :80 http *: regex:/(?:grpc\.health\..*)/(?:Wa.*) [:method=POST] -> ` + toGRPC,
			"default/gw :80 http *: prefix:/ [:method=POST] -> " + toGRPC,
		},
	}, {
		name: "grpcroute-invalid-matches",
		objects: base + httpGateway + grpcRoute("r", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  rules: [{matches: [{method: {service: "bad/service", method: M}}], backendRefs: [{name: web, port: 80}]}]`) +
			grpcRoute("empty", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  rules: [{matches: [{method: {type: Exact}}], backendRefs: [{name: web, port: 80}]}]`) +
			grpcRoute("regex", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  rules: [{matches: [{method: {type: RegularExpression, service: "`+strings.Repeat("(foo|bar)", 20)+`"}}], backendRefs: [{name: web, port: 80}]}]`) +
			// Each half within the limit, the path they make is not; nor a long method
			// name without a service (a regular expression too).
			grpcRoute("halves", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  rules: [{matches: [{method: {type: RegularExpression, service: "`+strings.Repeat("(foo|bar)", 6)+`", method: "`+strings.Repeat("(foo|bar)", 6)+`"}}], backendRefs: [{name: web, port: 80}]}]`) +
			grpcRoute("long", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  rules: [{matches: [{method: {method: `+strings.Repeat("Get", 40)+`}}], backendRefs: [{name: web, port: 80}]}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 0),
			"GRPCRoute default/r parent gw: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs",
			"GRPCRoute default/empty parent gw: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs",
			"GRPCRoute default/regex parent gw: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs",
			"GRPCRoute default/halves parent gw: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs",
			"GRPCRoute default/long parent gw: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs"},
		routes: []string{"default/gw :80 http *: no routes"},
	}, {
		name: "grpcroute-filters",
		objects: base + httpGateway + grpcRoute("r", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  rules:
  - filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-a, value: "1"}]}}]
    backendRefs: [{name: web, port: 80}]`) + grpcRoute("mirror", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  rules:
  - filters: [{type: RequestMirror, requestMirror: {backendRef: {name: web, port: 80}}}]
    backendRefs: [{name: web, port: 80}]`) + grpcRoute("ext", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  hostnames: [ext.example.com]
  rules:
  - filters: [{type: ExtensionRef, extensionRef: {group: example.com, kind: Thing, name: t}}]
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 2),
			"GRPCRoute default/r parent gw: " + grpcOK,
			"GRPCRoute default/mirror parent gw: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs",
			"GRPCRoute default/ext parent gw: Accepted=True/Accepted ResolvedRefs=False/InvalidKind"},
		routes: []string{
			"default/gw :80 http *: prefix:/ [:method=POST] -> " + toGRPC,
			"default/gw :80 http ext.example.com: prefix:/ [:method=POST] -> status 500",
		},
	}, {
		name: "grpcroute-backends",
		objects: base + httpGateway + grpcRoute("r", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  rules:
  - backendRefs: [{name: web, port: 80, weight: 3}, {name: missing, port: 80}]
  - matches: [{method: {service: ws.Svc}}]
    backendRefs: [{name: ws, port: 80}]`) + `
---
kind: Service
apiVersion: v1
metadata: {name: ws}
spec: {ports: [{port: 80, appProtocol: kubernetes.io/ws}]}`,
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1),
			"GRPCRoute default/r parent gw: Accepted=True/Accepted ResolvedRefs=False/BackendNotFound"},
		routes: []string{
			"default/gw :80 http *: prefix:/ [:method=POST] -> default/web/80/" + h2cSuffix(t) + "*3,500*1",
			"default/gw :80 http *: stringprefix:/ws.Svc/ [:method=POST] -> status 500",
		},
	}, {
		name: "grpcroute-listener-kinds",
		objects: base + gatewayHead + `
  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {kinds: [{kind: HTTPRoute}]}}
  - {name: grpc, protocol: HTTP, port: 8080, allowedRoutes: {kinds: [{kind: GRPCRoute}]}}
` + grpcRoute("r", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw, sectionName: http}, {name: gw, sectionName: grpc}]
  rules: [{backendRefs: [{name: web, port: 80}]}]`),
		statuses: []string{acceptedClass, acceptedGateway,
			"Gateway default/gw listener http: attached=0 kinds=HTTPRoute Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=True/Programmed",
			"Gateway default/gw listener grpc: attached=1 kinds=GRPCRoute Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=True/Programmed",
			"GRPCRoute default/r parent gw/http: Accepted=False/NotAllowedByListeners ResolvedRefs=True/ResolvedRefs",
			"GRPCRoute default/r parent gw/grpc: " + grpcOK},
		routes: []string{
			"default/gw :80 http *: no routes",
			"default/gw :8080 http *: prefix:/ [:method=POST] -> " + toGRPC,
		},
	}, {
		name: "grpcroute-httproute-hostname-conflict",
		objects: base + httpGateway + routeCreated("web", "default", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  hostnames: [api.example.com, www.example.com]
  rules: [{backendRefs: [{name: web, port: 80}]}]`) + grpcRoute("wild", "2026-01-02T00:00:00Z", `
  parentRefs: [{name: gw}]
  hostnames: ["*.example.com"]
  rules: [{backendRefs: [{name: web, port: 80}]}]`) + grpcRoute("other", "2025-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  hostnames: [grpc.example.org]
  rules: [{backendRefs: [{name: web, port: 80}]}]`) + grpcRoute("exact", "2026-01-03T00:00:00Z", `
  parentRefs: [{name: gw}]
  hostnames: [api.example.com]
  rules: [{backendRefs: [{name: web, port: 80}]}]`) + routeCreated("late", "default", "2026-01-04T00:00:00Z", `
  parentRefs: [{name: gw}]
  hostnames: ["*.example.org"]
  rules: [{backendRefs: [{name: web, port: 80}]}]`),
		// The older HTTPRoute keeps api and www.example.com: the younger GRPCRoute's
		// *.example.com takes requests for them, so it is refused; another hostname is
		// no conflict.
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 2),
			"HTTPRoute default/web parent gw: " + routeOK,
			"GRPCRoute default/wild parent gw: Accepted=False/HostnameConflict ResolvedRefs=True/ResolvedRefs",
			"GRPCRoute default/other parent gw: " + grpcOK,
			"GRPCRoute default/exact parent gw: Accepted=False/HostnameConflict ResolvedRefs=True/ResolvedRefs",
			"HTTPRoute default/late parent gw: Accepted=False/HostnameConflict ResolvedRefs=True/ResolvedRefs"},
		routes: []string{
			"default/gw :80 http *: no routes",
			"default/gw :80 http api.example.com: prefix:/ [] -> " + toWeb,
			"default/gw :80 http www.example.com: prefix:/ [] -> " + toWeb,
			"default/gw :80 http grpc.example.org: prefix:/ [:method=POST] -> " + toGRPC,
		},
	}})
}

// GRPCRoute precedence: more characters of service, then of method, then more header
// matches; then the oldest route, then namespace/name, then rule order. No route has a
// timeout.
func TestGRPCRoutePrecedence(t *testing.T) {
	g := build(t, base+httpGateway+grpcRoute("b", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  rules:
  - backendRefs: [{name: web, port: 80}]
  - matches: [{method: {method: Check}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{method: {service: a.B}, headers: [{name: x, value: "1"}]}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{method: {service: a.B, method: Get}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{method: {service: a.B}}]
    backendRefs: [{name: web, port: 80}]`)+grpcRoute("a", "2026-01-02T00:00:00Z", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{method: {service: a.B, method: Get}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{method: {service: longer.Service}}]
    backendRefs: [{name: web, port: 80}]`))
	var got []string
	for _, r := range g.Gateways[0].Ports[0].HTTP[0].Routes {
		got = append(got, r.Source.Name+" "+r.Path.Value+" "+itoa(len(r.Headers)))
		// Streams last as long as the client wants: no route timeout.
		if r.Timeouts == nil || r.Timeouts.Request == nil || *r.Timeouts.Request != 0 {
			t.Errorf("%s: timeouts %+v, want the request timeout off", r.Path.Value, r.Timeouts)
		}
	}
	want := []string{
		"a /longer.Service/ 1",
		"b /a.B/Get 1", // older than a's
		"a /a.B/Get 1",
		"b /a.B/ 2", // a header match
		"b /a.B/ 1",
		"b /[^/]+/Check 1",
		"b / 1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("order:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
