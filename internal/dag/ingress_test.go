package dag

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/portico-dev/portico/internal/store"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/testutil"
)

func TestRouteOrderFollowsIngressPrecedence(t *testing.T) {
	g := build(ing(t, `
metadata: {name: web}
spec:
  rules:
  - host: foo.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: root, port: {number: 80}}}}
      - {path: /aaa/, pathType: Prefix, backend: {service: {name: aaa, port: {number: 80}}}}
      - {path: /aaa/bbb, pathType: Prefix, backend: {service: {name: bbb, port: {number: 80}}}}
      - {path: /foo, pathType: Prefix, backend: {service: {name: fooprefix, port: {number: 80}}}}
      - {path: /foo, pathType: Exact, backend: {service: {name: fooexact, port: {number: 80}}}}
      - {path: /impl/, pathType: ImplementationSpecific, backend: {service: {name: impl, port: {number: 80}}}}
      - {path: "", pathType: ImplementationSpecific, backend: {service: {name: empty, port: {number: 80}}}}
`))
	want := []routeView{
		{"Exact /foo", "default/fooexact/80"},
		{"Prefix /aaa/bbb", "default/bbb/80"},
		{"Prefix /impl", "default/impl/80"},
		{"Prefix /aaa", "default/aaa/80"}, // trailing slash ignored
		{"Prefix /foo", "default/fooprefix/80"},
		{"Prefix /", "default/root/80"},
	}
	if diff := cmp.Diff(want, routesOf(g, "foo.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	// "" (ImplementationSpecific) means "/", which the explicit "/" already claims.
	if s := statusOf(g, "default", "web"); s.Status != StatusValid || !strings.Contains(s.Description, "repeats") {
		t.Errorf("status = %+v, want valid with a note about the repeated path", s)
	}
}

func TestInvalidPathsRejectTheIngress(t *testing.T) {
	for _, tc := range []struct{ pathType, path, want string }{
		{"Prefix", "foo", `must begin with "/"`},
		{"Exact", "/foo//bar", `consecutive "/"`},
		{"Prefix", "//", `consecutive "/"`},
		{"Exact", "", "a path is required"},
		{"Prefix", "/a?b", `"?" or "#"`},
		{"Prefix", "/a b", "spaces or control characters"},
		{"Prefix", "/a/../b", `"/../"`},
		{"Prefix", "/a%2fb", `"%2f"`},
		{"Regex", "/a", `pathType "Regex" is not one of`},
	} {
		t.Run(tc.pathType+" "+tc.path, func(t *testing.T) {
			g := build(ing(t, `
metadata: {name: bad}
spec:
  rules:
  - host: foo.com
    http:
      paths:
      - {path: "`+tc.path+`", pathType: `+tc.pathType+`, backend: {service: {name: s, port: {number: 80}}}}
`))
			s := statusOf(g, "default", "bad")
			if s.Status != StatusInvalid || !strings.Contains(s.Description, tc.want) || !strings.Contains(s.Description, "spec.rules[0].http.paths[0].path") {
				t.Errorf("status = %+v, want invalid naming the field and %q", s, tc.want)
			}
			if len(g.HTTP) != 0 {
				t.Errorf("an invalid Ingress must add no routes, got %d virtual hosts", len(g.HTTP))
			}
		})
	}
}

func TestHostValidation(t *testing.T) {
	for _, tc := range []struct {
		host  string
		valid bool
	}{
		{"foo.com", true},
		{"*.foo.com", true},
		{"*", false},
		{"*.*.foo.com", false},
		{"a.*.foo.com", false},
		{"foo*.com", false},
		{"Foo.com", false},
		{"10.0.0.1", false},
		{"-foo.com", false},
	} {
		t.Run(tc.host, func(t *testing.T) {
			g := build(ing(t, `
metadata: {name: h}
spec:
  rules:
  - host: "`+tc.host+`"
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}
`))
			got := statusOf(g, "default", "h")
			if (got.Status == StatusValid) != tc.valid {
				t.Errorf("status = %+v, want valid=%v", got, tc.valid)
			}
		})
	}
}

func TestIngressClassSelection(t *testing.T) {
	const spec = `
spec:
  rules:
  - host: foo.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}
`
	ours := `{metadata: {name: ours}, spec: {controller: portico.dev/ingress-controller}}`
	theirs := `{metadata: {name: nginx, annotations: {ingressclass.kubernetes.io/is-default-class: "true"}}, spec: {controller: k8s.io/ingress-nginx}}`
	oursDefault := `{metadata: {name: ours, annotations: {ingressclass.kubernetes.io/is-default-class: "true"}}, spec: {controller: portico.dev/ingress-controller}}`
	for _, tc := range []struct {
		name    string
		meta    string
		classes []string
		want    StatusValue
	}{
		{"no class, no default class", `metadata: {name: i}`, nil, StatusValid},
		{"no class, default class is another controller's", `metadata: {name: i}`, []string{theirs}, StatusIgnored},
		{"no class, default class is ours", `metadata: {name: i}`, []string{oursDefault}, StatusValid},
		{"field names the configured class", `metadata: {name: i}
spec: {ingressClassName: portico}`, nil, StatusValid},
		{"field names an IngressClass with our controller", `metadata: {name: i}
spec: {ingressClassName: ours}`, []string{ours}, StatusValid},
		{"field names another class", `metadata: {name: i}
spec: {ingressClassName: nginx}`, []string{theirs}, StatusIgnored},
		{"field names an unknown class", `metadata: {name: i}
spec: {ingressClassName: unknown}`, nil, StatusIgnored},
		{"annotation ours", `metadata: {name: i, annotations: {kubernetes.io/ingress.class: portico}}`, nil, StatusValid},
		{"annotation wins over field (ours)", `metadata: {name: i, annotations: {kubernetes.io/ingress.class: portico}}
spec: {ingressClassName: nginx}`, []string{theirs}, StatusValid},
		{"annotation wins over field (theirs)", `metadata: {name: i, annotations: {kubernetes.io/ingress.class: nginx}}
spec: {ingressClassName: portico}`, nil, StatusIgnored},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := ing(t, tc.meta)
			i.Spec.Rules = ing(t, spec).Spec.Rules
			objs := []runtime.Object{i}
			for _, c := range tc.classes {
				objs = append(objs, fromYAML[networkingv1.IngressClass](t, c))
			}
			g := build(objs...)
			s := statusOf(g, "default", "i")
			if s.Status != tc.want {
				t.Fatalf("status = %+v, want %s", s, tc.want)
			}
			if served := len(routesOf(g, "foo.com")) > 0; served != (tc.want == StatusValid) {
				t.Errorf("routes served = %v, want %v", served, tc.want == StatusValid)
			}
		})
	}
}

