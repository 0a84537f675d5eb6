package translate

import (
	"cmp"
	"strconv"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// cluster translates a Service port, with the installation's settings g (connect
// timeout, backend TLS versions, DNS lookup family). Kubernetes endpoints arrive over
// EDS so that an endpoint change does not touch the cluster; ExternalName Services
// resolve by DNS.
func cluster(c *dag.Cluster, g Global) *clusterv3.Cluster {
	connectTimeout := g.ConnectTimeout
	// The messages of an EDS cluster are allocated together: a build translates one
	// cluster per Service port in use.
	parts := &clusterParts{timeout: durationpb.Duration{Seconds: int64(connectTimeout / time.Second), Nanos: int32(connectTimeout % time.Second)}}
	out := &parts.cluster
	out.Name = c.Name
	out.AltStatName = c.Service.Namespace + "_" + c.Service.Name + "_" + portString(c)
	out.ConnectTimeout = &parts.timeout
	out.LbPolicy = lbPolicy(c.LoadBalancer)
	slowStart(out, c.SlowStart)
	out.HealthChecks = healthChecks(c.HealthCheck)
	out.CommonLbConfig = commonLbConfig(c.HealthCheck)
	out.CircuitBreakers = circuitBreakers(c.CircuitBreakers, g.CircuitBreakers)
	if po := httpProtocolOptions(c); po != nil {
		out.TypedExtensionProtocolOptions = map[string]*anypb.Any{HTTPProtocolOptionsName: mustAny(po)}
	}
	out.TransportSocket = upstreamTLS(c, g)
	out.OutlierDetection = outlierDetection(c.Outlier)
	if c.ExternalName != "" {
		// The data plane resolves the name itself: the controller never sees the
		// answers. What the controller enforces is in the graph (dag's
		// externalNameRefused): ExternalName Services only with
		// --enable-external-name-services (off in serve), and never a name that is
		// this machine (localhost, a loopback, link-local or unspecified literal,
		// IPv4-mapped too) or another namespace's Service. The embedded proxy also
		// refuses, at connect time, every answer that is loopback, link-local or
		// unspecified, and any address Portico listens on. Envoy has no such filter
		// on resolved addresses: a name answering 127.0.0.1 reaches whatever
		// listens on the Envoy pod's loopback (the node's, with hostNetwork), and no
		// NetworkPolicy covers loopback. docs/ingress.md ("ExternalName Services")
		// tells operators what that leaves to them.
		out.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}
		family := c.DNSLookupFamily
		if family == "" {
			family = g.DNSLookupFamily
		}
		out.DnsLookupFamily = dnsLookupFamily(family)
		out.LoadAssignment = &endpointv3.ClusterLoadAssignment{
			ClusterName: c.Name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{lbEndpoint(c.ExternalName, c.Port)},
			}},
		}
		return out
	}
	parts.typ.Type = clusterv3.Cluster_EDS
	out.ClusterDiscoveryType = &parts.typ
	parts.eds.EdsConfig, parts.eds.ServiceName = parts.source.configSource(), c.Name
	out.EdsClusterConfig = &parts.eds
	return out
}

// clusterParts are the messages of one EDS cluster.
type clusterParts struct {
	cluster clusterv3.Cluster
	timeout durationpb.Duration
	typ     clusterv3.Cluster_Type
	eds     clusterv3.Cluster_EdsClusterConfig
	source  adsSourceParts
}

// HTTPProtocolOptionsName is the key of a cluster's HTTP protocol options in
// typed_extension_protocol_options.
const HTTPProtocolOptionsName = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// httpProtocolOptions says how the proxy speaks HTTP to the endpoints: HTTP/2 for "h2c"
// and "h2", and the upstream connections' idle timeout. Nil means Envoy's defaults
// (HTTP/1.1, a one-hour idle timeout). HttpProtocolOptions requires an upstream protocol,
// so a timeout alone comes with an explicit HTTP/1.1.
func httpProtocolOptions(c *dag.Cluster) *httpv3.HttpProtocolOptions {
	h2 := c.Protocol == "h2c" || c.Protocol == "h2"
	if !h2 && c.IdleConnectionTimeout == nil {
		return nil
	}
	explicit := &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
		ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}},
	}
	if h2 {
		explicit.ProtocolConfig = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}
	}
	out := &httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: explicit},
	}
	if d := c.IdleConnectionTimeout; d != nil {
		out.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(*d)}
	}
	return out
}

