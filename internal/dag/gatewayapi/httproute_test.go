package gatewayapi

import (
	"fmt"
	"testing"
)

// route is an HTTPRoute named name attached to gw with the given spec lines (indented
// two spaces, under spec:).
func route(name, namespace, spec string) string {
	return routeCreated(name, namespace, "2026-01-01T00:00:00Z", spec)
}

// routeCreated is route, created at the time created.
func routeCreated(name, namespace, created, spec string) string {
	return `
---
kind: HTTPRoute
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: ` + name + `, namespace: ` + namespace + `, creationTimestamp: "` + created + `"}
spec:
` + spec
}

const toWeb = "default/web/80*1"

// crossNamespaceRoute sends to Service web of namespace other.
var crossNamespaceRoute = route("r", "default", `
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: web, namespace: other, port: 80}]}]`)

func TestHTTPRouteAttachment(t *testing.T) {
	twoListeners := base + gatewayHead + `
  - {name: foo, protocol: HTTP, port: 80, hostname: foo.example.com}
  - {name: wild, protocol: HTTP, port: 80, hostname: "*.example.com"}
  - {name: alt, protocol: HTTP, port: 8080, allowedRoutes: {namespaces: {from: All}}}
`
	runCases(t, []graphCase{{
		name: "httproute-simple",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: web, port: 80}]}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1), "HTTPRoute default/r parent gw: " + routeOK},
		routes:   []string{"default/gw :80 http *: prefix:/ [] -> " + toWeb},
	}, {
		name: "httproute-other-controller-parent",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: elsewhere}]
  rules: [{backendRefs: [{name: web, port: 80}]}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 0)},
		routes:   []string{"default/gw :80 http *: no routes"},
	}, {
		name: "httproute-section-name-and-port",
		objects: twoListeners + route("r", "default", `
  parentRefs:
  - {name: gw, sectionName: foo}
  - {name: gw, sectionName: nope}
  - {name: gw, port: 8080}
  - {name: gw, sectionName: foo, port: 8080}
  rules: [{backendRefs: [{name: web, port: 80}]}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("foo", 1), listenerOK("wild", 0), listenerOK("alt", 1),
			"HTTPRoute default/r parent gw/foo: " + routeOK,
			"HTTPRoute default/r parent gw/nope: Accepted=False/NoMatchingParent ResolvedRefs=True/ResolvedRefs",
			"HTTPRoute default/r parent gw:8080: " + routeOK,
			"HTTPRoute default/r parent gw/foo:8080: Accepted=False/NoMatchingParent ResolvedRefs=True/ResolvedRefs",
		},
		routes: []string{
			"default/gw :80 http *.example.com: no routes",
			"default/gw :80 http foo.example.com: prefix:/ [] -> " + toWeb,
			"default/gw :8080 http *: prefix:/ [] -> " + toWeb,
		},
	}, {
		name: "httproute-allowed-namespaces",
		objects: twoListeners + route("r", "other", `
  parentRefs: [{name: gw, namespace: default}]
  rules: [{backendRefs: [{name: web, port: 80}]}]`) + route("s", "other", `
  parentRefs: [{name: gw, namespace: default, sectionName: foo}]
  rules: [{backendRefs: [{name: web, port: 80}]}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("foo", 0), listenerOK("wild", 0), listenerOK("alt", 1),
			"HTTPRoute other/r parent gw: " + routeOK,
			"HTTPRoute other/s parent gw/foo: Accepted=False/NotAllowedByListeners ResolvedRefs=True/ResolvedRefs",
		},
		routes: []string{
			"default/gw :80 http *.example.com: no routes",
			"default/gw :80 http foo.example.com: no routes",
			"default/gw :8080 http *: prefix:/ [] -> other/web/80*1",
		},
	}, {
		name: "httproute-namespace-selector",
		objects: base + `
---
kind: Namespace
apiVersion: v1
metadata: {name: other, labels: {team: a}}
---
kind: Namespace
apiVersion: v1
metadata: {name: third, labels: {team: b}}` + gatewayHead + `
  - name: http
    protocol: HTTP
    port: 80
    allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {team: a}}}}
` + route("r", "other", `
  parentRefs: [{name: gw, namespace: default}]
  rules: [{backendRefs: [{name: web, port: 80}]}]`) + route("r", "third", `
  parentRefs: [{name: gw, namespace: default}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1),
			"HTTPRoute other/r parent gw: " + routeOK,
			"HTTPRoute third/r parent gw: Accepted=False/NotAllowedByListeners ResolvedRefs=True/ResolvedRefs",
		},
		routes: []string{"default/gw :80 http *: prefix:/ [] -> other/web/80*1"},
	}, {
		name: "httproute-hostname-intersection",
		objects: twoListeners + route("r", "default", `
  parentRefs: [{name: gw, port: 80}]
  hostnames: ["*.example.com", "bar.example.com", "foo.example.com", "other.org"]
  rules: [{backendRefs: [{name: web, port: 80}]}]`) + route("none", "default", `
  parentRefs: [{name: gw, sectionName: foo}]
  hostnames: [bar.example.com]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("foo", 1), listenerOK("wild", 1), listenerOK("alt", 0),
			"HTTPRoute default/r parent gw:80: " + routeOK,
			"HTTPRoute default/none parent gw/foo: Accepted=False/NoMatchingListenerHostname ResolvedRefs=True/ResolvedRefs",
		},
		// foo.example.com is the foo listener's alone: the wildcard listener's routes
		// never serve it (listener isolation).
		routes: []string{
			"default/gw :80 http *.example.com: prefix:/ [] -> " + toWeb,
			"default/gw :80 http bar.example.com: prefix:/ [] -> " + toWeb,
			"default/gw :80 http foo.example.com: prefix:/ [] -> " + toWeb,
			"default/gw :8080 http *: no routes",
		},
	}, {
		name: "httproute-listener-isolation",
		objects: twoListeners + route("wild", "default", `
  parentRefs: [{name: gw, sectionName: wild}]
  hostnames: [foo.example.com, bar.example.com]
  rules: [{backendRefs: [{name: web, port: 80}]}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("foo", 0), listenerOK("wild", 1), listenerOK("alt", 0),
			"HTTPRoute default/wild parent gw/wild: " + routeOK,
		},
		routes: []string{
			"default/gw :80 http *.example.com: no routes",
			"default/gw :80 http bar.example.com: prefix:/ [] -> " + toWeb,
			"default/gw :80 http foo.example.com: no routes",
			"default/gw :8080 http *: no routes",
		},
	}})
}

func TestHTTPRouteRules(t *testing.T) {
	runCases(t, []graphCase{{
		name: "httproute-matches",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches:
    - path: {type: Exact, value: /exact}
    - path: {type: PathPrefix, value: /dir/}
      headers: [{name: X-Env, value: canary}, {name: x-env, value: ignored}, {name: X-Id, type: RegularExpression, value: "[0-9]+"}]
    - path: {type: RegularExpression, value: "/v[0-9]+/.*"}
      queryParams: [{name: q, value: "1"}]
      method: POST
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1), "HTTPRoute default/r parent gw: " + routeOK},
		routes: []string{
			"default/gw :80 http *: exact:/exact [] -> " + toWeb,
			"default/gw :80 http *: prefix:/dir [x-env=canary x-id~[0-9]+] -> " + toWeb,
			"default/gw :80 http *: regex:/v[0-9]+/.* [:method=POST ?q=1] -> " + toWeb,
		},
	}, {
		name: "httproute-invalid-regex",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: RegularExpression, value: "/(unclosed"}}]
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 0),
			"HTTPRoute default/r parent gw: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs"},
		routes: []string{"default/gw :80 http *: no routes"},
	}, {
		name: "httproute-filters",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /redirect}}]
    filters:
    - type: RequestRedirect
      requestRedirect: {scheme: https, hostname: example.org, statusCode: 308, path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}}
  - matches: [{path: {value: /rewrite}}]
    filters:
    - {type: URLRewrite, urlRewrite: {hostname: backend.internal, path: {type: ReplaceFullPath, replaceFullPath: /full}}}
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-set, value: a}], add: [{name: x-add, value: b}], remove: [x-gone]}
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1), "HTTPRoute default/r parent gw: " + routeOK},
		routes: []string{
			"default/gw :80 http *: prefix:/redirect [] -> redirect 308 https://example.org:443 /new",
			"default/gw :80 http *: prefix:/rewrite [] -> " + toWeb + " path-rewrite=/full",
		},
	}, {
		name: "httproute-replace-prefix-match",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /strip}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /dir/}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /other}}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /moved}}]
    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /new/}}}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1), "HTTPRoute default/r parent gw: " + routeOK},
		// "/strip/x" becomes "/x", never "//x": the paths below the prefix have a
		// route of their own; "/dir/x" becomes "/other/x" and "/dir" "/other".
		routes: []string{
			"default/gw :80 http *: stringprefix:/strip/ [] -> " + toWeb + " prefix-rewrite=/",
			"default/gw :80 http *: prefix:/strip [] -> " + toWeb + " prefix-rewrite=/",
			"default/gw :80 http *: prefix:/dir [] -> " + toWeb + " prefix-rewrite=/other",
			"default/gw :80 http *: stringprefix:/moved/ [] -> redirect 302 ://:80 /new/",
			"default/gw :80 http *: prefix:/moved [] -> redirect 302 ://:80 /new/",
		},
	}, {
		name: "httproute-redirect-listener-port",
		objects: base + gatewayHead + `
  - {name: a, protocol: HTTP, port: 80}
  - {name: b, protocol: HTTP, port: 8080}
` + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /same}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org}}]
  - matches: [{path: {value: /http}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: http}}]`) + route("bad", "default", `
  parentRefs: [{name: gw}]
  rules: [{filters: [{type: RequestRedirect, requestRedirect: {statusCode: 305}}]}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("a", 1), listenerOK("b", 1),
			"HTTPRoute default/r parent gw: " + routeOK,
			"HTTPRoute default/bad parent gw: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs"},
		routes: []string{
			"default/gw :80 http *: prefix:/same [] -> redirect 302 ://example.org:80 ",
			"default/gw :80 http *: prefix:/http [] -> redirect 302 http://:80 ",
			"default/gw :8080 http *: prefix:/same [] -> redirect 302 ://example.org:8080 ",
			"default/gw :8080 http *: prefix:/http [] -> redirect 302 http://:80 ",
		},
	}, {
		name: "httproute-unsupported-filter",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - filters: [{type: ExternalAuth, externalAuth: {protocol: HTTP, backendRef: {name: web, port: 80}}}]
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 0),
			"HTTPRoute default/r parent gw: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs"},
		routes: []string{"default/gw :80 http *: no routes"},
	}, {
		// RequestMirror: every request, a percent, or a fraction of them copied; a
		// mirror whose backend cannot be used is left out, the route still served.
		name: "httproute-request-mirror",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /all}}]
    filters:
    - {type: RequestMirror, requestMirror: {backendRef: {name: web, port: 80}}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: web, port: 80}, percent: 20}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: web, port: 80}, fraction: {numerator: 25, denominator: 50}}}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /missing}}]
    filters:
    - {type: RequestMirror, requestMirror: {backendRef: {name: nope, port: 80}}}
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1),
			"HTTPRoute default/r parent gw: Accepted=True/Accepted ResolvedRefs=False/BackendNotFound"},
		routes: []string{
			"default/gw :80 http *: prefix:/missing [] -> default/web/80*1",
			"default/gw :80 http *: prefix:/all [] -> default/web/80*1 mirror=default/web/80(0/0) mirror=default/web/80(20/100) mirror=default/web/80(25/50)",
		},
	}, {
		name: "httproute-extension-ref",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - filters: [{type: ExtensionRef, extensionRef: {group: example.com, kind: Thing, name: t}}]
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1),
			"HTTPRoute default/r parent gw: Accepted=True/Accepted ResolvedRefs=False/InvalidKind"},
		routes: []string{"default/gw :80 http *: prefix:/ [] -> status 500"},
	}, {
		name: "httproute-prefix-rewrite-needs-prefix-match",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /x}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /y}}}]
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 0),
			"HTTPRoute default/r parent gw: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs"},
		routes: []string{"default/gw :80 http *: no routes"},
	}})
}

func TestHTTPRouteBackends(t *testing.T) {
	runCases(t, []graphCase{{
		name: "httproute-backend-weights",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /split}}]
    backendRefs: [{name: web, port: 80, weight: 3}, {name: h2, port: 81, weight: 0}, {name: h2, port: 81}]
  - matches: [{path: {value: /zero}}]
    backendRefs: [{name: web, port: 80, weight: 0}]
  - matches: [{path: {value: /none}}]`) + `
---
kind: Service
apiVersion: v1
metadata: {name: h2}
spec: {ports: [{port: 81, appProtocol: kubernetes.io/h2c}]}`,
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1), "HTTPRoute default/r parent gw: " + routeOK},
		routes: []string{
			"default/gw :80 http *: prefix:/split [] -> default/web/80*3,default/h2/81/" + h2cSuffix(t) + "*1",
			"default/gw :80 http *: prefix:/none [] -> status 500",
			"default/gw :80 http *: prefix:/zero [] -> status 500",
		},
	}, {
		name: "httproute-backend-not-found",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /a}}]
    backendRefs: [{name: missing, port: 80}]
  - matches: [{path: {value: /b}}]
    backendRefs: [{name: web, port: 80}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1),
			"HTTPRoute default/r parent gw: Accepted=True/Accepted ResolvedRefs=False/BackendNotFound"},
		routes: []string{
			"default/gw :80 http *: prefix:/a [] -> status 500",
			"default/gw :80 http *: prefix:/b [] -> " + toWeb,
		},
	}, {
		name: "httproute-backend-kind",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{group: example.com, kind: Bucket, name: web, port: 80}]}]`),
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1),
			"HTTPRoute default/r parent gw: Accepted=True/Accepted ResolvedRefs=False/InvalidKind"},
		routes: []string{"default/gw :80 http *: prefix:/ [] -> status 500"},
	}, {
		name:    "httproute-backend-cross-namespace",
		objects: base + httpGateway + crossNamespaceRoute,
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1),
			"HTTPRoute default/r parent gw: Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted"},
		routes: []string{"default/gw :80 http *: prefix:/ [] -> status 500"},
	}, {
		name: "referencegrant-backend",
		objects: base + httpGateway + crossNamespaceRoute + `
