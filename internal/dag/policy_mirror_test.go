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
