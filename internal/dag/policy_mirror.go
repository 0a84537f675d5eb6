package dag

import contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"

// Mirror is a cluster that gets a copy of a share of a route's requests (HTTPProxy's
// mirror services, HTTPRoute's RequestMirror filters). Its answers are discarded: the
// client only ever sees the answer of the route's own clusters.
type Mirror struct {
	Cluster *Cluster
	// Numerator out of Denominator of the requests are copied; a Denominator of 0
	// copies every request.
	Numerator, Denominator uint32
}

// proxyMirrors are the mirror services of a route (mirror: true): every request is
// copied to each. Upstream HTTPProxy allows one per route (a route of mirrors only is
// refused by validateHTTPProxy: NoServices).
func (b *builder) proxyMirrors(n *proxyNode, services []contourv1.Service, field string, pol clusterPolicy, c *proxyCheck) []*Mirror {
	var out []*Mirror
	mirrors := 0
	for i := range services {
		s := &services[i]
		if !s.Mirror {
			continue
		}
		mirrors++
		at := lazyField{field, ".services", i}
		if mirrors > 1 {
			c.fail(problemService, "OnlyOneMirror", "%s.mirror: a route has at most one mirror service; keep mirror: true on one of them", at)
			continue
		}
		if cluster := b.proxyServiceCluster(n, s, at, pol, c); cluster != nil {
			out = append(out, &Mirror{Cluster: cluster})
		}
	}
	return out
}
