package dag

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// A root (spec.virtualhost) serves its host; a vertex serves only what a root delegates to
// it. A vertex nobody reaches is orphaned and adds nothing to the graph.
func TestIngressRouteVertexIsServedOnlyWhenReachedFromARoot(t *testing.T) {
	g := build(
		ir(t, `
metadata: {name: app, namespace: infra}
spec:
  virtualhost: {fqdn: app.example.com}
  routes:
  - {match: /, services: [{name: web, port: 80}]}
  - {match: /shop, delegate: {name: shop, namespace: shop}}
`),
		ir(t, `
metadata: {name: shop, namespace: shop}
spec:
  routes:
  - {match: /shop, services: [{name: web, port: 80}]}
  - {match: /shop/api, services: [{name: api, port: 80}]}
`),
		ir(t, `
metadata: {name: unused, namespace: shop}
spec:
  routes:
  - {match: /unused, services: [{name: web, port: 80}]}
`),
	)
	want := []irRoute{
		{"/shop/api", "shop/api/80", "shop/shop"},
		{"/shop", "shop/web/80", "shop/shop"},
		{"/", "infra/web/80", "infra/app"},
	}
	if diff := cmp.Diff(want, httpRoutes(g, "app.example.com")); diff != "" {
		t.Errorf("app.example.com routes (-want +got):\n%s", diff)
	}
	if h, s := hostNames(g); len(h) != 1 || len(s) != 0 {
		t.Errorf("virtual hosts = %v / %v, want only app.example.com", h, s)
	}
	root := wantStatus(t, g, "infra", "app", StatusValid, "valid IngressRoute")
	if !root.Root || !cmp.Equal(root.Hosts, []string{"app.example.com"}) {
		t.Errorf("root status = %+v, want Root and Hosts [app.example.com]", root)
	}
	wantStatus(t, g, "shop", "shop", StatusValid, `valid delegated IngressRoute: "/shop" delegated by IngressRoute infra/app on app.example.com`)
	orphan := wantStatus(t, g, "shop", "unused", StatusOrphaned)
	if orphan.Description != "not part of a delegation chain from a root" || orphan.Root || orphan.Hosts != nil {
		t.Errorf("orphan status = %+v", orphan)
	}
}

func TestIngressRouteOrphanedVertexAddsNoRoutes(t *testing.T) {
	g := build(ir(t, `
metadata: {name: lonely, namespace: team}
spec:
  routes:
  - {match: /, services: [{name: web, port: 80}]}
`))
	if len(g.HTTP) != 0 || len(g.HTTPS) != 0 || len(g.Clusters()) != 0 {
		t.Errorf("an orphaned vertex added virtual hosts %v / %v", g.HTTP, g.HTTPS)
	}
	wantStatus(t, g, "team", "lonely", StatusOrphaned, "not part of a delegation chain from a root")
}

// delegate.namespace defaults to the namespace of the delegating object, not "default".
func TestIngressRouteDelegateNamespaceDefaultsToTheDelegatingObjects(t *testing.T) {
	vertex := `
spec:
  routes:
  - {match: /v, services: [{name: web, port: 80}]}
`
	g := build(
		ir(t, `
metadata: {name: root, namespace: team}
spec:
  virtualhost: {fqdn: team.example.com}
  routes:
  - {match: /v, delegate: {name: v}}
`),
		ir(t, "metadata: {name: v, namespace: team}"+vertex),
		ir(t, "metadata: {name: v, namespace: default}"+vertex),
	)
	if diff := cmp.Diff([]irRoute{{"/v", "team/web/80", "team/v"}}, httpRoutes(g, "team.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantStatus(t, g, "team", "v", StatusValid)
	wantStatus(t, g, "default", "v", StatusOrphaned)
}

// Services are always resolved in the namespace of the object whose route names them.
func TestIngressRouteServicesResolveOnlyInTheObjectsOwnNamespace(t *testing.T) {
	g := build(
		ir(t, `
metadata: {name: root, namespace: a}
spec:
  virtualhost: {fqdn: ns.example.com}
  routes:
  - {match: /, services: [{name: x, port: 80}]}
  - {match: /b, delegate: {name: v, namespace: b}}
`),
		ir(t, `
metadata: {name: v, namespace: b}
spec:
  routes:
  - {match: /b, services: [{name: x, port: 80}]}
`),
		svc("a", "x", "http:80"), endpoints("a", "x", "http", 8080, "10.0.0.1"),
		svc("b", "x", "http:80"), endpoints("b", "x", "http", 8080, "10.0.0.2"),
	)
	want := []irRoute{{"/b", "b/x/80", "b/v"}, {"/", "a/x/80", "a/root"}}
	if diff := cmp.Diff(want, httpRoutes(g, "ns.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	got := map[string]types.NamespacedName{}
	eps := map[string][]Endpoint{}
	for _, c := range g.Clusters() {
		got[c.Name], eps[c.Name] = c.Service, c.Endpoints
	}
	wantSvc := map[string]types.NamespacedName{"a/x/80": {Namespace: "a", Name: "x"}, "b/x/80": {Namespace: "b", Name: "x"}}
	if diff := cmp.Diff(wantSvc, got); diff != "" {
		t.Errorf("cluster services (-want +got):\n%s", diff)
	}
	wantEps := map[string][]Endpoint{"a/x/80": {{Address: "10.0.0.1", Port: 8080}}, "b/x/80": {{Address: "10.0.0.2", Port: 8080}}}
	if diff := cmp.Diff(wantEps, eps); diff != "" {
		t.Errorf("cluster endpoints (-want +got):\n%s", diff)
	}
	wantStatus(t, g, "b", "v", StatusValid)
}

// Matches are string prefixes: "/app" delegates "/apple" too.
func TestIngressRouteMatchesAreStringPrefixes(t *testing.T) {
	g := build(
		ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: p.example.com}
  routes:
  - {match: /app, delegate: {name: v, namespace: team}}
`),
		ir(t, `
metadata: {name: v, namespace: team}
spec:
  routes:
  - {match: /apple, services: [{name: apple, port: 80}]}
  - {match: /app, services: [{name: app, port: 80}]}
`),
	)
	want := []irRoute{{"/apple", "team/apple/80", "team/v"}, {"/app", "team/app/80", "team/v"}}
	if diff := cmp.Diff(want, httpRoutes(g, "p.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	for _, r := range httpHost(g, "p.example.com").Routes {
		if r.Path.Kind != PathStringPrefix {
			t.Errorf("route %q has kind %s, want StringPrefix", r.Path.Value, r.Path.Kind)
		}
	}
	wantStatus(t, g, "team", "v", StatusValid)
}

// A delegated vertex's routes must all start with the delegating route's match. Otherwise
// that delegation is refused: its prefix answers 503, the delegating object stays valid
// with a note, and the vertex is invalid unless another delegation to it was accepted.
func TestIngressRouteDelegatedRoutesMustAllStartWithTheDelegatingMatch(t *testing.T) {
	money := ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: money.example.com}
  routes:
  - {match: /, services: [{name: web, port: 80}]}
  - {match: /money, delegate: {name: finance, namespace: fin}}
`)
	finance := ir(t, `
metadata: {name: finance, namespace: fin}
spec:
  routes:
  - {match: /finance, services: [{name: app, port: 80}]}
  - {match: /money/ok, services: [{name: app, port: 80}]}
`)
	wantMoney := []irRoute{{"/money", "503", "infra/root"}, {"/", "infra/web/80", "infra/root"}}
	const rootNote = `route "/money": not delegated to IngressRoute fin/finance: its route "/finance" is not under "/money"; requests under "/money" get 503`
	const refusal = `IngressRoute infra/root delegates "/money" to it, but its route "/finance" is not under "/money"`

	t.Run("only delegation refused", func(t *testing.T) {
		g := build(money, finance)
		if diff := cmp.Diff(wantMoney, httpRoutes(g, "money.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
		if r := httpHost(g, "money.example.com").Routes[0]; r.DirectStatus != 503 || len(r.Clusters) != 0 {
			t.Errorf("refused prefix route = %+v, want DirectStatus 503 and no clusters", r)
		}
		wantStatus(t, g, "infra", "root", StatusValid, rootNote)
		wantStatus(t, g, "fin", "finance", StatusInvalid, "every delegation to it was refused", refusal)
	})

	t.Run("another delegation accepted", func(t *testing.T) {
		other := ir(t, `
metadata: {name: root2, namespace: infra}
spec:
  virtualhost: {fqdn: finance.example.com}
  routes:
  - {match: /, delegate: {name: finance, namespace: fin}}
`)
		g := build(money, finance, other)
		if diff := cmp.Diff(wantMoney, httpRoutes(g, "money.example.com")); diff != "" {
			t.Errorf("money.example.com routes (-want +got):\n%s", diff)
		}
		want := []irRoute{{"/money/ok", "fin/app/80", "fin/finance"}, {"/finance", "fin/app/80", "fin/finance"}}
		if diff := cmp.Diff(want, httpRoutes(g, "finance.example.com")); diff != "" {
			t.Errorf("finance.example.com routes (-want +got):\n%s", diff)
		}
		wantStatus(t, g, "infra", "root", StatusValid, rootNote)
		s := wantStatus(t, g, "fin", "finance", StatusValid, `"/" delegated by IngressRoute infra/root2 on finance.example.com`, refusal)
		if !cmp.Equal(s.Hosts, []string{"finance.example.com"}) {
			t.Errorf("hosts = %v, want only the host of the accepted delegation", s.Hosts)
		}
	})
}

// Delegation works through any number of namespaces, each under the prefix it was given.
func TestIngressRouteDelegationChainAcrossFourNamespaces(t *testing.T) {
	g := build(
		ir(t, `
metadata: {name: root, namespace: a}
spec:
  virtualhost: {fqdn: chain.example.com, aliases: [www.chain.example.com]}
  routes:
  - {match: /, services: [{name: s, port: 80}]}
  - {match: /b, delegate: {name: v, namespace: b}}
`),
		ir(t, `
metadata: {name: v, namespace: b}
spec:
  routes:
  - {match: /b, services: [{name: s, port: 80}]}
  - {match: /b/c, delegate: {name: v, namespace: c}}
`),
		ir(t, `
metadata: {name: v, namespace: c}
spec:
  routes:
  - {match: /b/c, services: [{name: s, port: 80}]}
  - {match: /b/c/d, delegate: {name: v, namespace: d}}
`),
		ir(t, `
metadata: {name: v, namespace: d}
spec:
  routes:
  - {match: /b/c/d, services: [{name: s, port: 80}]}
`),
	)
	want := []irRoute{
		{"/b/c/d", "d/s/80", "d/v"},
		{"/b/c", "c/s/80", "c/v"},
		{"/b", "b/s/80", "b/v"},
		{"/", "a/s/80", "a/root"},
	}
	for _, host := range []string{"chain.example.com", "www.chain.example.com"} {
		if diff := cmp.Diff(want, httpRoutes(g, host)); diff != "" {
			t.Errorf("%s routes (-want +got):\n%s", host, diff)
		}
	}
	for ns, by := range map[string]string{"b": "a/root", "c": "b/v", "d": "c/v"} {
		s := wantStatus(t, g, ns, "v", StatusValid, "delegated by IngressRoute "+by)
		if !cmp.Equal(s.Hosts, []string{"chain.example.com", "www.chain.example.com"}) {
			t.Errorf("%s/v hosts = %v", ns, s.Hosts)
		}
	}
}

// A delegation that cannot be followed answers 503 at its prefix; the delegating object
// stays valid and its status names the target and the reason.
func TestIngressRouteUnservableDelegateAnswers503(t *testing.T) {
	root := ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: root.example.com}
  routes:
  - {match: /, services: [{name: web, port: 80}]}
  - {match: /x, delegate: {name: target, namespace: team}}
`)
	for _, tc := range []struct {
		name   string
		target string // "" = no target object
		reason string
		// targetStatus is the target's own status and a part of its description.
		targetStatus StatusValue
		targetDesc   string
	}{
		{"missing", "", "it does not exist", "", ""},
		{"another ingress class", `
metadata: {name: target, namespace: team, annotations: {kubernetes.io/ingress.class: nginx}}
spec: {routes: [{match: /x, services: [{name: s, port: 80}]}]}
`, "it belongs to another ingress class", StatusIgnored, `ingress class "nginx" is not "portico"`},
		{"another ingress class (contour annotation)", `
metadata: {name: target, namespace: team, annotations: {contour.heptio.com/ingress.class: contour}}
spec: {routes: [{match: /x, services: [{name: s, port: 80}]}]}
`, "it belongs to another ingress class", StatusIgnored, `ingress class "contour"`},
		{"invalid", `
metadata: {name: target, namespace: team}
spec: {routes: [{match: /x, services: [{name: s, port: 0}]}]}
`, "it is invalid (see its status)", StatusInvalid, "port 0 is not in 1-65535"},
		{"a root", `
metadata: {name: target, namespace: team}
spec:
  virtualhost: {fqdn: target.example.com}
  routes: [{match: /x, services: [{name: s, port: 80}]}]
`, "it is a root (it has spec.virtualhost)", StatusValid, `IngressRoute infra/root delegates "/x" to it, which is ignored`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{root}
			if tc.target != "" {
				objs = append(objs, ir(t, tc.target))
			}
			g := build(objs...)
			want := []irRoute{{"/x", "503", "infra/root"}, {"/", "infra/web/80", "infra/root"}}
			if diff := cmp.Diff(want, httpRoutes(g, "root.example.com")); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
			wantStatus(t, g, "infra", "root", StatusValid, `route "/x": not delegated to IngressRoute team/target: `+tc.reason, `requests under "/x" get 503`)
			if tc.target == "" {
				return
			}
			s := wantStatus(t, g, "team", "target", tc.targetStatus, tc.targetDesc)
			if tc.targetStatus == StatusValid {
				// A root delegated to keeps serving its own host, and only it.
				if diff := cmp.Diff([]irRoute{{"/x", "team/s/80", "team/target"}}, httpRoutes(g, "target.example.com")); diff != "" {
					t.Errorf("target.example.com routes (-want +got):\n%s", diff)
				}
				if !s.Root || !cmp.Equal(s.Hosts, []string{"target.example.com"}) {
					t.Errorf("target status = %+v", s)
				}
			}
		})
	}
}

// A delegation cycle makes its newest object invalid (seed 003 asks for the object
// closing a cycle to be invalid; the newest is the one that closed it), naming the
// cycle. The choice looks at the objects alone, never at where a root's walk enters the
// cycle, so no root can choose which object of another tree is rejected. The delegation
// to the rejected object answers 503 for its prefix, like any refused delegation.
func TestIngressRouteDelegationCycles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objs    []string
		entry   string // the object the root delegates "/a" to
		invalid string // the newest object of the cycle
		cycle   string
		routes  []irRoute
	}{
		{
			name:    "self delegation",
			objs:    []string{`{metadata: {name: a, namespace: c}, spec: {routes: [{match: /a, delegate: {name: a}}, {match: /a/x, services: [{name: s, port: 80}]}]}}`},
			entry:   "a",
			invalid: "a",
			cycle:   "its delegation closes a cycle: IngressRoute c/a -> IngressRoute c/a",
			routes:  []irRoute{{"/a", "503", "infra/root"}},
		},
		{
			name: "two objects",
			objs: []string{
				`{metadata: {name: a, namespace: c}, spec: {routes: [{match: /a, delegate: {name: b}}]}}`,
				`{metadata: {name: b, namespace: c}, spec: {routes: [{match: /a, delegate: {name: a}}, {match: /a/x, services: [{name: s, port: 80}]}]}}`,
			},
			entry:   "a",
			invalid: "b",
			cycle:   "its delegation closes a cycle: IngressRoute c/b -> IngressRoute c/a -> IngressRoute c/b",
			routes:  []irRoute{{"/a", "503", "c/a"}},
		},
		{
			name: "three objects, entered in the middle",
			objs: []string{
				`{metadata: {name: a, namespace: c}, spec: {routes: [{match: /a, delegate: {name: b}}]}}`,
				`{metadata: {name: b, namespace: c}, spec: {routes: [{match: /a, delegate: {name: z}}]}}`,
				`{metadata: {name: z, namespace: c}, spec: {routes: [{match: /a, delegate: {name: a}}]}}`,
			},
			entry:   "b",
			invalid: "z",
			cycle:   "its delegation closes a cycle: IngressRoute c/z -> IngressRoute c/a -> IngressRoute c/b -> IngressRoute c/z",
			routes:  []irRoute{{"/a", "503", "c/b"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: cycle.example.com}
  routes:
  - {match: /, services: [{name: web, port: 80}]}
  - {match: /a, delegate: {name: `+tc.entry+`, namespace: c}}
`)}
			for _, o := range tc.objs {
				objs = append(objs, ir(t, o))
			}
			g := build(objs...)
			want := append(tc.routes, irRoute{"/", "infra/web/80", "infra/root"})
			if diff := cmp.Diff(want, httpRoutes(g, "cycle.example.com")); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
			wantStatus(t, g, "infra", "root", StatusValid)
			wantStatus(t, g, "c", tc.invalid, StatusInvalid, tc.cycle)
		})
	}
}

