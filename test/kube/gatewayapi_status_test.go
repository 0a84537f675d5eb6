package kube

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/status"
	"github.com/portico-dev/portico/internal/store"
)

const otherController gatewayv1.GatewayController = "example.com/other-controller"

// gatewayStatusFixture is a namespace of Gateway API objects, some Portico's, some
// another controller's, in the real API server.
type gatewayStatusFixture struct {
	t      *testing.T
	c      gatewayclient.Interface
	ns     string
	writer *status.GatewayAPIWriter
	writes atomic.Int64
	now    time.Time
}

func (f *gatewayStatusFixture) ctx() context.Context { return f.t.Context() }

// snapshot reads every object back, as the informers would hold them.
func (f *gatewayStatusFixture) snapshot() *store.Store {
	f.t.Helper()
	v1, ctx, ns := f.c.GatewayV1(), f.ctx(), f.ns
	var objs []runtime.Object
	add := func(err error, items ...runtime.Object) {
		f.t.Helper()
		if err != nil {
			f.t.Fatal(err)
		}
		objs = append(objs, items...)
	}
	classes, err := v1.GatewayClasses().List(ctx, metav1.ListOptions{})
	add(err)
	for i := range classes.Items {
		add(nil, &classes.Items[i])
	}
	gws, err := v1.Gateways(ns).List(ctx, metav1.ListOptions{})
	add(err)
	for i := range gws.Items {
		add(nil, &gws.Items[i])
	}
	sets, err := v1.ListenerSets(ns).List(ctx, metav1.ListOptions{})
	add(err)
	for i := range sets.Items {
		add(nil, &sets.Items[i])
	}
	routes, err := v1.HTTPRoutes(ns).List(ctx, metav1.ListOptions{})
	add(err)
	for i := range routes.Items {
		add(nil, &routes.Items[i])
	}
	grpc, err := v1.GRPCRoutes(ns).List(ctx, metav1.ListOptions{})
	add(err)
	for i := range grpc.Items {
		add(nil, &grpc.Items[i])
	}
	tls, err := v1.TLSRoutes(ns).List(ctx, metav1.ListOptions{})
	add(err)
	for i := range tls.Items {
		add(nil, &tls.Items[i])
	}
	policies, err := v1.BackendTLSPolicies(ns).List(ctx, metav1.ListOptions{})
	add(err)
	for i := range policies.Items {
		add(nil, &policies.Items[i])
	}
	return store.FromObjects(objs)
}

func (f *gatewayStatusFixture) sync(s *store.Store, statuses []*dag.Status) int64 {
	f.t.Helper()
	before := f.writes.Load()
	if failed := f.writer.Sync(f.ctx(), s, statuses); failed != 0 {
		f.t.Fatalf("%d status writes failed", failed)
	}
	return f.writes.Load() - before
}

func cond(typ string, st metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg}
}

func gwStatus(kind, ns, name string, s dag.GatewayAPIStatus) *dag.Status {
	return &dag.Status{Object: dag.ObjectRef{Kind: kind, Namespace: ns, Name: name}, Status: dag.StatusValid, GatewayAPI: &s}
}

