package gatewayapi

import (
	"fmt"
	"testing"
)

func TestHTTPRoutePrecedence(t *testing.T) {
	old := func(name, ns, created, spec string) string {
		return routeCreated(name, ns, created, "  parentRefs: [{name: gw, namespace: default}]\n"+spec)
	}
	objects := base + gatewayHead + ` [{name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}]
` + old("b-new", "default", "2026-01-02T00:00:00Z", `
  rules:
  - matches: [{path: {value: /}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /api}, headers: [{name: a, value: "1"}]}]
    backendRefs: [{name: web, port: 80}]`) + old("a-old", "other", "2026-01-01T00:00:00Z", `
  rules:
  - matches:
    - path: {value: /api}
    - path: {value: /api}
      method: GET
    - path: {value: /api}
      headers: [{name: a, value: "1"}, {name: b, value: "2"}]
    - path: {value: /api}
      queryParams: [{name: q, value: "1"}]
    - path: {type: Exact, value: /}
    - path: {value: /api/v1}
    backendRefs: [{name: web, port: 80}]`) + old("a-new", "default", "2026-01-02T00:00:00Z", `
  rules:
  - matches: [{path: {value: /}}]
    backendRefs: [{name: web, port: 80}]`)
	const other = "other/web/80*1"
	runCases(t, []graphCase{{
		name:    "httproute-precedence",
		objects: objects,
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 3),
			"HTTPRoute default/a-new parent gw: " + routeOK, "HTTPRoute default/b-new parent gw: " + routeOK, "HTTPRoute other/a-old parent gw: " + routeOK},
		routes: []string{
			"default/gw :80 http *: exact:/ [] -> " + other,
			"default/gw :80 http *: prefix:/api/v1 [] -> " + other,
			"default/gw :80 http *: prefix:/api [:method=GET] -> " + other,
			"default/gw :80 http *: prefix:/api [a=1 b=2] -> " + other,
			"default/gw :80 http *: prefix:/api [a=1] -> " + toWeb,
			"default/gw :80 http *: prefix:/api [?q=1] -> " + other,
			"default/gw :80 http *: prefix:/api [] -> " + other,
			"default/gw :80 http *: prefix:/ [] -> " + toWeb,
			"default/gw :80 http *: prefix:/ [] -> " + toWeb,
		},
	}})
	// The order itself, which checkLines does not look at.
	g := build(t, objects)
	var got []string
	for _, r := range g.Gateways[0].Ports[0].HTTP[0].Routes {
		got = append(got, r.Source.Namespace+"/"+r.Source.Name+" "+r.Path.Value)
	}
	want := []string{"other/a-old /", "other/a-old /api/v1", "other/a-old /api", "other/a-old /api", "default/b-new /api",
		"other/a-old /api", "other/a-old /api", "default/a-new /", "default/b-new /"}
	if len(got) != len(want) {
		t.Fatalf("order: got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order: got %v, want %v", got, want)
		}
	}
}

// TestHostnamePrecedence: on the host abc.example.com of a listener for it, a route
// written for abc.example.com comes before one whose *.example.com only intersects it,
// although the latter is older and has the longer path (conformance:
// HTTPRouteMultipleRoutesAttachmentSameHostnameIntersection); a route without hostnames
// comes last.
func TestHostnamePrecedence(t *testing.T) {
	attached := func(name, created, hostnames, path string) string {
		return routeCreated(name, "default", created, `
  parentRefs: [{name: gw}]`+hostnames+`
  rules: [{matches: [{path: {value: `+path+`}}], backendRefs: [{name: web, port: 80}]}]`)
	}
	objects := base + gatewayHead + ` [{name: http, protocol: HTTP, port: 80, hostname: abc.example.com}]` +
		attached("any-host", "2025-01-01T00:00:00Z", "", "/any/longest/path") +
		attached("wildcard", "2026-01-01T00:00:00Z", "\n  hostnames: [\"*.example.com\"]", "/longer/path") +
		attached("exact", "2026-02-01T00:00:00Z", "\n  hostnames: [abc.example.com, \"*.example.com\"]", "/")
	g := build(t, objects)
	var got []string
	for _, r := range g.Gateways[0].Ports[0].HTTP[0].Routes {
		got = append(got, r.Source.Name+" "+r.Path.Value)
	}
	want := []string{"exact /", "wildcard /longer/path", "any-host /any/longest/path"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("routes of abc.example.com: %v, want %v", got, want)
	}
}
