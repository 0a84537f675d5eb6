package translate

import (
	"slices"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag"
)

// The Gateways' data planes, translated incrementally as the shared listeners are: a
// Gateway that is the same pointer as in the previous graph keeps its translation, and
// in one that is not, a port that is the same pointer keeps its own; in a port that
// changed, a virtual host or server name that is the same pointer keeps its translation
// (dag.Incremental keeps them so), and its route configuration and listener are made
// again only when one of them changed. The result is translateGateways'.

// gatewayEntry is the translation of one Gateway's data plane, port by port.
type gatewayEntry struct {
	src   *dag.Gateway
	ports map[uint32]*gatewayPortEntry
}

// gatewayPortEntry is the translation of one port of a Gateway.
type gatewayPortEntry struct {
	src  *dag.GatewayPort
	name string
	addr hostPort

	// http are its HTTP hosts; listener and routes their listener and route
	// configuration, nil when it has none.
	http, httpSpare []hostEntry[*dag.VirtualHost, *vhostEntry]
	listener        *listenerv3.Listener
	routes          *routev3.RouteConfiguration

	// secure are its server names; tls their listener, nil when no name has a chain, and
	// tlsShell that listener without chains.
	secure, secureSpare []hostEntry[*dag.SecureVirtualHost, *secureEntry]
	tls, tlsShell       *listenerv3.Listener
}

// gatewayResources adds the Gateways' data planes in the order translateGateways does,
// translating again only what changed.
func (t *Incremental) gatewayResources(gateways []*dag.Gateway, res *Resources) error {
	next := make(map[k8stypes.NamespacedName]*gatewayEntry, len(gateways))
	for _, gw := range gateways {
		e := t.gateways[gw.Name]
		if e == nil {
			e = &gatewayEntry{ports: map[uint32]*gatewayPortEntry{}}
		}
		delete(t.gateways, gw.Name)
		if e.src != gw {
			if err := t.gatewayPorts(gw, e); err != nil {
				return err
			}
		}
		next[gw.Name] = e
	}
	for _, e := range t.gateways {
		for _, pe := range e.ports {
			t.releasePort(pe)
		}
	}
	t.gateways = next

	secrets := make(map[string]bool, len(res.Secrets))
	for _, s := range res.Secrets {
		secrets[secretName(s)] = true
	}
	for _, gw := range gateways {
		e := next[gw.Name]
		for _, p := range gw.Ports {
			e.ports[p.Port].addTo(res, secrets)
		}
	}
	return nil
}

// gatewayPorts translates the ports of gw that changed since e was made.
func (t *Incremental) gatewayPorts(gw *dag.Gateway, e *gatewayEntry) error {
	ports := make(map[uint32]*gatewayPortEntry, len(gw.Ports))
	for _, p := range gw.Ports {
		pe := e.ports[p.Port]
		if pe == nil {
			name := GatewayListenerName(gw.Name, p.Port)
			pe = &gatewayPortEntry{name: name, addr: hostPort{host: "0.0.0.0", port: p.Port}}
		}
		if pe.src != p {
			if err := t.gatewayPort(p, pe); err != nil {
				return err
			}
		}
		ports[p.Port] = pe
	}
	for port, pe := range e.ports {
		if ports[port] == nil {
			t.releasePort(pe)
		}
	}
	e.src, e.ports = gw, ports
	return nil
}

// gatewayPort translates again the hosts and server names of p that changed.
func (t *Incremental) gatewayPort(p *dag.GatewayPort, pe *gatewayPortEntry) error {
	next, err := walkHosts(pe.http, pe.httpSpare, p.HTTP, vhostName, keepGatewayHost,
		func(vh *dag.VirtualHost, old *vhostEntry) (*vhostEntry, error) {
			tr := t.pre.gatewayVirtualHost(vh)
			if tr == nil {
				tr = gatewayHostsOn(p.Port, "http")(vh, gatewayOptions(t.opts))
				if err := validateAll(tr); err != nil {
					return nil, err
				}
			}
			t.Retranslated++
			if old != nil && proto.Equal(old.out, tr) {
				tr = old.out
			}
			return &vhostEntry{out: tr, uses: t.use(routeClusters(vh.Routes))}, nil
		},
		func(e *vhostEntry) { t.release(e.uses) })
	if err != nil {
		return err
	}
	pe.http, pe.httpSpare = next, recycle(pe.http)
	if err := pe.httpResources(gatewayOptions(t.opts)); err != nil {
		return err
	}
	nextSecure, err := walkHosts(pe.secure, pe.secureSpare, p.HTTPS, secureName, keepSecureHost,
		func(svh *dag.SecureVirtualHost, old *secureEntry) (*secureEntry, error) {
			return t.gatewaySecureEntry(pe.name, p.Port, svh, old)
		},
		func(e *secureEntry) { t.release(e.uses) })
	if err != nil {
		return err
	}
	pe.secure, pe.secureSpare = nextSecure, recycle(pe.secure)
	if err := pe.tlsListener(t.opts.Global); err != nil {
		return err
	}
	pe.src = p
	return nil
}