// TestGatewayAPIStatusWriter: the statuses a build computes for Gateway API objects are
// written to the status subresource with the objects' generation and transition times
// kept while a condition holds; other controllers' route parents and policy ancestors
// survive (a concurrent write of theirs included); another controller's GatewayClass is
// never written; nothing is written when nothing changed.
func TestGatewayAPIStatusWriter(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallGatewayAPICRDs(t, kubetest.GatewayAPIStandard)
	gw, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "gw-status"
	createNamespace(t, kubetest.Clientset(t, cfg), ns)
	f := &gatewayStatusFixture{t: t, c: gw, ns: ns, now: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)}
	f.writer = &status.GatewayAPIWriter{Client: gw, Workers: 4, Logger: slog.Default(),
		OnWrite: func(string) { f.writes.Add(1) }, Now: func() time.Time { return f.now }}
	v1, ctx := gw.GatewayV1(), t.Context()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(v1.GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "gw-status-ours"},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: dag.GatewayControllerName}}, metav1.CreateOptions{}))
	must(v1.GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "gw-status-theirs"},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: otherController}}, metav1.CreateOptions{}))
	must(v1.Gateways(ns).Create(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "gw"}, Spec: gatewayv1.GatewaySpec{
		GatewayClassName: "gw-status-ours", Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType},
			{Name: "tls", Port: 443, Protocol: gatewayv1.TLSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{Mode: ptrTo(gatewayv1.TLSModePassthrough)}},
		}}}, metav1.CreateOptions{}))
	must(v1.ListenerSets(ns).Create(ctx, &gatewayv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Name: "extra"}, Spec: gatewayv1.ListenerSetSpec{
		ParentRef: gatewayv1.ParentGatewayReference{Name: "gw"},
		Listeners: []gatewayv1.ListenerEntry{{Name: "extra", Port: 8080, Protocol: gatewayv1.HTTPProtocolType}}}}, metav1.CreateOptions{}))
	ours := gatewayv1.ParentReference{Name: "gw"}
	theirs := gatewayv1.ParentReference{Name: "their-gw"}
	must(v1.HTTPRoutes(ns).Create(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{ours, theirs}}}}, metav1.CreateOptions{}))
	must(v1.TLSRoutes(ns).Create(ctx, &gatewayv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Spec: gatewayv1.TLSRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{ours}}, Hostnames: []gatewayv1.Hostname{"tls.example.com"},
		Rules: []gatewayv1.TLSRouteRule{{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "tls", Port: ptrTo(gatewayv1.PortNumber(443))}}}}}}},
		metav1.CreateOptions{}))
	must(v1.BackendTLSPolicies(ns).Create(ctx, &gatewayv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Spec: gatewayv1.BackendTLSPolicySpec{
		TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: "web"}}},
		Validation: gatewayv1.BackendTLSPolicyValidation{Hostname: "web.example.com", WellKnownCACertificates: ptrTo(gatewayv1.WellKnownCACertificatesSystem)}}},
		metav1.CreateOptions{}))
	// Another controller's entries, written before Portico's.
	theirParent := gatewayv1.RouteParentStatus{ParentRef: theirs, ControllerName: otherController,
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "theirs", LastTransitionTime: metav1.NewTime(f.now.Add(-time.Hour))}}}
	route, err := v1.HTTPRoutes(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	route.Status.Parents = []gatewayv1.RouteParentStatus{theirParent}
	must(v1.HTTPRoutes(ns).UpdateStatus(ctx, route, metav1.UpdateOptions{}))
	theirAncestor := gatewayv1.PolicyAncestorStatus{AncestorRef: theirs, ControllerName: otherController,
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "theirs", LastTransitionTime: metav1.NewTime(f.now.Add(-time.Hour))}}}
	policy, err := v1.BackendTLSPolicies(ns).Get(ctx, "tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	policy.Status.Ancestors = []gatewayv1.PolicyAncestorStatus{theirAncestor}
	must(v1.BackendTLSPolicies(ns).UpdateStatus(ctx, policy, metav1.UpdateOptions{}))

	accepted := cond("Accepted", metav1.ConditionTrue, "Accepted", "")
	programmed := cond("Programmed", metav1.ConditionTrue, "Programmed", "")
	listener := func(name string, attached int32, conds ...metav1.Condition) gatewayv1.ListenerStatus {
		return gatewayv1.ListenerStatus{Name: gatewayv1.SectionName(name), AttachedRoutes: attached, Conditions: conds,
			SupportedKinds: []gatewayv1.RouteGroupKind{{Kind: "HTTPRoute"}}}
	}
	routeParents := func(conds ...metav1.Condition) *gatewayv1.RouteStatus {
		return &gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{{ParentRef: ours, Conditions: conds}}}
	}
	resolved := cond("ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs", "")
	statuses := func(httpListener gatewayv1.ListenerStatus) []*dag.Status {
		return []*dag.Status{
			gwStatus(dag.KindGatewayClass, "", "gw-status-ours", dag.GatewayAPIStatus{GatewayClass: &gatewayv1.GatewayClassStatus{Conditions: []metav1.Condition{accepted}}}),
			gwStatus(dag.KindGatewayClass, "", "gw-status-theirs", dag.GatewayAPIStatus{GatewayClass: &gatewayv1.GatewayClassStatus{Conditions: []metav1.Condition{accepted}}}),
			gwStatus(dag.KindGateway, ns, "gw", dag.GatewayAPIStatus{Gateway: &gatewayv1.GatewayStatus{
				Addresses:  []gatewayv1.GatewayStatusAddress{{Value: "192.0.2.10"}},
				Conditions: []metav1.Condition{accepted, programmed},
				Listeners:  []gatewayv1.ListenerStatus{httpListener, listener("tls", 1, accepted, programmed, resolved)},
			}}),
			gwStatus(dag.KindListenerSet, ns, "extra", dag.GatewayAPIStatus{ListenerSet: &gatewayv1.ListenerSetStatus{
				Conditions: []metav1.Condition{accepted, programmed},
				Listeners:  []gatewayv1.ListenerEntryStatus{{Name: "extra", Conditions: []metav1.Condition{accepted, programmed, resolved}}},
			}}),
			gwStatus(dag.KindHTTPRoute, ns, "web", dag.GatewayAPIStatus{Route: routeParents(accepted, resolved)}),
			gwStatus(dag.KindTLSRoute, ns, "tls", dag.GatewayAPIStatus{Route: routeParents(accepted, resolved)}),
			gwStatus(dag.KindBackendTLSPolicy, ns, "tls", dag.GatewayAPIStatus{Policy: &gatewayv1.PolicyStatus{
				Ancestors: []gatewayv1.PolicyAncestorStatus{{AncestorRef: ours, Conditions: []metav1.Condition{accepted}}}}}),
		}
	}

	first := statuses(listener("http", 2, accepted, programmed, resolved))
	if n := f.sync(f.snapshot(), first); n != 6 {
		t.Errorf("first sync wrote %d statuses, want 6 (our class, the Gateway, the ListenerSet, two routes, the policy)", n)
	}
	s1 := f.snapshot()
	written := metav1.NewTime(f.now)
	want := func(c metav1.Condition, gen int64, at metav1.Time) metav1.Condition {
		c.ObservedGeneration, c.LastTransitionTime = gen, at
		return c
	}
	ignoreMeta := cmpopts.IgnoreFields(metav1.Condition{}, "Message")
	if got := s1.GatewayClasses["gw-status-ours"].Status.Conditions; !cmp.Equal([]metav1.Condition{want(accepted, 1, written)}, got, ignoreMeta) {
		t.Errorf("our GatewayClass's conditions = %+v", got)
	}
	if got := s1.GatewayClasses["gw-status-theirs"].Status.Conditions; len(got) != 1 || got[0].Reason != "Pending" {
		t.Errorf("their GatewayClass's conditions = %+v, want the API server's default (Pending): never written", got)
	}
	g := s1.Gateways[key(ns, "gw")]
	if len(g.Status.Listeners) != 2 || g.Status.Listeners[0].AttachedRoutes != 2 || len(g.Status.Addresses) != 1 {
		t.Fatalf("Gateway status = %+v", g.Status)
	}
	if diff := cmp.Diff([]metav1.Condition{want(accepted, 1, written), want(programmed, 1, written), want(resolved, 1, written)}, g.Status.Listeners[0].Conditions); diff != "" {
		t.Errorf("http listener's conditions (-want +got):\n%s", diff)
	}
	web := s1.HTTPRoutes[key(ns, "web")]
	if len(web.Status.Parents) != 2 || !cmp.Equal(theirParent, web.Status.Parents[0], cmpopts.IgnoreFields(gatewayv1.ParentReference{}, "Group", "Kind")) ||
		web.Status.Parents[1].ControllerName != dag.GatewayControllerName {
		t.Errorf("route parents = %+v, want theirs kept first, then ours", web.Status.Parents)
	}
	if got := web.Status.Parents[len(web.Status.Parents)-1].Conditions; len(got) != 2 || got[0].ObservedGeneration != web.Generation {
		t.Errorf("our route parent's conditions = %+v, want observedGeneration %d", got, web.Generation)
	}
	if p := s1.BackendTLSPolicies[key(ns, "tls")]; len(p.Status.Ancestors) != 2 || p.Status.Ancestors[0].ControllerName != otherController {
		t.Errorf("policy ancestors = %+v, want theirs kept, then ours", p.Status.Ancestors)
	}
	if ls := s1.ListenerSets[key(ns, "extra")]; len(ls.Status.Listeners) != 1 || len(ls.Status.Conditions) != 2 {
		t.Errorf("ListenerSet status = %+v", ls.Status)
	}

	f.now = f.now.Add(time.Minute)
	if n := f.sync(s1, first); n != 0 {
		t.Errorf("a sync with nothing changed wrote %d statuses, want none", n)
	}

	// The Gateway is edited (generation 2) and its http listener stops being programmed:
	// that condition moves, the others keep their time and take the new generation.
	cur, err := v1.Gateways(ns).Get(ctx, "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Listeners[0].Hostname = ptrTo(gatewayv1.Hostname("app.example.com"))
	must(v1.Gateways(ns).Update(ctx, cur, metav1.UpdateOptions{}))
	notProgrammed := cond("Programmed", metav1.ConditionFalse, "Invalid", "fix the listener")
	second := statuses(listener("http", 2, accepted, notProgrammed, resolved))
	// Meanwhile another controller adds an entry to the route: the stale copy conflicts.
	route, err = v1.HTTPRoutes(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	late := gatewayv1.RouteParentStatus{ParentRef: gatewayv1.ParentReference{Name: "late-gw"}, ControllerName: otherController,
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.NewTime(f.now)}}}
	route.Status.Parents = append(route.Status.Parents, late)
	must(v1.HTTPRoutes(ns).UpdateStatus(ctx, route, metav1.UpdateOptions{}))
	stale := f.snapshot()
	stale.Upsert(s1.HTTPRoutes[key(ns, "web")]) // the cache has not seen their write yet
	second[4] = gwStatus(dag.KindHTTPRoute, ns, "web", dag.GatewayAPIStatus{Route: routeParents(accepted, cond("ResolvedRefs", metav1.ConditionFalse, "BackendNotFound", "no Service web"))})
	if n := f.sync(stale, second); n != 2 {
		t.Errorf("second sync wrote %d statuses, want 2 (the Gateway, the route)", n)
	}
	s2 := f.snapshot()
	g = s2.Gateways[key(ns, "gw")]
	moved := metav1.NewTime(f.now)
	if diff := cmp.Diff([]metav1.Condition{want(accepted, 2, written), want(notProgrammed, 2, moved), want(resolved, 2, written)}, g.Status.Listeners[0].Conditions); diff != "" {
		t.Errorf("http listener's conditions after the edit (-want +got):\n%s", diff)
	}
	web = s2.HTTPRoutes[key(ns, "web")]
	var controllers []gatewayv1.GatewayController
	for _, p := range web.Status.Parents {
		controllers = append(controllers, p.ControllerName)
	}
	if len(web.Status.Parents) != 3 || web.Status.Parents[1].ParentRef.Name != "late-gw" || controllers[2] != dag.GatewayControllerName {
		t.Errorf("route parents after a concurrent write = %v %+v, want both of theirs and ours", controllers, web.Status.Parents)
	} else if c := web.Status.Parents[2].Conditions; c[1].Status != metav1.ConditionFalse || !c[0].LastTransitionTime.Equal(&written) {
		t.Errorf("our route parent's conditions = %+v", c)
	}

	// The route no longer attaches to Portico's Gateway: its entry goes, theirs stay.
	if n := f.sync(s2, append(second[:4:4], second[6])); n != 2 {
		t.Errorf("sync without the routes' statuses wrote %d, want 2 (the HTTPRoute and TLSRoute lose Portico's entry)", n)
	}
	web = f.snapshot().HTTPRoutes[key(ns, "web")]
	if len(web.Status.Parents) != 2 || web.Status.Parents[0].ControllerName != otherController || web.Status.Parents[1].ControllerName != otherController {
		t.Errorf("route parents = %+v, want only theirs", web.Status.Parents)
	}
}