// circuitBreakers are the cluster's thresholds at DEFAULT priority, Contour's: each
// limit the Service's annotations set, else the installation's default, else none
// (Envoy's default); per-host, max_connections only. Nil when nothing is set.
func circuitBreakers(service, defaults dag.CircuitBreakers) *clusterv3.CircuitBreakers {
	cb := dag.CircuitBreakers{
		MaxConnections:        cmp.Or(service.MaxConnections, defaults.MaxConnections),
		MaxPendingRequests:    cmp.Or(service.MaxPendingRequests, defaults.MaxPendingRequests),
		MaxRequests:           cmp.Or(service.MaxRequests, defaults.MaxRequests),
		MaxRetries:            cmp.Or(service.MaxRetries, defaults.MaxRetries),
		PerHostMaxConnections: cmp.Or(service.PerHostMaxConnections, defaults.PerHostMaxConnections),
	}
	if cb.IsZero() {
		return nil
	}
	out := &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		MaxConnections:     limit(cb.MaxConnections),
		MaxPendingRequests: limit(cb.MaxPendingRequests),
		MaxRequests:        limit(cb.MaxRequests),
		MaxRetries:         limit(cb.MaxRetries),
		// Envoy's remaining_* gauges, as Contour asks for them.
		TrackRemaining: true,
	}}}
	if cb.PerHostMaxConnections > 0 {
		out.PerHostThresholds = []*clusterv3.CircuitBreakers_Thresholds{{MaxConnections: limit(cb.PerHostMaxConnections), TrackRemaining: true}}
	}
	return out
}

// limit is a threshold: nil (Envoy's default) for 0.
func limit(n uint32) *wrapperspb.UInt32Value {
	if n == 0 {
		return nil
	}
	return wrapperspb.UInt32(n)
}

// upstreamTLS encrypts the connections to the endpoints of "h2" and "tls" clusters,
// offering only the protocol the cluster speaks by ALPN. With UpstreamValidation the
// endpoint's certificate must chain to its CA and carry one of its subject names or
// URIs (ServerName, else the first name, is sent as SNI); without it the connection is
// encrypted but not verified and no SNI is sent. Other protocols are clear text:
// UpstreamValidation is ignored then. The TLS versions are Envoy's client defaults
// (1.2 only) unless the installation's settings (g) give them; the installation's client
// certificate, when it has one, is presented.
func upstreamTLS(c *dag.Cluster, g Global) *corev3.TransportSocket {
	var alpn string
	switch c.Protocol {
	case "h2":
		alpn = "h2"
	case "tls":
		alpn = "http/1.1"
	default:
		return nil
	}
	ctx := &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{AlpnProtocols: []string{alpn}, TlsParams: g.upstreamTLSParams()}}
	if g.clientSecret != "" {
		ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{{Name: g.clientSecret, SdsConfig: adsSource()}}
	}
	if v := c.UpstreamValidation; v != nil {
		if len(v.SubjectNames) > 0 {
			ctx.Sni = v.SubjectNames[0]
		}
		if v.ServerName != "" {
			ctx.Sni = v.ServerName
		}
		if len(v.CACert) > 0 {
			vc := &tlsv3.CertificateValidationContext{
				TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: v.CACert}},
			}
			for _, name := range v.SubjectNames {
				vc.MatchTypedSubjectAltNames = append(vc.MatchTypedSubjectAltNames, exactSAN(tlsv3.SubjectAltNameMatcher_DNS, name))
			}
			for _, uri := range v.SubjectURIs {
				vc.MatchTypedSubjectAltNames = append(vc.MatchTypedSubjectAltNames, exactSAN(tlsv3.SubjectAltNameMatcher_URI, uri))
			}
			ctx.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}
		}
	}
	return &corev3.TransportSocket{
		Name:       wellknown.TransportSocketTls,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(ctx)},
	}
}

// exactSAN matches a subject alternative name of one type exactly; Envoy accepts a
// certificate when any of a context's matchers matches.
func exactSAN(t tlsv3.SubjectAltNameMatcher_SanType, value string) *tlsv3.SubjectAltNameMatcher {
	return &tlsv3.SubjectAltNameMatcher{
		SanType: t,
		Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: value}},
	}
}

