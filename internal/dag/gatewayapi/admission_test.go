package gatewayapi

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/dagtest"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// TestObjectFindingsEqualFullBuild holds ObjectFindings, which builds an object with
// only the objects its status depends on, to the status a full build gives it, for
// every Gateway API object of random stores.
func TestObjectFindingsEqualFullBuild(t *testing.T) {
	const seeds, steps = 60, 80
	opts := dag.Options{Processors: []dag.Processor{Processor{}}}
	seen := map[string]int{}
	dagtest.RunGatewayAPI(t, seeds, steps, func(uint64) {}, func(s *store.Store, seed uint64, step int, log string) {
		findingsAgree(t, s, opts, seen, fmt.Sprintf("seed %d, step %d", seed, step), log)
	})
	// The property only means something if objects of every kind were Portico's, with
	// and without problems. (Random sequences seldom attach HTTPRoutes and GRPCRoutes to
	// one Gateway: TestObjectFindingsOfSharedObjects has their conflicts.)
	for _, what := range []string{"GatewayClass", "Gateway", "ListenerSet", "HTTPRoute", "GRPCRoute", "TLSRoute", "problems", "none", "HTTPRoute/NotAllowedByListeners", "Gateway/HostnameConflict"} {
		if seen[what] < 50 {
			t.Errorf("only %d findings of %s: %v", seen[what], what, seen)
		}
	}
}

// TestObjectFindingsOfSharedObjects is the property on a store where objects meet on
// every path the scope of one object follows: a ListenerSet's listeners conflicting
// with its Gateway's, a route attached through it; on another Gateway, chains of
// HTTPRoutes and GRPCRoutes where each route's hostnames depend on the one before (h0
// keeps b from g1, so h2 keeps c; g3 keeps d from h4, so g5 keeps e, so h6 loses f);
// BackendTLSPolicies on one Service (the younger conflicted), used by routes of both
// Gateways.
func TestObjectFindingsOfSharedObjects(t *testing.T) {
	gw := func(name string) string {
		return `
---
kind: Gateway
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: ` + name + `}
spec:
  gatewayClassName: portico
  allowedListeners: {namespaces: {from: All}}
  listeners: [{name: http, protocol: HTTP, port: 80}]`
	}
	grpc := func(name, created, spec string) string {
		return `
---
kind: GRPCRoute
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: ` + name + `, creationTimestamp: "` + created + `"}
spec:
` + spec
	}
	onGW2 := func(hosts string) string {
		return `
  parentRefs: [{name: gw2}]
  hostnames: [` + hosts + `]
  rules: [{backendRefs: [{name: web, port: 80}]}]`
	}
	objs := testutil.DecodeObjects(t, base+gw("gw")+gw("gw2")+`
---
kind: ListenerSet
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: more}
spec:
  parentRef: {name: gw}
  listeners: [{name: extra, protocol: HTTP, port: 8080}, {name: clash, protocol: HTTPS, port: 80, tls: {certificateRefs: [{name: cert}]}}]`+
		routeCreated("through-set", "default", "2026-01-01T00:00:00Z", `
  parentRefs: [{kind: ListenerSet, name: more, sectionName: extra}]
  rules: [{backendRefs: [{name: web, port: 80}]}]`)+
		grpc("g-on-gw", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  hostnames: [x.example.com]
  rules: [{backendRefs: [{name: web, port: 80}]}]`)+
		routeCreated("h0", "default", "2026-01-01T00:00:00Z", onGW2("b.example.com"))+
		grpc("g1", "2026-01-02T00:00:00Z", onGW2("b.example.com, c.example.com"))+
		routeCreated("h2", "default", "2026-01-03T00:00:00Z", onGW2("c.example.com"))+
		grpc("g3", "2026-01-01T00:00:00Z", onGW2("d.example.com"))+
		routeCreated("h4", "default", "2026-01-02T00:00:00Z", onGW2("d.example.com, e.example.com"))+
		grpc("g5", "2026-01-03T00:00:00Z", onGW2("e.example.com, f.example.com"))+
		routeCreated("h6", "default", "2026-01-04T00:00:00Z", onGW2("f.example.com"))+
		policy("older", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: web}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}], hostname: web.example.com}`)+
		policy("younger", "2026-01-02T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: web}, {group: "", kind: Service, name: unused}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}], hostname: web.example.com}`)+
		policy("unused", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: unused}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}], hostname: web.example.com}`))
	s := store.FromObjects(append(objs, caConfigMap("ca"), tlsSecret("default", "cert", "*.example.com")))
	seen := map[string]int{}
	findingsAgree(t, s, dag.Options{Processors: []dag.Processor{Processor{}}}, seen, "shared objects", "")
	for _, what := range []string{"BackendTLSPolicy/Conflicted", "ListenerSet/ProtocolConflict", "BackendTLSPolicy", "ListenerSet"} {
		if seen[what] == 0 {
			t.Errorf("no findings of %s: %v", what, seen)
		}
	}
	// g1, h4 and h6 lose a hostname; h2 and g5 do not.
	if seen["HTTPRoute/HostnameConflict"] != 2 || seen["GRPCRoute/HostnameConflict"] != 1 {
		t.Errorf("the chain of hostname conflicts is not the one described: %v", seen)
	}
}

// findingsAgree checks that ObjectFindings of every object of s is what the status of a
// full build says (nothing, for objects of other APIs), as for an update (s holds the
// object) and as for a creation (it does not). seen counts the kinds of objects of
// Portico's, "problems" and "none", and kind/reason of their problems.
func findingsAgree(t *testing.T, s *store.Store, opts dag.Options, seen map[string]int, where, log string) {
	t.Helper()
	want := map[dag.ObjectRef]Findings{}
	for _, st := range dag.Build(s, opts).Statuses {
		if st.GatewayAPI != nil {
			want[st.Object] = Findings{Ours: true, Problems: append(append([]dag.Problem(nil), st.Errors...), st.Warnings...)}
		}
	}
	for _, obj := range dagtest.Objects(s) {
		ref, _ := dag.RefOf(obj)
		stores := []*store.Store{s}
		if hasStatus(ref.Kind) {
			without := s.Clone()
			without.Delete(obj)
			stores = append(stores, without)
		}
		for _, in := range stores {
			got := ObjectFindings(obj, in, opts)
			if diff := cmp.Diff(want[ref], got); diff != "" {
				t.Fatalf("%s: %s: findings differ from the full build's status (-full +findings):\n%s\nchanges:\n%s", where, ref, diff, log)
			}
		}
		if f := want[ref]; f.Ours {
			seen[ref.Kind]++
			seen[map[bool]string{true: "problems", false: "none"}[len(f.Problems) > 0]]++
			for _, p := range f.Problems {
				seen[ref.Kind+"/"+p.Reason]++
			}
		}
	}
}

// pendingAddress is serve's address source before a Gateway's Service has an address.
type pendingAddress struct{}

func (pendingAddress) Addresses(*dag.Processing, types.NamespacedName) ([]gatewayv1.GatewayStatusAddress, string) {
	return nil, "its data plane is being deployed"
}

// TestObjectFindings: with serve's address source, whose Gateways are not Programmed
// until their data plane has an address, a Gateway just created has no problem; a
// route's problems are those of its status. (The webhook's tests have the rest.)
func TestObjectFindings(t *testing.T) {
	s := store.FromObjects(testutil.DecodeObjects(t, base+httpGateway))
	opts := dag.Options{Processors: []dag.Processor{Processor{Addresses: pendingAddress{}}}}
	tests := []struct {
		name     string
		obj      string
		ours     bool
		problems []string
	}{
		{name: "a Gateway being deployed", ours: true, obj: httpGateway},
		{name: "a valid route", ours: true, obj: route("r", "default", `
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: web, port: 80}]}]`)},
		{name: "a route to a missing Service", ours: true, obj: route("r", "default", `
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: missing, port: 80}]}]`),
			problems: []string{"ResolvedRefs/BackendNotFound: spec.rules[0].backendRefs[0]: Service default/missing not found (the requests the rule would send it are answered 500)"}},
		{name: "a ReferenceGrant", obj: `