---
kind: ReferenceGrant
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: g, namespace: other}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: default}]
  to: [{group: "", kind: Service}]`,
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1), "HTTPRoute default/r parent gw: " + routeOK},
		routes:   []string{"default/gw :80 http *: prefix:/ [] -> other/web/80*1"},
	}, {
		name: "referencegrant-wrong-name",
		objects: base + httpGateway + crossNamespaceRoute + `
---
kind: ReferenceGrant
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: g, namespace: other}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: default}]
  to: [{group: "", kind: Service, name: api}]`,
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1),
			"HTTPRoute default/r parent gw: Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted"},
		routes: []string{"default/gw :80 http *: prefix:/ [] -> status 500"},
	}, {
		name: "httproute-backend-unsupported-protocol",
		objects: base + httpGateway + route("r", "default", `
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: grpc, port: 80}]}]`) + `
---
kind: Service
apiVersion: v1
metadata: {name: grpc}
spec: {ports: [{port: 80, appProtocol: example.com/quic}]}`,
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1),
			"HTTPRoute default/r parent gw: Accepted=True/Accepted ResolvedRefs=False/UnsupportedProtocol"},
		routes: []string{"default/gw :80 http *: prefix:/ [] -> status 500"},
	}})
}

// h2cSuffix is the name suffix of an h2c cluster, which dag derives from its policy.
func h2cSuffix(t *testing.T) string {
	g := build(t, base+httpGateway+route("r", "default", `
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: h2, port: 81}]}]`)+`
---
kind: Service
apiVersion: v1
metadata: {name: h2}
spec: {ports: [{port: 81, appProtocol: kubernetes.io/h2c}]}`)
	c := g.Gateways[0].Ports[0].HTTP[0].Routes[0].Clusters[0].Cluster
	if c.Protocol != "h2c" {
		t.Fatalf("appProtocol kubernetes.io/h2c: cluster protocol %q, want h2c", c.Protocol)
	}
	return c.Name[len("default/h2/81/"):]
}

// TestHTTPRouteTLSAppProtocols: a Service port whose appProtocol says it speaks TLS
// is reached over TLS (BackendTLSPolicy, when one targets it, says how to verify it;
// conformance: BackendTLSPolicyInvalidCACertificateRef's Services say HTTPS).
func TestHTTPRouteTLSAppProtocols(t *testing.T) {
	for _, ap := range []string{"HTTPS", "https", "tls", "kubernetes.io/wss"} {
		g := build(t, base+httpGateway+route("r", "default", `
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: secure, port: 443}]}]`)+`
---
kind: Service
apiVersion: v1
metadata: {name: secure}
spec: {ports: [{port: 443, appProtocol: "`+ap+`"}]}`)
		r := g.Gateways[0].Ports[0].HTTP[0].Routes[0]
		if len(r.Clusters) != 1 || r.Clusters[0].Cluster.Protocol != "tls" {
			t.Errorf("appProtocol %s: clusters %v (direct status %d), want one cluster over TLS", ap, r.Clusters, r.DirectStatus)
			continue
		}
		if ws := r.Clusters[0].Cluster; (ap == "kubernetes.io/wss") != r.Websocket {
			t.Errorf("appProtocol %s: cluster %s, websockets %v", ap, ws.Name, r.Websocket)
		}
	}
}

func TestHTTPRouteTimeoutsAndRetry(t *testing.T) {
	g := build(t, base+httpGateway+route("r", "default", `
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /min}}]
    timeouts: {request: 10s, backendRequest: 2s}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /off}}]
    timeouts: {request: 0s, backendRequest: 3s}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /retry}}]
    timeouts: {request: 10s, backendRequest: 2s}
    retry: {codes: [503], attempts: 2}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /noretry}}]
    retry: {codes: [503], attempts: 0}
    backendRefs: [{name: web, port: 80}]`))
	got := map[string]string{}
	for _, r := range g.Gateways[0].Ports[0].HTTP[0].Routes {
		var s string
		if r.Timeouts != nil && r.Timeouts.Request != nil {
			s += "timeout=" + r.Timeouts.Request.String()
		}
		if rp := r.Retry; rp != nil {
			s += fmt.Sprintf(" retries=%d on=%v codes=%v per-try=%s", rp.NumRetries, rp.RetryOn, rp.OnStatusCodes, rp.PerTryTimeout)
		}
		got[r.Path.Value] = s
	}
	want := map[string]string{
		"/min":     "timeout=2s",
		"/off":     "timeout=3s",
		"/retry":   "timeout=10s retries=2 on=[connect-failure refused-stream] codes=[503] per-try=2s",
		"/noretry": "",
	}
	for path, w := range want {
		if got[path] != w {
			t.Errorf("%s: %q, want %q", path, got[path], w)
		}
	}
	g = build(t, base+httpGateway+route("r", "default", `
  parentRefs: [{name: gw}]
  rules: [{retry: {backoff: 1s}, backendRefs: [{name: web, port: 80}]}]`))
	checkLines(t, "statuses", describeStatuses(g), []string{acceptedClass, acceptedGateway, listenerOK("http", 0),
		"HTTPRoute default/r parent gw: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs"})
}
