package translate

import (
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// ServerName is the Server response header of Portico's routes (serverHeader).
const ServerName = "portico"

// mustAny validates and packs a message whose type is known at compile time. A resource's
// ValidateAll does not look inside the Any, so the packed message is validated here; an
// invalid one is a translator bug, which Translate recovers and reports as an error, as it
// does for an invalid resource. Packing itself can only fail for a nil message.
func mustAny(m proto.Message) *anypb.Any {
	if v, ok := m.(validatable); ok {
		if err := v.ValidateAll(); err != nil {
			panic(invalidPacked{msg: m, err: err})
		}
	}
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

// invalidPacked is mustAny's panic value for a message that does not validate.
type invalidPacked struct {
	msg proto.Message
	err error
}

// adsSource is the config source of every dynamic resource: the aggregated stream.
func adsSource() *corev3.ConfigSource { return new(adsSourceParts).configSource() }

// adsSourceParts are the messages of an aggregated config source, for those who
// allocate them with others (one per EDS cluster).
type adsSourceParts struct {
	source     corev3.ConfigSource
	ads        corev3.ConfigSource_Ads
	aggregated corev3.AggregatedConfigSource
}

func (p *adsSourceParts) configSource() *corev3.ConfigSource {
	p.source.ResourceApiVersion = corev3.ApiVersion_V3
	p.ads.Ads = &p.aggregated
	p.source.ConfigSourceSpecifier = &p.ads
	return &p.source
}

func address(a hostPort) *corev3.Address { return new(addressParts).address(a) }

// addressParts are the messages of a socket address, for those who allocate them with
// others (one per endpoint).
type addressParts struct {
	addr corev3.Address
	sock corev3.Address_SocketAddress
	sa   corev3.SocketAddress
	port corev3.SocketAddress_PortValue
}

func (p *addressParts) address(a hostPort) *corev3.Address {
	p.port.PortValue = a.port
	p.sa.Address, p.sa.PortSpecifier = a.host, &p.port
	p.sock.SocketAddress = &p.sa
	p.addr.Address = &p.sock
	return &p.addr
}

func httpListener(addr hostPort, opts Options) *listenerv3.Listener {
	return plainListener(ListenerHTTP, RouteHTTP, addr, opts)
}

// plainListener is a clear-text HTTP listener whose routes are the route configuration
// routeName.
func plainListener(name, routeName string, addr hostPort, opts Options) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name:            name,
		Address:         address(addr),
		ListenerFilters: proxyProtocol(opts.Global),
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{httpConnectionManager(name, routeName, nil, opts)},
		}},
	}
}

// httpsListener is the HTTPS listener without its filter chains, which the caller adds:
// one per server name, so that the certificate, the TLS settings and the routes all
// follow the SNI the client sent (see secureFilterChain).
func httpsListener(addr hostPort, g Global) *listenerv3.Listener {
	return tlsListener(ListenerHTTPS, addr, g)
}

// tlsListener is a listener named name that dispatches on SNI, without its filter chains.
func tlsListener(name string, addr hostPort, g Global) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name:    name,
		Address: address(addr),
		ListenerFilters: append(proxyProtocol(g), &listenerv3.ListenerFilter{
			Name:       wellknown.TlsInspector,
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(&tlsinspectorv3.TlsInspector{})},
		}),
	}
}

// proxyProtocol is the listener filters that read the PROXY protocol header a load
// balancer in front sends first, when the installation expects one: Envoy's filter
// with its defaults, as Contour emits it (a connection without a header is closed).
// It comes first, before the TLS inspector: the header precedes the ClientHello.
func proxyProtocol(g Global) []*listenerv3.ListenerFilter {
	if !g.UseProxyProtocol {
		return nil
	}
	return []*listenerv3.ListenerFilter{{
		Name:       wellknown.ProxyProtocol,
		ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(&proxyprotocolv3.ProxyProtocol{})},
	}}
}

