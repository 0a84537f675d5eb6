package status

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
)

// BenchmarkGatewayAPIPlanUnchanged: planning the writes of 5,000 HTTPRoutes whose
// status is already what the build says, as every status sync after a rebuild does. (The
// client is never called: nothing is written.)
func BenchmarkGatewayAPIPlanUnchanged(b *testing.B) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	w := &GatewayAPIWriter{Client: fake.NewSimpleClientset(), Now: func() time.Time { return now }}
	gk, kind := gatewayv1.Group(gatewayv1.GroupName), gatewayv1.Kind("Gateway")
	parent := gatewayv1.ParentReference{Group: &gk, Kind: &kind, Name: "gw"}
	conds := []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "attached"},
		{Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs", Message: "resolved"},
	}
	var objs []runtime.Object
	var statuses []*dag.Status
	for i := range 5000 {
		name := fmt.Sprintf("r%d", i)
		stored := make([]metav1.Condition, len(conds))
		for j, c := range conds {
			c.ObservedGeneration, c.LastTransitionTime = 1, metav1.NewTime(now)
			stored[j] = c
		}
		objs = append(objs, &gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, Generation: 1},
			Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}},
				Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web"}}}}}}},
			Status: gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{
				{ParentRef: parent, ControllerName: dag.GatewayControllerName, Conditions: stored}}}},
		})
		statuses = append(statuses, &dag.Status{Object: dag.ObjectRef{Kind: dag.KindHTTPRoute, Namespace: "apps", Name: name},
			GatewayAPI: &dag.GatewayAPIStatus{Route: &gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{{ParentRef: parent, Conditions: conds}}}}})
	}
	s := store.FromObjects(objs)
	b.ReportAllocs()
	for b.Loop() {
		if u := w.updates(s, statuses); len(u) != 0 {
			b.Fatalf("%d updates planned, want none", len(u))
		}
	}
}