// The object blamed for a cycle does not depend on the roots: a second root entering the
// cycle elsewhere rejects the same object, the newest one (a review found that blaming
// the object where a walk closed the cycle let a second root choose).
func TestIngressRouteCycleEnteredByAnotherRoot(t *testing.T) {
	objs := []runtime.Object{
		ir(t, `{metadata: {name: app, namespace: platform}, spec: {virtualhost: {fqdn: app.example.com}, routes: [{match: /, services: [{name: web, port: 80}]}, {match: /a, delegate: {name: a, namespace: team-a}}]}}`),
		ir(t, `{metadata: {name: a, namespace: team-a, creationTimestamp: "2026-01-01T00:00:00Z"}, spec: {routes: [{match: /a, delegate: {name: b, namespace: blog}}, {match: /a/x, services: [{name: ax, port: 80}]}]}}`),
		ir(t, `{metadata: {name: b, namespace: blog, creationTimestamp: "2026-02-01T00:00:00Z"}, spec: {routes: [{match: /a/b, services: [{name: bb, port: 80}]}, {match: /a, delegate: {name: a, namespace: team-a}}]}}`),
	}
	second := ir(t, `{metadata: {name: r, namespace: blog}, spec: {virtualhost: {fqdn: blog.example.com}, routes: [{match: /a, delegate: {name: b}}]}}`)
	want := []irRoute{{"/a/x", "team-a/ax/80", "team-a/a"}, {"/a", "503", "team-a/a"}, {"/", "platform/web/80", "platform/app"}}
	for _, g := range []*Graph{build(objs...), build(append(objs, second)...)} {
		if diff := cmp.Diff(want, httpRoutes(g, "app.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
		wantStatus(t, g, "team-a", "a", StatusValid)
		wantStatus(t, g, "blog", "b", StatusInvalid, "its delegation closes a cycle: IngressRoute blog/b -> IngressRoute team-a/a -> IngressRoute blog/b")
	}
}

// A delegation back up the tree that the prefix rule refuses anyway is not a cycle: it
// cannot make the object it points at invalid (a downstream team cannot break its
// delegator); only its own prefix answers 503.
func TestIngressRouteBackEdgeRefusedByPrefixIsNotACycle(t *testing.T) {
	g := build(
		ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: shop.example.com}
  routes: [{match: /, delegate: {name: shop, namespace: shop}}]
`),
		ir(t, `{metadata: {name: shop, namespace: shop}, spec: {routes: [{match: /, services: [{name: web, port: 80}]}, {match: /reviews, delegate: {name: reviews, namespace: reviews}}]}}`),
		ir(t, `{metadata: {name: reviews, namespace: reviews}, spec: {routes: [{match: /reviews, services: [{name: reviews, port: 80}]}, {match: /reviews/x, delegate: {name: shop, namespace: shop}}]}}`),
	)
	want := []irRoute{
		{"/reviews/x", "503", "reviews/reviews"},
		{"/reviews", "reviews/reviews/80", "reviews/reviews"},
		{"/", "shop/web/80", "shop/shop"},
	}
	if diff := cmp.Diff(want, httpRoutes(g, "shop.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantStatus(t, g, "shop", "shop", StatusValid)
	wantStatus(t, g, "reviews", "reviews", StatusValid, `route "/reviews/x": not delegated to IngressRoute shop/shop: its route "/" is not under "/reviews/x"`)
}

// A cycle that no root reaches still makes its newest object invalid (it is wrong on its
// own terms); the rest are orphaned, like any unreachable vertex.
func TestIngressRouteUnreachedCycleIsOrphaned(t *testing.T) {
	g := build(
		ir(t, `{metadata: {name: a, namespace: c}, spec: {routes: [{match: /a, delegate: {name: a}}, {match: /a/t, delegate: {name: tail}}]}}`),
		ir(t, `{metadata: {name: tail, namespace: c}, spec: {routes: [{match: /a/t, services: [{name: s, port: 80}]}]}}`),
	)
	wantStatus(t, g, "c", "a", StatusInvalid, "its delegation closes a cycle: IngressRoute c/a -> IngressRoute c/a")
	wantStatus(t, g, "c", "tail", StatusOrphaned, "not part of a delegation chain from a root")
}

// Two roots created at the same moment claiming one host (fqdn or alias, whatever the
// case) are both invalid: nothing tells which came first. Other roots are unaffected.
func TestIngressRouteRootsClaimingOneHostAreBothInvalid(t *testing.T) {
	g := build(
		ir(t, `{metadata: {name: one, namespace: infra}, spec: {virtualhost: {fqdn: shop.example.com}, routes: [{match: /, services: [{name: one, port: 80}]}]}}`),
		ir(t, `{metadata: {name: two, namespace: team}, spec: {virtualhost: {fqdn: other.example.com, aliases: [SHOP.example.com]}, routes: [{match: /, services: [{name: two, port: 80}]}]}}`),
		ir(t, `{metadata: {name: three, namespace: team}, spec: {virtualhost: {fqdn: three.example.com}, routes: [{match: /, services: [{name: three, port: 80}]}]}}`),
	)
	wantStatus(t, g, "infra", "one", StatusInvalid, `host "shop.example.com" is also claimed by IngressRoute team/two`)
	wantStatus(t, g, "team", "two", StatusInvalid, `host "shop.example.com" is also claimed by IngressRoute infra/one`)
	wantStatus(t, g, "team", "three", StatusValid)
	http, https := hostNames(g)
	if diff := cmp.Diff([]string{"three.example.com"}, http); diff != "" || len(https) != 0 {
		t.Errorf("virtual hosts (-want +got):\n%s (https %v)", diff, https)
	}
	if diff := cmp.Diff([]irRoute{{"/", "team/three/80", "team/three"}}, httpRoutes(g, "three.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

// Between roots of different ages the oldest keeps the host: a new root can neither take
// it over nor take it down, and the oldest holds it even while it is invalid itself.
func TestIngressRouteOldestRootKeepsItsHost(t *testing.T) {
	older := `{metadata: {name: one, namespace: infra, creationTimestamp: "2020-01-01T00:00:00Z"}, spec: {virtualhost: {fqdn: shop.example.com}, strategy: STRATEGY, routes: [{match: /, services: [{name: one, port: 80}]}]}}`
	newer := ir(t, `{metadata: {name: two, namespace: team, creationTimestamp: "2021-01-01T00:00:00Z"}, spec: {virtualhost: {fqdn: other.example.com, aliases: [SHOP.example.com]}, routes: [{match: /, services: [{name: two, port: 80}]}]}}`)

	g := build(ir(t, strings.Replace(older, "STRATEGY", "RoundRobin", 1)), newer)
	wantStatus(t, g, "infra", "one", StatusValid, `host "shop.example.com" is also claimed by the newer IngressRoute team/two, which was rejected`)
	wantStatus(t, g, "team", "two", StatusInvalid, `host "shop.example.com" belongs to the older IngressRoute infra/one`)
	if diff := cmp.Diff([]irRoute{{"/", "infra/one/80", "infra/one"}}, httpRoutes(g, "shop.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}

	// A typo in the older root does not hand its host to the newer one.
	g = build(ir(t, strings.Replace(older, "STRATEGY", "Fastest", 1)), newer)
	wantStatus(t, g, "infra", "one", StatusInvalid, "Fastest")
	wantStatus(t, g, "team", "two", StatusInvalid, `host "shop.example.com" belongs to the older IngressRoute infra/one (invalid itself: fix or delete it to free the host)`)
	if http, _ := hostNames(g); len(http) != 0 {
		t.Errorf("hosts served while their oldest root is invalid: %v", http)
	}
}

// A host an older Ingress serves cannot be taken by an IngressRoute...
func TestIngressRouteRootOnAnIngressHostIsInvalid(t *testing.T) {
	g := build(
		ing(t, `
metadata: {name: web, creationTimestamp: "2020-01-01T00:00:00Z"}
spec:
  rules: [{host: ing.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
`),
		ir(t, `{metadata: {name: taker, namespace: team, creationTimestamp: "2021-01-01T00:00:00Z"}, spec: {virtualhost: {fqdn: ir.example.com, aliases: [ing.example.com]}, routes: [{match: /, services: [{name: s, port: 80}]}]}}`),
		ir(t, `{metadata: {name: fine, namespace: team}, spec: {virtualhost: {fqdn: fine.example.com}, routes: [{match: /, services: [{name: s, port: 80}]}]}}`),
	)
	wantStatus(t, g, "team", "taker", StatusInvalid, `host "ing.example.com" is already served by Ingress default/web`)
	wantStatus(t, g, "team", "fine", StatusValid)
	if diff := cmp.Diff([]routeView{{"Prefix /", "default/web/80"}}, routesOf(g, "ing.example.com")); diff != "" {
		t.Errorf("Ingress routes (-want +got):\n%s", diff)
	}
	http, _ := hostNames(g)
	if diff := cmp.Diff([]string{"fine.example.com", "ing.example.com"}, http); diff != "" {
		t.Errorf("virtual hosts (-want +got):\n%s", diff)
	}
	if s := statusOf(g, "default", "web"); s.Status != StatusValid {
		t.Errorf("Ingress status = %+v", s)
	}
}

// ... and a newer Ingress (or one created at the same time) cannot take a root's host:
// whichever is older keeps it, so nobody can take a working host away.
func TestIngressOnAnOlderRootsHostIsInvalid(t *testing.T) {
	for _, ingTime := range []string{"2021-01-01T00:00:00Z", "2020-01-01T00:00:00Z"} {
		g := build(
			ing(t, `
metadata: {name: steal, namespace: attacker, creationTimestamp: "`+ingTime+`"}
spec:
  rules: [{host: app.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: evil, port: {number: 80}}}}]}}]
