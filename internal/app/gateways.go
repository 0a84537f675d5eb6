package app

import (
	"context"
	"fmt"
	"net"
	"slices"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/gatewayapi"
	"github.com/portico-dev/portico/internal/managedtls"
	"github.com/portico-dev/portico/internal/provision"
)

// DefaultGatewayNamespace is where the Gateways' data planes run: a namespace of their
// own, so that the controller may manage Deployments and Services there and nowhere
// else (not its own Services).
const DefaultGatewayNamespace = "portico-gateways"

// servedGateways are the data planes of the Gateways a graph serves.
func servedGateways(g *dag.Graph) []*dag.Gateway {
	if g == nil {
		return nil
	}
	return g.Gateways
}

// provisionGateways gives each Gateway of build b a data plane (leader only), and returns
// how many operations failed, for the status loop to retry.
func (s *Server) provisionGateways(ctx context.Context, b *built) int {
	if s.provisioner == nil {
		return 0
	}
	gateways := make([]*gatewayv1.Gateway, 0, len(b.gateways))
	for _, dp := range b.gateways {
		if gw := b.store.Gateways[dp.Name]; gw != nil {
			gateways = append(gateways, withServedPorts(gw, dp))
		}
	}
	return s.provisioner.Sync(ctx, gateways)
}

// gatewayDataPlaneOptions fills what serve's own configuration implies.
func gatewayDataPlaneOptions(opts ServeOptions) provision.Options {
	o := opts.GatewayDataPlanes
	if o.Namespace == "" {
		o.Namespace = DefaultGatewayNamespace
	}
	if o.XDSAddress == "" {
		_, port, err := net.SplitHostPort(opts.XDSAddr)
		if err != nil || port == "0" {
			port = "8001"
		}
		o.XDSAddress = net.JoinHostPort(opts.XDSServerNames[0], port)
	}
	if o.XDSClientSecret == "" && opts.ManagedTLS {
		o.XDSClientSecret = managedtls.DefaultClientSecret
	}
	if o.XDSServerName == "" && opts.ManagedTLS {
		// The managed server certificate carries XDSServerNames, whatever address the
		// data planes dial.
		o.XDSServerName = opts.XDSServerNames[0]
	}
	return o
}

// withServedPorts returns gw, or a copy of it with a listener for each port its data
// plane serves that none of its own listeners has (a ListenerSet's): the provisioner
// exposes the ports of a Gateway's listeners, and the ListenerSets' ports must be
// reachable too.
func withServedPorts(gw *gatewayv1.Gateway, dp *dag.Gateway) *gatewayv1.Gateway {
	var out *gatewayv1.Gateway
	for _, p := range dp.Ports {
		port := gatewayv1.PortNumber(p.Port)
		if slices.ContainsFunc(gw.Spec.Listeners, func(l gatewayv1.Listener) bool { return l.Port == port }) {
			continue
		}
		if out == nil {
			out = gw.DeepCopy()
		}
		out.Spec.Listeners = append(out.Spec.Listeners, gatewayv1.Listener{
			Name: gatewayv1.SectionName(fmt.Sprintf("listenerset-port-%d", port)), Port: port, Protocol: gatewayv1.HTTPProtocolType})
	}
	if out == nil {
		return gw
	}
	return out
}

// gatewayAddresses is where serve reads the Gateways' addresses: the Services of the
// data planes it deploys; none when the operator deploys them.
func gatewayAddresses(opts ServeOptions) []gatewayapi.AddressSource {
	if opts.GatewayDataPlanes.DataPlane == "" {
		return nil
	}
	return []gatewayapi.AddressSource{serviceAddress{namespace: gatewayDataPlaneOptions(opts).Namespace}}
}