// secureFilterChain is the filter chain of one server name, or nil when the host has
// nothing to serve (the builder does not produce such hosts); its HTTP connection
// manager has stat prefix statPrefix and the routes of the route configuration
// routeName. A Gateway listener without a hostname has the server name "*": its chain
// takes every connection no other chain's server name matches.
func secureFilterChain(svh *dag.SecureVirtualHost, statPrefix, routeName string, opts Options) *listenerv3.FilterChain {
	fc := &listenerv3.FilterChain{
		Name:             svh.Name,
		FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{svh.Name}},
	}
	if svh.Name == "*" {
		fc.FilterChainMatch = nil
	}
	switch {
	case svh.TCPProxy != nil && len(svh.TCPProxy.Clusters) == 0:
		// Nowhere to send the bytes: no chain, so the connection is closed.
		return nil
	case svh.TCPProxy != nil && svh.Passthrough:
		fc.Filters = []*listenerv3.Filter{tcpProxy(svh)}
	case svh.Secret == nil:
		// Only a passthrough host has no certificate; anything else without one cannot
		// be served.
		return nil
	case svh.TCPProxy != nil:
		fc.TransportSocket = downstreamTLS(svh, nil, opts.Global)
		fc.Filters = []*listenerv3.Filter{tcpProxy(svh)}
	default:
		fc.TransportSocket = downstreamTLS(svh, alpnFor(opts.httpVersions(svh)), opts.Global)
		fc.Filters = []*listenerv3.Filter{httpConnectionManager(statPrefix, routeName, svh, opts)}
	}
	return fc
}

// servesHTTP reports whether a secure virtual host's connections are HTTP requests
// routed by its route configuration (not a TCP stream), with a certificate: whether its
// filter chain names the route configuration https/<name>.
func servesHTTP(svh *dag.SecureVirtualHost) bool {
	return svh.TCPProxy == nil && svh.Secret != nil
}

// terminatesTLS reports whether a secure virtual host's filter chain presents its
// certificate: whether the chain refers to the SDS secret.
func terminatesTLS(svh *dag.SecureVirtualHost) bool {
	if svh.Secret == nil {
		return false
	}
	if svh.TCPProxy != nil {
		return !svh.Passthrough && len(svh.TCPProxy.Clusters) > 0
	}
	return true
}

// tcpProxy sends the connection's bytes to the host's cluster, or to one of its clusters
// by weight. TCP weights must be at least 1: a cluster of weight 0 is left out (it would
// get no connections), and when every weight is 0 they all get 1 (an even split). Each
// connection gets an access log line, as each HTTP request does.
func tcpProxy(svh *dag.SecureVirtualHost) *listenerv3.Filter {
	tp := &tcpproxyv3.TcpProxy{StatPrefix: tcpStatPrefix(svh.Name), AccessLog: stdoutAccessLog()}
	var clusters []*tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight
	for _, wc := range svh.TCPProxy.Clusters {
		if wc.Weight > 0 {
			clusters = append(clusters, &tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{Name: wc.Cluster.Name, Weight: wc.Weight})
		}
	}
	if len(clusters) == 0 {
		for _, wc := range svh.TCPProxy.Clusters {
			clusters = append(clusters, &tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{Name: wc.Cluster.Name, Weight: 1})
		}
	}
	if len(clusters) == 1 {
		tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_Cluster{Cluster: clusters[0].Name}
	} else {
		tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpproxyv3.TcpProxy_WeightedCluster{Clusters: clusters}}
	}
	return &listenerv3.Filter{
		Name:       wellknown.TCPProxy,
		ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(tp)},
	}
}

// tcpStatPrefix is "tcp_" and the server name with its dots as underscores and a
// wildcard spelled out: "tcp_db_example_com", "tcp_wildcard_example_com".
func tcpStatPrefix(name string) string {
	return "tcp_" + strings.NewReplacer("*", "wildcard", ".", "_").Replace(name)
}