`),
			ir(t, `{metadata: {name: app, namespace: infra, creationTimestamp: "2020-01-01T00:00:00Z"}, spec: {virtualhost: {fqdn: app.example.com}, routes: [{match: /, services: [{name: web, port: 80}]}]}}`),
		)
		wantStatus(t, g, "infra", "app", StatusValid)
		if diff := cmp.Diff([]irRoute{{"/", "infra/web/80", "infra/app"}}, httpRoutes(g, "app.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
		if s := statusOf(g, "attacker", "steal"); s.Status != StatusInvalid || !strings.Contains(s.Description, `host "app.example.com" belongs to IngressRoute infra/app, which is not newer than this Ingress`) {
			t.Errorf("Ingress status = %+v", s)
		}
	}
}

// Any static validation error rejects the whole object: an invalid root's host is not
// served at all, and an invalid vertex adds none of its routes (its delegated prefix
// answers 503).
func TestIngressRouteStaticValidationErrorsRejectTheWholeObject(t *testing.T) {
	const good = `{match: /v, services: [{name: good, port: 80}]}`
	for _, tc := range []struct {
		name     string
		spec     string // spec without virtualhost, at two spaces of indentation
		vhost    string // "" = {fqdn: bad.example.com}
		rootOnly bool
		want     string
	}{
		{name: "empty routes", spec: "routes: []", want: "spec.routes is empty"},
		{name: "no routes", spec: "strategy: Random", want: "spec.routes is empty"},
		{name: "match without leading slash", spec: "routes: [" + good + ", {match: v/x, services: [{name: s, port: 80}]}]", want: `match "v/x" must start with "/"`},
		{name: "empty match", spec: "routes: [" + good + `, {match: "", services: [{name: s, port: 80}]}]`, want: `match "" must start with "/"`},
		{name: "match with a query", spec: "routes: [" + good + `, {match: "/v?x", services: [{name: s, port: 80}]}]`, want: `match "/v?x" must be a path`},
		{name: "match with a space", spec: "routes: [" + good + `, {match: "/v x", services: [{name: s, port: 80}]}]`, want: `match "/v x" must be a path`},
		{name: "match with a control character", spec: "routes: [" + good + `, {match: "/v\x00", services: [{name: s, port: 80}]}]`, want: `must be a path`},
		{name: "prefixRewrite with a control character", spec: "routes: [" + good + `, {match: /v/x, services: [{name: s, port: 80}], prefixRewrite: "/\x01"}]`, want: `prefixRewrite "/\x01" must be a path`},
		{name: "duplicate match", spec: "routes: [" + good + ", {match: /v, services: [{name: s, port: 80}]}]", want: `spec.routes[0] and spec.routes[1] both match "/v"`},
		{name: "services and delegate", spec: "routes: [" + good + ", {match: /v/x, services: [{name: s, port: 80}], delegate: {name: d}}]", want: "both services and delegate are set"},
		{name: "service and delegate", spec: "routes: [" + good + ", {match: /v/x, service: {name: s, port: 80}, delegate: {name: d}}]", want: "both services and delegate are set"},
		{name: "neither services nor delegate", spec: "routes: [" + good + ", {match: /v/x}]", want: "has neither services nor delegate"},
		{name: "both services and service", spec: "routes: [{match: /v, services: [{name: a, port: 80}], service: [{name: b, port: 80}]}]", want: "both services and service are set"},
		{name: "port 0", spec: "routes: [" + good + ", {match: /v/x, services: [{name: s, port: 0}]}]", want: `service 0 ("s"): port 0 is not in 1-65535`},
		{name: "port too large", spec: "routes: [" + good + ", {match: /v/x, services: [{name: s, port: 65536}]}]", want: "port 65536 is not in 1-65535"},
		{name: "bad service name", spec: "routes: [" + good + ", {match: /v/x, services: [{name: S_1, port: 80}]}]", want: `name "S_1" is not a Service name`},
		{name: "negative weight", spec: "routes: [" + good + ", {match: /v/x, services: [{name: s, port: 80, weight: -1}]}]", want: "weight -1 is not in 0-"},
		{name: "unknown spec.strategy", spec: "strategy: Fastest\n  routes: [" + good + "]", want: `spec.strategy "Fastest" is not one of RoundRobin, WeightedLeastRequest, RingHash, Maglev, Random`},
		{name: "unknown service strategy", spec: "routes: [" + good + ", {match: /v/x, services: [{name: s, port: 80, strategy: roundrobin}]}]", want: `strategy "roundrobin" is not one of`},
		{name: "health check path", spec: "routes: [" + good + ", {match: /v/x, services: [{name: s, port: 80, healthCheck: {path: healthz}}]}]", want: `healthCheck: path "healthz" must start with "/"`},
		{name: "health check without path", spec: "healthCheck: {intervalSeconds: 3}\n  routes: [" + good + "]", want: `spec.healthCheck: path "" must start with "/"`},
		{name: "health check negative interval", spec: "healthCheck: {path: /hz, intervalSeconds: -1}\n  routes: [" + good + "]", want: "intervalSeconds -1 is not in 0-86400"},
		{name: "health check negative threshold", spec: "routes: [" + good + ", {match: /v/x, services: [{name: s, port: 80, healthCheck: {path: /hz, unhealthyThresholdCount: -3}}]}]", want: "unhealthyThresholdCount -3 is not in"},
		{name: "health check bad host", spec: "routes: [" + good + ", {match: /v/x, services: [{name: s, port: 80, healthCheck: {path: /hz, host: bad_host}}]}]", want: `host "bad_host" is not a host name`},
		{name: "count and maxRetries", spec: "routes: [" + good + `, {match: /v/x, services: [{name: s, port: 80}], retryPolicy: {count: "1", maxRetries: "2"}}]`, want: "retryPolicy sets both count and maxRetries"},
		{name: "prefixRewrite not a path", spec: "routes: [" + good + ", {match: /v/x, services: [{name: s, port: 80}], prefixRewrite: x}]", want: `prefixRewrite "x" must start with "/"`},
		{name: "prefixRewrite on a delegating route", spec: "routes: [" + good + ", {match: /v/x, delegate: {name: d}, prefixRewrite: /}]", want: "prefixRewrite is set on a delegating route"},
		{name: "timeoutPolicy on a delegating route", spec: "routes: [" + good + ", {match: /v/x, delegate: {name: d}, timeoutPolicy: {request: 1s}}]", want: "timeoutPolicy is set on a delegating route"},
		{name: "retryPolicy on a delegating route", spec: "routes: [" + good + ", {match: /v/x, delegate: {name: d}, retryPolicy: {count: 1}}]", want: "retryPolicy is set on a delegating route"},
		{name: "permitInsecure on a delegating route", spec: "routes: [" + good + ", {match: /v/x, delegate: {name: d}, permitInsecure: true}]", want: "permitInsecure is set on a delegating route"},
		{name: "bad delegate name", spec: "routes: [" + good + ", {match: /v/x, delegate: {name: Bad_Name}}]", want: `delegate.name "Bad_Name" is not valid`},
		{name: "bad fqdn", vhost: "{fqdn: bad_host.example.com}", rootOnly: true, spec: "routes: [" + good + "]", want: `spec.virtualhost.fqdn "bad_host.example.com" is not a valid host name`},
		{name: "empty fqdn", vhost: `{fqdn: ""}`, rootOnly: true, spec: "routes: [" + good + "]", want: `spec.virtualhost.fqdn "" is empty`},
		{name: "wildcard fqdn", vhost: `{fqdn: "*.example.com"}`, rootOnly: true, spec: "routes: [" + good + "]", want: `spec.virtualhost.fqdn "*.example.com" has a wildcard`},
		{name: "wildcard alias", vhost: `{fqdn: bad.example.com, aliases: ["*.example.com"]}`, rootOnly: true, spec: "routes: [" + good + "]", want: `spec.virtualhost.aliases[0] "*.example.com" has a wildcard`},
		{name: "repeated alias", vhost: `{fqdn: bad.example.com, aliases: [BAD.example.com]}`, rootOnly: true, spec: "routes: [" + good + "]", want: `spec.virtualhost.aliases[0] "BAD.example.com" repeats a host name`},
		{name: "bad tls secretName", vhost: `{fqdn: bad.example.com, tls: {secretName: Bad_Name}}`, rootOnly: true, spec: "routes: [" + good + "]", want: `spec.virtualhost.tls.secretName "Bad_Name"`},
		{name: "empty tls secretName", vhost: `{fqdn: bad.example.com, tls: {secretName: ""}}`, rootOnly: true, spec: "routes: [" + good + "]", want: "spec.virtualhost.tls.secretName is empty"},
		{name: "bad tls secret namespace", vhost: `{fqdn: bad.example.com, tls: {secretName: "Certs/x"}}`, rootOnly: true, spec: "routes: [" + good + "]", want: `namespace "Certs" is not valid`},
		{name: "bad minimumProtocolVersion", vhost: `{fqdn: bad.example.com, tls: {secretName: cert, minimumProtocolVersion: "1.0"}}`, rootOnly: true, spec: "routes: [" + good + "]", want: `spec.virtualhost.tls.minimumProtocolVersion "1.0" is not one of`},
	} {
		t.Run("root/"+tc.name, func(t *testing.T) {
			vhost := tc.vhost
			if vhost == "" {
				vhost = "{fqdn: bad.example.com}"
			}
			cert := testutil.SelfSigned("bad.example.com")
			g := build(
				ir(t, "metadata: {name: bad, namespace: team}\nspec:\n  virtualhost: "+vhost+"\n  "+tc.spec+"\n"),
				ir(t, `{metadata: {name: other, namespace: infra}, spec: {virtualhost: {fqdn: other.example.com}, routes: [{match: /, services: [{name: web, port: 80}]}]}}`),
				tlsSecret("team", "cert", cert.CertPEM, cert.KeyPEM),
			)
			if s := wantStatus(t, g, "team", "bad", StatusInvalid, "not served: ", tc.want); !s.Root {
				t.Errorf("status = %+v, want Root", s)
			}
			http, https := hostNames(g)
			if diff := cmp.Diff([]string{"other.example.com"}, http); diff != "" || len(https) != 0 {
				t.Errorf("virtual hosts (-want +got):\n%s (https %v)", diff, https)
			}
			wantStatus(t, g, "infra", "other", StatusValid)
		})
		if tc.rootOnly {
			continue
		}
		t.Run("vertex/"+tc.name, func(t *testing.T) {
			g := build(
				ir(t, "metadata: {name: bad, namespace: team}\nspec:\n  "+tc.spec+"\n"),
				ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: root.example.com}
  routes:
  - {match: /, services: [{name: web, port: 80}]}
  - {match: /v, delegate: {name: bad, namespace: team}}
`),
			)
			wantStatus(t, g, "team", "bad", StatusInvalid, "not served: ", tc.want)
			wantStatus(t, g, "infra", "root", StatusValid, `not delegated to IngressRoute team/bad: it is invalid`)
			want := []irRoute{{"/v", "503", "infra/root"}, {"/", "infra/web/80", "infra/root"}}
			if diff := cmp.Diff(want, httpRoutes(g, "root.example.com")); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
		})
	}
}

