package app

import (
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/dagtest"
	"github.com/portico-dev/portico/internal/source/manifest"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

const lvServices = `
apiVersion: v1
kind: Service
metadata: {name: a}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: b}
spec: {ports: [{name: http, port: 80}]}
`

func lvRoot(name, fqdn, strategy, service string) string {
	return `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: ` + name + `}
spec:
  virtualhost: {fqdn: ` + fqdn + `}
  strategy: ` + strategy + `
  routes:
  - match: /
    services: [{name: ` + service + `, port: 80}]
`
}

func lvStore(t *testing.T, docs ...string) *store.Store {
	t.Helper()
	objs, probs := manifest.Decode("test.yaml", []byte(strings.Join(docs, "\n---\n")))
	if len(probs) > 0 {
		t.Fatalf("decode: %v", probs)
	}
	return store.FromObjects(objs)
}

func statusOf(t *testing.T, g *dag.Graph, name string) *dag.Status {
	t.Helper()
	for _, s := range g.Statuses {
		if s.Object.Name == name {
			return s
		}
	}
	t.Fatalf("no status for %s in %+v", name, g.Statuses)
	return &dag.Status{}
}

// servedCluster is the service the first route of host answers from, "" if none.
func servedCluster(g *dag.Graph, host string) string {
	for _, vh := range g.HTTP {
		if vh.Name == host && len(vh.Routes) > 0 && len(vh.Routes[0].Clusters) > 0 {
			return vh.Routes[0].Clusters[0].Cluster.Service.Name
		}
	}
	return ""
}

func TestLastValidKeepsPreviousVersion(t *testing.T) {
	var logs testutil.SyncBuffer
	k := NewLastValid(slog.New(slog.NewTextHandler(&logs, nil)))
	g := k.Build(lvStore(t, lvServices, lvRoot("site", "x.test", "RoundRobin", "a")), FullBuilder{})
	if st := statusOf(t, g, "site"); st.Status != dag.StatusValid || servedCluster(g, "x.test") != "a" {
		t.Fatalf("v1: %+v, served %q", st, servedCluster(g, "x.test"))
	}

	// v2 is invalid (unknown strategy): v1 keeps serving; the status names v2's mistake.
	g = k.Build(lvStore(t, lvServices, lvRoot("site", "x.test", "Fastest", "b")), FullBuilder{})
	st := statusOf(t, g, "site")
	if st.Status != dag.StatusInvalid || !strings.Contains(st.Description, "Fastest") || !strings.Contains(st.Description, keptNote) {
		t.Errorf("v2 status = %+v, want invalid naming the strategy and the kept version", st)
	}
	if got := servedCluster(g, "x.test"); got != "a" {
		t.Errorf("v2: x.test served by %q, want v1's a", got)
	}

	// v3 is valid again: it is served.
	g = k.Build(lvStore(t, lvServices, lvRoot("site", "x.test", "Random", "b")), FullBuilder{})
	if st := statusOf(t, g, "site"); st.Status != dag.StatusValid || servedCluster(g, "x.test") != "b" {
		t.Fatalf("v3: %+v, served %q", st, servedCluster(g, "x.test"))
	}

	// Deleted: nothing kept, and the log says so.
	g = k.Build(lvStore(t, lvServices), FullBuilder{})
	if got := servedCluster(g, "x.test"); got != "" {
		t.Errorf("after deletion x.test is served by %q", got)
	}
	if !strings.Contains(logs.String(), "object removed") || !strings.Contains(logs.String(), "IngressRoute default/site") {
		t.Errorf("the removal is not logged with the object's name:\n%s", logs.String())
	}
	// A new object of the same name starts afresh: its invalid first version is not
	// replaced by the deleted object's.
	g = k.Build(lvStore(t, lvServices, lvRoot("site", "x.test", "Fastest", "b")), FullBuilder{})
	if st := statusOf(t, g, "site"); st.Status != dag.StatusInvalid || strings.Contains(st.Description, keptNote) || servedCluster(g, "x.test") != "" {
		t.Errorf("re-created invalid object: %+v, served %q", st, servedCluster(g, "x.test"))
	}
}

// After a restart, the versions a LastValid served in place of invalid edits are
// served again when Restore hands them to a new one: the typo still in place is not
// served, and the status says so. An object whose current version is valid, or that is
// gone, is built as it is.
func TestLastValidRestore(t *testing.T) {
	before := NewLastValid(slog.New(slog.DiscardHandler))
	before.Build(lvStore(t, lvServices, lvRoot("site", "x.test", "RoundRobin", "a"), lvRoot("fixed", "y.test", "RoundRobin", "a"), lvRoot("gone", "z.test", "RoundRobin", "a")), FullBuilder{})
	typos := []string{lvRoot("site", "x.test", "Fastest", "b"), lvRoot("fixed", "y.test", "Fastest", "b"), lvRoot("gone", "z.test", "Fastest", "b")}
	before.Build(lvStore(t, append([]string{lvServices}, typos...)...), FullBuilder{})
	saved := before.Served()
	if len(saved) != 3 {
		t.Fatalf("served in place of the typos: %d objects, want 3", len(saved))
	}

	after := NewLastValid(slog.New(slog.DiscardHandler))
	after.Restore(saved)
	g := after.Build(lvStore(t, lvServices, typos[0], lvRoot("fixed", "y.test", "Random", "b")), dag.NewIncremental(dag.Options{}))
	if st := statusOf(t, g, "site"); st.Status != dag.StatusInvalid || !strings.Contains(st.Description, "Fastest") || !strings.Contains(st.Description, keptNote) {
		t.Errorf("site after the restart: %+v, want invalid, naming the typo and the kept version", st)
	}
	if got := servedCluster(g, "x.test"); got != "a" {
		t.Errorf("after the restart x.test is served by %q, want the kept version's a", got)
	}
	if got := servedCluster(g, "y.test"); got != "b" {
		t.Errorf("the object fixed meanwhile: y.test served by %q, want its current version's b", got)
	}
	if got := after.Served(); len(got) != 1 || got[0] != saved[2] {
		t.Errorf("served after the restart: %d objects, want site's kept version alone", len(got))
	}
}

// An object invalid because of others is not replaced by an earlier version of itself:
// only its own edits are undone. Two roots of the same age on one host are both invalid
// (seed 003).
func TestLastValidLeavesConflictsAlone(t *testing.T) {
	k := NewLastValid(slog.New(slog.DiscardHandler))
	k.Build(lvStore(t, lvServices, lvRoot("first", "x.test", "RoundRobin", "a")), FullBuilder{})
	g := k.Build(lvStore(t, lvServices, lvRoot("first", "x.test", "RoundRobin", "a"), lvRoot("second", "x.test", "RoundRobin", "b")), FullBuilder{})
	for _, name := range []string{"first", "second"} {
		if st := statusOf(t, g, name); st.Status != dag.StatusInvalid || strings.Contains(st.Description, keptNote) {
			t.Errorf("%s: %+v, want invalid without a kept version", name, st)
		}
	}
}

// When the last valid version would itself be invalid now, it is not served either, and
// the status is the current version's own. (Same-age roots on one host: all invalid.)
func TestLastValidDropsAVersionInvalidNow(t *testing.T) {
	k := NewLastValid(slog.New(slog.DiscardHandler))
	k.Build(lvStore(t, lvServices, lvRoot("first", "x.test", "RoundRobin", "a")), FullBuilder{})
	g := k.Build(lvStore(t, lvServices, lvRoot("first", "x.test", "Fastest", "a"), lvRoot("second", "x.test", "RoundRobin", "b")), FullBuilder{})
	st := statusOf(t, g, "first")
	if st.Status != dag.StatusInvalid || !strings.Contains(st.Description, "Fastest") || strings.Contains(st.Description, keptNote) {
		t.Errorf("first: %+v, want its own invalid status, nothing kept", st)
	}
	if got := servedCluster(g, "x.test"); got != "" {
		t.Errorf("x.test served by %q while its roots conflict", got)
	}
}

// A version that stopped being served (here: moved to another ingress class) is never
// brought back by a later invalid edit.
func TestLastValidForgetsVersionsNoLongerServed(t *testing.T) {
	k := NewLastValid(slog.New(slog.DiscardHandler))
	k.Build(lvStore(t, lvServices, lvRoot("site", "x.test", "RoundRobin", "a")), FullBuilder{})
	other := strings.Replace(lvRoot("site", "x.test", "RoundRobin", "a"), "metadata: {name: site}", "metadata: {name: site, annotations: {kubernetes.io/ingress.class: nginx}}", 1)
	g := k.Build(lvStore(t, lvServices, other), FullBuilder{})
	if st := statusOf(t, g, "site"); st.Status != dag.StatusIgnored {
		t.Fatalf("moved to class nginx: %+v, want ignored", st)
	}
	g = k.Build(lvStore(t, lvServices, lvRoot("site", "y.test", "Fastest", "b")), FullBuilder{})
	if got := servedCluster(g, "x.test"); got != "" {
		t.Errorf("the version that stopped serving came back: x.test served by %q", got)
	}
	if st := statusOf(t, g, "site"); strings.Contains(st.Description, keptNote) {
		t.Errorf("status claims a previous version serves: %+v", st)
	}
}

// Removing an object logs it; that its routes are no longer served only if it was
// served.
func TestLastValidLogsRemovals(t *testing.T) {
	var logs testutil.SyncBuffer
	k := NewLastValid(slog.New(slog.NewTextHandler(&logs, nil)))
	k.Build(lvStore(t, lvServices, lvRoot("served", "x.test", "RoundRobin", "a"), lvRoot("never", "y.test", "Bogus", "a")), FullBuilder{})
	k.Build(lvStore(t, lvServices), FullBuilder{})
	for _, want := range []string{
		`msg="object removed; its routes are no longer served" object="IngressRoute default/served"`,
		`msg="object removed" object="IngressRoute default/never"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logs.String())
		}
	}
}

func TestKeptDescription(t *testing.T) {
	got := keptDescription(`not served: spec.rules[0].http.paths[0].path "/api": pathType "prefix" is not one of Exact, Prefix, ImplementationSpecific`)
	want := `this version is not served: spec.rules[0].http.paths[0].path "/api": pathType "prefix" is not one of Exact, Prefix, ImplementationSpecific. ` + keptNote
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// aged sets an IngressRoute manifest's creation time.
func aged(doc, name, at string) string {
	return strings.Replace(doc, "metadata: {name: "+name+"}", "metadata: {name: "+name+", creationTimestamp: \""+at+"\"}", 1)
}

// The reviewer's takeover: the older root's typo while a newer root claims its host. The
// kept previous version is older, so it keeps the host; the newcomer gets nothing.
func TestLastValidTypoDoesNotHandTheHostToANewerRoot(t *testing.T) {
	k := NewLastValid(slog.New(slog.DiscardHandler))
	first := func(strategy string) string {
		return aged(lvRoot("first", "x.test", strategy, "a"), "first", "2020-01-01T00:00:00Z")
	}
	second := aged(lvRoot("second", "x.test", "RoundRobin", "b"), "second", "2021-01-01T00:00:00Z")
	k.Build(lvStore(t, lvServices, first("RoundRobin")), FullBuilder{})
	g := k.Build(lvStore(t, lvServices, first("Fastest"), second), FullBuilder{})
	if got := servedCluster(g, "x.test"); got != "a" {
		t.Errorf("x.test served by %q, want the older root's kept version (a)", got)
	}
	if st := statusOf(t, g, "second"); st.Status != dag.StatusInvalid || !strings.Contains(st.Description, "older IngressRoute default/first") {
		t.Errorf("second: %+v, want invalid: the host belongs to the older root", st)
	}
	if st := statusOf(t, g, "first"); st.Status != dag.StatusInvalid || !strings.Contains(st.Description, keptNote) {
		t.Errorf("first: %+v, want invalid with its previous version kept", st)
	}
}

// TestLastValidIncrementalEqualsFull runs two LastValids over the same random change
// sequences, one building whole and one incrementally (looking only at the objects the
// builder touched): every graph, statuses included, must be the same.
func TestLastValidIncrementalEqualsFull(t *testing.T) {
	const seeds, steps = 20, 60
	keptSeen := 0
	var full, inc *LastValid
	var builder *dag.Incremental
	start := func(uint64) {
		full = NewLastValid(slog.New(slog.DiscardHandler))
		inc = NewLastValid(slog.New(slog.DiscardHandler))
		builder = dag.NewIncremental(dag.Options{})
	}
	dagtest.Run(t, seeds, steps, start, func(s *store.Store, seed uint64, step int, log string) {
		want := full.Build(s, FullBuilder{})
		got := inc.Build(s, builder)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d, step %d: (-full +incremental):\n%s\nchanges:\n%s", seed, step, diff, log)
		}
		// What a restart would restore is the same, and is what serves.
		if w, g := full.Served(), inc.Served(); !slices.Equal(w, g) {
			t.Fatalf("seed %d, step %d: served versions differ: full %d, incremental %d\nchanges:\n%s", seed, step, len(w), len(g), log)
		}
		kept := 0
		for _, st := range got.Statuses {
			if strings.Contains(st.Description, keptNote) {
				kept++
			}
		}
		if n := len(inc.Served()); n != kept {
			t.Fatalf("seed %d, step %d: %d versions served in place of others, %d statuses say so\nchanges:\n%s", seed, step, n, kept, log)
		}
		for _, st := range got.Statuses {
			if strings.Contains(st.Description, keptNote) {
				keptSeen++
			}
		}
	})
	// The sequences must exercise what LastValid is for: edits that keep a previous version.
	if keptSeen < 20 {
		t.Fatalf("only %d statuses of kept versions in all sequences", keptSeen)
	}
}

// A kept version (an invalid IngressRoute edit) leaves the Gateways of the build in
// the graph: the Gateway API part is not the kept objects' to drop.
func TestLastValidKeepsGateways(t *testing.T) {
	k := NewLastValid(slog.New(slog.DiscardHandler))
	gateway := testutil.DecodeObjects(t, gatewayGW+` [{name: http, protocol: HTTP, port: 80}]`)
	build := func(strategy string) *dag.Graph {
		s := lvStore(t, lvServices, lvRoot("site", "x.test", strategy, "a"))
		for _, o := range gateway {
			s.Upsert(o)
		}
		return k.Build(s, FullBuilder{})
	}
	if g := build("RoundRobin"); len(g.Gateways) != 1 {
		t.Fatalf("v1: %d Gateways served, want 1", len(g.Gateways))
	}
	g := build("Fastest")
	if st := statusOf(t, g, "site"); !strings.Contains(st.Description, keptNote) {
		t.Fatalf("v2 is not kept: %+v", st)
	}
	if len(g.Gateways) != 1 {
		t.Errorf("with a kept version, %d Gateways served, want 1", len(g.Gateways))
	}
}

// An HTTPRoute edit that makes it invalid (a filter Portico does not implement) keeps its previous
// version serving in run, its status saying what is wrong with the edit, as for the
// other APIs.
func TestLastValidKeepsHTTPRoute(t *testing.T) {
	k := NewLastValid(slog.New(slog.DiscardHandler))
	const gateway = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: portico
  listeners: [{name: http, protocol: HTTP, port: 80}]`
	route := func(filters string) string {
		return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: gw}]
  hostnames: [web.test]
  rules: [{backendRefs: [{name: a, port: 80}]` + filters + `}]`
	}
	served := func(g *dag.Graph) bool {
		for _, gw := range g.Gateways {
			for _, p := range gw.Ports {
				for _, vh := range p.HTTP {
					if vh.Name == "web.test" && len(vh.Routes) > 0 {
						return true
					}
				}
			}
		}
		return false
	}
	g := k.Build(lvStore(t, lvServices, gateway, route("")), FullBuilder{})
	if st := statusOf(t, g, "web"); st.Status != dag.StatusValid || !served(g) {
		t.Fatalf("v1: %+v, served %v", st, served(g))
	}
	g = k.Build(lvStore(t, lvServices, gateway, route(", filters: [{type: ExternalAuth, externalAuth: {protocol: HTTP, backendRef: {name: auth, port: 80}}}]")), FullBuilder{})
	st := statusOf(t, g, "web")
	if st.Status != dag.StatusInvalid || !strings.Contains(st.Description, "ExternalAuth") || !strings.Contains(st.Description, keptNote) {
		t.Errorf("v2 status = %+v, want invalid naming the filter and the kept version", st)
	}
	if !served(g) {
		t.Error("v2: web.test is no longer served; want v1 kept")
	}
	if r := st.GatewayAPI; r == nil || r.Route == nil || len(r.Route.Parents) != 1 || r.Route.Parents[0].Conditions[0].Status != "False" {
		t.Errorf("v2 conditions = %+v, want the edit's (not accepted)", r)
	}
}
