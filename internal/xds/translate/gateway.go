package translate

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/parallel"
)

// translateGateways adds the data plane of each Gateway: per port, a Listener on
// 0.0.0.0:<port> named GatewayListenerName(gateway, port) (the data plane maps it to
// its own address), with for HTTP ports the RouteConfiguration of the same name, and
// for HTTPS ports one filter chain per server name, as the shared HTTPS listener has,
// each with its RouteConfiguration "<listener name>/<server name>". Secrets already
// in res are not added twice.
func translateGateways(gateways []*dag.Gateway, opts Options, res *Resources) error {
	if len(gateways) == 0 {
		return nil
	}
	secrets := map[string]bool{}
	for _, s := range res.Secrets {
		secrets[secretName(s)] = true
	}
	for _, gw := range gateways {
		for _, p := range gw.Ports {
			name := GatewayListenerName(gw.Name, p.Port)
			addr := hostPort{host: "0.0.0.0", port: p.Port}
			if len(p.HTTP) > 0 {
				l := plainListener(name, name, addr, opts)
				rc, err := gatewayRouteConfig(name, p.HTTP, opts)
				if err != nil {
					return err
				}
				// Its hosts are validated one by one (gatewayRouteConfig): the route
				// configuration is validated without them.
				if err := validateAll(l, routeConfiguration(name, nil)); err != nil {
					return err
				}
				res.Listeners = append(res.Listeners, l)
				res.Routes = append(res.Routes, rc)
			}
			if len(p.HTTPS) > 0 {
				if err := gatewaySecurePort(name, addr, p.HTTPS, opts, res, secrets); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// gatewayRouteConfig is the route configuration of a Gateway's HTTP port.
func gatewayRouteConfig(name string, hosts []*dag.VirtualHost, opts Options) (*routev3.RouteConfiguration, error) {
	vhosts := make([]*routev3.VirtualHost, len(hosts))
	err := parallel.Do(len(hosts), func(i int) error {
		vhosts[i] = gatewayVirtualHost(hosts[i], opts)
		return validateAll(vhosts[i])
	})
	if err != nil {
		return nil, err
	}
	return routeConfiguration(name, vhosts), nil
}

// translateGatewaySecureHost translates a server name of the Gateway port whose
// listener is named listener.
func translateGatewaySecureHost(svh *dag.SecureVirtualHost, listener string, opts Options) (secureHost, error) {
	return translateSecureHostAs(svh, listener, listener+"/"+svh.Name, gatewayVirtualHost, opts)
}

// gatewayVirtualHost translates a Gateway's virtual host. A Gateway API wildcard
// "*.example.com" matches hosts any number of labels deep, as Envoy's domain does, so
// the host needs none of the one-label condition of virtualHost; a route's own hosts
// and listener isolation are settled in the graph (internal/dag/gatewayapi).
func gatewayVirtualHost(vh *dag.VirtualHost, opts Options) *routev3.VirtualHost {
	out := &routev3.VirtualHost{Name: vh.Name, Domains: []string{vh.Name}, Routes: routes(vh, nil, opts)}
	uniqueRouteNames(out.Routes)
	return out
}

// gatewaySecurePort adds the TLS listener of a Gateway's HTTPS port, when any of its
// server names has something to serve.
func gatewaySecurePort(name string, addr hostPort, hosts []*dag.SecureVirtualHost, opts Options, res *Resources, secrets map[string]bool) error {
	l := tlsListener(name, addr)
	for _, svh := range hosts {
		h, err := translateGatewaySecureHost(svh, name, opts)
		if err != nil {
			return err
		}
		h.addTo(l, res, secrets)
	}
	if len(l.FilterChains) == 0 {
		return nil // Envoy refuses a listener without filter chains
	}
	if err := validateAll(l); err != nil {
		return err
	}
	res.Listeners = append(res.Listeners, l)
	return nil
}

func secretName(r types.Resource) string {
	if s, ok := r.(interface{ GetName() string }); ok {
		return s.GetName()
	}
	return ""
}
