// Package bootstrap writes the Envoy bootstrap configuration that points an Envoy at
// Portico's xDS server: everything else arrives over ADS.
package bootstrap

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/portico-dev/portico/internal/xds/server"
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

// DefaultAdminAddress is where Envoy's admin interface listens unless configured: a
// Unix socket, which no route can reach (a TCP port on loopback is reachable from any
// cluster whose endpoint resolves to 127.0.0.1: an ExternalName Service, or a name an
// upstream's DNS answers with a loopback address).
const DefaultAdminAddress = "unix:/tmp/envoy-admin.sock"

// Options configure the bootstrap.
type Options struct {
	XDSAddress string // host:port of Portico's xDS server
	// AdminAddress is Envoy's admin interface: "unix:PATH" (DefaultAdminAddress; the
	// socket is made readable and writable by Envoy's user only) or a loopback host:port.
	AdminAddress string
	// StatsAddress is where Envoy serves /stats/prometheus and /ready to scrapers and
	// probes (default DefaultStatsAddress).
	StatsAddress string
	NodeID       string
	NodeCluster  string
	// Gateway, "namespace/name", makes the Envoy the data plane of that Gateway API
	// Gateway (node metadata portico.io/gateway): it is sent that Gateway's listeners
	// and no others. Empty: the shared data plane.
	Gateway string
	// TLS, when set, makes Envoy connect to the xDS server over mutual TLS.
	TLS *TLSFiles
	// SDSDir is the directory, as Envoy sees it, of the two SDS files that name the
	// TLS files (SDSFiles); Write defaults it to the bootstrap file's directory.
	SDSDir string
}

// Names of the SDS files and of the secrets in them.
const (
	SDSCertificateFile = "xds-client-certificate.json"
	SDSValidationFile  = "xds-trusted-ca.json"
	sdsCertificateName = "xds-client-certificate"
	sdsValidationName  = "xds-trusted-ca"
)

// TLSFiles are paths as Envoy sees them (for example a mounted Secret) of the client
// certificate Envoy presents to the xDS server and of the CA bundle that verifies the
// server. Envoy reads them through file-based SDS and watches their directories, so
// that certificates rotated in place (a Secret volume updated by the kubelet) apply to
// the next connection without a restart; the connection in use stays up.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
	// ServerName is sent as SNI and must be a name in the server's certificate;
	// it defaults to the host of Options.XDSAddress.
	ServerName string
}

// Build returns a validated bootstrap.
func Build(o Options) (*bootstrapv3.Bootstrap, error) {
	if o.AdminAddress == "" {
		o.AdminAddress = DefaultAdminAddress
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
	admin, err := adminAddress(o.AdminAddress, o.StatsAddress)
	if err != nil {
		return nil, err
	}
	statsHost, statsPort, err := splitAddr(o.StatsAddress)
	if err != nil {
		return nil, fmt.Errorf("stats address: %w", err)
	}
	if a := admin.GetSocketAddress(); a != nil && statsPort == a.GetPortValue() && (statsHost == a.Address || !loopback(statsHost)) {
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
		Node:  &corev3.Node{Id: o.NodeID, Cluster: o.NodeCluster, Metadata: nodeMetadata(o)},
		Admin: &bootstrapv3.Admin{Address: admin},
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
		}, adminCluster(admin)},
			Listeners: []*listenerv3.Listener{stats},
		},
	}
	if o.TLS != nil {
		ts, err := transportSocket(*o.TLS, xdsHost, o.SDSDir)
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

// adminAddress parses the admin interface's address: "unix:PATH", or a loopback
// host:port. It refuses anything else: the admin interface can change Envoy's state
// and stop it, so only Envoy's own pod may reach it.
func adminAddress(addr, statsAddr string) (*corev3.Address, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if !filepath.IsAbs(path) {
			return nil, fmt.Errorf("admin address %q: want unix:/absolute/path", addr)
		}
		return &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: path, Mode: 0o600}}}, nil
	}
	host, port, err := splitAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("admin address: %w", err)
	}
	if !loopback(host) {
		return nil, fmt.Errorf("admin address %q: Envoy's admin interface must listen on a Unix socket (unix:/path) or a loopback address (it can change Envoy's state and stop it); its stats are served on the stats address %s", addr, statsAddr)
	}
	return socket(host, port), nil
}

// adminCluster reaches Envoy's own admin interface, for the stats listener.
func adminCluster(addr *corev3.Address) *clusterv3.Cluster {
	kind := clusterv3.Cluster_STATIC
	if a := addr.GetSocketAddress(); a != nil {
		if _, err := netip.ParseAddr(a.Address); err != nil {
			kind = clusterv3.Cluster_STRICT_DNS // localhost
		}
	}
	return &clusterv3.Cluster{
		Name:                 AdminCluster,
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: kind},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: AdminCluster, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: addr}}}},
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

