package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// pathRule is one path of an Ingress rule in a table row.
type pathRule struct{ pathType, path, service string }

func ingressManifest(name, host string, paths []pathRule, defaultService string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: %s}\nspec:\n", name)
	if defaultService != "" {
		fmt.Fprintf(&b, "  defaultBackend: {service: {name: %s, port: {number: 80}}}\n", defaultService)
	}
	fmt.Fprintf(&b, "  rules:\n  - host: %s\n    http:\n      paths:\n", host)
	for _, p := range paths {
		fmt.Fprintf(&b, "      - {path: %q, pathType: %s, backend: {service: {name: %s, port: {name: http}}}}\n", p.path, p.pathType, p.service)
	}
	return b.String()
}

// TestPathMatchingTable is every row of seed 000's "Examples" table, with real requests.
// A row's "No" means the Ingress's default backend answers, as the seed says.
func TestPathMatchingTable(t *testing.T) {
	rows := []struct {
		name     string
		paths    []pathRule
		requests map[string]string // request path → service expected ("fallback" = no match)
	}{
		{"Prefix / matches all paths", []pathRule{{"Prefix", "/", "p0"}},
			map[string]string{"/": "p0", "/foo": "p0", "/foo/bar/": "p0"}},
		{"Exact /foo matches /foo", []pathRule{{"Exact", "/foo", "p0"}}, map[string]string{"/foo": "p0"}},
		{"Exact /foo does not match /bar", []pathRule{{"Exact", "/foo", "p0"}}, map[string]string{"/bar": "fallback"}},
		{"Exact /foo does not match /foo/", []pathRule{{"Exact", "/foo", "p0"}}, map[string]string{"/foo/": "fallback"}},
		{"Exact /foo/ does not match /foo", []pathRule{{"Exact", "/foo/", "p0"}}, map[string]string{"/foo": "fallback", "/foo/": "p0"}},
		{"Prefix /foo matches /foo and /foo/", []pathRule{{"Prefix", "/foo", "p0"}}, map[string]string{"/foo": "p0", "/foo/": "p0"}},
		{"Prefix /foo/ matches /foo and /foo/", []pathRule{{"Prefix", "/foo/", "p0"}}, map[string]string{"/foo": "p0", "/foo/": "p0"}},
		{"Prefix /aaa/bb does not match /aaa/bbb", []pathRule{{"Prefix", "/aaa/bb", "p0"}}, map[string]string{"/aaa/bbb": "fallback"}},
		{"Prefix /aaa/bbb matches /aaa/bbb", []pathRule{{"Prefix", "/aaa/bbb", "p0"}}, map[string]string{"/aaa/bbb": "p0"}},
		{"Prefix /aaa/bbb/ ignores trailing slash", []pathRule{{"Prefix", "/aaa/bbb/", "p0"}}, map[string]string{"/aaa/bbb": "p0"}},
		{"Prefix /aaa/bbb matches trailing slash", []pathRule{{"Prefix", "/aaa/bbb", "p0"}}, map[string]string{"/aaa/bbb/": "p0"}},
		{"Prefix /aaa/bbb matches subpath", []pathRule{{"Prefix", "/aaa/bbb", "p0"}}, map[string]string{"/aaa/bbb/ccc": "p0"}},
		{"Prefix /aaa/bbb does not match string prefix", []pathRule{{"Prefix", "/aaa/bbb", "p0"}}, map[string]string{"/aaa/bbbxyz": "fallback"}},
		{"Prefix /, /aaa: /aaa/ccc matches /aaa", []pathRule{{"Prefix", "/", "p0"}, {"Prefix", "/aaa", "p1"}}, map[string]string{"/aaa/ccc": "p1"}},
		{"Prefix /, /aaa, /aaa/bbb: /aaa/bbb matches /aaa/bbb", []pathRule{{"Prefix", "/", "p0"}, {"Prefix", "/aaa", "p1"}, {"Prefix", "/aaa/bbb", "p2"}}, map[string]string{"/aaa/bbb": "p2"}},
		{"Prefix /, /aaa, /aaa/bbb: /ccc matches /", []pathRule{{"Prefix", "/", "p0"}, {"Prefix", "/aaa", "p1"}, {"Prefix", "/aaa/bbb", "p2"}}, map[string]string{"/ccc": "p0"}},
		{"Prefix /aaa: /ccc uses default backend", []pathRule{{"Prefix", "/aaa", "p0"}}, map[string]string{"/ccc": "fallback"}},
		{"Mixed /foo Prefix and Exact: prefers Exact", []pathRule{{"Prefix", "/foo", "p1"}, {"Exact", "/foo", "p0"}}, map[string]string{"/foo": "p0", "/foo/x": "p1"}},
		// Beyond the table: matching is case sensitive, and the query string is not part of the path.
		{"case sensitive", []pathRule{{"Prefix", "/Foo", "p0"}}, map[string]string{"/Foo": "p0", "/foo": "fallback"}},
		{"query excluded", []pathRule{{"Exact", "/foo", "p0"}}, map[string]string{"/foo?x=/bar": "p0"}},
	}
	files := map[string]string{"backends.yaml": backends(t, "p0", "p1", "p2", "fallback")}
	for i, row := range rows {
		files[fmt.Sprintf("row%02d.yaml", i)] = ingressManifest(fmt.Sprintf("row%02d", i), fmt.Sprintf("row%02d.example.com", i), row.paths, "fallback")
	}
	e := start(t, files)
	for i, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			host := fmt.Sprintf("row%02d.example.com", i)
			for path, want := range row.requests {
				r := e.get(host, path)
				if r.status != 200 || r.service() != want {
					t.Errorf("GET %s%s: status %d from %q, want 200 from %q", host, path, r.status, r.service(), want)
				}
			}
		})
	}
}

