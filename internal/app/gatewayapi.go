package app

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/gatewayapi"
	"github.com/portico-dev/portico/internal/provision"
)

// withGatewayAPI adds the Gateway API processor to a build's options, with addrs as its
// address source, unless the options have one already (run and serve set theirs): dag
// builds Gateway API objects through it without importing the package.
func withGatewayAPI(o dag.Options, addrs ...gatewayapi.AddressSource) dag.Options {
	for _, p := range o.Processors {
		if _, ok := p.(gatewayapi.Processor); ok {
			return o
		}
	}
	pr := gatewayapi.Processor{}
	if len(addrs) > 0 {
		pr.Addresses = addrs[0]
	}
	o.Processors = append(o.Processors[:len(o.Processors):len(o.Processors)], pr)
	return o
}

// localAddress is where `portico run` serves every Gateway: its --gateway-host.
type localAddress string

func (a localAddress) Addresses(*dag.Processing, types.NamespacedName) ([]gatewayv1.GatewayStatusAddress, string) {
	t := gatewayv1.HostnameAddressType
	if _, err := netip.ParseAddr(string(a)); err == nil {
		t = gatewayv1.IPAddressType
	}
	return []gatewayv1.GatewayStatusAddress{{Type: &t, Value: string(a)}}, ""
}

// serviceAddress reads a Gateway's addresses from its data plane's Service, as the
// provisioner names it in namespace.
type serviceAddress struct{ namespace string }

func (s serviceAddress) Addresses(p *dag.Processing, gw types.NamespacedName) ([]gatewayv1.GatewayStatusAddress, string) {
	key := provision.ServiceKey(s.namespace, gw)
	svc := p.Service(key)
	if svc == nil {
		return nil, "its data plane is being deployed: the Service " + key.String() + " does not exist yet" +
			" (the controller creates it; if it does not, its log says why, and --watch-namespaces must include " + s.namespace + ")"
	}
	if addrs := provision.Addresses(svc); len(addrs) > 0 {
		// Programmed means requests are answered: until a replica passes its
		// readiness probe (it has its first complete configuration), they would not be.
		if len(svc.Spec.Ports) > 0 && p.ReadyEndpoints(key, svc.Spec.Ports[0].Name) == 0 {
			return addrs, "its data plane has no ready replica yet (Deployment " + key.String() + "); if this lasts, " +
				"see that Deployment's Pods and their logs"
		}
		return addrs, ""
	}
	return nil, "its data plane's Service " + key.String() + " has no load-balancer address yet; in a cluster without a load-balancer " +
		"implementation, run serve with --gateway-service-type ClusterIP or NodePort"
}