// transportSocket is the upstream mutual TLS of the xDS cluster. Its certificate and
// validation context come from the SDS files in sdsDir (see SDSFiles), which Envoy
// reads again, with the files they name, when those change: inline file names would be
// read once, at start-up, and a rotated certificate would need a restart.
func transportSocket(t TLSFiles, xdsHost, sdsDir string) (*corev3.TransportSocket, error) {
	if t.CertFile == "" || t.KeyFile == "" || t.CAFile == "" {
		return nil, fmt.Errorf("xDS TLS needs a certificate, key and CA file")
	}
	if sdsDir == "" {
		return nil, fmt.Errorf("xDS TLS needs the directory of its SDS files")
	}
	if t.ServerName == "" {
		t.ServerName = xdsHost
	}
	fromFile := func(name, file string) *tlsv3.SdsSecretConfig {
		return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: &corev3.ConfigSource{
			ResourceApiVersion:    corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{Path: filepath.Join(sdsDir, file)}},
		}}
	}
	ctx, err := anypb.New(&tlsv3.UpstreamTlsContext{
		Sni: t.ServerName,
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams:                      &tlsv3.TlsParameters{TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2},
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{fromFile(sdsCertificateName, SDSCertificateFile)},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{
				ValidationContextSdsSecretConfig: fromFile(sdsValidationName, SDSValidationFile),
			},
			// gRPC requires HTTP/2, negotiated with ALPN.
			AlpnProtocols: []string{"h2"},
		},
	})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: ctx}}, nil
}

// SDSFiles returns the contents of the two SDS files the TLS bootstrap reads, by file
// name: each a DiscoveryResponse holding one Secret. The certificate's and the CA's
// directories are watched (watched_directory): a Kubernetes Secret volume is updated by
// moving a new directory into place, which Envoy sees there, and the certificate and
// key are then read together.
func SDSFiles(o Options) (map[string]*discoveryv3.DiscoveryResponse, error) {
	t := o.TLS
	if t == nil {
		return nil, nil
	}
	host, _, err := splitAddr(o.XDSAddress)
	if err != nil {
		return nil, fmt.Errorf("xDS address: %w", err)
	}
	serverName := t.ServerName
	if serverName == "" {
		serverName = host
	}
	file := func(path string) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: path}}
	}
	// Envoy checks only the chain against trusted_ca unless told which name to match.
	sanType := tlsv3.SubjectAltNameMatcher_DNS
	if _, err := netip.ParseAddr(serverName); err == nil {
		sanType = tlsv3.SubjectAltNameMatcher_IP_ADDRESS
	}
	secrets := map[string]*tlsv3.Secret{
		SDSCertificateFile: {Name: sdsCertificateName, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: file(t.CertFile),
			PrivateKey:       file(t.KeyFile),
			WatchedDirectory: &corev3.WatchedDirectory{Path: filepath.Dir(t.CertFile)},
		}}},
		SDSValidationFile: {Name: sdsValidationName, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: file(t.CAFile),
			MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{
				SanType: sanType,
				Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: serverName}},
			}},
			WatchedDirectory: &corev3.WatchedDirectory{Path: filepath.Dir(t.CAFile)},
		}}},
	}
	out := map[string]*discoveryv3.DiscoveryResponse{}
	for name, sec := range secrets {
		if err := sec.ValidateAll(); err != nil {
			return nil, fmt.Errorf("SDS file %s does not validate: %w", name, err)
		}
		res, err := anypb.New(sec)
		if err != nil {
			return nil, err
		}
		out[name] = &discoveryv3.DiscoveryResponse{Resources: []*anypb.Any{res}}
	}
	return out, nil
}

// Write builds the bootstrap and writes it as JSON to path, with its SDS files (with
// TLS) in o.SDSDir, by default path's directory.
func Write(path string, o Options) error {
	if o.SDSDir == "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return err
		}
		o.SDSDir = filepath.Dir(abs)
	}
	b, err := Build(o)
	if err != nil {
		return err
	}
	sds, err := SDSFiles(o)
	if err != nil {
		return err
	}
	for name, resp := range sds {
		if err := writeJSON(filepath.Join(o.SDSDir, name), resp); err != nil {
			return err
		}
	}
	return writeJSON(path, b)
}

func writeJSON(path string, m proto.Message) error {
	data, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
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

// nodeMetadata tells the xDS server which listeners this Envoy serves (see
// internal/xds/server's scope.go); nil for the shared data plane.
func nodeMetadata(o Options) *structpb.Struct {
	if o.Gateway == "" {
		return nil
	}
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		server.NodeGatewayKey: structpb.NewStringValue(o.Gateway),
	}}
}