// When several objects of one root's tree have a route for the same match, the object
// with the longest delegated prefix serves it, then the one closest to the root; the
// other is told.
func TestIngressRouteConflictingRoutesInOneTree(t *testing.T) {
	t.Run("longest delegated prefix wins", func(t *testing.T) {
		g := build(
			ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: blog.example.com}
  routes:
  - {match: /blog/old, services: [{name: old, port: 80}]}
  - {match: /blog, delegate: {name: blog, namespace: blog}}
`),
			ir(t, `
metadata: {name: blog, namespace: blog}
spec:
  routes:
  - {match: /blog, services: [{name: web, port: 80}]}
  - {match: /blog/old, services: [{name: legacy, port: 80}]}
`),
		)
		want := []irRoute{{"/blog/old", "blog/legacy/80", "blog/blog"}, {"/blog", "blog/web/80", "blog/blog"}}
		if diff := cmp.Diff(want, httpRoutes(g, "blog.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
		wantStatus(t, g, "infra", "root", StatusValid, `route "/blog/old" is not served on blog.example.com: IngressRoute infra/root delegates "/blog" to blog/blog`)
		if s := irStatus(t, g, "blog", "blog"); strings.Contains(s.Description, "is not served") {
			t.Errorf("the winner was told it lost: %q", s.Description)
		}
	})
	t.Run("then closest to the root", func(t *testing.T) {
		g := build(
			ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: near.example.com}
  routes:
  - {match: /a, delegate: {name: near, namespace: x}}
`),
			ir(t, `
metadata: {name: near, namespace: x}
spec:
  routes:
  - {match: /a/b, services: [{name: near, port: 80}]}
  - {match: /a, delegate: {name: far}}
`),
			ir(t, `
metadata: {name: far, namespace: x}
spec:
  routes:
  - {match: /a/b, services: [{name: far, port: 80}]}
  - {match: /a/c, services: [{name: far, port: 80}]}
`),
		)
		want := []irRoute{{"/a/b", "x/near/80", "x/near"}, {"/a/c", "x/far/80", "x/far"}, {"/a", "404", "infra/root"}}
		if diff := cmp.Diff(want, httpRoutes(g, "near.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
		wantStatus(t, g, "x", "far", StatusValid, `route "/a/b" is not served on near.example.com: IngressRoute x/near, closer to the root, serves it`)
	})
}

