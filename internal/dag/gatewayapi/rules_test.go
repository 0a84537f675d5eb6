package gatewayapi

import (
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// refused is the status of route r of namespace default refused by parent gw.
func refused(reason string) string {
	return "HTTPRoute default/r parent gw: Accepted=False/" + reason + " ResolvedRefs=True/ResolvedRefs"
}

// The rules of the spec that the data planes cannot see for themselves: how values are
// normalized, which are refused, and what invalid backends' requests get.
func TestHTTPRouteSpecRules(t *testing.T) {
	long := "/" + strings.Repeat("(foo|bar)", 20)
	runCases(t, []graphCase{{
		name: "httproute-prefix-trailing-slash",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /foo/}}, {path: {value: /bar//}}, {path: {value: //}}]
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1), "HTTPRoute default/r parent gw: " + routeOK},
		// "/foo/" matches "/foo" and "/foo/x", as "/foo" does.
		routes: []string{
			"default/gw :80 http *: prefix:/foo [] -> " + toWeb,
			"default/gw :80 http *: prefix:/bar [] -> " + toWeb,
			"default/gw :80 http *: prefix:/ [] -> " + toWeb,
		},
	}, {
		name: "httproute-empty-replace-prefix-match",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /strip}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: ""}}}]
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1), "HTTPRoute default/r parent gw: " + routeOK},
		routes: []string{
			"default/gw :80 http *: stringprefix:/strip/ [] -> " + toWeb + " prefix-rewrite=/",
			"default/gw :80 http *: prefix:/strip [] -> " + toWeb + " prefix-rewrite=/",
		},
	}, {
		name: "httproute-query-duplicates",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{queryParams: [{name: q, value: "1"}, {name: q, value: "2"}, {name: Q, value: "3"}]}]
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1), "HTTPRoute default/r parent gw: " + routeOK},
		// Query parameter names are case-sensitive: Q is another parameter.
		routes: []string{"default/gw :80 http *: prefix:/ [?q=1 ?Q=3] -> " + toWeb},
	}, {
		name: "httproute-header-modifier-host",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: Host, value: other.example.com}]}}]
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 0), refused("UnsupportedValue")},
		routes:   []string{"default/gw :80 http *: no routes"},
	}, {
		name: "httproute-header-modifier-pseudo-header",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {remove: [":status"]}}]
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 0), refused("UnsupportedValue")},
		routes:   []string{"default/gw :80 http *: no routes"},
	}, {
		name: "httproute-header-modifier-two-actions",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-A, value: "1"}], remove: [x-a]}}]
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 0), refused("UnsupportedValue")},
		routes:   []string{"default/gw :80 http *: no routes"},
	}, {
		name: "httproute-regex-too-complex",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: RegularExpression, value: "`+long+`"}}]
    backendRefs: [{name: web, port: 80}]`) + route("h", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{headers: [{name: x, type: RegularExpression, value: "`+long+`"}]}]
    backendRefs: [{name: web, port: 80}]`) + route("q", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{queryParams: [{name: x, type: RegularExpression, value: "`+long+`"}]}]
    backendRefs: [{name: web, port: 80}]`) + route("ok", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: RegularExpression, value: "/(a|b)+"}}]
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1), refused("UnsupportedValue"),
			"HTTPRoute default/h parent gw: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs",
			"HTTPRoute default/q parent gw: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs",
			"HTTPRoute default/ok parent gw: " + routeOK},
		routes: []string{"default/gw :80 http *: regex:/(a|b)+ [] -> " + toWeb},
	}, {
		name: "httproute-backend-partially-invalid",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /half}}]
    backendRefs: [{name: web, port: 80}, {name: missing, port: 80}]
  - matches: [{path: {value: /quarter}}]
    backendRefs: [{name: web, port: 80, weight: 3}, {name: web, namespace: other, port: 80}, {name: missing, port: 80, weight: 0}]
  - matches: [{path: {value: /filter}}]
    backendRefs:
    - {name: web, port: 80, weight: 2}
    - {name: web, port: 80, weight: 5, filters: [{type: RequestMirror, requestMirror: {backendRef: {name: web, port: 80}}}]}`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1),
			"HTTPRoute default/r parent gw: Accepted=True/Accepted ResolvedRefs=False/BackendNotFound"},
		// The invalid refs' share is answered 500; it never goes to the valid ones.
		routes: []string{
			"default/gw :80 http *: prefix:/half [] -> " + toWeb + ",500*1",
			"default/gw :80 http *: prefix:/quarter [] -> default/web/80*3,500*1",
			"default/gw :80 http *: prefix:/filter [] -> default/web/80*2,500*5",
		},
	}, {
		name: "gateway-allowed-routes-invalid-selector",
		objects: base + gatewayHead + `
  - {name: http, protocol: HTTP, port: 80}
  - name: bad
    protocol: HTTP
    port: 8080
    allowedRoutes: {namespaces: {from: Selector, selector: {matchExpressions: [{key: team, operator: Sideways, values: [a]}]}}}
  - name: none
    protocol: HTTP
    port: 8081
    allowedRoutes: {namespaces: {from: Selector}}
`,
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=True/ListenersNotValid Programmed=True/Programmed",
			listenerOK("http", 0),
			"Gateway default/gw listener bad: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Invalid",
			"Gateway default/gw listener none: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Invalid",
		},
		routes: []string{"default/gw :80 http *: no routes"},
	}})
}

