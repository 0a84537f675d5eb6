package provision

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func gateway(ns, name string, ports ...int32) *gatewayv1.Gateway {
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for i, p := range ports {
		gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayv1.Listener{
			Name: gatewayv1.SectionName("l" + string(rune('a'+i))), Port: p, Protocol: gatewayv1.HTTPProtocolType,
		})
	}
	return gw
}

func TestNamesAreDistinctValidDNSLabels(t *testing.T) {
	long := strings.Repeat("x", 200)
	pairs := [][2]types.NamespacedName{
		{{Namespace: "a-b", Name: "c"}, {Namespace: "a", Name: "b-c"}},
		{{Namespace: "team", Name: long + "1"}, {Namespace: "team", Name: long + "2"}},
	}
	for _, p := range pairs {
		a, b := Name(p[0]), Name(p[1])
		if a == b {
			t.Errorf("%v and %v share the data plane name %q", p[0], p[1], a)
		}
		for _, n := range []string{a, b} {
			if errs := validation.IsDNS1035Label(n); len(errs) > 0 {
				t.Errorf("name %q is not a valid Service name: %v", n, errs)
			}
		}
	}
	if got := Name(types.NamespacedName{Namespace: "infra", Name: "public"}); !strings.HasPrefix(got, "gateway-infra-public-") {
		t.Errorf("Name = %q: an operator should recognise the Gateway in it", got)
	}
	if v := dataPlaneLabels(types.NamespacedName{Namespace: "team", Name: long})[LabelGatewayName]; len(v) > 63 {
		t.Errorf("gateway-name label %q is longer than a label value may be", v)
	}
}

func TestServiceExposesEachListenerPortOnce(t *testing.T) {
	gw := gateway("infra", "public", 443, 80, 443)
	svc := Service(gw, Options{Namespace: "portico-system"})
	var ports []int32
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Port)
		if p.TargetPort.IntVal != p.Port {
			t.Errorf("port %d targets %v: the data plane binds the listener's own port", p.Port, p.TargetPort)
		}
	}
	if !slices.Equal(ports, []int32{80, 443}) {
		t.Errorf("Service ports %v, want [80 443]", ports)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Namespace != "portico-system" {
		t.Errorf("Service type %s in %s, want LoadBalancer in portico-system", svc.Spec.Type, svc.Namespace)
	}
	dep := Deployment(gw, Options{Namespace: "portico-system"})
	for k, v := range dep.Spec.Selector.MatchLabels {
		if svc.Spec.Selector[k] != v || dep.Spec.Template.Labels[k] != v {
			t.Errorf("selector label %s=%s: Service %q, pods %q", k, v, svc.Spec.Selector[k], dep.Spec.Template.Labels[k])
		}
	}
}

func TestDataPlanesServeOnlyTheirGateway(t *testing.T) {
	gw := gateway("infra", "public", 80)
	o := Options{Namespace: "portico-system", XDSAddress: "portico.portico-system.svc:8001", XDSClientSecret: "portico-xds-client",
		PorticoImage: "ghcr.io/portico-dev/portico:test", EnvoyImage: "envoyproxy/envoy:test"}
	for _, tc := range []struct {
		plane     DataPlane
		container func(*corev1.PodSpec) corev1.Container
	}{
		{DataPlanePortico, func(s *corev1.PodSpec) corev1.Container { return s.Containers[0] }},
		{DataPlaneEnvoy, func(s *corev1.PodSpec) corev1.Container { return s.InitContainers[0] }},
	} {
		o.DataPlane = tc.plane
		spec := Deployment(gw, o).Spec.Template.Spec
		args := strings.Join(tc.container(&spec).Args, " ")
		for _, want := range []string{"--gateway infra/public", "portico.portico-system.svc:8001", "--xds-tls-cert-file /certs/tls.crt"} {
			if !strings.Contains(args, want) {
				t.Errorf("%s data plane: args %q lack %q", tc.plane, args, want)
			}
		}
		if *spec.SecurityContext.RunAsNonRoot != true || len(spec.SecurityContext.Sysctls) != 1 {
			t.Errorf("%s data plane: runs as root, or cannot bind port 80 without privileges: %+v", tc.plane, spec.SecurityContext)
		}
	}
}

func TestAddressesFollowTheService(t *testing.T) {
	lb := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.0.0.9"}}
	if got := Addresses(lb); len(got) != 0 {
		t.Errorf("a load balancer not yet set up gave addresses %v; the cluster IP is not the Gateway's address", got)
	}
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}, {Hostname: "lb.example.com"}}
	got := Addresses(lb)
	if len(got) != 2 || got[0].Value != "203.0.113.7" || *got[0].Type != gatewayv1.IPAddressType ||
		got[1].Value != "lb.example.com" || *got[1].Type != gatewayv1.HostnameAddressType {
		t.Errorf("Addresses = %+v", got)
	}
	cip := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.0.0.9", ClusterIPs: []string{"10.0.0.9"}}}
	if got := Addresses(cip); len(got) != 1 || got[0].Value != "10.0.0.9" {
		t.Errorf("ClusterIP Service: Addresses = %+v", got)
	}
	if Addresses(nil) != nil {
		t.Error("no Service yet must give no address")
	}
}