func TestConflictsGoToTheOlderIngress(t *testing.T) {
	older := ing(t, `
metadata: {name: zz-older, namespace: team-b, creationTimestamp: "2020-01-01T00:00:00Z"}
spec:
  rules:
  - host: foo.com
    http: {paths: [{path: /api, pathType: Prefix, backend: {service: {name: old, port: {number: 80}}}}]}
`)
	newer := ing(t, `
metadata: {name: aa-newer, namespace: team-a, creationTimestamp: "2021-01-01T00:00:00Z"}
spec:
  rules:
  - host: foo.com
    http:
      paths:
      - {path: /api/, pathType: Prefix, backend: {service: {name: new, port: {number: 80}}}}
      - {path: /other, pathType: Prefix, backend: {service: {name: new, port: {number: 80}}}}
`)
	g := build(newer, older)
	want := []routeView{{"Prefix /api", "team-b/old/80"}}
	if diff := cmp.Diff(want, routesOf(g, "foo.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	if s := statusOf(g, "team-a", "aa-newer"); s.Status != StatusInvalid || !strings.Contains(s.Description, `Prefix path "/api" is served by Ingress team-b/zz-older`) {
		t.Errorf("newer status = %+v", s)
	}
	if s := statusOf(g, "team-b", "zz-older"); s.Status != StatusValid || !strings.Contains(s.Description, "also claimed by Ingress team-a/aa-newer") {
		t.Errorf("older status = %+v", s)
	}
	// Exact and Prefix on the same path are different matches, not a conflict.
	exact := ing(t, `
metadata: {name: exact, creationTimestamp: "2022-01-01T00:00:00Z"}
spec:
  rules:
  - host: foo.com
    http: {paths: [{path: /api, pathType: Exact, backend: {service: {name: ex, port: {number: 80}}}}]}
`)
	g = build(newer, older, exact)
	want = []routeView{{"Exact /api", "default/ex/80"}, {"Prefix /api", "team-b/old/80"}}
	if diff := cmp.Diff(want, routesOf(g, "foo.com")); diff != "" {
		t.Errorf("routes with exact (-want +got):\n%s", diff)
	}
}

func TestDefaultBackend(t *testing.T) {
	g := build(ing(t, `
metadata: {name: d}
spec:
  defaultBackend: {service: {name: fallback, port: {number: 80}}}
  rules:
  - host: foo.com
    http: {paths: [{path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}]}
  - host: bar.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: bar, port: {number: 80}}}}]}
`))
	for host, want := range map[string][]routeView{
		"*":       {{"Prefix /", "default/fallback/80"}},
		"foo.com": {{"Prefix /api", "default/api/80"}, {"Prefix /", "default/fallback/80"}},
		"bar.com": {{"Prefix /", "default/bar/80"}},
	} {
		if diff := cmp.Diff(want, routesOf(g, host)); diff != "" {
			t.Errorf("%s routes (-want +got):\n%s", host, diff)
		}
	}
	// Only the oldest default backend serves unknown hosts. A newer Ingress keeps its default
	// backend for its own hosts, and is told; one with nothing else to serve is rejected.
	g = build(ing(t, `
metadata: {name: a, creationTimestamp: "2020-01-01T00:00:00Z"}
spec: {defaultBackend: {service: {name: one, port: {number: 80}}}}
`), ing(t, `
metadata: {name: b, creationTimestamp: "2021-01-01T00:00:00Z"}
spec: {defaultBackend: {service: {name: two, port: {number: 80}}}}
`), ing(t, `
metadata: {name: c, creationTimestamp: "2022-01-01T00:00:00Z"}
spec:
  defaultBackend: {service: {name: three, port: {number: 80}}}
  rules: [{host: c.com, http: {paths: [{path: /x, pathType: Exact, backend: {service: {name: x, port: {number: 80}}}}]}}]
`))
	if diff := cmp.Diff([]routeView{{"Prefix /", "default/one/80"}}, routesOf(g, "*")); diff != "" {
		t.Errorf("catch-all routes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]routeView{{"Exact /x", "default/x/80"}, {"Prefix /", "default/three/80"}}, routesOf(g, "c.com")); diff != "" {
		t.Errorf("c.com routes (-want +got):\n%s", diff)
	}
	if s := statusOf(g, "default", "b"); s.Status != StatusInvalid || !strings.Contains(s.Description, "Ingress default/a, which is older, does") {
		t.Errorf("status of b = %+v", s)
	}
	if s := statusOf(g, "default", "c"); s.Status != StatusValid || !strings.Contains(s.Description, "does not serve requests for unknown hosts") {
		t.Errorf("status of c = %+v", s)
	}
}

func TestBackendsResolveThroughTheService(t *testing.T) {
	g := build(
		ing(t, `
metadata: {name: web, namespace: shop}
spec:
  rules:
  - host: shop.com
    http:
      paths:
      - {path: /named, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}
      - {path: /number, pathType: Prefix, backend: {service: {name: web, port: {number: 8443}}}}
      - {path: /missing, pathType: Prefix, backend: {service: {name: ghost, port: {number: 80}}}}
      - {path: /noport, pathType: Prefix, backend: {service: {name: web, port: {number: 1234}}}}
      - {path: /sliced, pathType: Prefix, backend: {service: {name: sliced, port: {name: http}}}}
`),
		svc("shop", "web", "http:80", "https:8443"),
		endpoints("shop", "web", "http", 8080, "10.0.0.2", "10.0.0.1"),
		svc("shop", "sliced", "http:80"),
		endpoints("shop", "sliced", "http", 9999, "10.9.9.9"), // ignored: slices exist
		slice("shop", "sliced", "sliced-a", "http", 8080, map[string]bool{"10.1.0.1": true, "10.1.0.2": false}),
		slice("shop", "sliced", "sliced-b", "http", 8080, map[string]bool{"10.1.0.3": true}),
	)
	clusters := map[string][]Endpoint{}
	for _, c := range g.Clusters() {
		clusters[c.Name] = c.Endpoints
	}
	want := map[string][]Endpoint{
		"shop/web/80":    {{Address: "10.0.0.1", Port: 8080}, {Address: "10.0.0.2", Port: 8080}},
		"shop/web/8443":  nil, // no endpoint port named "https"
		"shop/ghost/80":  nil,
		"shop/web/1234":  nil,
		"shop/sliced/80": {{Address: "10.1.0.1", Port: 8080}, {Address: "10.1.0.3", Port: 8080}},
	}
	if diff := cmp.Diff(want, clusters); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	s := statusOf(g, "shop", "web")
	for _, w := range []string{"Service shop/ghost not found", "Service shop/web has no port 1234"} {
		if s.Status != StatusValid || !strings.Contains(s.Description, w) {
			t.Errorf("status = %+v, want valid mentioning %q", s, w)
		}
	}
}

func TestResourceBackendIsRejected(t *testing.T) {
	g := build(ing(t, `
metadata: {name: bucket}
spec:
  defaultBackend: {resource: {apiGroup: acme.io, kind: StorageBucket, name: assets}}
`))
	s := statusOf(g, "default", "bucket")
	if s.Status != StatusInvalid || !strings.Contains(s.Description, `kind "StorageBucket"`) || !strings.Contains(s.Description, "use a Service backend") {
		t.Errorf("status = %+v", s)
	}
	g = build(ing(t, `
metadata: {name: both}
spec:
  defaultBackend: {service: {name: s, port: {number: 80}}, resource: {kind: StorageBucket, name: assets}}
`))
	if s := statusOf(g, "default", "both"); s.Status != StatusInvalid || !strings.Contains(s.Description, "not both") {
		t.Errorf("status = %+v", s)
	}
}

func TestTLS(t *testing.T) {
	good := testutil.SelfSigned("secure.com")
	other := testutil.SelfSigned("other.com")
	expired := testutil.Expired("old.com")
	const doc = `
metadata: {name: tls}
spec:
  tls:
  - {hosts: [secure.com], secretName: good}
  - {hosts: [mismatch.com], secretName: mismatch}
  - {hosts: [missing.com], secretName: absent}
  - {hosts: [old.com], secretName: expired}
  rules:
  - host: secure.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}
  - host: mismatch.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}
  - host: missing.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}
  - host: old.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}
`
	g := build(ing(t, doc),
		tlsSecret("default", "good", good.CertPEM, good.KeyPEM),
		tlsSecret("default", "mismatch", good.CertPEM, other.KeyPEM),
		tlsSecret("default", "expired", expired.CertPEM, expired.KeyPEM),
	)
	if len(g.HTTPS) != 1 || g.HTTPS[0].Name != "secure.com" || g.HTTPS[0].Secret.Name != "default/good" {
		t.Fatalf("secure hosts = %+v, want only secure.com with default/good", g.HTTPS)
	}
	if diff := cmp.Diff([]routeView{{"Prefix /", "default/s/80"}}, viewRoutes(&g.HTTPS[0].VirtualHost)); diff != "" {
		t.Errorf("secure routes (-want +got):\n%s", diff)
	}
	if len(routesOf(g, "mismatch.com")) != 1 {
		t.Errorf("plain HTTP routes of a host with a bad certificate must still be served")
	}
	s := statusOf(g, "default", "tls")
	for _, w := range []string{"Secret default/mismatch: invalid certificate or key", "Secret default/absent not found", "certificate expired"} {
		if s.Status != StatusInvalid || !strings.Contains(s.Description, w) {
			t.Errorf("status = %+v, want invalid mentioning %q", s, w)
		}
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	objs := []runtime.Object{
		ing(t, `{metadata: {name: a}, spec: {rules: [{host: a.com, http: {paths: [{path: /x, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]}}`),
		ing(t, `{metadata: {name: b}, spec: {rules: [{host: a.com, http: {paths: [{path: /y, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]}}`),
		ing(t, `{metadata: {name: c}, spec: {rules: [{host: "*.a.com", http: {paths: [{path: /y, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]}}`),
	}
	first := build(objs...)
	for i := 0; i < 20; i++ {
		if diff := cmp.Diff(first, build(objs...)); diff != "" {
			t.Fatalf("build %d differs:\n%s", i, diff)
		}
	}
}

// A team cannot put its certificate in front of another team's host: TLS hosts need a
// rule in the same Ingress, and the first Ingress to claim a TLS host keeps it.
func TestTLSHostsCannotBeTakenOver(t *testing.T) {
	a, b := testutil.SelfSigned("shop.example.com"), testutil.SelfSigned("shop.example.com")
	owner := ing(t, `
metadata: {name: shop, namespace: team-a, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  tls: [{hosts: [shop.example.com], secretName: tls}]
  rules: [{host: shop.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]
`)
	squatter := ing(t, `
metadata: {name: squat, namespace: team-b, creationTimestamp: "2025-01-01T00:00:00Z"}
spec:
  tls: [{hosts: [shop.example.com], secretName: tls}]
  rules: [{host: squat.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]
`)
	secrets := []runtime.Object{tlsSecret("team-a", "tls", a.CertPEM, a.KeyPEM), tlsSecret("team-b", "tls", b.CertPEM, b.KeyPEM)}
	g := build(append(secrets, owner, squatter)...)
	if len(g.HTTPS) != 1 || g.HTTPS[0].Secret.Name != "team-a/tls" {
		t.Fatalf("secure hosts = %+v, want shop.example.com with team-a/tls only", g.HTTPS)
	}
	if s := statusOf(g, "team-b", "squat"); !strings.Contains(s.Description, `host "shop.example.com" has no rule in this Ingress`) {
		t.Errorf("squatter status = %+v", s)
	}
	// With a rule for the host too, the newer Ingress conflicts and is rejected whole.
	squatter.Spec.Rules = append(squatter.Spec.Rules, owner.Spec.Rules...)
	squatter.Spec.Rules[1].HTTP = ing(t, `{spec: {rules: [{http: {paths: [{path: /other, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]}}`).Spec.Rules[0].HTTP
	g = build(append(secrets, owner, squatter)...)
	if s := statusOf(g, "team-b", "squat"); s.Status != StatusInvalid || !strings.Contains(s.Description, "TLS certificate is served by Ingress team-a/shop") {
		t.Errorf("squatter with a rule: status = %+v", s)
	}
	if len(g.HTTPS) != 1 || g.HTTPS[0].Secret.Name != "team-a/tls" {
		t.Errorf("secure hosts = %+v", g.HTTPS)
	}
}

// A "/" rule and a default backend both serve a host's unmatched paths: a newer
// Ingress cannot take either from an older one.
func TestRootPathAndDefaultBackendAreOneClaim(t *testing.T) {
	old := ing(t, `
metadata: {name: old, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  defaultBackend: {service: {name: a, port: {number: 80}}}
  rules: [{host: old.example.com, http: {paths: [{path: /x, pathType: Prefix, backend: {service: {name: a, port: {number: 80}}}}]}}]
`)
	newer := ing(t, `
metadata: {name: new, creationTimestamp: "2025-01-01T00:00:00Z"}
spec:
  rules:
  - http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: b, port: {number: 80}}}}]}
  - host: old.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: b, port: {number: 80}}}}]}
`)
	g := build(old, newer)
	s := statusOf(g, "default", "new")
	for _, want := range []string{`host * (any host), Prefix path "/" or default backend is served by Ingress default/old`, `host old.example.com, Prefix path "/" or default backend is served by Ingress default/old`} {
		if s.Status != StatusInvalid || !strings.Contains(s.Description, want) {
			t.Errorf("newer status = %+v, want invalid mentioning %q", s, want)
		}
	}
	if diff := cmp.Diff([]routeView{{"Prefix /x", "default/a/80"}, {"Prefix /", "default/a/80"}}, routesOf(g, "old.example.com")); diff != "" {
		t.Errorf("old.example.com routes (-want +got):\n%s", diff)
	}
	// Within one Ingress, its own "/" rule wins over its default backend, silently.
	g = build(ing(t, `
metadata: {name: self}
spec:
  defaultBackend: {service: {name: fallback, port: {number: 80}}}
  rules: [{host: h.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: root, port: {number: 80}}}}]}}]
`))
	if diff := cmp.Diff([]routeView{{"Prefix /", "default/root/80"}}, routesOf(g, "h.com")); diff != "" {
		t.Errorf("h.com routes (-want +got):\n%s", diff)
	}
	if s := statusOf(g, "default", "self"); s.Description != "valid Ingress; Service default/root not found: its routes answer 503 until it exists; Service default/fallback not found: its routes answer 503 until it exists" {
		t.Errorf("self status = %q", s.Description)
	}
}

func TestWildcardCertificateCarriesThePreciseHostsItCovers(t *testing.T) {
	c := testutil.SelfSigned("*.example.com")
	g := build(tlsSecret("default", "wild", c.CertPEM, c.KeyPEM), ing(t, `
metadata: {name: wild}
spec:
  tls: [{hosts: ["*.example.com"], secretName: wild}]
  rules: [{host: "*.example.com", http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: c, port: {number: 80}}}}]}}]
`), ing(t, `
metadata: {name: app}
spec:
  rules:
  - {host: app.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: a, port: {number: 80}}}}]}}
  - {host: a.b.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: a, port: {number: 80}}}}]}}
`))
	if len(g.HTTPS) != 1 {
		t.Fatalf("secure hosts = %+v", g.HTTPS)
	}
	var also []string
	for _, vh := range g.HTTPS[0].Also {
		also = append(also, vh.Name)
	}
	if diff := cmp.Diff([]string{"app.example.com"}, also); diff != "" {
		t.Errorf("hosts reached through the wildcard certificate (-want +got):\n%s", diff)
	}
}

func TestUnusableEndpointsAreSkipped(t *testing.T) {
	g := build(
		ing(t, `{metadata: {name: e}, spec: {rules: [{host: e.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]}}`),
		svc("default", "web", "http:80"),
		endpoints("default", "web", "http", 70000, "10.0.0.1"),
	)
	if eps := g.Clusters()[0].Endpoints; len(eps) != 0 {
		t.Errorf("endpoints = %v, want none (port out of range)", eps)
	}
	if s := statusOf(g, "default", "e"); !strings.Contains(s.Description, "1 endpoint addresses ignored") {
		t.Errorf("status = %+v", s)
	}
	fqdn := slice("default", "web", "web-fqdn", "http", 8080, map[string]bool{"backend.example.net": true, "10.0.0.9": true, "10.0.0.300": true})
	g = build(ing(t, `{metadata: {name: e}, spec: {rules: [{host: e.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]}}`),
		svc("default", "web", "http:80"), fqdn)
	if diff := cmp.Diff([]Endpoint{{Address: "10.0.0.9", Port: 8080}}, g.Clusters()[0].Endpoints); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
}

func TestExternalNameServices(t *testing.T) {
	route := `{metadata: {name: x, namespace: team-a}, spec: {rules: [{host: x.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: ext, port: {number: 443}}}}]}}]}}`
	external := func(name string) *corev1.Service {
		s := svc("team-a", "ext", "https:443")
		s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, name
		return s
	}
	for _, tc := range []struct {
		name, externalName string
		allow              bool
		want               string // "" = allowed
	}{
		{"disabled", "example.org", false, "ExternalName Services are disabled"},
		{"public name", "example.org", true, ""},
		{"same namespace", "db.team-a.svc.cluster.local", true, ""},
		{"localhost", "localhost", true, "is this machine"},
		{"loopback IP", "127.0.0.1", true, "loopback"},
		{"IPv6 loopback", "::1", true, "loopback"},
		{"link-local", "169.254.169.254", true, "link-local"},
		{"IPv4-mapped unspecified", "::ffff:0.0.0.0", true, "unspecified"},
		{"IPv4-mapped loopback", "::ffff:127.0.0.1", true, "loopback"},
		{"other namespace", "db.team-b.svc.cluster.local", true, "another namespace"},
		{"other namespace, short", "db.team-b.svc", true, "another namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Build(store.FromObjects([]runtime.Object{ing(t, route), external(tc.externalName)}), Options{AllowExternalName: tc.allow})
			c := g.Clusters()[0]
			s := statusOf(g, "team-a", "x")
			if tc.want == "" {
				if c.ExternalName != tc.externalName {
					t.Errorf("cluster = %+v, want one resolving %s", c, tc.externalName)
				}
				return
			}
			if c.ExternalName != "" || !strings.Contains(s.Description, tc.want) {
				t.Errorf("cluster %+v, status %q: want refused with %q", c, s.Description, tc.want)
			}
		})
	}
}

func TestInvalidSecretNameInvalidatesTLSOnly(t *testing.T) {
	g := build(ing(t, `
metadata: {name: badname}
spec:
  tls: [{hosts: [a.com], secretName: "Not_A_Name"}]
  rules: [{host: a.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]
`))
	if s := statusOf(g, "default", "badname"); s.Status != StatusInvalid || !strings.Contains(s.Description, `secretName "Not_A_Name" is not a valid Secret name`) {
		t.Errorf("status = %+v", s)
	}
	if len(g.HTTPS) != 0 || len(routesOf(g, "a.com")) != 1 {
		t.Errorf("want no HTTPS and the plain-HTTP route kept; got %d secure hosts, %d routes", len(g.HTTPS), len(routesOf(g, "a.com")))
	}
}

// Noted marks a served object whose status carries remarks, which the log shows at WARN:
// an Ingress to a missing Service is served, and its routes answer 503.
func TestIngressNoted(t *testing.T) {
	g := build(
		ing(t, `{metadata: {name: ok}, spec: {rules: [{host: a.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]}}`),
		ing(t, `{metadata: {name: missing}, spec: {rules: [{host: b.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: nope, port: {number: 80}}}}]}}]}}`),
		svc("default", "web", ":80"),
	)
	if s := statusOf(g, "default", "ok"); s.Status != StatusValid || s.Noted {
		t.Errorf("ok: %+v, want valid without notes", s)
	}
	if s := statusOf(g, "default", "missing"); s.Status != StatusValid || !s.Noted || !strings.Contains(s.Description, "default/nope not found") {
		t.Errorf("missing: %+v, want valid, noted, naming the missing Service", s)
	}
}
