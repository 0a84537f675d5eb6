package translate

import (
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// ServerName is the Server header the data plane sends.
const ServerName = "portico"

// mustAny packs a message whose type is known at compile time; packing can only fail for
// a nil message, which would be a bug here.
func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

// adsSource is the config source of every dynamic resource: the aggregated stream.
func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}

func address(a hostPort) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       a.host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: a.port},
	}}}
}

func httpListener(addr hostPort, opts Options) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name:    ListenerHTTP,
		Address: address(addr),
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{httpConnectionManager(ListenerHTTP, RouteHTTP, opts)},
		}},
	}
}

// httpsListener has one filter chain per server name so that the certificate, the TLS
// settings and the routes all follow the SNI the client sent.
func httpsListener(addr hostPort, hosts []*dag.SecureVirtualHost, opts Options) *listenerv3.Listener {
	l := &listenerv3.Listener{
		Name:    ListenerHTTPS,
		Address: address(addr),
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name:       wellknown.TlsInspector,
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(&tlsinspectorv3.TlsInspector{})},
		}},
	}
	for _, svh := range hosts {
		l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{
			Name:             svh.Name,
			FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{svh.Name}},
			TransportSocket:  downstreamTLS(svh),
			Filters:          []*listenerv3.Filter{httpConnectionManager(ListenerHTTPS, RouteHTTPS(svh.Name), opts)},
		})
	}
	return l
}

func downstreamTLS(svh *dag.SecureVirtualHost) *corev3.TransportSocket {
	ctx := &tlsv3.DownstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams: &tlsv3.TlsParameters{
				TlsMinimumProtocolVersion: minTLSVersion(svh.MinTLSVersion),
				TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
			},
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: svh.Secret.Name, SdsConfig: adsSource()}},
			AlpnProtocols:                  []string{"h2", "http/1.1"},
		},
	}
	return &corev3.TransportSocket{
		Name:       wellknown.TransportSocketTls,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(ctx)},
	}
}

func minTLSVersion(v string) tlsv3.TlsParameters_TlsProtocol {
	switch v {
	case "1.1":
		return tlsv3.TlsParameters_TLSv1_1
	case "1.3":
		return tlsv3.TlsParameters_TLSv1_3
	default:
		return tlsv3.TlsParameters_TLSv1_2
	}
}

// httpConnectionManager configures the edge behaviour: Portico is the first proxy a
// client reaches, so it trusts no forwarding headers and normalises paths before routing.
// The request header limits are always explicit, so that Envoy and the embedded proxy
// enforce the same ones whatever their defaults.
func httpConnectionManager(statPrefix, routeName string, opts Options) *listenerv3.Filter {
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: statPrefix,
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    adsSource(),
			RouteConfigName: routeName,
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       wellknown.Router,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})},
		}},
		UseRemoteAddress:    wrapperspb.Bool(true),
		ServerName:          ServerName,
		NormalizePath:       wrapperspb.Bool(true),
		StripPortMode:       &hcmv3.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: true},
		MaxRequestHeadersKb: wrapperspb.UInt32(opts.MaxRequestHeadersKB),
		CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{
			MaxHeadersCount: wrapperspb.UInt32(opts.MaxRequestHeaders),
		},
		AccessLog: []*accesslogv3.AccessLog{{
			Name:       "envoy.access_loggers.stdout",
			ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(&streamv3.StdoutAccessLog{})},
		}},
	}
	return &listenerv3.Filter{
		Name:       wellknown.HTTPConnectionManager,
		ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)},
	}
}