// --root-namespaces: roots elsewhere are invalid; vertices may live anywhere.
func TestIngressRouteRootNamespaces(t *testing.T) {
	g := buildWith(Options{RootNamespaces: []string{"infra", "platform"}},
		ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: ok.example.com}
  routes: [{match: /, delegate: {name: v, namespace: team}}]
`),
		ir(t, `{metadata: {name: v, namespace: team}, spec: {routes: [{match: /, services: [{name: s, port: 80}]}]}}`),
		ir(t, `{metadata: {name: rogue, namespace: team}, spec: {virtualhost: {fqdn: rogue.example.com}, routes: [{match: /, services: [{name: s, port: 80}]}]}}`),
	)
	wantStatus(t, g, "infra", "root", StatusValid)
	wantStatus(t, g, "team", "v", StatusValid)
	wantStatus(t, g, "team", "rogue", StatusInvalid, "root IngressRoutes (with spec.virtualhost) are only allowed in namespaces infra, platform")
	http, _ := hostNames(g)
	if diff := cmp.Diff([]string{"ok.example.com"}, http); diff != "" {
		t.Errorf("virtual hosts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]irRoute{{"/", "team/s/80", "team/v"}}, httpRoutes(g, "ok.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	// A root rejected for its namespace does not take a host from a valid root.
	g = buildWith(Options{RootNamespaces: []string{"infra"}},
		ir(t, `{metadata: {name: root, namespace: infra}, spec: {virtualhost: {fqdn: ok.example.com}, routes: [{match: /, services: [{name: s, port: 80}]}]}}`),
		ir(t, `{metadata: {name: rogue, namespace: team}, spec: {virtualhost: {fqdn: ok.example.com}, routes: [{match: /, services: [{name: s, port: 80}]}]}}`),
	)
	wantStatus(t, g, "infra", "root", StatusValid)
	wantStatus(t, g, "team", "rogue", StatusInvalid, "only allowed in namespaces infra")
}

// DisableIngress turns Ingress processing off; IngressRoutes are still served, even on a
// host an Ingress names.
func TestIngressRouteServedWhenIngressIsDisabled(t *testing.T) {
	objs := []runtime.Object{
		ing(t, `{metadata: {name: web, creationTimestamp: "2020-01-01T00:00:00Z"}, spec: {rules: [{host: shared.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]}}`),
		ir(t, `{metadata: {name: root, namespace: infra, creationTimestamp: "2021-01-01T00:00:00Z"}, spec: {virtualhost: {fqdn: shared.example.com}, routes: [{match: /, services: [{name: s, port: 80}]}]}}`),
	}
	g := buildWith(Options{DisableIngress: true}, objs...)
	if diff := cmp.Diff([]irRoute{{"/", "infra/s/80", "infra/root"}}, httpRoutes(g, "shared.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantStatus(t, g, "infra", "root", StatusValid)
	for _, s := range g.Statuses {
		if s.Object.Kind == KindIngress {
			t.Errorf("Ingress processed although disabled: %+v", s)
		}
	}
	g = build(objs...)
	wantStatus(t, g, "infra", "root", StatusInvalid, "already served by Ingress default/web")
}

func TestIngressRouteTLS(t *testing.T) {
	cert := testutil.SelfSigned("secure.example.com", "www.secure.example.com")
	other := testutil.SelfSigned("other.example.com")
	expired := testutil.Expired("secure.example.com")
	const routes = `
  routes:
  - {match: /, services: [{name: web, port: 80}]}
  - {match: /.well-known/acme-challenge, services: [{name: acme, port: 80}], permitInsecure: true}
  - {match: /team, delegate: {name: v, namespace: team}}
`
	doc := func(tls string) string {
		return "metadata: {name: root, namespace: infra}\nspec:\n  virtualhost: {fqdn: secure.example.com, aliases: [www.secure.example.com], tls: " + tls + "}" + routes
	}
	vertex := ir(t, `
metadata: {name: v, namespace: team}
spec:
  routes:
  - {match: /team, services: [{name: app, port: 80}]}
  - {match: /team/public, services: [{name: app, port: 80}], permitInsecure: true}
`)

	t.Run("secret in the root's namespace", func(t *testing.T) {
		g := build(ir(t, doc("{secretName: cert}")), vertex, tlsSecret("infra", "cert", cert.CertPEM, cert.KeyPEM))
		wantStatus(t, g, "infra", "root", StatusValid)
		http, https := hostNames(g)
		hosts := []string{"secure.example.com", "www.secure.example.com"}
		if !cmp.Equal(hosts, http) || !cmp.Equal(hosts, https) {
			t.Fatalf("virtual hosts = %v / %v, want %v on both", http, https, hosts)
		}
		secure := []irRoute{
			{"/.well-known/acme-challenge", "infra/acme/80", "infra/root"},
			{"/team/public", "team/app/80", "team/v"},
			{"/team", "team/app/80", "team/v"},
			{"/", "infra/web/80", "infra/root"},
		}
		plain := []irRoute{
			{"/.well-known/acme-challenge", "infra/acme/80", "infra/root"},
			{"/team/public", "team/app/80", "team/v"},
			{"/team", "https", "team/v"},
			{"/", "https", "infra/root"},
		}
		for _, h := range hosts {
			svh := httpsHost(g, h)
			if svh.Secret == nil || svh.Secret.Name != "infra/cert" || svh.MinTLSVersion != "1.1" {
				t.Errorf("%s: secret %v, minimum TLS %q; want infra/cert and the seed's default 1.1", h, svh.Secret, svh.MinTLSVersion)
			}
			if diff := cmp.Diff(secure, httpsRoutes(g, h)); diff != "" {
				t.Errorf("%s HTTPS routes (-want +got):\n%s", h, diff)
			}
			if diff := cmp.Diff(plain, httpRoutes(g, h)); diff != "" {
				t.Errorf("%s HTTP routes (-want +got):\n%s", h, diff)
			}
		}
	})

	t.Run("minimumProtocolVersion", func(t *testing.T) {
		for _, v := range []string{"1.1", "1.2", "1.3"} {
			g := build(ir(t, doc(`{secretName: cert, minimumProtocolVersion: "`+v+`"}`)), vertex, tlsSecret("infra", "cert", cert.CertPEM, cert.KeyPEM))
			if svh := httpsHost(g, "secure.example.com"); svh == nil || svh.MinTLSVersion != v {
				t.Errorf("minimumProtocolVersion %s: secure host %+v", v, svh)
			}
		}
	})

	certs := tlsSecret("certs", "wild", cert.CertPEM, cert.KeyPEM)
	for _, tc := range []struct {
		name       string
		secretName string
		objs       []runtime.Object
		want       string // "" = valid
	}{
		{"delegated to the root's namespace", "certs/wild", []runtime.Object{certs, certDelegation(t, `{metadata: {name: d, namespace: certs}, spec: {delegations: [{secretName: wild, targetNamespaces: [other, infra]}]}}`)}, ""},
		{"delegated to every namespace", "certs/wild", []runtime.Object{certs, certDelegation(t, `{metadata: {name: d, namespace: certs}, spec: {delegations: [{secretName: wild, targetNamespaces: ["*"]}]}}`)}, ""},
		{"own namespace spelled out", "infra/cert", []runtime.Object{tlsSecret("infra", "cert", cert.CertPEM, cert.KeyPEM)}, ""},
		{"no delegation", "certs/wild", []runtime.Object{certs},
			`spec.virtualhost.tls.secretName "certs/wild": namespace certs does not delegate Secret wild to namespace infra; add a TLSCertificateDelegation in certs listing it`},
		{"delegated to other namespaces", "certs/wild", []runtime.Object{certs, certDelegation(t, `{metadata: {name: d, namespace: certs}, spec: {delegations: [{secretName: wild, targetNamespaces: [team]}]}}`)},
			"add a TLSCertificateDelegation in certs"},
		{"another secret delegated", "certs/wild", []runtime.Object{certs, certDelegation(t, `{metadata: {name: d, namespace: certs}, spec: {delegations: [{secretName: other, targetNamespaces: ["*"]}]}}`)},
			"add a TLSCertificateDelegation in certs"},
		{"delegation in another namespace", "certs/wild", []runtime.Object{certs, certDelegation(t, `{metadata: {name: d, namespace: infra}, spec: {delegations: [{secretName: wild, targetNamespaces: ["*"]}]}}`)},
			"add a TLSCertificateDelegation in certs"},
		{"missing secret", "absent", nil, "spec.virtualhost.tls: Secret infra/absent not found"},
		{"missing delegated secret", "certs/absent", []runtime.Object{certDelegation(t, `{metadata: {name: d, namespace: certs}, spec: {delegations: [{secretName: absent, targetNamespaces: ["*"]}]}}`)}, "Secret certs/absent not found"},
		{"key does not match", "cert", []runtime.Object{tlsSecret("infra", "cert", cert.CertPEM, other.KeyPEM)}, "Secret infra/cert: invalid certificate or key"},
		{"expired", "cert", []runtime.Object{tlsSecret("infra", "cert", expired.CertPEM, expired.KeyPEM)}, "Secret infra/cert: certificate expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(append(tc.objs, ir(t, doc("{secretName: "+tc.secretName+"}")), vertex)...)
			http, https := hostNames(g)
			if tc.want == "" {
				wantStatus(t, g, "infra", "root", StatusValid)
				if len(https) != 2 || len(http) != 2 {
					t.Errorf("virtual hosts = %v / %v, want both hosts on both listeners", http, https)
				}
				return
			}
			wantStatus(t, g, "infra", "root", StatusInvalid, tc.want)
			// Never served in plain text instead.
			if len(http) != 0 || len(https) != 0 {
				t.Errorf("virtual hosts = %v / %v, want none", http, https)
			}
			wantStatus(t, g, "team", "v", StatusOrphaned)
		})
	}
}

// spec.strategy is the default of every service; a service's own strategy overrides it.
// Each distinct policy of one Service port is a cluster of its own; the default policy
// keeps the plain namespace/service/port name.
func TestIngressRouteLoadBalancingStrategies(t *testing.T) {
	g := build(ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: lb.example.com}
  strategy: WeightedLeastRequest
  routes:
  - {match: /default, services: [{name: s, port: 80}]}
  - {match: /ring, services: [{name: s, port: 80, strategy: RingHash}]}
  - {match: /ring2, services: [{name: s, port: 80, strategy: RingHash}]}
  - {match: /maglev, services: [{name: s, port: 80, strategy: Maglev}]}
  - {match: /random, services: [{name: s, port: 80, strategy: Random}]}
  - {match: /rr, services: [{name: s, port: 80, strategy: RoundRobin}]}
`), ir(t, `
metadata: {name: plain, namespace: infra}
spec:
  virtualhost: {fqdn: plain.example.com}
  routes:
  - {match: /, services: [{name: s, port: 80}]}
`))
	byMatch := map[string]*Cluster{}
	for _, r := range httpHost(g, "lb.example.com").Routes {
		byMatch[r.Path.Value] = r.Clusters[0].Cluster
	}
	for match, lb := range map[string]LoadBalancer{"/default": LBWeightedLeastRequest, "/ring": LBRingHash, "/maglev": LBMaglev, "/random": LBRandom} {
		c := byMatch[match]
		if c.LoadBalancer != lb || !strings.HasPrefix(c.Name, "infra/s/80/") {
			t.Errorf("%s: cluster %q with %q, want infra/s/80/<policy> with %s", match, c.Name, c.LoadBalancer, lb)
		}
	}
	if byMatch["/ring"] != byMatch["/ring2"] {
		t.Errorf("one policy of one Service port must share a cluster: %q vs %q", byMatch["/ring"].Name, byMatch["/ring2"].Name)
	}
	names := map[string]bool{}
	for _, m := range []string{"/default", "/ring", "/maglev", "/random", "/rr"} {
		names[byMatch[m].Name] = true
	}
	if len(names) != 5 {
		t.Errorf("distinct policies must give distinct clusters, got %v", names)
	}
	if c := byMatch["/rr"]; c.Name != "infra/s/80" {
		t.Errorf("RoundRobin cluster = %q, want the plain name", c.Name)
	}
	if c := httpHost(g, "plain.example.com").Routes[0].Clusters[0].Cluster; c.Name != "infra/s/80" || (c.LoadBalancer != "" && c.LoadBalancer != LBRoundRobin) {
		t.Errorf("default cluster = %q with %q, want the plain name, round robin", c.Name, c.LoadBalancer)
	}
	if len(g.Clusters()) != 5 {
		t.Errorf("got %d clusters, want 5", len(g.Clusters()))
	}
}

