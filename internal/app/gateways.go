package app

import (
	"context"
	"net"

	"k8s.io/apimachinery/pkg/types"
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

// gatewayNames are the Gateways a graph serves.
func gatewayNames(g *dag.Graph) []types.NamespacedName {
	if g == nil {
		return nil
	}
	out := make([]types.NamespacedName, len(g.Gateways))
	for i, gw := range g.Gateways {
		out[i] = gw.Name
	}
	return out
}

// provisionGateways gives each Gateway of build b a data plane (leader only), and returns
// how many operations failed, for the status loop to retry.
func (s *Server) provisionGateways(ctx context.Context, b *built) int {
	if s.provisioner == nil {
		return 0
	}
	gateways := make([]*gatewayv1.Gateway, 0, len(b.gateways))
	for _, nn := range b.gateways {
		if gw := b.store.Gateways[nn]; gw != nil {
			gateways = append(gateways, gw)
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

// gatewayAddresses is where serve reads the Gateways' addresses: the Services of the
// data planes it deploys; none when the operator deploys them.
func gatewayAddresses(opts ServeOptions) []gatewayapi.AddressSource {
	if opts.GatewayDataPlanes.DataPlane == "" {
		return nil
	}
	return []gatewayapi.AddressSource{serviceAddress{namespace: gatewayDataPlaneOptions(opts).Namespace}}
}
