package dag

import "testing"

// A mirror service gets a copy of the route's requests and none of its share; a route
// has at most one, and a service that is not a mirror to answer.
func TestHTTPProxyMirrorServices(t *testing.T) {
	doc := func(services string) *Graph {
		return build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: m.example.com}
  routes:
  - services: `+services+`
`), svc("default", "web", "http:80"), svc("default", "shadow", "http:80"), svc("default", "other", "http:80"))
	}
	g := doc(`[{name: web, port: 80, weight: 10}, {name: shadow, port: 80, mirror: true}]`)
	wantClean(t, g, "default", "root")
	var r *Route
	for _, vh := range g.HTTP {
		if vh.Name == "m.example.com" {
			r = vh.Routes[0]
		}
	}
	if r == nil || len(r.Clusters) != 1 || r.Clusters[0].Cluster.Service.Name != "web" || len(r.Mirrors) != 1 || r.Mirrors[0].Cluster.Service.Name != "shadow" || r.Mirrors[0].Denominator != 0 {
		t.Fatalf("route = %+v", r)
	}
	wantInvalid(t, doc(`[{name: web, port: 80}, {name: shadow, port: 80, mirror: true}, {name: other, port: 80, mirror: true}]`),
		"default", "root", problemService, "OnlyOneMirror", "spec.routes[0].services[2].mirror", "at most one mirror")
	wantInvalid(t, doc(`[{name: shadow, port: 80, mirror: true}]`), "default", "root", problemService, "NoServices", "every service is a mirror")
}

// cookieRewritePolicies reach the route and its clusters; a rule that cannot be written
// into a Set-Cookie header makes the object invalid.
func TestHTTPProxyCookieRewrites(t *testing.T) {
	doc := func(route, service string) *Graph {
		return build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: c.example.com}
  routes:
  - cookieRewritePolicies: `+route+`
    services: [{name: web, port: 80, cookieRewritePolicies: `+service+`}]
`), svc("default", "web", "http:80"))
	}
	g := doc(`[{name: session, pathRewrite: {value: /app}, secure: true}]`, `[{name: prefs, sameSite: Lax}]`)
	wantClean(t, g, "default", "root")
	r := g.HTTP[0].Routes[0]
	if len(r.CookieRewrites) != 1 || r.CookieRewrites[0].Path != "/app" || *r.CookieRewrites[0].Secure != true ||
		len(r.Clusters[0].CookieRewrites) != 1 || r.Clusters[0].CookieRewrites[0].SameSite != "Lax" {
		t.Fatalf("route %+v, cluster %+v", r.CookieRewrites, r.Clusters[0].CookieRewrites)
	}
	wantInvalid(t, doc(`[{name: "a b", secure: true}]`, `[]`), "default", "root", problemRoute, "CookieRewriteInvalid", "must be a cookie name")
	wantInvalid(t, doc(`[{name: s, secure: true}, {name: s, secure: false}]`, `[]`), "default", "root", problemRoute, "CookieRewriteInvalid", "rewritten twice")
	wantInvalid(t, doc(`[]`, `[{name: s, pathRewrite: {value: "/a;b"}}]`), "default", "root", problemRoute, "CookieRewriteInvalid", "spec.routes[0].services[0].cookieRewritePolicies[0].pathRewrite.value")
	wantInvalid(t, doc(`[{name: s, sameSite: Sometimes}]`, `[]`), "default", "root", problemRoute, "CookieRewriteInvalid", "must be Strict, Lax or None")
}

// internalRedirectPolicy reaches the route with Envoy's defaults filled in; a status
// that is not a redirect, or an unknown cross-scheme mode, makes the object invalid.
func TestHTTPProxyInternalRedirect(t *testing.T) {
	doc := func(policy string) *Graph {
		return build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: r.example.com}
  routes:
  - internalRedirectPolicy: `+policy+`
    services: [{name: web, port: 80}]
`), svc("default", "web", "http:80"))
	}
	g := doc(`{}`)
	wantClean(t, g, "default", "root")
	if ir := g.HTTP[0].Routes[0].InternalRedirect; ir == nil || ir.MaxRedirects != 1 || len(ir.Codes) != 1 || ir.Codes[0] != 302 || ir.CrossScheme != "Never" {
		t.Fatalf("defaults: %+v", ir)
	}
	g = doc(`{maxInternalRedirects: 3, redirectResponseCodes: [301, 307, 301], allowCrossSchemeRedirect: SafeOnly, denyRepeatedRouteRedirect: true}`)
	if ir := g.HTTP[0].Routes[0].InternalRedirect; ir == nil || ir.MaxRedirects != 3 || len(ir.Codes) != 2 || ir.CrossScheme != "SafeOnly" || !ir.DenyRepeatedRoute {
		t.Fatalf("set: %+v", ir)
	}
	wantInvalid(t, doc(`{redirectResponseCodes: [200]}`), "default", "root", problemRoute, "InternalRedirectInvalid", "redirectResponseCodes[0] 200")
	wantInvalid(t, doc(`{allowCrossSchemeRedirect: Sometimes}`), "default", "root", problemRoute, "InternalRedirectInvalid", "allowCrossSchemeRedirect")
}

// slowStartPolicy gives the service's cluster its ramp (Envoy's defaults filled in);
// a bad window or aggression, or a load balancer that does not weigh endpoints, makes
// the object invalid.
func TestHTTPProxySlowStart(t *testing.T) {
	doc := func(route, policy string) *Graph {
		return build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: s.example.com}
  routes:
  - services: [{name: web, port: 80, slowStartPolicy: `+policy+`}]`+route+`
`), svc("default", "web", "http:80"))
	}
	g := doc("", `{window: 30s}`)
	wantClean(t, g, "default", "root")
	if ss := g.HTTP[0].Routes[0].Clusters[0].Cluster.SlowStart; ss == nil || ss.Window != 30e9 || ss.Aggression != 1 || ss.MinWeightPercent != 10 {
		t.Fatalf("slow start = %+v", ss)
	}
	wantInvalid(t, doc("", `{window: soon}`), "default", "root", problemService, "SlowStartInvalid", "window \"soon\"")
	wantInvalid(t, doc("", `{window: 30s, aggression: "0"}`), "default", "root", problemService, "SlowStartInvalid", "aggression \"0\"")
	wantInvalid(t, doc("\n    loadBalancerPolicy: {strategy: Random}", `{window: 30s}`), "default", "root", problemService, "SlowStartInvalid", "RoundRobin or WeightedLeastRequest")
}
