package translate

import (
	"regexp"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

func httpRouteConfig(hosts []*dag.VirtualHost) *routev3.RouteConfiguration {
	var fallback []*routev3.Route
	for _, vh := range hosts {
		if vh.Name == "*" {
			fallback = routes(vh, nil)
		}
	}
	rc := &routev3.RouteConfiguration{Name: RouteHTTP}
	for _, vh := range hosts {
		rc.VirtualHosts = append(rc.VirtualHosts, virtualHost(vh, fallback))
	}
	return rc
}

// httpsRouteConfig holds only the virtual host of one server name: a TLS connection can
// reach no other host's routes, whatever Host header it sends.
func httpsRouteConfig(svh *dag.SecureVirtualHost) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{
		Name:         RouteHTTPS(svh.Name),
		VirtualHosts: []*routev3.VirtualHost{virtualHost(&svh.VirtualHost, nil)},
	}
}

// virtualHost translates vh. Envoy's "*.foo.com" domain matches any number of labels,
// while an Ingress wildcard matches exactly one: a wildcard host's routes therefore also
// require the host to be one label deep, and are followed by the catch-all host's routes
// (fallback), which serve requests the wildcard does not really match.
func virtualHost(vh *dag.VirtualHost, fallback []*routev3.Route) *routev3.VirtualHost {
	out := &routev3.VirtualHost{Name: vh.Name, Domains: []string{vh.Name}}
	if vh.IsWildcard() {
		out.Routes = append(routes(vh, singleLabelHost(vh.Name)), fallback...)
	} else {
		out.Routes = routes(vh, nil)
	}
	return out
}

// singleLabelHost matches a Host of exactly one label followed by the wildcard's suffix.
func singleLabelHost(wildcard string) *routev3.HeaderMatcher {
	suffix := strings.TrimPrefix(wildcard, "*")
	return &routev3.HeaderMatcher{
		Name: ":authority",
		HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{
				Regex: "(?i)^[^.]+" + regexp.QuoteMeta(suffix) + "$",
			}},
		}},
	}
}

func routes(vh *dag.VirtualHost, host *routev3.HeaderMatcher) []*routev3.Route {
	out := make([]*routev3.Route, 0, len(vh.Routes))
	for _, r := range vh.Routes {
		m := routeMatch(r.Path)
		if host != nil {
			m.Headers = append(m.Headers, host)
		}
		out = append(out, &routev3.Route{
			Match:  m,
			Action: &routev3.Route_Route{Route: routeAction(r)},
		})
	}
	return out
}

// routeMatch maps a path condition. Element-wise prefixes use Envoy's
// path_separated_prefix, which matches the value itself or the value followed by "/";
// the prefix "/" matches everything and is a plain prefix.
func routeMatch(p dag.PathMatch) *routev3.RouteMatch {
	switch {
	case p.Kind == dag.PathExact:
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: p.Value}}
	case p.Value == "/":
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	default:
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: p.Value}}
	}
}

func routeAction(r *dag.Route) *routev3.RouteAction {
	if len(r.Clusters) == 1 {
		return &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: r.Clusters[0].Cluster.Name}}
	}
	wc := &routev3.WeightedCluster{}
	for _, c := range r.Clusters {
		wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{
			Name:   c.Cluster.Name,
			Weight: wrapperspb.UInt32(c.Weight),
		})
	}
	return &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}}
}
