package translate

import (
	"google.golang.org/protobuf/proto"
	"strconv"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag"
)

func testCluster(ns, name string, port int32, eps ...dag.Endpoint) *dag.Cluster {
	return &dag.Cluster{
		Name:      ns + "/" + name + "/" + strconv.Itoa(int(port)),
		Service:   k8stypes.NamespacedName{Namespace: ns, Name: name},
		Port:      port,
		Endpoints: eps,
	}
}

func route(kind dag.PathMatchKind, path string, c *dag.Cluster) *dag.Route {
	return &dag.Route{Path: dag.PathMatch{Kind: kind, Value: path}, Clusters: []*dag.WeightedCluster{{Cluster: c, Weight: 1}}}
}

func TestRouteConfigurationShapes(t *testing.T) {
	web := testCluster("default", "web", 80, dag.Endpoint{Address: "10.0.0.1", Port: 8080})
	fallback := testCluster("default", "fallback", 80)
	g := &dag.Graph{HTTP: []*dag.VirtualHost{
		{Name: "*", Routes: []*dag.Route{route(dag.PathPrefix, "/", fallback)}},
		{Name: "*.foo.com", Routes: []*dag.Route{route(dag.PathPrefix, "/app", web)}},
		{Name: "foo.com", Routes: []*dag.Route{route(dag.PathExact, "/foo", web), route(dag.PathPrefix, "/", web)}},
	}}
	res, err := Translate(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	toCluster := func(name string) *routev3.Route_Route {
		return &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name}}}
	}
	oneLabel := &routev3.HeaderMatcher{Name: ":authority", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
		MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: `(?i)^[^.]+\.foo\.com$`}},
	}}}
	deeper := proto.Clone(oneLabel).(*routev3.HeaderMatcher)
	deeper.InvertMatch = true
	catchAllRoute := &routev3.Route{Name: "prefix:/", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}, Action: toCluster("default/fallback/80")}
	want := &routev3.RouteConfiguration{Name: "ingress_http", MostSpecificHeaderMutationsWins: true, ResponseHeadersToAdd: []*corev3.HeaderValueOption{{
		Header: &corev3.HeaderValue{Key: "server", Value: "portico"}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}}, VirtualHosts: []*routev3.VirtualHost{
		{Name: "*", Domains: []string{"*"}, Routes: []*routev3.Route{catchAllRoute}},
		{Name: "*.foo.com", Domains: []string{"*.foo.com"}, Routes: []*routev3.Route{
			{Name: "prefix:/app", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/app"}, Headers: []*routev3.HeaderMatcher{oneLabel}}, Action: toCluster("default/web/80")},
			// A deeper subdomain is not matched by the wildcard: it gets the catch-all's routes.
			{Name: "prefix:/", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{deeper}}, Action: toCluster("default/fallback/80")},
		}},
		{Name: "foo.com", Domains: []string{"foo.com"}, Routes: []*routev3.Route{
			{Name: "exact:/foo", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/foo"}}, Action: toCluster("default/web/80")},
			{Name: "prefix:/", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}, Action: toCluster("default/web/80")},
		}},
	}}
	if diff := cmp.Diff([]types.Resource{want}, res.Routes, protocmp.Transform()); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantClusters := []types.Resource{
		&clusterv3.Cluster{
			Name: "default/fallback/80", AltStatName: "default_fallback_80",
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource(), ServiceName: "default/fallback/80"},
			ConnectTimeout:       durationpb.New(2e9),
		},
		&clusterv3.Cluster{
			Name: "default/web/80", AltStatName: "default_web_80",
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource(), ServiceName: "default/web/80"},
			ConnectTimeout:       durationpb.New(2e9),
		},
	}
	if diff := cmp.Diff(wantClusters, res.Clusters, protocmp.Transform()); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	wantEndpoints := []types.Resource{
		&endpointv3.ClusterLoadAssignment{ClusterName: "default/fallback/80"},
		&endpointv3.ClusterLoadAssignment{ClusterName: "default/web/80", Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{lbEndpoint("10.0.0.1", 8080)},
		}}},
	}
	if diff := cmp.Diff(wantEndpoints, res.Endpoints, protocmp.Transform()); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
	if len(res.Listeners) != 1 || len(res.Secrets) != 0 {
		t.Errorf("got %d listeners and %d secrets, want only the HTTP listener", len(res.Listeners), len(res.Secrets))
	}
}

