package translate

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

func httpRouteConfig(hosts []*dag.VirtualHost, opts Options) *routev3.RouteConfiguration {
	fallback := catchAllVirtualHost(hosts)
	rc := &routev3.RouteConfiguration{Name: RouteHTTP}
	for _, vh := range hosts {
		rc.VirtualHosts = append(rc.VirtualHosts, virtualHost(vh, fallback, opts))
	}
	return rc
}

func catchAllVirtualHost(hosts []*dag.VirtualHost) *dag.VirtualHost {
	for _, vh := range hosts {
		if vh.Name == "*" {
			return vh
		}
	}
	return nil
}

// MisdirectedVirtualHost names the last virtual host of every HTTPS route configuration.
const MisdirectedVirtualHost = "misdirected"

// httpsRouteConfig holds the virtual host of one server name, the precise hosts that a
// wildcard certificate covers, and finally a virtual host answering 421 Misdirected
// Request to every other Host: an HTTP/2 client that reuses a connection for a host this
// certificate does not serve retries on a new connection, and a TLS connection can never
// reach another host's routes.
func httpsRouteConfig(svh *dag.SecureVirtualHost, opts Options) *routev3.RouteConfiguration {
	rc := &routev3.RouteConfiguration{
		Name:         RouteHTTPS(svh.Name),
		VirtualHosts: []*routev3.VirtualHost{virtualHost(&svh.VirtualHost, nil, opts)},
	}
	for _, vh := range svh.Also {
		rc.VirtualHosts = append(rc.VirtualHosts, virtualHost(vh, nil, opts))
	}
	rc.VirtualHosts = append(rc.VirtualHosts, &routev3.VirtualHost{
		Name:    MisdirectedVirtualHost,
		Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Name:   MisdirectedVirtualHost,
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 421}},
		}},
	})
	return rc
}

// virtualHost translates vh. Envoy's "*.foo.com" domain matches any number of labels,
// while an Ingress wildcard matches exactly one. A wildcard host's routes therefore also
// require the host to be one label deep; they are followed by the catch-all host's routes
// (fallback) for hosts that are NOT one label deep, which the wildcard does not really
// match. A one-label host that matches no wildcard route gets 404, as for any known host.
func virtualHost(vh *dag.VirtualHost, fallback *dag.VirtualHost, opts Options) *routev3.VirtualHost {
	out := &routev3.VirtualHost{Name: vh.Name, Domains: []string{vh.Name}}
	if !vh.IsWildcard() {
		out.Routes = routes(vh, nil, opts)
		uniqueRouteNames(out.Routes)
		return out
	}
	oneLabel := singleLabelHost(vh.Name)
	out.Routes = routes(vh, oneLabel, opts)
	if fallback != nil {
		deeper := proto.Clone(oneLabel).(*routev3.HeaderMatcher)
		deeper.InvertMatch = true
		out.Routes = append(out.Routes, routes(fallback, deeper, opts)...)
	}
	uniqueRouteNames(out.Routes)
	return out
}

// maxRouteNameLen bounds route names, which data planes use as metric labels and in
// access logs: a longer name keeps its start and gets a hash of the whole.
const maxRouteNameLen = 200

// routeName names a route after the object that declared it and its path condition:
// "ingress/default/web:prefix:/api", "ingressroute/team/app:exact:/health". It is stable
// across rebuilds and bounded by the number of routes the objects declare, so it can
// label metrics.
func routeName(r *dag.Route) string {
	kind := "prefix"
	if r.Path.Kind == dag.PathExact {
		kind = "exact"
	}
	name := kind + ":" + r.Path.Value
	if src := r.Source; src.Kind != "" {
		name = strings.ToLower(src.Kind) + "/" + src.Namespace + "/" + src.Name + ":" + name
	}
	if len(name) > maxRouteNameLen {
		h := fnv.New32a()
		_, _ = h.Write([]byte(name))
		// Cut on a character boundary: a name that is not valid UTF-8 cannot be marshalled,
		// and one such route would stop every update to every data plane.
		cut := maxRouteNameLen - 9
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = fmt.Sprintf("%s~%08x", name[:cut], h.Sum32())
	}
	return name
}

