// Package bootstrap writes the Envoy bootstrap configuration that points an Envoy at
// Portico's xDS server: everything else arrives over ADS.
package bootstrap

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// XDSCluster names the static cluster of the xDS server.
const XDSCluster = "portico-xds"

// StatsListener names the static listener that serves Envoy's Prometheus stats and
// readiness from the admin interface, through AdminCluster: the admin interface itself
// (which can also change Envoy's state or stop it) stays on loopback.
const (
	StatsListener = "portico-stats"
	AdminCluster  = "envoy-admin"
	// DefaultStatsAddress is where StatsListener listens unless configured.
	DefaultStatsAddress = "0.0.0.0:8002"
)

// Paths the stats listener serves (GET only), from the admin interface.
var statsPaths = []string{"/stats/prometheus", "/ready"}

// Options configure the bootstrap.
type Options struct {
	XDSAddress   string // host:port of Portico's xDS server
	AdminAddress string // Envoy's admin listener: a loopback address, 127.0.0.1:9001 by default
	// StatsAddress is where Envoy serves /stats/prometheus and /ready to scrapers and
	// probes (default DefaultStatsAddress).
	StatsAddress string
	NodeID       string
	NodeCluster  string
	// TLS, when set, makes Envoy connect to the xDS server over mutual TLS.
	TLS *TLSFiles
}

// TLSFiles are paths as Envoy sees them (for example a mounted Secret) of the client
// certificate Envoy presents to the xDS server and of the CA that verifies the server.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
	// ServerName is sent as SNI and must be a name in the server's certificate;
	// it defaults to the host of Options.XDSAddress.
	ServerName string
}

// Build returns a validated bootstrap.
func Build(o Options) (*bootstrapv3.Bootstrap, error) {
	if o.AdminAddress == "" {
		o.AdminAddress = "127.0.0.1:9001"
	}
	if o.NodeCluster == "" {
		o.NodeCluster = "portico"
	}
	if o.NodeID == "" {
		o.NodeID = "envoy"
	}
	if o.StatsAddress == "" {
		o.StatsAddress = DefaultStatsAddress
	}
	xdsHost, xdsPort, err := splitAddr(o.XDSAddress)
	if err != nil {
		return nil, fmt.Errorf("xDS address: %w", err)
	}
	adminHost, adminPort, err := splitAddr(o.AdminAddress)
	if err != nil {
		return nil, fmt.Errorf("admin address: %w", err)
	}
	if !loopback(adminHost) {
		return nil, fmt.Errorf("admin address %q: Envoy's admin interface must listen on a loopback address (it can change Envoy's state and stop it); its stats are served on the stats address %s", o.AdminAddress, o.StatsAddress)
	}
	statsHost, statsPort, err := splitAddr(o.StatsAddress)
	if err != nil {
		return nil, fmt.Errorf("stats address: %w", err)
	}
	if statsPort == adminPort && (statsHost == adminHost || !loopback(statsHost)) {
		return nil, fmt.Errorf("stats address %q and admin address %q use the same port", o.StatsAddress, o.AdminAddress)
	}
	stats, err := statsListener(statsHost, statsPort)
	if err != nil {
		return nil, err
	}
	// The xDS server speaks gRPC, which needs HTTP/2 to the upstream.
	h2, err := anypb.New(&httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}},
		}},
	})
	if err != nil {
		return nil, err
	}
	// Every config source, the bootstrap's and the translator's (RDS, EDS, SDS), is
	// "ads: {}": it follows the ADS stream's protocol, so DELTA_GRPC below makes all
	// of them incremental. Portico's server still answers state-of-the-world
	// clients (older bootstraps).
	ads := &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
	b := &bootstrapv3.Bootstrap{
		Node:  &corev3.Node{Id: o.NodeID, Cluster: o.NodeCluster},
		Admin: &bootstrapv3.Admin{Address: socket(adminHost, adminPort)},
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			AdsConfig: &corev3.ApiConfigSource{
				ApiType:             corev3.ApiConfigSource_DELTA_GRPC,
				TransportApiVersion: corev3.ApiVersion_V3,
				GrpcServices:        []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: XDSCluster}}}},
			},
			LdsConfig: ads,
			CdsConfig: ads,
		},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{Clusters: []*clusterv3.Cluster{{
			Name:                          XDSCluster,
			ConnectTimeout:                durationpb.New(5 * time.Second),
			ClusterDiscoveryType:          &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS},
			TypedExtensionProtocolOptions: map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": h2},
			LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: XDSCluster, Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socket(xdsHost, xdsPort)}}}},
			}}},
		}, adminCluster(adminHost, adminPort)},
			Listeners: []*listenerv3.Listener{stats},
		},
	}
	if o.TLS != nil {
		ts, err := transportSocket(*o.TLS, xdsHost)
		if err != nil {
			return nil, err
		}
		b.StaticResources.Clusters[0].TransportSocket = ts
	}
	if err := b.ValidateAll(); err != nil {
		return nil, fmt.Errorf("bootstrap does not validate: %w", err)
	}
	return b, nil
}