// Health checks get the seed's defaults; spec.healthCheck applies to services without
// their own.
func TestIngressRouteHealthChecks(t *testing.T) {
	g := build(ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: hc.example.com}
  healthCheck: {path: /healthz}
  routes:
  - {match: /inherit, services: [{name: a, port: 80}]}
  - match: /own
    services:
    - name: b
      port: 80
      healthCheck: {path: /ready, host: probe.example.com, intervalSeconds: 10, timeoutSeconds: 3, unhealthyThresholdCount: 5, healthyThresholdCount: 4}
`), ir(t, `
metadata: {name: none, namespace: infra}
spec:
  virtualhost: {fqdn: none.example.com}
  routes: [{match: /, services: [{name: c, port: 80}]}]
`))
	got := map[string]*HealthCheck{}
	for _, c := range g.Clusters() {
		got[c.Service.Name] = c.HealthCheck
	}
	want := map[string]*HealthCheck{
		"a": {Path: "/healthz", Host: "contour-envoy-healthcheck", Interval: 5 * time.Second, Timeout: 2 * time.Second, UnhealthyThreshold: 3, HealthyThreshold: 2},
		"b": {Path: "/ready", Host: "probe.example.com", Interval: 10 * time.Second, Timeout: 3 * time.Second, UnhealthyThreshold: 5, HealthyThreshold: 4},
		"c": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("health checks (-want +got):\n%s", diff)
	}
	for _, c := range g.Clusters() {
		if plain := c.Name == c.Service.Namespace+"/"+c.Service.Name+"/80"; plain != (c.HealthCheck == nil) {
			t.Errorf("cluster %q: a health-checked cluster needs a policy suffix, a plain one none", c.Name)
		}
	}
}

func TestIngressRouteWeights(t *testing.T) {
	for _, tc := range []struct {
		name     string
		services string
		want     string
	}{
		{"none set: equal", "[{name: a, port: 80}, {name: b, port: 80}]", "infra/a/80=1 infra/b/80=1"},
		{"some set: unset is 0", "[{name: a, port: 80, weight: 90}, {name: b, port: 80}, {name: c, port: 80, weight: 10}]", "infra/a/80=90 infra/b/80=0 infra/c/80=10"},
		{"explicit zero", "[{name: a, port: 80, weight: 0}, {name: b, port: 80, weight: 100}]", "infra/a/80=0 infra/b/80=100"},
		{"all zero: equal", "[{name: a, port: 80, weight: 0}, {name: b, port: 80, weight: 0}]", "infra/a/80=1 infra/b/80=1"},
		{"duplicates summed", "[{name: a, port: 80, weight: 2}, {name: b, port: 80, weight: 5}, {name: a, port: 80, weight: 3}]", "infra/a/80=5 infra/b/80=5"},
		{"duplicates without weights summed", "[{name: a, port: 80}, {name: b, port: 80}, {name: a, port: 80}]", "infra/a/80=2 infra/b/80=1"},
		{"one service twice", "[{name: a, port: 80, weight: 7}, {name: a, port: 80, weight: 3}]", "infra/a/80=10"},
		{"one service", "[{name: a, port: 80, weight: 7}]", "infra/a/80=7"},
		{"service spelling", "[{name: a, port: 80}]", "infra/a/80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			field := "services"
			if strings.Contains(tc.name, "spelling") {
				field = "service"
			}
			g := build(ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: w.example.com}
  routes: [{match: /, `+field+`: `+tc.services+`}]
`))
			wantStatus(t, g, "infra", "root", StatusValid)
			if diff := cmp.Diff([]irRoute{{"/", tc.want, "infra/root"}}, httpRoutes(g, "w.example.com")); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
		})
	}
}

// A prefixRewrite ending in "/" on a match that does not gets a second route for the match
// followed by "/", so that "/app/x" becomes "/x" and not "//x" — unless the tree already
// has a route for that.
func TestIngressRoutePrefixRewriteAddsASlashRoute(t *testing.T) {
	g := build(
		ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: rw.example.com}
  routes:
  - {match: /app, services: [{name: app, port: 80}], prefixRewrite: /}
  - {match: /v2, services: [{name: v2, port: 80}], prefixRewrite: /api/}
  - {match: /keep/, services: [{name: keep, port: 80}], prefixRewrite: /}
  - {match: /noslash, services: [{name: ns, port: 80}], prefixRewrite: /x}
  - {match: /taken, services: [{name: taken, port: 80}], prefixRewrite: /}
  - {match: /taken/, delegate: {name: v, namespace: team}}
`),
		ir(t, `{metadata: {name: v, namespace: team}, spec: {routes: [{match: /taken/, services: [{name: other, port: 80}]}]}}`),
	)
	type rw struct{ Match, Rewrite, To string }
	var got []rw
	for _, r := range httpHost(g, "rw.example.com").Routes {
		got = append(got, rw{r.Path.Value, r.PrefixRewrite, r.Clusters[0].Cluster.Name})
	}
	want := []rw{
		{"/noslash", "/x", "infra/ns/80"},
		{"/taken/", "", "team/other/80"},
		{"/keep/", "/", "infra/keep/80"},
		{"/taken", "/", "infra/taken/80"},
		{"/app/", "/", "infra/app/80"},
		{"/app", "/", "infra/app/80"},
		{"/v2/", "/api/", "infra/v2/80"},
		{"/v2", "/api/", "infra/v2/80"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

// Every IngressRoute gets exactly one status, of kind IngressRoute, with Root set for
// roots and Hosts the root hosts it is served on. A root that is not served reports its
// own hosts anyway (the metrics count invalid roots by host).
func TestIngressRouteStatusOnePerObject(t *testing.T) {
	g := build(
		ir(t, `{metadata: {name: r1, namespace: infra}, spec: {virtualhost: {fqdn: one.example.com, aliases: [www.one.example.com]}, routes: [{match: /, delegate: {name: shared, namespace: team}}]}}`),
		ir(t, `{metadata: {name: r2, namespace: infra}, spec: {virtualhost: {fqdn: Two.Example.com}, routes: [{match: /, delegate: {name: shared, namespace: team}}, {match: /x, delegate: {name: missing}}]}}`),
		ir(t, `{metadata: {name: shared, namespace: team}, spec: {routes: [{match: /s, services: [{name: s, port: 80}]}]}}`),
		ir(t, `{metadata: {name: orphan, namespace: team}, spec: {routes: [{match: /s, services: [{name: s, port: 80}]}]}}`),
		ir(t, `{metadata: {name: bad, namespace: team}, spec: {virtualhost: {fqdn: bad.example.com}, routes: []}}`),
		ir(t, `{metadata: {name: theirs, namespace: team, annotations: {kubernetes.io/ingress.class: other}}, spec: {virtualhost: {fqdn: theirs.example.com}, routes: [{match: /, services: [{name: s, port: 80}]}]}}`),
		ing(t, `{metadata: {name: i}, spec: {rules: [{host: ing.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]}}`),
	)
	var got []Status
	for _, s := range g.Statuses {
		if s.Object.Kind == KindIngressRoute {
			s := *s
			s.Description = ""
			got = append(got, s)
		}
	}
	ref := func(ns, name string) ObjectRef { return ObjectRef{Kind: KindIngressRoute, Namespace: ns, Name: name} }
	want := []Status{
		{Object: ref("infra", "r1"), Status: StatusValid, Root: true, Hosts: []string{"one.example.com", "www.one.example.com"}},
		{Object: ref("infra", "r2"), Status: StatusValid, Root: true, Hosts: []string{"two.example.com"}, Noted: true}, // its delegation to missing is not followed
		{Object: ref("team", "bad"), Status: StatusInvalid, Root: true, Hosts: []string{"bad.example.com"}},
		{Object: ref("team", "orphan"), Status: StatusOrphaned},
		{Object: ref("team", "shared"), Status: StatusValid, Hosts: []string{"one.example.com", "two.example.com", "www.one.example.com"}, Noted: true}, // Service s is missing
		{Object: ref("team", "theirs"), Status: StatusIgnored, Root: true, Hosts: []string{"theirs.example.com"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if s := statusOf(g, "default", "i"); s.Object.Kind != KindIngress || s.Status != StatusValid {
		t.Errorf("Ingress status = %+v", s)
	}
	// Host names are lower-cased, as virtual hosts are.
	if httpHost(g, "two.example.com") == nil {
		t.Errorf("virtual host two.example.com missing: %v", g.HTTP)
	}
}

func TestIngressRouteBuildIsDeterministic(t *testing.T) {
	cert := testutil.SelfSigned("a.example.com")
	objs := []runtime.Object{
		tlsSecret("infra", "cert", cert.CertPEM, cert.KeyPEM),
		ir(t, `{metadata: {name: a, namespace: infra}, spec: {virtualhost: {fqdn: a.example.com, tls: {secretName: cert}}, routes: [{match: /, delegate: {name: v, namespace: team}}, {match: /x, services: [{name: s, port: 80, strategy: Maglev}]}]}}`),
		ir(t, `{metadata: {name: b, namespace: infra}, spec: {virtualhost: {fqdn: b.example.com}, routes: [{match: /, delegate: {name: v, namespace: team}}]}}`),
		ir(t, `{metadata: {name: v, namespace: team}, spec: {routes: [{match: /, services: [{name: s, port: 80}], timeoutPolicy: {request: nonsense}}, {match: /y, delegate: {name: w}}]}}`),
		ir(t, `{metadata: {name: w, namespace: team}, spec: {routes: [{match: /z, services: [{name: s, port: 80}]}]}}`),
	}
	first := build(objs...)
	for i := 0; i < 20; i++ {
		if diff := cmp.Diff(first, build(objs...)); diff != "" {
			t.Fatalf("build %d differs:\n%s", i, diff)
		}
	}
}

// A refused delegation answers 503 for its whole prefix, even where another object of the
// tree, delegated a shorter prefix, has a route with the same match: the traffic the root
// gave to the broken delegate must not go to another team instead.
func TestIngressRouteRefusedDelegationIsNotTakenByAShorterDelegation(t *testing.T) {
	g := build(
		ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: r.example.com}
  routes:
  - {match: /, delegate: {name: w, namespace: www}}
  - {match: /a, delegate: {name: missing, namespace: a}}
`),
		ir(t, `
metadata: {name: w, namespace: www}
spec:
  routes:
  - {match: /, services: [{name: web, port: 80}]}
  - {match: /a, services: [{name: web, port: 80}]}
`),
	)
	want := []irRoute{
		{"/a", "503", "infra/root"},
		{"/", "www/web/80", "www/w"},
	}
	if diff := cmp.Diff(want, httpRoutes(g, "r.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantStatus(t, g, "infra", "root", StatusValid, `route "/a": not delegated to IngressRoute a/missing: it does not exist`)
	wantStatus(t, g, "www", "w", StatusValid, `route "/a" is not served on r.example.com: IngressRoute infra/root delegates "/a" to a/missing, a delegation that is refused, so it answers 503`)
}

// ... but an object delegated the same prefix closer to the root still wins over a refused
// delegation deeper in the tree.
func TestIngressRouteRefusedDelegationLosesToACloserDelegation(t *testing.T) {
	g := build(
		ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: r.example.com}
  routes:
  - {match: /, delegate: {name: w, namespace: www}}
  - {match: /a, delegate: {name: v, namespace: a}}
`),
		ir(t, `{metadata: {name: w, namespace: www}, spec: {routes: [{match: /, services: [{name: web, port: 80}]}, {match: /a, delegate: {name: missing}}]}}`),
		ir(t, `{metadata: {name: v, namespace: a}, spec: {routes: [{match: /a, services: [{name: app, port: 80}]}]}}`),
	)
	want := []irRoute{{"/a", "a/app/80", "a/v"}, {"/", "www/web/80", "www/w"}}
	if diff := cmp.Diff(want, httpRoutes(g, "r.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantStatus(t, g, "www", "w", StatusValid, `route "/a": not delegated: IngressRoute infra/root delegates "/a" to a/v`)
}

// A plain-HTTP IngressRoute host that an Ingress's wildcard certificate covers is reached
// over TLS through that certificate: its connections must reach its own routes, never the
// wildcard Ingress's.
func TestIngressRouteHostCoveredByAWildcardCertificateKeepsItsRoutes(t *testing.T) {
	c := testutil.SelfSigned("*.example.com")
	g := build(tlsSecret("default", "wild", c.CertPEM, c.KeyPEM), ing(t, `
metadata: {name: wild}
spec:
  tls: [{hosts: ["*.example.com"], secretName: wild}]
  rules: [{host: "*.example.com", http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: wild, port: {number: 80}}}}]}}]