// outlierDetection ejects endpoints that keep answering 5xx. A zero duration is left
// unset (Envoy's default: 10s interval, 30s base ejection time), as Envoy refuses 0s; the
// percentage is at most 100.
func outlierDetection(o *dag.OutlierDetection) *clusterv3.OutlierDetection {
	if o == nil {
		return nil
	}
	out := &clusterv3.OutlierDetection{
		Consecutive_5Xx:    wrapperspb.UInt32(o.Consecutive5xx),
		MaxEjectionPercent: wrapperspb.UInt32(min(o.MaxEjectionPercent, 100)),
		// Envoy's success-rate detector is on by default; failurePolicy asks for the
		// consecutive-5xx detector only.
		EnforcingSuccessRate: wrapperspb.UInt32(0),
		// One endpoint may always be ejected (seed 004), even where max_ejection_percent
		// of a small cluster rounds down to none.
		AlwaysEjectOneHost: wrapperspb.Bool(true),
	}
	if o.Interval > 0 {
		out.Interval = durationpb.New(o.Interval)
	}
	if o.BaseEjectionTime > 0 {
		out.BaseEjectionTime = durationpb.New(o.BaseEjectionTime)
	}
	return out
}

func lbPolicy(lb dag.LoadBalancer) clusterv3.Cluster_LbPolicy {
	switch lb {
	case dag.LBWeightedLeastRequest:
		return clusterv3.Cluster_LEAST_REQUEST
	case dag.LBRingHash:
		return clusterv3.Cluster_RING_HASH
	case dag.LBMaglev:
		return clusterv3.Cluster_MAGLEV
	case dag.LBRandom:
		return clusterv3.Cluster_RANDOM
	}
	return clusterv3.Cluster_ROUND_ROBIN
}

// healthChecks translates an active health check: an HTTP GET, or a TCP connection
// alone. no_traffic_interval is the interval too: Envoy would otherwise check a cluster
// that has not had traffic yet only once a minute, and a bad endpoint would get the first
// requests.
func healthChecks(hc *dag.HealthCheck) []*corev3.HealthCheck {
	if hc == nil {
		return nil
	}
	out := &corev3.HealthCheck{
		Timeout:            durationpb.New(hc.Timeout),
		Interval:           durationpb.New(hc.Interval),
		NoTrafficInterval:  durationpb.New(hc.Interval),
		UnhealthyThreshold: wrapperspb.UInt32(hc.UnhealthyThreshold),
		HealthyThreshold:   wrapperspb.UInt32(hc.HealthyThreshold),
	}
	if hc.TCP {
		out.HealthChecker = &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}}
		return []*corev3.HealthCheck{out}
	}
	check := &corev3.HealthCheck_HttpHealthCheck{
		Path:              hc.Path,
		Host:              hc.Host,
		RetriableStatuses: countedFailures(),
	}
	for _, r := range hc.ExpectedStatuses {
		check.ExpectedStatuses = append(check.ExpectedStatuses, &typev3.Int64Range{Start: r.Start, End: r.End})
	}
	out.HealthChecker = &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: check}
	return []*corev3.HealthCheck{out}
}

// commonLbConfig turns panic mode off (healthy_panic_threshold 0) on a cluster with an
// active health check, as Contour does: when every endpoint fails its check the client
// gets a 503 "no healthy upstream" instead of reaching an endpoint known to be failing
// (Envoy's default sends traffic to every endpoint once fewer than half are healthy).
// Other clusters keep Envoy's default: only outlier detection can take their endpoints
// out, and a Service whose endpoints are all ejected still gets its traffic.
func commonLbConfig(hc *dag.HealthCheck) *clusterv3.Cluster_CommonLbConfig {
	if hc == nil {
		return nil
	}
	return &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}}
}

// countedFailures are the check answers that count towards unhealthy_threshold: every
// status but 503, which seed 003 says takes an endpoint out at once (Envoy would
// otherwise take it out on the first non-200 answer). Ranges are [start, end).
//
// They stay the same when the check lists its own expected statuses: Envoy (and the
// embedded proxy) look an answer up in expected_statuses first, so an expected status is
// a success even inside these ranges (a 503 too, when listed), and every other answer
// keeps the meaning above.
func countedFailures() []*typev3.Int64Range {
	return []*typev3.Int64Range{{Start: 100, End: 503}, {Start: 504, End: 600}}
}