// downstreamTLS terminates TLS with the host's certificate (the one of its certificates
// whose names match the SNI, when it has more), offering alpn (none for a TCP
// stream: the client must not believe it speaks HTTP to the proxy), with the TLS
// versions of the host within those of the installation (g) and the installation's
// cipher suites.
func downstreamTLS(svh *dag.SecureVirtualHost, alpn []string, g Global) *corev3.TransportSocket {
	sds := []*tlsv3.SdsSecretConfig{{Name: svh.Secret.Name, SdsConfig: adsSource()}}
	for _, s := range svh.MoreSecrets {
		sds = append(sds, &tlsv3.SdsSecretConfig{Name: s.Name, SdsConfig: adsSource()})
	}
	lo, hi := g.tlsVersions(svh.MinTLSVersion, svh.MaxTLSVersion)
	ctx := &tlsv3.DownstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams: &tlsv3.TlsParameters{
				TlsMinimumProtocolVersion: lo,
				TlsMaximumProtocolVersion: hi,
				CipherSuites:              g.CipherSuites,
			},
			TlsCertificateSdsSecretConfigs: sds,
			AlpnProtocols:                  alpn,
		},
	}
	clientValidation(ctx, svh.ClientValidation)
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

// maxTLSVersion is TLSv1_3 unless "1.2" is asked for.
func maxTLSVersion(v string) tlsv3.TlsParameters_TlsProtocol {
	if v == "1.2" {
		return tlsv3.TlsParameters_TLSv1_2
	}
	return tlsv3.TlsParameters_TLSv1_3
}

// httpConnectionManager configures the edge behaviour: Portico is the first proxy a
// client reaches, so it trusts no forwarding headers (unless told how many proxies
// stand in front of it: opts.NumTrustedHops) and normalises paths before routing.
// The request header limits are always explicit, so that Envoy and the embedded proxy
// enforce the same ones whatever their defaults. The Host loses its port, for routing
// and upstream (strip_any_host_port), unless opts keep it (a Gateway's listeners, whose
// route configurations ignore it instead: routeConfigurationFor).
//
// svh is the HTTPS server name the connection manager serves alone; nil for a
// plain listener's.
func httpConnectionManager(statPrefix, routeName string, svh *dag.SecureVirtualHost, opts Options) *listenerv3.Filter {
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: statPrefix,
		CodecType:  codecFor(opts.httpVersions(svh)),
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    adsSource(),
			RouteConfigName: routeName,
		}},
		HttpFilters:       httpFilterChain(svh, opts),
		UseRemoteAddress:  wrapperspb.Bool(true),
		XffNumTrustedHops: opts.NumTrustedHops,
		// The Server header is the route configuration's (serverHeader): the connection
		// manager would set it after a route's changes, and undo them.
		ServerHeaderTransformation: hcmv3.HttpConnectionManager_PASS_THROUGH,
		// The request's id goes back to the client, as the embedded proxy does and the
		// docs say; Envoy's default returns it only for a forced trace.
		AlwaysSetRequestIdInResponse: true,
		NormalizePath:                wrapperspb.Bool(true),
		MergeSlashes:                 !opts.DisableMergeSlashes,
		StripTrailingHostDot:         opts.StripTrailingHostDot,
		StreamIdleTimeout:            opts.streamIdleTimeout(),
		MaxRequestHeadersKb:          wrapperspb.UInt32(opts.MaxRequestHeadersKB),
		CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{
			MaxHeadersCount: wrapperspb.UInt32(opts.MaxRequestHeaders),
		},
		// As Contour's: HTTP/1.0 clients that send a Host are served (Envoy answers
		// them 426 by default), and a chunked request's Content-Length is dropped
		// rather than the request refused, which is also what Go's parser under the
		// embedded proxy does.
		HttpProtocolOptions: &corev3.Http1ProtocolOptions{AcceptHttp_10: true, AllowChunkedLength: true},
		AccessLog:           stdoutAccessLog(),
	}
	opts.Connection.apply(hcm)
	if svh != nil {
		forwardClientCert(hcm, svh.ClientValidation)
	}
	if !opts.keepHostPort {
		hcm.StripPortMode = &hcmv3.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: true}
	}
	return &listenerv3.Filter{
		Name:       wellknown.HTTPConnectionManager,
		ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)},
	}
}

// stdoutAccessLog is Envoy's access log to its standard output, in its default format;
// the embedded proxy writes its own lines (docs/metrics.md).
func stdoutAccessLog() []*accesslogv3.AccessLog {
	return []*accesslogv3.AccessLog{{
		Name:       "envoy.access_loggers.stdout",
		ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(&streamv3.StdoutAccessLog{})},
	}}
}