`),
		ir(t, `{metadata: {name: root, namespace: team}, spec: {virtualhost: {fqdn: app.example.com}, routes: [{match: /, services: [{name: app, port: 80}]}]}}`),
	)
	wantStatus(t, g, "team", "root", StatusValid)
	svh := httpsHost(g, "*.example.com")
	if svh == nil {
		t.Fatalf("secure hosts = %v", g.HTTPS)
	}
	var also []string
	for _, vh := range svh.Also {
		also = append(also, vh.Name)
		if diff := cmp.Diff([]irRoute{{"/", "team/app/80", "team/root"}}, viewIRRoutes(vh.Routes)); diff != "" {
			t.Errorf("routes of %s reached through the wildcard certificate (-want +got):\n%s", vh.Name, diff)
		}
	}
	if diff := cmp.Diff([]string{"app.example.com"}, also); diff != "" {
		t.Errorf("hosts reached through the wildcard certificate (-want +got):\n%s", diff)
	}
}

// A route deeper than a prefix the tree delegated elsewhere is not served by the object
// holding the shorter prefix: "/a/x" of the object delegated "/" stays inside "/a", which
// belongs to another object (here one that cannot be served, so it answers 503).
func TestIngressRouteDeeperRouteStaysInsideAnotherDelegation(t *testing.T) {
	g := build(
		ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: r.example.com}
  routes:
  - {match: /, delegate: {name: w, namespace: www}}
  - {match: /a, delegate: {name: missing, namespace: a}}
`),
		ir(t, `
metadata: {name: w, namespace: www}
spec:
  routes:
  - {match: /, services: [{name: web, port: 80}]}
  - {match: /a/x, services: [{name: web, port: 80}]}
`),
	)
	want := []irRoute{
		{"/a", "503", "infra/root"},
		{"/", "www/web/80", "www/w"},
	}
	if diff := cmp.Diff(want, httpRoutes(g, "r.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantStatus(t, g, "www", "w", StatusValid, `route "/a/x" is not served on r.example.com: IngressRoute infra/root delegates "/a" to a/missing, a delegation that is refused, so it answers 503`)
}

// A delegate may hand its whole prefix on: the object it delegates the same prefix to
// serves, while a sibling delegation of that prefix made deeper in another branch does not.
func TestIngressRouteSamePrefixDelegatedOnVersusElsewhere(t *testing.T) {
	g := build(
		ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: r.example.com}
  routes:
  - {match: /, delegate: {name: w, namespace: www}}
  - {match: /a, delegate: {name: v, namespace: a}}
`),
		ir(t, `
metadata: {name: w, namespace: www}
spec:
  routes:
  - {match: /, services: [{name: web, port: 80}]}
  - {match: /a, delegate: {name: z, namespace: z}}
`),
		ir(t, `
metadata: {name: v, namespace: a}
spec:
  routes:
  - {match: /a, delegate: {name: v2}}
`),
		ir(t, `
metadata: {name: v2, namespace: a}
spec:
  routes:
  - {match: /a, services: [{name: app, port: 80}]}
`),
		ir(t, `
metadata: {name: z, namespace: z}
spec:
  routes:
  - {match: /a/z, services: [{name: zed, port: 80}]}
`),
	)
	want := []irRoute{
		{"/a", "a/app/80", "a/v2"},
		{"/", "www/web/80", "www/w"},
	}
	if diff := cmp.Diff(want, httpRoutes(g, "r.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	// w oversteps: "/a" is not its to hand out, so z is never reached.
	wantStatus(t, g, "www", "w", StatusValid, `route "/a": not delegated: IngressRoute infra/root delegates "/a" to a/v`)
	wantStatus(t, g, "z", "z", StatusOrphaned)
}

// Review finding: a team delegated "/" cannot delegate (nor answer 503) inside "/admin",
// which the root gave to another team.
func TestIngressRouteCannotDelegateInsideAnotherTeamsPrefix(t *testing.T) {
	for _, target := range []string{"a2", "missing"} {
		t.Run(target, func(t *testing.T) {
			g := build(
				ir(t, `
metadata: {name: app, namespace: infra}
spec:
  virtualhost: {fqdn: app.example.com}
  routes:
  - {match: /, delegate: {name: a, namespace: team-a}}
  - {match: /admin, delegate: {name: b, namespace: team-b}}
`),
				ir(t, `{metadata: {name: a, namespace: team-a}, spec: {routes: [{match: /, services: [{name: web, port: 80}]}, {match: /admin/x, delegate: {name: `+target+`}}]}}`),
				ir(t, `{metadata: {name: a2, namespace: team-a}, spec: {routes: [{match: /admin/x, services: [{name: evil, port: 80}]}]}}`),
				ir(t, `{metadata: {name: b, namespace: team-b}, spec: {routes: [{match: /admin, services: [{name: admin, port: 80}]}, {match: /admin/x/y, services: [{name: admin-y, port: 80}]}]}}`),
			)
			want := []irRoute{
				{"/admin/x/y", "team-b/admin-y/80", "team-b/b"},
				{"/admin", "team-b/admin/80", "team-b/b"},
				{"/", "team-a/web/80", "team-a/a"},
			}
			if diff := cmp.Diff(want, httpRoutes(g, "app.example.com")); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
			wantStatus(t, g, "team-a", "a", StatusValid, `route "/admin/x": not delegated: IngressRoute infra/app delegates "/admin" to team-b/b`)
			wantStatus(t, g, "team-b", "b", StatusValid)
		})
	}
}

// Review finding: delegating to a vertex that the root already delegates does not take it
// away from the root's delegation; and a vertex handed both "/shop" and "/shop/reviews"
// by the root keeps them apart from the shop team's own delegation of "/shop/reviews".
func TestIngressRouteDelegatingAnAlreadyDelegatedVertex(t *testing.T) {
	g := build(
		ir(t, `
metadata: {name: app, namespace: infra}
spec:
  virtualhost: {fqdn: app.example.com}
  routes:
  - {match: /, delegate: {name: a, namespace: team-a}}
  - {match: /blog, delegate: {name: blog, namespace: blog}}
`),
		ir(t, `{metadata: {name: a, namespace: team-a}, spec: {routes: [{match: /, services: [{name: web, port: 80}]}, {match: /blog, delegate: {name: blog, namespace: blog}}]}}`),
		ir(t, `{metadata: {name: blog, namespace: blog}, spec: {routes: [{match: /blog, services: [{name: blog, port: 80}]}]}}`),
	)
	want := []irRoute{{"/blog", "blog/blog/80", "blog/blog"}, {"/", "team-a/web/80", "team-a/a"}}
	if diff := cmp.Diff(want, httpRoutes(g, "app.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantStatus(t, g, "blog", "blog", StatusValid, `"/blog" delegated by IngressRoute infra/app`)
	wantStatus(t, g, "team-a", "a", StatusValid, `route "/blog": not delegated: IngressRoute infra/app delegates "/blog" to blog/blog`)
}

// Review finding: a long chain of delegations of one prefix, inside a team's own
// namespace, costs time linear in its length, not cubic (4,000 objects took 17 s).
func TestIngressRouteLongDelegationChainIsCheap(t *testing.T) {
	const n = 4000
	objs := []runtime.Object{ir(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: chain.example.com}
  routes: [{match: /, delegate: {name: v0, namespace: t}}]
`)}
	for i := 0; i < n; i++ {
		next := fmt.Sprintf("v%d", i+1)
		if i == n-1 {
			next = "missing"
		}
		objs = append(objs, ir(t, fmt.Sprintf(`{metadata: {name: v%d, namespace: t}, spec: {routes: [{match: /a, services: [{name: s, port: 80}]}, {match: /, delegate: {name: %s}}]}}`, i, next)))
	}
	start := time.Now()
	g := build(objs...)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("building a chain of %d delegations took %s", n, d)
	}
	want := []irRoute{{"/a", "t/s/80", "t/v0"}, {"/", "503", "t/v3999"}}
	if diff := cmp.Diff(want, httpRoutes(g, "chain.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

// Review finding: a newer Ingress cannot take a root's host by adding a decoy root that
// claims the same host: the decoy is newer, so the root keeps serving it, and the
// Ingress does not get it.
func TestIngressRouteDecoyRootDoesNotHandAHostToAnIngress(t *testing.T) {
	g := build(
		ir(t, `{metadata: {name: app, namespace: infra, creationTimestamp: "2020-01-01T00:00:00Z"}, spec: {virtualhost: {fqdn: app.example.com}, routes: [{match: /, services: [{name: web, port: 80}]}]}}`),
		ir(t, `{metadata: {name: x, namespace: evil, creationTimestamp: "2021-01-01T00:00:00Z"}, spec: {virtualhost: {fqdn: decoy.example.com, aliases: [app.example.com]}, routes: [{match: /, services: [{name: evil, port: 80}]}]}}`),
		ing(t, `
metadata: {name: steal, namespace: evil, creationTimestamp: "2021-01-01T00:00:00Z"}
spec:
  rules: [{host: app.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: evil, port: {number: 80}}}}]}}]
`),
	)
	if got := routesOf(g, "app.example.com"); len(got) != 1 || got[0].Cluster != "infra/web/80" {
		t.Errorf("app.example.com routes = %v, want the older root's infra/web only", got)
	}
	wantStatus(t, g, "evil", "x", StatusInvalid, `host "app.example.com" belongs to the older IngressRoute infra/app`)
	if s := statusOf(g, "evil", "steal"); s.Status != StatusInvalid {
		t.Errorf("Ingress status = %+v, want invalid", s)
	}
}

// Review finding: a co-holder of a zone (handed it by the object closer to the root)
// cannot take a prefix that the closer object routes itself by delegating it.
func TestIngressRouteCoHolderCannotDelegateItsDelegatorsRoute(t *testing.T) {
	g := build(
		ir(t, `{metadata: {name: app, namespace: infra}, spec: {virtualhost: {fqdn: app.example.com}, routes: [{match: /, delegate: {name: a, namespace: a}}]}}`),
		ir(t, `{metadata: {name: a, namespace: a}, spec: {routes: [{match: /, delegate: {name: b, namespace: b}}, {match: /pay, services: [{name: pay, port: 80}]}]}}`),
		ir(t, `{metadata: {name: b, namespace: b}, spec: {routes: [{match: /, services: [{name: web, port: 80}]}, {match: /pay, delegate: {name: b2}}]}}`),
		ir(t, `{metadata: {name: b2, namespace: b}, spec: {routes: [{match: /pay, services: [{name: evil, port: 80}]}]}}`),
	)
	want := []irRoute{{"/pay", "a/pay/80", "a/a"}, {"/", "b/web/80", "b/b"}}
	if diff := cmp.Diff(want, httpRoutes(g, "app.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantStatus(t, g, "b", "b", StatusValid, `route "/pay": not delegated: IngressRoute a/a, closer to the root, routes "/pay"`)
	wantStatus(t, g, "b", "b2", StatusOrphaned)
}

// Review finding: a zone is sealed: requests under a delegated prefix that its holder
// does not route get 404, never another team's shorter route ("/adm" catching "/admin").
func TestIngressRouteZonesAreSealed(t *testing.T) {
	g := build(
		ir(t, `{metadata: {name: app, namespace: infra}, spec: {virtualhost: {fqdn: app.example.com}, routes: [{match: /, delegate: {name: web, namespace: web}}, {match: /admin, delegate: {name: admin, namespace: admin}}]}}`),
		ir(t, `{metadata: {name: web, namespace: web}, spec: {routes: [{match: /, services: [{name: web, port: 80}]}, {match: /adm, services: [{name: web2, port: 80}]}]}}`),
		ir(t, `{metadata: {name: admin, namespace: admin}, spec: {routes: [{match: /admin/api, services: [{name: api, port: 80}]}]}}`),
	)
	want := []irRoute{
		{"/admin/api", "admin/api/80", "admin/admin"},
		{"/admin", "404", "infra/app"},
		{"/adm", "web/web2/80", "web/web"},
		{"/", "web/web/80", "web/web"},
	}
	if diff := cmp.Diff(want, httpRoutes(g, "app.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

// Review finding: nested prefixes all delegated to one vertex with many routes cost
// time in proportion to the objects, not to their product (700 x 700 took 12 s and 2 GB):
// an object is served at most once per root.
func TestIngressRouteNestedDelegationsToOneVertexAreCheap(t *testing.T) {
	const k, m = 400, 400
	var delegations, routes strings.Builder
	for i := 1; i <= k; i++ {
		fmt.Fprintf(&delegations, "  - {match: /t/%s, delegate: {name: v}}\n", strings.Repeat("a", i))
	}
	long := "/t/" + strings.Repeat("a", k)
	for i := 0; i < m; i++ {
		fmt.Fprintf(&routes, "  - {match: %s%d, services: [{name: s, port: 80}]}\n", long, i)
	}
	objs := []runtime.Object{
		ir(t, `{metadata: {name: app, namespace: infra}, spec: {virtualhost: {fqdn: app.example.com}, routes: [{match: /t, delegate: {name: t, namespace: evil}}]}}`),
		ir(t, "metadata: {name: t, namespace: evil}\nspec:\n  routes:\n"+delegations.String()),
		ir(t, "metadata: {name: v, namespace: evil}\nspec:\n  routes:\n"+routes.String()),
	}
	start := time.Now()
	g := build(objs...)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("build took %s", d)
	}
	if n := len(httpRoutes(g, "app.example.com")); n > k+m+2 {
		t.Errorf("%d routes for %d delegations and %d routes", n, k, m)
	}
}

// Review finding: a root with a validation error still holds its host against a newer
// Ingress staged for it (a typo must not hand the host over).
func TestIngressRouteInvalidRootKeepsItsHostFromNewerIngresses(t *testing.T) {
	g := build(
		ir(t, `{metadata: {name: app, namespace: infra, creationTimestamp: "2020-01-01T00:00:00Z"}, spec: {virtualhost: {fqdn: app.example.com}, routes: [{match: /, services: [{name: web, port: 0}]}]}}`),
		ing(t, `
metadata: {name: steal, namespace: evil, creationTimestamp: "2021-01-01T00:00:00Z"}
spec:
  rules: [{host: app.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: evil, port: {number: 80}}}}]}}]
`),
	)
	if got := routesOf(g, "app.example.com"); len(got) != 0 {
		t.Errorf("app.example.com routes = %v, want none", got)
	}
	if s := statusOf(g, "evil", "steal"); s.Status != StatusInvalid || !strings.Contains(s.Description, "belongs to IngressRoute infra/app") {
		t.Errorf("Ingress status = %+v", s)
	}
	wantStatus(t, g, "infra", "app", StatusInvalid, "port 0 is not in 1-65535")
}

// Review finding: nor by delegating a shorter prefix that covers the closer holder's route.
func TestIngressRouteCoHolderCannotCoverItsDelegatorsRouteWithAShorterPrefix(t *testing.T) {
	g := build(
		ir(t, `{metadata: {name: app, namespace: infra}, spec: {virtualhost: {fqdn: app.example.com}, routes: [{match: /, delegate: {name: a, namespace: a}}]}}`),
		ir(t, `{metadata: {name: a, namespace: a}, spec: {routes: [{match: /, delegate: {name: b, namespace: b}}, {match: /pay, services: [{name: pay, port: 80}]}]}}`),
		ir(t, `{metadata: {name: b, namespace: b}, spec: {routes: [{match: /, services: [{name: web, port: 80}]}, {match: /pa, delegate: {name: b2}}]}}`),
		ir(t, `{metadata: {name: b2, namespace: b}, spec: {routes: [{match: /pa, services: [{name: evil, port: 80}]}]}}`),
	)
	want := []irRoute{{"/pay", "a/pay/80", "a/a"}, {"/", "b/web/80", "b/b"}}
	if diff := cmp.Diff(want, httpRoutes(g, "app.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantStatus(t, g, "b", "b", StatusValid, `route "/pa": not delegated: IngressRoute a/a, closer to the root, routes "/pay"`)
}

// Review finding: long delegated prefixes cost memory in proportion to the number of
// delegations, not their length in bytes (a byte-per-node trie took 122 MB for 600
// delegations of 1,000-character prefixes, per root).
func TestIngressRouteLongPrefixesAreCheap(t *testing.T) {
	var routes strings.Builder
	for i := 0; i < 600; i++ {
		fmt.Fprintf(&routes, "  - {match: /v/%04d%s, delegate: {name: missing}}\n", i, strings.Repeat("x", 1000))
	}
	objs := []runtime.Object{
		ir(t, `{metadata: {name: app, namespace: infra}, spec: {virtualhost: {fqdn: app.example.com}, routes: [{match: /v, delegate: {name: v, namespace: evil}}]}}`),
		ir(t, "metadata: {name: v, namespace: evil}\nspec:\n  routes:\n"+routes.String()),
	}
	s := store.FromObjects(objs)
	allocs := testing.AllocsPerRun(3, func() { Build(s, Options{}) })
	if allocs > 100_000 {
		t.Errorf("%.0f allocations per build for 600 delegations", allocs)
	}
}

// Review finding: a team holding "/" cannot capture another team's vertex by delegating
// to it before its rightful delegator does: an object is served by the longest
// delegation that reaches it, whatever the order of the walk.
func TestIngressRouteVertexCannotBeCapturedByAShorterDelegation(t *testing.T) {
	for _, attack := range []string{"/", "/b"} {
		t.Run(attack, func(t *testing.T) {
			g := build(
				ir(t, `{metadata: {name: app, namespace: infra}, spec: {virtualhost: {fqdn: app.localhost}, routes: [{match: /, delegate: {name: shop, namespace: shop}}, {match: /blog, delegate: {name: blog, namespace: blog}}]}}`),
				ir(t, `{metadata: {name: shop, namespace: shop}, spec: {routes: [{match: /shop, services: [{name: web, port: 80}]}, {match: `+attack+`, delegate: {name: comments, namespace: comments}}]}}`),
				ir(t, `{metadata: {name: blog, namespace: blog}, spec: {routes: [{match: /blog, services: [{name: blog, port: 80}]}, {match: /blog/comments, delegate: {name: comments, namespace: comments}}]}}`),
				ir(t, `{metadata: {name: comments, namespace: comments}, spec: {routes: [{match: /blog/comments, services: [{name: c, port: 80}]}]}}`),
			)
			got := httpRoutes(g, "app.localhost")
			found := false
			for _, r := range got {
				if r.Match == "/blog/comments" {
					found = r.To == "comments/c/80" && r.Source == "comments/comments"
				}
			}
			if !found {
				t.Errorf("/blog/comments is not served by comments/comments: %v", got)
			}
			wantStatus(t, g, "comments", "comments", StatusValid, `"/blog/comments" delegated by IngressRoute blog/blog`)
			wantStatus(t, g, "shop", "shop", StatusValid, "blog/blog delegates the longer prefix \"/blog/comments\" to it")
		})
	}
}

// Review finding: the same vertex behind two nested prefixes of one host is served under
// the longer one, whichever the root lists first.
func TestIngressRouteNestedDelegationsToOneVertexDoNotDependOnOrder(t *testing.T) {
	var results [][]irRoute
	for _, routes := range []string{
		`[{match: /t, delegate: {name: v, namespace: v}}, {match: /t/a, delegate: {name: v, namespace: v}}]`,
		`[{match: /t/a, delegate: {name: v, namespace: v}}, {match: /t, delegate: {name: v, namespace: v}}]`,
	} {
		g := build(
			ir(t, `{metadata: {name: app, namespace: infra}, spec: {virtualhost: {fqdn: app.example.com}, routes: `+routes+`}}`),
			ir(t, `{metadata: {name: v, namespace: v}, spec: {routes: [{match: /t/a1, services: [{name: s, port: 80}]}, {match: /t/a2, services: [{name: s, port: 80}]}]}}`),
		)
		results = append(results, httpRoutes(g, "app.example.com"))
		wantStatus(t, g, "v", "v", StatusValid, `"/t/a" delegated by IngressRoute infra/app`)
	}
	want := []irRoute{{"/t/a1", "v/s/80", "v/v"}, {"/t/a2", "v/s/80", "v/v"}, {"/t/a", "404", "infra/app"}, {"/t", "503", "infra/app"}}
	for i, got := range results {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("order %d: routes (-want +got):\n%s", i, diff)
		}
	}
}