func portString(c *dag.Cluster) string {
	if c.PortName != "" {
		return c.PortName
	}
	return strconv.Itoa(int(c.Port))
}

func loadAssignment(c *dag.Cluster) *endpointv3.ClusterLoadAssignment {
	if len(c.Endpoints) == 0 {
		return &endpointv3.ClusterLoadAssignment{ClusterName: c.Name}
	}
	// The endpoints' messages are allocated together, one array of parts for the
	// cluster, and the assignment with its one locality: a build translates tens of
	// thousands of endpoints.
	parts := make([]endpointParts, len(c.Endpoints))
	lbs := make([]*endpointv3.LbEndpoint, len(c.Endpoints))
	for i, ep := range c.Endpoints {
		lbs[i] = parts[i].lbEndpoint(ep.Address, ep.Port)
		if ep.HealthPort != 0 {
			// Checked on another port of the same address (HTTPProxy healthPort).
			parts[i].endpoint.HealthCheckConfig = &endpointv3.Endpoint_HealthCheckConfig{PortValue: uint32(ep.HealthPort)}
		}
	}
	a := &struct {
		cla        endpointv3.ClusterLoadAssignment
		locality   endpointv3.LocalityLbEndpoints
		localities [1]*endpointv3.LocalityLbEndpoints
	}{}
	a.cla.ClusterName = c.Name
	a.locality.LbEndpoints = lbs
	a.localities[0] = &a.locality
	a.cla.Endpoints = a.localities[:]
	return &a.cla
}

func lbEndpoint(host string, port int32) *endpointv3.LbEndpoint {
	return new(endpointParts).lbEndpoint(host, port)
}

// endpointParts are the messages of one endpoint.
type endpointParts struct {
	lb       endpointv3.LbEndpoint
	id       endpointv3.LbEndpoint_Endpoint
	endpoint endpointv3.Endpoint
	addr     addressParts
}

// lbEndpoint makes p the endpoint host:port, returning its root message.
func (p *endpointParts) lbEndpoint(host string, port int32) *endpointv3.LbEndpoint {
	p.endpoint.Address = p.addr.address(hostPort{host: host, port: uint32(port)})
	p.id.Endpoint = &p.endpoint
	p.lb.HostIdentifier = &p.id
	return &p.lb
}

func secret(s *dag.Secret) *tlsv3.Secret {
	return &tlsv3.Secret{
		Name: s.Name,
		Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: s.Cert}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: s.Key}},
		}},
	}
}

// dnsLookupFamily is a DNS cluster's address family; "" is Envoy's default (auto).
func dnsLookupFamily(f string) clusterv3.Cluster_DnsLookupFamily {
	switch f {
	case "v4":
		return clusterv3.Cluster_V4_ONLY
	case "v6":
		return clusterv3.Cluster_V6_ONLY
	case "all":
		return clusterv3.Cluster_ALL
	default:
		return clusterv3.Cluster_AUTO
	}
}

// slowStart has the cluster ramp up new endpoints' share (HTTPProxy
// slowStartPolicy), in the lb config of its policy, round robin or least request.
func slowStart(out *clusterv3.Cluster, s *dag.SlowStart) {
	if s == nil {
		return
	}
	cfg := &clusterv3.Cluster_SlowStartConfig{
		SlowStartWindow:  durationpb.New(s.Window),
		Aggression:       &corev3.RuntimeDouble{DefaultValue: s.Aggression, RuntimeKey: "portico.slow_start.aggression"},
		MinWeightPercent: &typev3.Percent{Value: s.MinWeightPercent},
	}
	switch out.LbPolicy {
	case clusterv3.Cluster_LEAST_REQUEST:
		out.LbConfig = &clusterv3.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &clusterv3.Cluster_LeastRequestLbConfig{SlowStartConfig: cfg}}
	case clusterv3.Cluster_ROUND_ROBIN:
		out.LbConfig = &clusterv3.Cluster_RoundRobinLbConfig_{RoundRobinLbConfig: &clusterv3.Cluster_RoundRobinLbConfig{SlowStartConfig: cfg}}
	}
}