func TestSecureHostsGetAFilterChainAndRoutesOfTheirOwn(t *testing.T) {
	web := testCluster("default", "web", 80)
	secret := &dag.Secret{Name: "default/cert", Cert: []byte("cert"), Key: []byte("key")}
	vh := dag.VirtualHost{Name: "secure.com", Routes: []*dag.Route{route(dag.PathPrefix, "/", web)}}
	g := &dag.Graph{
		HTTP:  []*dag.VirtualHost{&vh},
		HTTPS: []*dag.SecureVirtualHost{{VirtualHost: vh, Secret: secret}, {VirtualHost: dag.VirtualHost{Name: "other.com"}, Secret: secret, MinTLSVersion: "1.3"}},
	}
	res, err := Translate(g, Options{HTTPSAddress: "127.0.0.1:8443"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Listeners) != 2 {
		t.Fatalf("got %d listeners, want 2", len(res.Listeners))
	}
	https := res.Listeners[1].(*listenerv3.Listener)
	if https.Name != ListenerHTTPS || https.Address.GetSocketAddress().GetPortValue() != 8443 {
		t.Errorf("https listener = %s at %v", https.Name, https.Address)
	}
	var names []string
	for _, fc := range https.FilterChains {
		names = append(names, fc.FilterChainMatch.ServerNames...)
		var ctx tlsv3.DownstreamTlsContext
		if err := fc.TransportSocket.GetTypedConfig().UnmarshalTo(&ctx); err != nil {
			t.Fatal(err)
		}
		if got := ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs[0].Name; got != "default/cert" {
			t.Errorf("chain %s uses secret %q", fc.Name, got)
		}
		wantMin := tlsv3.TlsParameters_TLSv1_2
		if fc.Name == "other.com" {
			wantMin = tlsv3.TlsParameters_TLSv1_3
		}
		if got := ctx.CommonTlsContext.TlsParams.TlsMinimumProtocolVersion; got != wantMin {
			t.Errorf("chain %s minimum TLS = %v, want %v", fc.Name, got, wantMin)
		}
	}
	if diff := cmp.Diff([]string{"secure.com", "other.com"}, names); diff != "" {
		t.Errorf("server names (-want +got):\n%s", diff)
	}
	var routeNames []string
	for _, r := range res.Routes {
		routeNames = append(routeNames, r.(*routev3.RouteConfiguration).Name)
	}
	if diff := cmp.Diff([]string{"ingress_http", "https/secure.com", "https/other.com"}, routeNames); diff != "" {
		t.Errorf("route configurations (-want +got):\n%s", diff)
	}
	misdirected := res.Routes[1].(*routev3.RouteConfiguration).VirtualHosts[1]
	if misdirected.Name != MisdirectedVirtualHost || misdirected.Domains[0] != "*" || misdirected.Routes[0].GetDirectResponse().GetStatus() != 421 {
		t.Errorf("last virtual host of an HTTPS route configuration = %v, want * → 421", misdirected)
	}
	if len(res.Secrets) != 1 {
		t.Errorf("a secret shared by two hosts must be sent once, got %d", len(res.Secrets))
	}
}

func TestExternalNameClusterResolvesByDNS(t *testing.T) {
	ext := &dag.Cluster{Name: "default/ext/443", Service: k8stypes.NamespacedName{Namespace: "default", Name: "ext"}, Port: 443, ExternalName: "example.org"}
	g := &dag.Graph{HTTP: []*dag.VirtualHost{{Name: "*", Routes: []*dag.Route{route(dag.PathPrefix, "/", ext)}}}}
	res, err := Translate(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Clusters[0].(*clusterv3.Cluster)
	if c.GetType() != clusterv3.Cluster_STRICT_DNS || c.LoadAssignment.Endpoints[0].LbEndpoints[0].GetEndpoint().Address.GetSocketAddress().Address != "example.org" {
		t.Errorf("cluster = %v", c)
	}
	if len(res.Endpoints) != 0 {
		t.Errorf("a DNS cluster needs no EDS assignment, got %d", len(res.Endpoints))
	}
}

func TestBadListenerAddressIsAnError(t *testing.T) {
	if _, err := Translate(&dag.Graph{}, Options{HTTPAddress: "nonsense"}); err == nil {
		t.Error("want an error for an unparsable address")
	}
}

func TestWildcardCertificateRoutesIncludeCoveredHosts(t *testing.T) {
	web, app := testCluster("default", "web", 80), testCluster("default", "app", 80)
	appHost := &dag.VirtualHost{Name: "app.foo.com", Routes: []*dag.Route{route(dag.PathPrefix, "/", app)}}
	wild := dag.VirtualHost{Name: "*.foo.com", Routes: []*dag.Route{route(dag.PathPrefix, "/", web)}}
	g := &dag.Graph{
		HTTP:  []*dag.VirtualHost{appHost, &wild},
		HTTPS: []*dag.SecureVirtualHost{{VirtualHost: wild, Secret: &dag.Secret{Name: "default/wild", Cert: []byte("c"), Key: []byte("k")}, Also: []*dag.VirtualHost{appHost}}},
	}
	res, err := Translate(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, vh := range res.Routes[1].(*routev3.RouteConfiguration).VirtualHosts {
		names = append(names, vh.Name)
	}
	if diff := cmp.Diff([]string{"*.foo.com", "app.foo.com", MisdirectedVirtualHost}, names); diff != "" {
		t.Errorf("virtual hosts of https/*.foo.com (-want +got):\n%s", diff)
	}
}
