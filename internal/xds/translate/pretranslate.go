package translate

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/parallel"
)

// pretranslated are the translations of a whole graph, made in parallel before
// Incremental's walk, which then takes them in order instead of translating one host or
// cluster at a time: a first call (the cold start) has nothing to reuse.
type pretranslated struct {
	http     []*dag.VirtualHost
	vhosts   []*routev3.VirtualHost
	nextHTTP int
	secure   []*dag.SecureVirtualHost
	secures  []secureHost
	nextSec  int
	clusters map[*dag.Cluster]translatedCluster
}

// pretranslate translates every host and cluster of g, validated, or returns nil when g
// is too small for parallel work to pay.
func pretranslate(g *dag.Graph, opts Options) (*pretranslated, error) {
	clusters := g.Clusters()
	if len(g.HTTP)+len(g.HTTPS)+len(clusters) < parallel.MinItems {
		return nil, nil
	}
	p := &pretranslated{http: g.HTTP, secure: g.HTTPS}
	rc, err := httpRouteConfig(g.HTTP, opts)
	if err != nil {
		return nil, err
	}
	p.vhosts = rc.VirtualHosts
	p.secures = make([]secureHost, len(g.HTTPS))
	err = parallel.Do(len(g.HTTPS), func(i int) (err error) {
		p.secures[i], err = translateSecureHost(g.HTTPS[i], opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]translatedCluster, len(clusters))
	err = parallel.Do(len(clusters), func(i int) (err error) {
		out[i], err = clusterAndEndpoints(clusters[i], opts.ConnectTimeout)
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

// vhost returns the translation of vh, or nil. The walk asks for hosts in the graph's
// order, so the search resumes where the last one ended.
func (p *pretranslated) vhost(vh *dag.VirtualHost) *routev3.VirtualHost {
	if p == nil {
		return nil
	}
	for ; p.nextHTTP < len(p.http); p.nextHTTP++ {
		if p.http[p.nextHTTP] == vh {
			p.nextHTTP++
			return p.vhosts[p.nextHTTP-1]
		}
	}
	return nil
}

// secureHost returns the translation of svh, if made, as vhost does.
func (p *pretranslated) secureHost(svh *dag.SecureVirtualHost) (secureHost, bool) {
	if p == nil {
		return secureHost{}, false
	}
	for ; p.nextSec < len(p.secure); p.nextSec++ {
		if p.secure[p.nextSec] == svh {
			p.nextSec++
			return p.secures[p.nextSec-1], true
		}
	}
	return secureHost{}, false
}

// cluster returns the translation of c, if made.
func (p *pretranslated) cluster(c *dag.Cluster) (translatedCluster, bool) {
	if p == nil {
		return translatedCluster{}, false
	}
	tc, ok := p.clusters[c]
	return tc, ok
}
