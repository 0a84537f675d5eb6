package app

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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
// is not Programmed (AddressNotAssigned, saying what to do), nor until a replica behind
// it is ready (Pending: a request sent then would not be answered); the incremental
// builder notices the Service's and its endpoints' changes. In run, the address is
// --gateway-host.
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
	if c := programmed(gs); c.Status != metav1.ConditionFalse || c.Reason != string(gatewayv1.GatewayReasonPending) || len(gs.Addresses) != 1 || gs.Addresses[0].Value != "203.0.113.10" {
		t.Errorf("with an address and no ready replica: Programmed %s/%s, addresses %v; want False/Pending and 203.0.113.10", c.Status, c.Reason, gs.Addresses)
	}

	s.Upsert(readySlice(withLB, "10.0.0.7"))
	gs = gatewayStatus(inc.Build(s))
	if c := programmed(gs); c.Status != metav1.ConditionTrue || len(gs.Addresses) != 1 || gs.Addresses[0].Value != "203.0.113.10" {
		t.Errorf("once a replica is ready: Programmed %s/%s, addresses %v; want True and 203.0.113.10", c.Status, c.Reason, gs.Addresses)
	}

	run := dag.Build(s, withGatewayAPI(dag.Options{}, localAddress("127.0.0.1")))
	if gs := gatewayStatus(run); len(gs.Addresses) != 1 || gs.Addresses[0].Value != "127.0.0.1" || *gs.Addresses[0].Type != gatewayv1.IPAddressType {
		t.Errorf("run: addresses %v, want the IPAddress 127.0.0.1", gs.Addresses)
	}
}

// readySlice is the EndpointSlice of svc's first port with one ready endpoint at ip.
func readySlice(svc *corev1.Service, ip string) *discoveryv1.EndpointSlice {
	port := svc.Spec.Ports[0]
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &port.Name, Port: &port.TargetPort.IntVal}},
	}
}
