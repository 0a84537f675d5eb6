package gatewayapi

import (
	"testing"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// TestInvalidValuesStayWithTheirObject feeds values that the API server's schema
// refuses but a manifest in `portico run` may hold: each object says what is wrong,
// the others are served, and the configuration still translates (a value the data
// planes refuse would fail it whole).
func TestInvalidValuesStayWithTheirObject(t *testing.T) {
	objects := base + gatewayHead + `
  - {name: http, protocol: HTTP, port: 80}
  - {name: bad, protocol: HTTP, port: 8080, hostname: "Bad Host"}
` + route("good", "default", `
  parentRefs: [{name: gw, sectionName: http}]
  rules: [{backendRefs: [{name: web, port: 80}]}]`)
	bad := map[string]string{
		"hostname":        `hostnames: ["under_score.example.com"]`,
		"path":            `rules: [{matches: [{path: {type: Exact, value: "no-slash"}}]}]`,
		"header-name":     `rules: [{matches: [{headers: [{name: "bad header", value: x}]}]}]`,
		"header-value":    `rules: [{matches: [{headers: [{name: x-a, value: "a\nb"}]}]}]`,
		"query":           `rules: [{matches: [{queryParams: [{name: "", value: x}]}]}]`,
		"set-header":      `rules: [{filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: ":path", value: /x}]}}]}]`,
		"redirect-host":   `rules: [{filters: [{type: RequestRedirect, requestRedirect: {hostname: "*.example.com"}}]}]`,
		"redirect-scheme": `rules: [{filters: [{type: RequestRedirect, requestRedirect: {scheme: ftp}}]}]`,
		"rewrite-path":    `rules: [{filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplaceFullPath, replaceFullPath: "x"}}}]}]`,
		"rewrite-type":    `rules: [{filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplaceFullPath}}}]}]`,
	}
	want := []string{acceptedClass, "Gateway default/gw: Accepted=True/ListenersNotValid Programmed=True/Programmed", listenerOK("http", 1),
		"Gateway default/gw listener bad: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Invalid",
		"HTTPRoute default/good parent gw/http: " + routeOK}
	for name, spec := range bad {
		objects += route(name, "default", "  parentRefs: [{name: gw, sectionName: http}]\n  "+spec)
		want = append(want, "HTTPRoute default/"+name+" parent gw/http: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs")
	}
	g := build(t, objects)
	checkLines(t, "statuses", describeStatuses(g), want)
	checkLines(t, "data planes", describeGateways(g), []string{"default/gw :80 http *: prefix:/ [] -> " + toWeb})
	if _, err := translate.Translate(g, translate.Options{}); err != nil {
		t.Fatalf("translation failed: %v", err)
	}
}
