package provision

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Addresses are the addresses at which a Gateway whose data plane's Service is svc is
// reached: the load balancer's, once it has one; for a Service of another type, its
// cluster IPs (reached from inside the cluster only). None while the load balancer is
// being set up: the Gateway is not Programmed until then.
func Addresses(svc *corev1.Service) []gatewayv1.GatewayStatusAddress {
	if svc == nil {
		return nil
	}
	var out []gatewayv1.GatewayStatusAddress
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			switch {
			case ing.IP != "":
				out = append(out, address(gatewayv1.IPAddressType, ing.IP))
			case ing.Hostname != "":
				out = append(out, address(gatewayv1.HostnameAddressType, ing.Hostname))
			}
		}
		return out
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, ip := range ips {
		if _, err := netip.ParseAddr(ip); err == nil {
			out = append(out, address(gatewayv1.IPAddressType, ip))
		}
	}
	return out
}

func address(t gatewayv1.AddressType, v string) gatewayv1.GatewayStatusAddress {
	return gatewayv1.GatewayStatusAddress{Type: &t, Value: v}
}

// ServiceKey is the namespace/name of the Service of Gateway gw's data plane when data
// planes run in namespace.
func ServiceKey(namespace string, gw types.NamespacedName) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: Name(gw)}
}