// Header values are literal: a "%" reaches the data planes doubled (Envoy's header
// format), of duplicate names in one list the first counts, and names are canonical.
func TestHTTPRouteHeaderModifierValues(t *testing.T) {
	g := build(t, base+httpGateway+route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{name: x-share, value: "50%"}, {name: X-Share, value: ignored}]
        add: [{name: x-fmt, value: "%REQ(:path)%"}]
    backendRefs: [{name: web, port: 80}]`))
	r := g.Gateways[0].Ports[0].HTTP[0].Routes[0]
	want := dag.HeadersPolicy{Set: []dag.HeaderValue{{Name: "X-Share", Value: "50%%"}}, Add: []dag.HeaderValue{{Name: "X-Fmt", Value: "%%REQ(:path)%%"}}}
	if r.RequestHeaders == nil || !equalHeaders(*r.RequestHeaders, want) {
		t.Errorf("request headers %+v, want %+v", r.RequestHeaders, want)
	}
}

func equalHeaders(a, b dag.HeadersPolicy) bool {
	eq := func(x, y []dag.HeaderValue) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	return eq(a.Set, b.Set) && eq(a.Add, b.Add) && strings.Join(a.Remove, ",") == strings.Join(b.Remove, ",")
}

// Retries on 502, 503 and 504 never bring in Envoy's "gateway-error", which would
// retry resets after the request was sent; and a rule with an invalid backend's share
// translates to a route answering 500 to that fraction of its requests.
func TestHTTPRouteTranslatedActions(t *testing.T) {
	g := build(t, base+httpGateway+route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /retry}}]
    retry: {codes: [502, 503, 504], attempts: 2}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /half}}]
    backendRefs: [{name: web, port: 80}, {name: missing, port: 80}]`))
	res, err := translate.Translate(g, translate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]*routev3.RouteAction{}
	routesOf := map[string][]*routev3.Route{}
	for _, rc := range res.Routes {
		if err := rc.(interface{ ValidateAll() error }).ValidateAll(); err != nil {
			t.Errorf("route configuration: %v", err)
		}
		for _, vh := range rc.(*routev3.RouteConfiguration).GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				actions[r.GetMatch().GetPathSeparatedPrefix()] = r.GetRoute()
				routesOf[r.GetMatch().GetPathSeparatedPrefix()] = append(routesOf[r.GetMatch().GetPathSeparatedPrefix()], r)
			}
		}
	}
	if on := actions["/retry"].GetRetryPolicy().GetRetryOn(); strings.Contains(on, "gateway-error") || !strings.Contains(on, "connect-failure") {
		t.Errorf("/retry retry_on %q: want connection failures and the codes, not gateway-error", on)
	}
	// The share of the invalid ref, before the route to the valid one, same match.
	if len(routesOf["/half"]) != 2 {
		t.Fatalf("/half: %d routes, want the invalid ref's share and the rest", len(routesOf["/half"]))
	}
	share, rest := routesOf["/half"][0], routesOf["/half"][1]
	if got := share.GetMatch().GetRuntimeFraction().GetDefaultValue(); got.GetNumerator() != 500_000 || got.GetDenominator() != typev3.FractionalPercent_MILLION ||
		share.GetDirectResponse().GetStatus() != 500 {
		t.Errorf("/half: first route %v, want half of the requests answered 500", share)
	}
	if rest.GetRoute().GetCluster() != "default/web/80" || rest.GetMatch().GetRuntimeFraction() != nil {
		t.Errorf("/half: second route %v, want the rest sent to default/web/80", rest)
	}
}