kind: ReferenceGrant
apiVersion: gateway.networking.k8s.io/v1beta1
metadata: {name: g, namespace: other}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: default}]
  to: [{group: "", kind: Service}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ObjectFindings(testutil.DecodeObjects(t, tc.obj)[0], s, opts)
			var problems []string
			for _, p := range got.Problems {
				problems = append(problems, fmt.Sprintf("%s/%s: %s", p.Type, p.Reason, p.Message))
			}
			if got.Ours != tc.ours {
				t.Errorf("ours = %t, want %t", got.Ours, tc.ours)
			}
			if diff := cmp.Diff(tc.problems, problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkObjectFindings measures what the webhook pays to find what the status of one
// HTTPRoute would say, at 10,000 HTTPRoutes on 4 Gateways, against a full build of the
// same store.
// go test -bench=ObjectFindings -benchmem ./internal/dag/gatewayapi/
func BenchmarkObjectFindings(b *testing.B) {
	const n = 10000
	opts := dag.Options{Processors: []dag.Processor{Processor{}}}
	s := gatewayRoutes(b, n)
	candidate := benchRoute(7, "gw-3", "team-7", "c")
	if f := ObjectFindings(candidate, s, opts); !f.Ours || len(f.Problems) > 0 {
		b.Fatalf("findings %+v, want a route of Portico's without problems", f)
	}
	b.Run(fmt.Sprintf("one-route/routes=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ObjectFindings(candidate, s, opts)
		}
	})
	// A GRPCRoute on the candidate's Gateway brings that Gateway's 2,500 HTTPRoutes into
	// scope: which route keeps a hostname depends on each.
	mixed := s.Clone()
	mixed.Upsert(&gatewayv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "team-7", Name: "grpc"}, Spec: gatewayv1.GRPCRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: candidate.Spec.ParentRefs},
		Hostnames:       []gatewayv1.Hostname{"grpc.example.com"},
	}})
	b.Run(fmt.Sprintf("one-route-grpc-on-its-gateway/routes=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ObjectFindings(candidate, mixed, opts)
		}
	})
	b.Run(fmt.Sprintf("full-build/routes=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dag.Build(s, opts)
		}
	})
}
