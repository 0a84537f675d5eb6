package status

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
)

func checkCond(typ string, st metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg}
}

func gatewayCheckStatuses() []*dag.Status {
	section := gatewayv1.SectionName("http")
	return []*dag.Status{
		{Object: dag.ObjectRef{Kind: dag.KindGateway, Namespace: "infra", Name: "public"}, Status: dag.StatusValid, Description: "served",
			GatewayAPI: &dag.GatewayAPIStatus{Gateway: &gatewayv1.GatewayStatus{
				Conditions: []metav1.Condition{checkCond("Accepted", metav1.ConditionTrue, "Accepted", "")},
				Listeners: []gatewayv1.ListenerStatus{{Name: "http", AttachedRoutes: 1, Conditions: []metav1.Condition{
					checkCond("Programmed", metav1.ConditionTrue, "Programmed", "served")}}},
			}}},
		{Object: dag.ObjectRef{Kind: dag.KindHTTPRoute, Namespace: "shop", Name: "store"}, Status: dag.StatusInvalid, Description: "not attached",
			GatewayAPI: &dag.GatewayAPIStatus{Route: &gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{{
				ParentRef:  gatewayv1.ParentReference{Name: "public", Namespace: ptrTo(gatewayv1.Namespace("infra")), SectionName: &section},
				Conditions: []metav1.Condition{checkCond("Accepted", metav1.ConditionFalse, "NotAllowedByListeners", "no listener allows it")},
			}}}}},
		ingressStatus("web", dag.StatusValid, "valid Ingress"),
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestCheckShowsGatewayAPIConditions: check's table is followed by each Gateway API
// object's conditions (listeners with their attached routes, routes per parent); its
// JSON adds them as conditions and listeners, other kinds' entries unchanged.
func TestCheckShowsGatewayAPIConditions(t *testing.T) {
	var table bytes.Buffer
	if err := WriteTable(&table, gatewayCheckStatuses()); err != nil {
		t.Fatal(err)
	}
	want := `
Gateway API conditions:

Gateway infra/public
  Accepted=True Accepted
  listener http (1 attached routes):
    Programmed=True Programmed: served

HTTPRoute shop/store
  parent Gateway infra/public sectionName http:
    Accepted=False NotAllowedByListeners: no listener allows it
`
	if _, details, _ := strings.Cut(table.String(), "valid Ingress\n"); details != want {
		t.Errorf("table:\n%s\nwant after it:\n%s", table.String(), want)
	}

	var out bytes.Buffer
	if err := WriteJSON(&out, gatewayCheckStatuses()); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	wantJSON := []map[string]any{
		{"kind": "Gateway", "namespace": "infra", "name": "public", "status": "valid", "description": "served",
			"conditions": []any{
				map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted"},
				map[string]any{"listener": "http", "type": "Programmed", "status": "True", "reason": "Programmed", "message": "served"},
			},
			"listeners": []any{map[string]any{"name": "http", "attachedRoutes": float64(1)}}},
		{"kind": "HTTPRoute", "namespace": "shop", "name": "store", "status": "invalid", "description": "not attached",
			"conditions": []any{map[string]any{"parent": "Gateway infra/public sectionName http", "type": "Accepted", "status": "False",
				"reason": "NotAllowedByListeners", "message": "no listener allows it"}}},
		{"kind": "Ingress", "namespace": "default", "name": "web", "status": "valid", "description": "valid Ingress"},
	}
	if diff := cmp.Diff(wantJSON, got); diff != "" {
		t.Errorf("check -o json (-want +got):\n%s", diff)
	}
}
