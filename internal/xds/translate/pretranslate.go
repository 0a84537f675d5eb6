package translate

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/parallel"
)

// pretranslated are translations made in parallel before Incremental's walk, which
// then takes them in order instead of translating one host or cluster at a time: a first
// call (the cold start) or a change that rebuilt the whole graph has thousands of hosts
// to translate, a usual change a few.
type pretranslated struct {
	http     []*dag.VirtualHost
	vhosts   []*routev3.VirtualHost
	nextHTTP int
	secure   []*dag.SecureVirtualHost
	secures  []secureHost
	nextSec  int
	clusters map[*dag.Cluster]translatedCluster
	// gatewayHTTP and gatewaySecure are the Gateways' hosts and server names.
	gatewayHTTP   map[*dag.VirtualHost]*routev3.VirtualHost
	gatewaySecure map[*dag.SecureVirtualHost]secureHost
}

// pretranslate translates, validated, the hosts of g that the walk will translate and
// the clusters not in use yet, or returns nil when they are too few for parallel work
// to pay.
func (t *Incremental) pretranslate(g *dag.Graph) (*pretranslated, error) {
	http := newHosts(t.http, g.HTTP, vhostName, keepVirtualHost(catchAllVirtualHost(g.HTTP)))
	secure := newHosts(t.secure, g.HTTPS, secureName, keepSecureHost)
	gwHTTP, gwSecure := t.newGatewayHosts(g.Gateways)
	if len(http)+len(secure)+len(gwHTTP)+len(gwSecure) < parallel.MinItems {
		return nil, nil
	}
	p := &pretranslated{http: http, secure: secure}
	if err := p.gatewayHosts(gwHTTP, gwSecure, gatewayOptions(t.opts)); err != nil {
		return nil, err
	}
	var clusters []*dag.Cluster
	for _, c := range g.Clusters() {
		if t.byCluster[c] == nil {
			clusters = append(clusters, c)
		}
	}
	var err error
	if p.vhosts, err = virtualHosts(p.http, catchAllVirtualHost(g.HTTP), t.opts); err != nil {
		return nil, err
	}
	p.secures = make([]secureHost, len(p.secure))
	err = parallel.Do(len(p.secure), func(i int) (err error) {
		p.secures[i], err = translateSecureHost(p.secure[i], t.opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]translatedCluster, len(clusters))
	err = parallel.Do(len(clusters), func(i int) (err error) {
		out[i], err = clusterAndEndpoints(clusters[i], t.opts.Global)
		return err
	})
	if err != nil {
		return nil, err
	}
	p.clusters = make(map[*dag.Cluster]translatedCluster, len(clusters))
	for i, c := range clusters {
		p.clusters[c] = out[i]
	}
	return p, nil
}

// gatewaySecureHost is a server name of the Gateway port whose listener is named
// listener.
type gatewaySecureHost struct {
	svh      *dag.SecureVirtualHost
	listener string
	port     uint32
}

// gatewayHTTPHost is a host of a Gateway's HTTP port.
type gatewayHTTPHost struct {
	vh   *dag.VirtualHost
	port uint32
}

// newGatewayHosts returns the hosts and server names of the Gateways' ports that
// gatewayResources will translate.
func (t *Incremental) newGatewayHosts(gateways []*dag.Gateway) ([]gatewayHTTPHost, []gatewaySecureHost) {
	var http []gatewayHTTPHost
	var secure []gatewaySecureHost
	for _, gw := range gateways {
		e := t.gateways[gw.Name]
		if e != nil && e.src == gw {
			continue
		}
		for _, p := range gw.Ports {
			var pe *gatewayPortEntry
			if e != nil {
				pe = e.ports[p.Port]
			}
			if pe == nil {
				pe = &gatewayPortEntry{}
			} else if pe.src == p {
				continue
			}
			for _, vh := range newHosts(pe.http, p.HTTP, vhostName, keepGatewayHost) {
				http = append(http, gatewayHTTPHost{vh: vh, port: p.Port})
			}
			for _, svh := range newHosts(pe.secure, p.HTTPS, secureName, keepSecureHost) {
				secure = append(secure, gatewaySecureHost{svh: svh, listener: GatewayListenerName(gw.Name, p.Port), port: p.Port})
			}
		}
	}
	return http, secure
}

// gatewayHosts translates the Gateways' hosts and server names, in parallel.
func (p *pretranslated) gatewayHosts(http []gatewayHTTPHost, secure []gatewaySecureHost, opts Options) error {
	vhosts := make([]*routev3.VirtualHost, len(http))
	err := parallel.Do(len(http), func(i int) error {
		vhosts[i] = gatewayHostsOn(http[i].port, "http")(http[i].vh, opts)
		return validateAll(vhosts[i])
	})
	if err != nil {
		return err
	}
	secures := make([]secureHost, len(secure))
	err = parallel.Do(len(secure), func(i int) (err error) {
		secures[i], err = translateGatewaySecureHost(secure[i].svh, secure[i].listener, secure[i].port, opts)
		return err
	})
	if err != nil {
		return err
	}
	p.gatewayHTTP = make(map[*dag.VirtualHost]*routev3.VirtualHost, len(http))
	for i, h := range http {
		p.gatewayHTTP[h.vh] = vhosts[i]
	}
	p.gatewaySecure = make(map[*dag.SecureVirtualHost]secureHost, len(secure))
	for i, h := range secure {
		p.gatewaySecure[h.svh] = secures[i]
	}
	return nil
}

// gatewayVirtualHost returns the translation of a Gateway's host vh, or nil.
func (p *pretranslated) gatewayVirtualHost(vh *dag.VirtualHost) *routev3.VirtualHost {
	if p == nil {
		return nil
	}
	return p.gatewayHTTP[vh]
}

// gatewaySecureHost returns the translation of a Gateway's server name svh, if made.
func (p *pretranslated) gatewaySecureHost(svh *dag.SecureVirtualHost) (secureHost, bool) {
	if p == nil {
		return secureHost{}, false
	}
	h, ok := p.gatewaySecure[svh]
	return h, ok
}

// newHosts returns the hosts (ordered by name) that walkHosts will not find in prev,
// in order. An unchanged host costs one pointer comparison: this runs on every change.
func newHosts[H comparable, E any](prev []hostEntry[H, E], hosts []H, name func(H) string, keep func(H, E) bool) []H {
	var out []H
	j := 0
	for _, h := range hosts {
		if j < len(prev) && prev[j].host == h && keep(h, prev[j].entry) {
			j++
			continue
		}
		for j < len(prev) && name(prev[j].host) < name(h) {
			j++
		}
		if j < len(prev) && prev[j].host == h && keep(h, prev[j].entry) {
			j++
			continue
		}
		out = append(out, h)
	}
	return out
}

// vhost returns the translation of vh, or nil. The walk asks for hosts in the graph's
// order, by name, so the search resumes where the last one ended and stops at the first
// host that sorts after vh: a host the walk builds but newHosts did not pick (were they
// ever to disagree) costs a short search and is translated on its own, and the hosts
// after it are still found.
func (p *pretranslated) vhost(vh *dag.VirtualHost) *routev3.VirtualHost {
	if p == nil {
		return nil
	}
	if k, ok := findInOrder(p.http, p.nextHTTP, vh, vhostName); ok {
		p.nextHTTP = k + 1
		return p.vhosts[k]
	}
	return nil
}

// secureHost returns the translation of svh, if made, as vhost does.
func (p *pretranslated) secureHost(svh *dag.SecureVirtualHost) (secureHost, bool) {
	if p == nil {
		return secureHost{}, false
	}
	if k, ok := findInOrder(p.secure, p.nextSec, svh, secureName); ok {
		p.nextSec = k + 1
		return p.secures[k], true
	}
	return secureHost{}, false
}

// findInOrder returns the index of h in hosts (ordered by name) from position from on,
// searching no further than the first host whose name sorts after h's.
func findInOrder[H comparable](hosts []H, from int, h H, name func(H) string) (int, bool) {
	for k := from; k < len(hosts); k++ {
		if hosts[k] == h {
			return k, true
		}
		if name(hosts[k]) > name(h) {
			break
		}
	}
	return 0, false
}

// cluster returns the translation of c, if made.
func (p *pretranslated) cluster(c *dag.Cluster) (translatedCluster, bool) {
	if p == nil {
		return translatedCluster{}, false
	}
	tc, ok := p.clusters[c]
	return tc, ok
}