// uniqueRouteNames suffixes "#2", "#3"... to a name already used in the same virtual
// host (the same object and path reached twice, e.g. a wildcard's route and the
// catch-all route it falls back to).
func uniqueRouteNames(rs []*routev3.Route) {
	seen := make(map[string]int, len(rs))
	for _, r := range rs {
		seen[r.Name]++
		if n := seen[r.Name]; n > 1 {
			r.Name = r.Name + "#" + strconv.Itoa(n)
		}
	}
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

func routes(vh *dag.VirtualHost, host *routev3.HeaderMatcher, opts Options) []*routev3.Route {
	out := make([]*routev3.Route, 0, len(vh.Routes))
	for _, r := range vh.Routes {
		m := routeMatch(r.Path)
		if host != nil {
			m.Headers = append(m.Headers, host)
		}
		out = append(out, &routev3.Route{Name: routeName(r), Match: m})
		switch last := out[len(out)-1]; {
		case r.HTTPSRedirect:
			last.Action = &routev3.Route_Redirect{Redirect: httpsRedirect(opts)}
		case r.DirectStatus != 0:
			last.Action = &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: r.DirectStatus}}
		default:
			last.Action = &routev3.Route_Route{Route: routeAction(r)}
		}
	}
	return out
}

// httpsRedirect answers 301 with the request's URL on https. The port is dropped (443)
// unless the HTTPS listener is reached on another port.
func httpsRedirect(opts Options) *routev3.RedirectAction {
	return &routev3.RedirectAction{
		SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true},
		PortRedirect:           opts.HTTPSRedirectPort,
		ResponseCode:           routev3.RedirectAction_MOVED_PERMANENTLY,
	}
}

// routeMatch maps a path condition. Element-wise prefixes use Envoy's
// path_separated_prefix, which matches the value itself or the value followed by "/";
// the prefix "/" matches everything and is a plain prefix. String prefixes (IngressRoute)
// are Envoy's plain prefix of the same value.
func routeMatch(p dag.PathMatch) *routev3.RouteMatch {
	switch {
	case p.Kind == dag.PathExact:
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: p.Value}}
	case p.Kind == dag.PathStringPrefix:
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p.Value}}
	case p.Value == "/":
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	default:
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: p.Value}}
	}
}

func routeAction(r *dag.Route) *routev3.RouteAction {
	ra := &routev3.RouteAction{PrefixRewrite: r.PrefixRewrite}
	if len(r.Clusters) == 1 {
		ra.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: r.Clusters[0].Cluster.Name}
	} else {
		wc := &routev3.WeightedCluster{}
		for _, c := range r.Clusters {
			wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{
				Name:   c.Cluster.Name,
				Weight: wrapperspb.UInt32(c.Weight),
			})
		}
		ra.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	if t := r.Timeouts; t != nil {
		if t.Request != nil {
			ra.Timeout = durationpb.New(*t.Request)
		}
		if t.Idle != nil {
			ra.IdleTimeout = durationpb.New(*t.Idle)
		}
	}
	ra.RetryPolicy = retryPolicy(r.Retry)
	if hashesClient(r) {
		ra.HashPolicy = []*routev3.RouteAction_HashPolicy{{
			PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{
				ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true},
			},
		}}
	}
	return ra
}

// retryPolicy retries the listed status codes. When 502, 503 and 504 are all listed,
// "gateway-error" also retries what the proxy itself would answer with them: connection
// failures, resets and per-try timeouts.
func retryPolicy(rp *dag.RetryPolicy) *routev3.RetryPolicy {
	if rp == nil {
		return nil
	}
	retryOn := "retriable-status-codes"
	if slices.Contains(rp.OnStatusCodes, 502) && slices.Contains(rp.OnStatusCodes, 503) && slices.Contains(rp.OnStatusCodes, 504) {
		retryOn = "gateway-error," + retryOn
	}
	out := &routev3.RetryPolicy{
		RetryOn:              retryOn,
		NumRetries:           wrapperspb.UInt32(rp.NumRetries),
		RetriableStatusCodes: slices.Clone(rp.OnStatusCodes),
	}
	if rp.PerTryTimeout > 0 {
		out.PerTryTimeout = durationpb.New(rp.PerTryTimeout)
	}
	return out
}

// hashesClient reports whether a route sends to a consistent-hashing cluster: those hash
// the client's address, so that a client keeps reaching the same endpoint.
func hashesClient(r *dag.Route) bool {
	for _, wc := range r.Clusters {
		if lb := wc.Cluster.LoadBalancer; lb == dag.LBRingHash || lb == dag.LBMaglev {
			return true
		}
	}
	return false
}