// TestHostnameMatching covers seed 000's hostname examples: a wildcard matches exactly one
// label; requests for hosts no rule matches go to the default backend.
func TestHostnameMatching(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "wild", "exact", "deeper", "fallback"),
		"ingress.yaml": `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: hosts}
spec:
  defaultBackend: {service: {name: fallback, port: {number: 80}}}
  rules:
  - host: "*.foo.com"
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: wild, port: {number: 80}}}}]}
  - host: "precise.foo.com"
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: exact, port: {number: 80}}}}]}
  - host: "*.b.foo.com"
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: deeper, port: {number: 80}}}}]}
`,
	})
	for host, want := range map[string]string{
		"bar.foo.com":         "wild",     // shares the suffix foo.com
		"BAR.Foo.com":         "wild",     // host names are case-insensitive
		"bar.foo.com:8080":    "wild",     // the port is not part of the host
		"aaa.bbb.foo.com":     "fallback", // the wildcard matches a single label only
		"foo.com":             "fallback", // the wildcard must match one label
		"precise.foo.com":     "exact",    // a precise host wins over a wildcard
		"x.b.foo.com":         "deeper",
		"y.x.b.foo.com":       "fallback",
		"unknown.example.org": "fallback",
	} {
		r := e.get(host, "/")
		if r.status != 200 || r.service() != want {
			t.Errorf("Host %s: status %d from %q, want %q", host, r.status, r.service(), want)
		}
	}
}

func TestDefaultBackendAndNoRoute(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "api", "fallback"),
		"a.yaml": `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: a}
spec:
  rules:
  - host: api.example.com
    http: {paths: [{path: /v1, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}]}
`,
	})
	if r := e.get("api.example.com", "/v1/users"); r.service() != "api" {
		t.Errorf("GET /v1/users answered by %q (%d)", r.service(), r.status)
	}
	// No default backend anywhere: unmatched path and unknown host are 404 from the proxy.
	for _, hp := range [][2]string{{"api.example.com", "/v2"}, {"other.example.com", "/"}} {
		if r := e.get(hp[0], hp[1]); r.status != 404 || r.service() != "" {
			t.Errorf("GET %s%s: %d from %q, want 404 from the proxy", hp[0], hp[1], r.status, r.service())
		}
	}
	// A v1beta1 Ingress's spec.backend is its default backend.
	e.write("default.yaml", `
apiVersion: networking.k8s.io/v1beta1
kind: Ingress
metadata: {name: fallback}
spec:
  backend: {serviceName: fallback, servicePort: 80}
`)
	e.waitFor("other.example.com", "/", "fallback", 200)
	if r := e.get("api.example.com", "/v1"); r.service() != "api" {
		t.Errorf("rules must still win over the default backend, got %q", r.service())
	}
}