func ptrTo[T any](v T) *T { return &v }

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// TestServeWritesGatewayAPIStatus: `portico serve` watches the Gateway API kinds when
// their CRDs are installed and, as leader, writes the statuses its builds compute: the
// GatewayClass accepted, the route's entry for Portico's Gateway beside another
// controller's, with the objects' generations.
func TestServeWritesGatewayAPIStatus(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallGatewayAPICRDs(t, kubetest.GatewayAPIStandard)
	gw, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "gw-serve"
	createNamespace(t, kubetest.Clientset(t, cfg), ns)
	v1, ctx := gw.GatewayV1(), t.Context()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(v1.GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "gw-serve"},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: dag.GatewayControllerName}}, metav1.CreateOptions{}))
	must(v1.Gateways(ns).Create(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "gw"}, Spec: gatewayv1.GatewaySpec{
		GatewayClassName: "gw-serve", Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}}}, metav1.CreateOptions{}))
	route, err := v1.HTTPRoutes(ns).Create(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}, {Name: "their-gw"}}},
		Hostnames:       []gatewayv1.Hostname{"web.example.com"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	route.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: gatewayv1.ParentReference{Name: "their-gw"}, ControllerName: otherController,
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.Now()}}}}
	must(v1.HTTPRoutes(ns).UpdateStatus(ctx, route, metav1.UpdateOptions{}))

	s, err := app.NewServer(app.ServeOptions{
		Config: cfg, XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", WatchNamespaces: []string{ns},
		Holdoff: 50 * time.Millisecond, MaxDelay: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() { cancel(); <-done }()

	eventually(t, 30*time.Second, "the GatewayClass to be accepted", func() bool {
		gc, err := v1.GatewayClasses().Get(ctx, "gw-serve", metav1.GetOptions{})
		return err == nil && len(gc.Status.Conditions) > 0 && gc.Status.Conditions[0].Status == metav1.ConditionTrue && gc.Status.Conditions[0].ObservedGeneration == gc.Generation
	})
	eventually(t, 30*time.Second, "Portico's entry in the route's status beside theirs", func() bool {
		r, err := v1.HTTPRoutes(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(r.Status.Parents) != 2 || r.Status.Parents[0].ControllerName != otherController {
			return false
		}
		ours := r.Status.Parents[1]
		return ours.ControllerName == dag.GatewayControllerName && ours.ParentRef.Name == "gw" && len(ours.Conditions) > 0 && ours.Conditions[0].ObservedGeneration == r.Generation
	})
	eventually(t, 30*time.Second, "the Gateway's listener status", func() bool {
		g, err := v1.Gateways(ns).Get(ctx, "gw", metav1.GetOptions{})
		return err == nil && len(g.Status.Listeners) == 1 && g.Status.Listeners[0].AttachedRoutes == 1
	})
}