// loopback reports whether host is a loopback IP address or "localhost".
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// adminCluster reaches Envoy's own admin interface, for the stats listener.
func adminCluster(host string, port uint32) *clusterv3.Cluster {
	kind := clusterv3.Cluster_STATIC
	if _, err := netip.ParseAddr(host); err != nil {
		kind = clusterv3.Cluster_STRICT_DNS // localhost
	}
	return &clusterv3.Cluster{
		Name:                 AdminCluster,
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: kind},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: AdminCluster, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socket(host, port)}}}},
		}}},
	}
}

// statsListener serves GET /stats/prometheus and GET /ready from the admin
// interface, and nothing else of it (as Contour's "stats-health" listener does).
func statsListener(host string, port uint32) (*listenerv3.Listener, error) {
	get := &routev3.HeaderMatcher{Name: ":method", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "GET"}},
	}}
	vh := &routev3.VirtualHost{Name: StatsListener, Domains: []string{"*"}}
	for _, path := range statsPaths {
		vh.Routes = append(vh.Routes, &routev3.Route{
			Name:   path,
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: path}, Headers: []*routev3.HeaderMatcher{get}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: AdminCluster}}},
		})
	}
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, err
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix:     "stats",
		CodecType:      hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: StatsListener, VirtualHosts: []*routev3.VirtualHost{vh}}},
		HttpFilters:    []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	if err != nil {
		return nil, err
	}
	return &listenerv3.Listener{
		Name:    StatsListener,
		Address: socket(host, port),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name:       "envoy.filters.network.http_connection_manager",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
		}}}},
	}, nil
}

// transportSocket is the upstream mutual TLS of the xDS cluster.
func transportSocket(t TLSFiles, xdsHost string) (*corev3.TransportSocket, error) {
	if t.CertFile == "" || t.KeyFile == "" || t.CAFile == "" {
		return nil, fmt.Errorf("xDS TLS needs a certificate, key and CA file")
	}
	if t.ServerName == "" {
		t.ServerName = xdsHost
	}
	file := func(path string) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: path}}
	}
	// Envoy checks only the chain against trusted_ca unless told which name to match.
	sanType := tlsv3.SubjectAltNameMatcher_DNS
	if _, err := netip.ParseAddr(t.ServerName); err == nil {
		sanType = tlsv3.SubjectAltNameMatcher_IP_ADDRESS
	}
	ctx, err := anypb.New(&tlsv3.UpstreamTlsContext{
		Sni: t.ServerName,
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams:       &tlsv3.TlsParameters{TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2},
			TlsCertificates: []*tlsv3.TlsCertificate{{CertificateChain: file(t.CertFile), PrivateKey: file(t.KeyFile)}},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: file(t.CAFile),
				MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{
					SanType: sanType,
					Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: t.ServerName}},
				}},
			}},
			// gRPC requires HTTP/2, negotiated with ALPN.
			AlpnProtocols: []string{"h2"},
		},
	})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: ctx}}, nil
}

// Write builds the bootstrap and writes it as JSON to path.
func Write(path string, o Options) error {
	b, err := Build(o)
	if err != nil {
		return err
	}
	data, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(b)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func socket(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

func splitAddr(addr string) (string, uint32, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("port %q: must be 1-65535", port)
	}
	if host == "" {
		return "", 0, fmt.Errorf("%q: a host is required", addr)
	}
	return host, uint32(p), nil
}