func TestIngressClasses(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "s"),
		"classes.yaml": `
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: mine}
spec: {controller: portico.dev/ingress-controller}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
`,
		"ingresses.yaml": `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: by-field}
spec:
  ingressClassName: mine
  rules: [{host: field.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: other-class}
spec:
  ingressClassName: nginx
  rules: [{host: nginx.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: annotation-wins
  annotations: {kubernetes.io/ingress.class: portico}
spec:
  ingressClassName: nginx
  rules: [{host: annotated.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: no-class}
spec:
  rules: [{host: classless.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]
`,
	})
	for host, want := range map[string]int{"field.test": 200, "annotated.test": 200, "classless.test": 200, "nginx.test": 404} {
		if r := e.get(host, "/"); r.status != want {
			t.Errorf("Host %s: %d, want %d", host, r.status, want)
		}
	}
	// Marking another controller's class as the default makes class-less Ingresses theirs.
	e.write("default-class.yaml", `
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: nginx-default
  annotations: {ingressclass.kubernetes.io/is-default-class: "true"}
spec: {controller: k8s.io/ingress-nginx}
`)
	e.waitFor("classless.test", "/", "", 404)
}

func TestServiceBackends(t *testing.T) {
	named := startEcho(t, "default", "named")
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "numbered"),
		// The Service port "web" (80) targets the endpoints' port "web": the endpoint's own
		// port number is what the proxy connects to.
		"named.yaml": fmt.Sprintf(`
apiVersion: v1
kind: Service
metadata: {name: named}
spec: {ports: [{name: web, port: 80, targetPort: web}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: named-abc, labels: {kubernetes.io/service-name: named}}
addressType: IPv4
ports: [{name: web, port: %s}]
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
`, strings.Split(named, ":")[1]),
		"ingress.yaml": `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: svc}
spec:
  rules:
  - host: svc.test
    http:
      paths:
      - {path: /by-name, pathType: Prefix, backend: {service: {name: named, port: {name: web}}}}
      - {path: /by-number, pathType: Prefix, backend: {service: {name: numbered, port: {number: 80}}}}
      - {path: /missing, pathType: Prefix, backend: {service: {name: ghost, port: {number: 80}}}}
      - {path: /dead, pathType: Prefix, backend: {service: {name: dead, port: {number: 80}}}}
---
apiVersion: v1
kind: Service
metadata: {name: dead}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Endpoints
metadata: {name: dead}
subsets: [{addresses: [{ip: 127.0.0.1}], ports: [{name: http, port: 1}]}]
`,
	})
	if r := e.get("svc.test", "/by-name"); r.status != 200 || r.service() != "named" || r.echo.Endpoint != named {
		t.Errorf("by port name: %d from %q at %q, want named at %s", r.status, r.service(), r.echo.Endpoint, named)
	}
	if r := e.get("svc.test", "/by-number"); r.service() != "numbered" {
		t.Errorf("by port number: %d from %q", r.status, r.service())
	}
	if r := e.get("svc.test", "/missing"); r.status != 503 {
		t.Errorf("missing Service: %d, want 503", r.status)
	}
	if r := e.get("svc.test", "/dead"); r.status != 502 {
		t.Errorf("refused connection: %d, want 502", r.status)
	}
	// The missing Service appears: the same route starts working.
	e.write("ghost.yaml", backends(t, "ghost"))
	e.waitFor("svc.test", "/missing", "ghost", 200)
}

func TestRoundRobinAcrossEndpoints(t *testing.T) {
	a, b := startEcho(t, "default", "rr"), startEcho(t, "default", "rr")
	e := start(t, map[string]string{
		"svc.yaml": serviceManifest("default", "rr", a, b),
		"ing.yaml": ingressManifest("rr", "rr.test", []pathRule{{"Prefix", "/", "rr"}}, ""),
	})
	seen := map[string]int{}
	for i := 0; i < 20; i++ {
		seen[e.get("rr.test", "/").echo.Endpoint]++
	}
	if seen[a] != 10 || seen[b] != 10 {
		t.Errorf("20 requests over 2 endpoints: %v, want 10 each", seen)
	}
}
