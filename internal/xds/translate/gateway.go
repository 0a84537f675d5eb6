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
// in res are not added twice. As the Gateway API asks, a request's Host keeps its port:
// the virtual host is chosen by its name alone, and the backend sees the Host the client
// sent (keepHostPort).
func translateGateways(gateways []*dag.Gateway, opts Options, res *Resources) error {
	if len(gateways) == 0 {
		return nil
	}
	opts = gatewayOptions(opts)
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
				rc, err := gatewayRouteConfig(name, p.HTTP, gatewayHostsOn(p.Port, "http"), opts)
				if err != nil {
					return err
				}
				// Its hosts are validated one by one (gatewayRouteConfig): the route
				// configuration is validated without them.
				if err := validateAll(l, routeConfiguration(name, nil, opts.Global)); err != nil {
					return err
				}
				res.Listeners = append(res.Listeners, l)
				res.Routes = append(res.Routes, rc)
			}
			if len(p.HTTPS) > 0 {
				if err := gatewaySecurePort(name, addr, p.HTTPS, gatewayHostsOn(p.Port, "https"), opts, res, secrets); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// gatewayOptions are opts for the resources of Gateways: the Host keeps its port.
func gatewayOptions(opts Options) Options {
	opts.keepHostPort = true
	return opts
}

// gatewayRouteConfig is the route configuration of a Gateway's HTTP port, its virtual
// hosts made by vhost.
func gatewayRouteConfig(name string, hosts []*dag.VirtualHost, vhost vhostFunc, opts Options) (*routev3.RouteConfiguration, error) {
	vhosts := make([]*routev3.VirtualHost, len(hosts))
	err := parallel.Do(len(hosts), func(i int) error {
		vhosts[i] = vhost(hosts[i], opts)
		return validateAll(vhosts[i])
	})
	if err != nil {
		return nil, err
	}
	return routeConfigurationFor(name, vhosts, opts), nil
}

// translateGatewaySecureHost translates a server name of the Gateway port whose
// listener is named listener.
func translateGatewaySecureHost(svh *dag.SecureVirtualHost, listener string, port uint32, opts Options) (secureHost, error) {
	return translateSecureHostAs(svh, listener, listener+"/"+svh.Name, gatewayHostsOn(port, "https"), opts)
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

// gatewayHostsOn is the vhostFunc of a Gateway's port whose listeners speak scheme.
// The Host keeps its port there, and Envoy keeps it in a redirect's Location unless the
// redirect names a port (port_redirect) or leaves the scheme whose default port it is.
// The graph leaves out a redirect's port when it is its scheme's default (dag.Redirect):
// right on a port that is the default of its own scheme (80 for HTTP, 443 for HTTPS),
// where clients send no port, or that default one. On any other port clients send it
// (Host: foo.com:8080), so a redirect to a scheme's default port names that port
// ("https://foo.com:443/") rather than keep the listener's.
func gatewayHostsOn(port uint32, scheme string) vhostFunc {
	if port == defaultPort(scheme) {
		return gatewayVirtualHost
	}
	return func(vh *dag.VirtualHost, opts Options) *routev3.VirtualHost {
		out := gatewayVirtualHost(vh, opts)
		for _, r := range out.Routes {
			nameDefaultPort(r.GetRedirect())
		}
		return out
	}
}

// nameDefaultPort makes rd, a redirect that keeps the request's host and port, name
// the default port of its scheme.
func nameDefaultPort(rd *routev3.RedirectAction) {
	if rd == nil || rd.PortRedirect != 0 || rd.HostRedirect != "" {
		return
	}
	switch {
	case rd.GetHttpsRedirect():
		rd.PortRedirect = defaultPort("https")
	case rd.GetSchemeRedirect() != "":
		rd.PortRedirect = defaultPort(rd.GetSchemeRedirect())
	}
}

// gatewaySecurePort adds the TLS listener of a Gateway's HTTPS port, when any of its
// server names has something to serve; vhost makes its virtual hosts.
func gatewaySecurePort(name string, addr hostPort, hosts []*dag.SecureVirtualHost, vhost vhostFunc, opts Options, res *Resources, secrets map[string]bool) error {
	l := tlsListener(name, addr, opts.Global)
	for _, svh := range hosts {
		h, err := translateSecureHostAs(svh, name, name+"/"+svh.Name, vhost, opts)
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