// keepGatewayHost says that a Gateway's host that is the same pointer keeps its
// translation: it depends on nothing else.
func keepGatewayHost(*dag.VirtualHost, *vhostEntry) bool { return true }

// httpResources makes the port's listener and route configuration, when it has HTTP
// hosts: the listener once, the route configuration when a host changed. Its hosts are
// validated one by one, and the route configuration without them once.
func (pe *gatewayPortEntry) httpResources(opts Options) error {
	if len(pe.http) == 0 {
		pe.listener, pe.routes = nil, nil
		return nil
	}
	if pe.listener == nil {
		l := plainListener(pe.name, pe.name, pe.addr, opts)
		if err := validateAll(l, routeConfiguration(pe.name, nil, opts.Global)); err != nil {
			return err
		}
		pe.listener = l
	}
	if !sameVirtualHosts(pe.routes, pe.http) {
		hosts := make([]*routev3.VirtualHost, len(pe.http))
		for i, h := range pe.http {
			hosts[i] = h.entry.out
		}
		pe.routes = routeConfigurationFor(pe.name, hosts, opts)
	}
	return nil
}

// gatewaySecureEntry translates one server name of a Gateway's port named name.
func (t *Incremental) gatewaySecureEntry(name string, port uint32, svh *dag.SecureVirtualHost, old *secureEntry) (*secureEntry, error) {
	h, ok := t.pre.gatewaySecureHost(svh)
	if !ok {
		var err error
		if h, err = translateGatewaySecureHost(svh, name, port, gatewayOptions(t.opts)); err != nil {
			return nil, err
		}
	}
	return t.newSecureEntry(svh, h, old), nil
}

// tlsListener makes the port's TLS listener again when its filter chains changed: nil
// when it has none (Envoy refuses a listener without filter chains). Each chain was
// validated when made, the listener without them once.
func (pe *gatewayPortEntry) tlsListener(g Global) error {
	chains := make([]*listenerv3.FilterChain, 0, len(pe.secure))
	for _, h := range pe.secure {
		if h.entry.chain != nil {
			chains = append(chains, h.entry.chain)
		}
	}
	if len(chains) == 0 {
		pe.tls = nil
		return nil
	}
	if pe.tlsShell == nil {
		shell := tlsListener(pe.name, pe.addr, g)
		if err := validateAll(shell); err != nil {
			return err
		}
		pe.tlsShell = shell
	}
	if pe.tls == nil || !slices.Equal(chains, pe.tls.FilterChains) {
		l := proto.Clone(pe.tlsShell).(*listenerv3.Listener)
		l.FilterChains = chains
		pe.tls = l
	}
	return nil
}

// addTo adds the port's resources to res as translateGateways orders them: the HTTP
// listener and route configuration, then each server name's route configuration and
// secrets (those not in secrets yet), then the TLS listener.
func (pe *gatewayPortEntry) addTo(res *Resources, secrets map[string]bool) {
	if pe.listener != nil {
		res.Listeners = append(res.Listeners, pe.listener)
		res.Routes = append(res.Routes, pe.routes)
	}
	for _, h := range pe.secure {
		e := h.entry
		if e.routes != nil {
			res.Routes = append(res.Routes, e.routes)
		}
		addSecrets(res, secrets, e.secret, e.more)
	}
	if pe.tls != nil {
		res.Listeners = append(res.Listeners, pe.tls)
	}
}

// releasePort releases the clusters of a port that is gone.
func (t *Incremental) releasePort(pe *gatewayPortEntry) {
	for _, h := range pe.http {
		t.release(h.entry.uses)
	}
	for _, h := range pe.secure {
		t.release(h.entry.uses)
	}
}
