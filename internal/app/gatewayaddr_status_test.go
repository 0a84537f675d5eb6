package app

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/provision"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// TestGatewayAddressesFollowTheDataPlaneService: in serve, a Gateway's status.addresses
// are its data plane Service's load-balancer addresses, and until it has one the Gateway
// is not Programmed (AddressNotAssigned, saying what to do); the incremental builder
// notices the Service's change. In run, the address is --gateway-host.
func TestGatewayAddressesFollowTheDataPlaneService(t *testing.T) {
	objs := testutil.DecodeObjects(t, `kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: portico
  listeners: [{name: http, protocol: HTTP, port: 80}]`)
	s := store.FromObjects(objs)
	gwKey := types.NamespacedName{Namespace: "infra", Name: "gw"}
	inc := dag.NewIncremental(withGatewayAPI(dag.Options{}, serviceAddress{namespace: DefaultGatewayNamespace}))
	gatewayStatus := func(g *dag.Graph) *gatewayv1.GatewayStatus {
		t.Helper()
		for _, st := range dag.StatusesOf(g.Statuses, dag.ObjectRef{Kind: dag.KindGateway, Namespace: "infra", Name: "gw"}) {
			return st.GatewayAPI.Gateway
		}
		t.Fatal("no status for the Gateway")
		return nil
	}
	programmed := func(gs *gatewayv1.GatewayStatus) metav1.Condition {
		for _, c := range gs.Conditions {
			if c.Type == string(gatewayv1.GatewayConditionProgrammed) {
				return c
			}
		}
		t.Fatal("no Programmed condition")
		return metav1.Condition{}
	}

	gs := gatewayStatus(inc.Build(s))
	if c := programmed(gs); c.Status != metav1.ConditionFalse || c.Reason != string(gatewayv1.GatewayReasonAddressNotAssigned) || len(gs.Addresses) != 0 {
		t.Errorf("before its Service exists: Programmed %s/%s, addresses %v; want False/AddressNotAssigned and none", c.Status, c.Reason, gs.Addresses)
	}

	svc := provision.Service(s.Gateways[gwKey], provision.Options{Namespace: DefaultGatewayNamespace})
	s.Upsert(svc)
	if c := programmed(gatewayStatus(inc.Build(s))); c.Status != metav1.ConditionFalse || c.Reason != string(gatewayv1.GatewayReasonAddressNotAssigned) {
		t.Errorf("with a Service waiting for its load balancer: Programmed %s/%s, want False/AddressNotAssigned", c.Status, c.Reason)
	}

	withLB := svc.DeepCopy()
	withLB.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.10"}}
	s.Upsert(withLB)
	gs = gatewayStatus(inc.Build(s))
	if c := programmed(gs); c.Status != metav1.ConditionTrue || len(gs.Addresses) != 1 || gs.Addresses[0].Value != "203.0.113.10" {
		t.Errorf("once the load balancer answers: Programmed %s/%s, addresses %v; want True and 203.0.113.10", c.Status, c.Reason, gs.Addresses)
	}

	run := dag.Build(s, withGatewayAPI(dag.Options{}, localAddress("127.0.0.1")))
	if gs := gatewayStatus(run); len(gs.Addresses) != 1 || gs.Addresses[0].Value != "127.0.0.1" || *gs.Addresses[0].Type != gatewayv1.IPAddressType {
		t.Errorf("run: addresses %v, want the IPAddress 127.0.0.1", gs.Addresses)
	}
}
