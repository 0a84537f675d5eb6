package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// defaultConnectTimeout is Envoy's cluster connect_timeout default.
const defaultConnectTimeout = 5 * time.Second

type clusterKind int

const (
	ClusterEDS    clusterKind = iota // endpoints from a ClusterLoadAssignment
	ClusterInline                    // endpoints from the cluster's own load_assignment
)

// ClusterSpec is a validated Cluster.
type ClusterSpec struct {
	name           string
	Kind           clusterKind
	ServiceName    string            // EDS: the ClusterLoadAssignment's cluster_name
	Endpoints      []string          // inline: host:port (hostnames for STRICT_DNS, resolved per connection)
	HealthAddrs    map[string]string // inline: see assignmentSpec
	ConnectTimeout time.Duration
	Network        string // "tcp", "tcp4" or "tcp6" (dns_lookup_family)
	// byName: STRICT_DNS or LOGICAL_DNS, whose endpoints, IP literals
	// included, were chosen by whoever wrote an ExternalName Service (see
	// egress.go).
	ByName      bool
	LB          lbSpec
	HealthCheck *HealthCheckSpec // nil without health_checks
	TLS         *upstreamTLSSpec // nil: clear text
	Protocol    ProtocolSpec
	Outlier     *outlierSpec // nil without outlier_detection
	Breakers    BreakerSpec  // Envoy's defaults without circuit_breakers
	StatKey     upstreamKey  // the labels of its series (clusterStatKey)
}

// AssignmentSpec is a validated ClusterLoadAssignment.
type AssignmentSpec struct {
	Endpoints []string // host:port of the endpoints that may receive traffic
	// HealthAddrs are where the endpoints that are health checked elsewhere
	// (health_check_config.port_value) are checked, by endpoint; nil: none.
	HealthAddrs map[string]string
	// Held are the endpoints listed with an unhealthy, draining or timed out
	// health_status: no traffic, but slow start remembers when they joined.
	Held []string
}

// Cluster is a cluster of a snapshot.
type Cluster struct {
	Name      string
	Stats     *Stats // of its Service port
	Endpoints []string
	// HealthAddrs are where endpoints checked on another port are checked.
	HealthAddrs map[string]string
	// Dialer connects to the endpoints (connect_timeout, dns_lookup_family,
	// the egress rules).
	Dialer EndpointDialer
	LB     lbSpec
	// Added are when the endpoints joined the cluster, by index, for slow start;
	// nil without it.
	Added []time.Time
	// Held are the endpoints EDS lists but marks unhealthy (AssignmentSpec.Held).
	Held        []string
	HealthCheck *HealthCheckSpec
	TLS         *upstreamTLSSpec // nil: clear text
	Scheme      string           // of upstream URLs: "https" with TLS
	HTTP2       bool             // the cluster speaks HTTP/2 (h2 with TLS, else h2c)
	Breakers    BreakerSpec
	// Transport is the cluster's own transport (TLS, HTTP/2, idle_timeout);
	// nil: the shared HTTP/1.1 one.
	Transport http.RoundTripper
	// state, and the counters and health it holds, are shared by every
	// snapshot: they survive configuration swaps.
	State  *ClusterState
	Active []*atomic.Int64 // in-flight requests, by endpoint index
	Health *HealthState    // nil: every endpoint is healthy
	// Outlier is nil without outlier_detection; outlierHosts are by endpoint index.
	Outlier      *outlierState
	OutlierSpec  *outlierSpec
	OutlierHosts []*outlierHost

	AllHosts *HostSet                // every endpoint (without health checks)
	hosts    atomic.Pointer[HostSet] // with health checks: the set at the latest generation
}

func ConvertCluster(c *clusterv3.Cluster) (*ClusterSpec, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("transport_socket_matches", len(c.GetTransportSocketMatches()) > 0),
		xdsconv.Set("transport_socket_matcher", c.GetTransportSocketMatcher() != nil),
		xdsconv.Set("max_requests_per_connection", c.GetMaxRequestsPerConnection() != nil),
		xdsconv.Set("upstream_http_protocol_options", c.GetUpstreamHttpProtocolOptions() != nil),
		xdsconv.Set("common_http_protocol_options", c.GetCommonHttpProtocolOptions() != nil),
		xdsconv.Set("http_protocol_options", c.GetHttpProtocolOptions() != nil),
		xdsconv.Set("http2_protocol_options", c.GetHttp2ProtocolOptions() != nil),
		xdsconv.Set("protocol_selection USE_DOWNSTREAM_PROTOCOL", c.GetProtocolSelection() != clusterv3.Cluster_USE_CONFIGURED_PROTOCOL),
		xdsconv.Set("dns_resolvers", len(c.GetDnsResolvers()) > 0),
		xdsconv.Set("dns_resolution_config", c.GetDnsResolutionConfig() != nil),
		xdsconv.Set("typed_dns_resolver_config", c.GetTypedDnsResolverConfig() != nil),
		xdsconv.Set("upstream_bind_config", c.GetUpstreamBindConfig() != nil),
		xdsconv.Set("lb_subset_config", c.GetLbSubsetConfig() != nil),
		xdsconv.Set("load_balancing_policy", c.GetLoadBalancingPolicy() != nil),
		xdsconv.Set("filters", len(c.GetFilters()) > 0),
		xdsconv.Set("upstream_config", c.GetUpstreamConfig() != nil),
		xdsconv.Set("lrs_server", c.GetLrsServer() != nil),
		xdsconv.Set("close_connections_on_host_health_failure", c.GetCloseConnectionsOnHostHealthFailure()),
		xdsconv.Set("ignore_health_on_host_removal", c.GetIgnoreHealthOnHostRemoval()),
		xdsconv.Set("cluster_type (custom cluster)", c.GetClusterType() != nil),
	); err != nil {
		return nil, err
	}
	lb, err := convertLB(c)
	if err != nil {
		return nil, err
	}
	hc, err := convertHealthChecks(c.GetName(), c.GetHealthChecks())
	if err != nil {
		return nil, fmt.Errorf("health_checks: %w", err)
	}
	spec := &ClusterSpec{name: c.GetName(), ConnectTimeout: defaultConnectTimeout, Network: "tcp", LB: lb, HealthCheck: hc,
		StatKey: ClusterStatKey(c.GetName(), c.GetAltStatName())}
	if ts := c.GetTransportSocket(); ts != nil {
		if spec.TLS, err = convertUpstreamTLS(ts); err != nil {
			return nil, fmt.Errorf("transport_socket: %w", err)
		}
	}
	if spec.Protocol, err = convertProtocolOptions(c); err != nil {
		return nil, err
	}
	if err := checkProtocolALPN(spec.Protocol.Protocol, spec.TLS); err != nil {
		return nil, fmt.Errorf("transport_socket: %w", err)
	}
	if spec.Breakers, err = convertCircuitBreakers(c.GetCircuitBreakers()); err != nil {
		return nil, fmt.Errorf("circuit_breakers: %w", err)
	}
	if spec.Outlier, err = convertOutlierDetection(c.GetOutlierDetection()); err != nil {
		return nil, fmt.Errorf("outlier_detection: %w", err)
	}
	if c.GetConnectTimeout() != nil {
		spec.ConnectTimeout = c.GetConnectTimeout().AsDuration()
	}
	switch c.GetDnsLookupFamily() {
	case clusterv3.Cluster_V4_ONLY:
		spec.Network = "tcp4"
	case clusterv3.Cluster_V6_ONLY:
		spec.Network = "tcp6"
	}
	switch t := c.GetType(); t {
	case clusterv3.Cluster_EDS:
		if c.GetLoadAssignment() != nil {
			return nil, errors.New("an EDS cluster must not have a load_assignment")
		}
		if err := xdsconv.CheckADSConfigSource(c.GetEdsClusterConfig().GetEdsConfig()); err != nil {
			return nil, fmt.Errorf("eds_cluster_config.eds_config: %w", err)
		}
		spec.Kind = ClusterEDS
		spec.ServiceName = c.GetEdsClusterConfig().GetServiceName()
		if spec.ServiceName == "" {
			spec.ServiceName = c.GetName()
		}
	case clusterv3.Cluster_STATIC, clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
		// Hostnames are resolved by the dialer for every new connection, which
		// honours STRICT_DNS and LOGICAL_DNS closely enough for HTTP.
		if c.GetLoadAssignment() == nil {
			return nil, fmt.Errorf("a %v cluster needs a load_assignment", t)
		}
		a, err := convertAssignment(c.GetLoadAssignment(), t == clusterv3.Cluster_STATIC)
		if err != nil {
			return nil, fmt.Errorf("load_assignment: %w", err)
		}
		spec.Kind = ClusterInline
		spec.Endpoints, spec.HealthAddrs = a.Endpoints, a.HealthAddrs
		spec.ByName = t != clusterv3.Cluster_STATIC
	default:
		return nil, fmt.Errorf("cluster type %v is not supported (EDS, STATIC, STRICT_DNS, LOGICAL_DNS)", t)
	}
	return spec, nil
}

// ConvertEDSAssignment converts an EDS ClusterLoadAssignment; its endpoints
// must be IP addresses, as in Envoy.
func ConvertEDSAssignment(cla *endpointv3.ClusterLoadAssignment) (*AssignmentSpec, error) {
	return convertAssignment(cla, true)
}

func convertAssignment(cla *endpointv3.ClusterLoadAssignment, requireIP bool) (*AssignmentSpec, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("named_endpoints", len(cla.GetNamedEndpoints()) > 0),
		xdsconv.Set("policy.drop_overloads", len(cla.GetPolicy().GetDropOverloads()) > 0),
	); err != nil {
		return nil, err
	}
	a := &AssignmentSpec{Endpoints: []string{}}
	var weight uint32
	for _, loc := range cla.GetEndpoints() {
		if loc.GetPriority() != 0 {
			return nil, errors.New("endpoint priorities other than 0 are not supported")
		}
		if loc.GetLbConfig() != nil {
			return nil, errors.New("locality lb_config is not supported")
		}
		for _, lbe := range loc.GetLbEndpoints() {
			ep := lbe.GetEndpoint()
			if ep == nil {
				return nil, errors.New("endpoint_name is not supported")
			}
			healthPort, err := convertEndpointHealthCheck(ep.GetHealthCheckConfig())
			if err != nil {
				return nil, err
			}
			if w := lbe.GetLoadBalancingWeight().GetValue(); w != 0 {
				if weight != 0 && w != weight {
					return nil, errors.New("endpoints with different load_balancing_weight are not supported")
				}
				weight = w
			}
			addr, err := xdsconv.TCPSocketAddress(ep.GetAddress())
			if err != nil {
				return nil, fmt.Errorf("endpoint: %w", err)
			}
			host, _, _ := net.SplitHostPort(addr)
			if requireIP && net.ParseIP(host) == nil {
				return nil, fmt.Errorf("endpoint %q: an IP address is required", addr)
			}
			if !servesTraffic(lbe.GetHealthStatus()) {
				a.Held = append(a.Held, addr)
				continue
			}
			a.Endpoints = append(a.Endpoints, addr)
			if healthPort != 0 {
				if a.HealthAddrs == nil {
					a.HealthAddrs = map[string]string{}
				}
				a.HealthAddrs[addr] = net.JoinHostPort(host, strconv.FormatUint(uint64(healthPort), 10))
			}
		}
	}
	return a, nil
}

// convertEndpointHealthCheck returns the port an endpoint is health checked
// on instead of its own; 0: its own.
func convertEndpointHealthCheck(hc *endpointv3.Endpoint_HealthCheckConfig) (uint32, error) {
	if hc == nil {
		return 0, nil
	}
	if err := xdsconv.Unsupported(
		xdsconv.Set("health_check_config.hostname", hc.GetHostname() != ""),
		xdsconv.Set("health_check_config.address", hc.GetAddress() != nil),
		xdsconv.Set("health_check_config.disable_active_health_check", hc.GetDisableActiveHealthCheck()),
	); err != nil {
		return 0, fmt.Errorf("endpoint: %w", err)
	}
	if p := hc.GetPortValue(); p > 65535 {
		return 0, fmt.Errorf("endpoint: health_check_config.port_value %d is not a port", p)
	}
	return hc.GetPortValue(), nil
}

// servesTraffic mirrors Envoy: endpoints reported unhealthy, draining or timed
// out by EDS receive no new requests.
func servesTraffic(h corev3.HealthStatus) bool {
	switch h {
	case corev3.HealthStatus_UNHEALTHY, corev3.HealthStatus_DRAINING, corev3.HealthStatus_TIMEOUT:
		return false
	}
	return true
}

// maxIdleConnsPerEndpoint is how many idle connections an endpoint's pool
// keeps: Envoy keeps every connection until its idle timeout, and opens at
// most its default max_connections (1024) per cluster. A lower bound would
// close, after each burst, connections the next burst opens again.
const maxIdleConnsPerEndpoint = 1024

// NewTransport is the HTTP/1.1 transport shared by all clusters
// without their own, behind http1Client, which hands it the requests it does
// not exchange itself. Connections are pooled per endpoint address.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil, // never use HTTP(S)_PROXY from the environment
		DialContext:         dialUpstream,
		MaxIdleConnsPerHost: maxIdleConnsPerEndpoint,
		MaxIdleConns:        0, // no bound across endpoints, as in Envoy
		IdleConnTimeout:     defaultUpstreamIdleTimeout,
		// Upstreams speak HTTP/1.1; the response header wait is bounded by the route timeout.
		ForceAttemptHTTP2:     false,
		ExpectContinueTimeout: time.Second,
		// Never add an Accept-Encoding the client did not send, nor decode
		// the response: bodies, Content-Encoding and ETag pass through as is.
		DisableCompression: true,
	}
}

// dialUpstream connects to an endpoint of the request's cluster (see
// endpointDialer). Hostnames (STRICT_DNS/LOGICAL_DNS) are resolved on every
// dial. Every forwarded request carries its target (package proxy, handler.go); a connection
// without one is not made.
func dialUpstream(ctx context.Context, _, addr string) (net.Conn, error) {
	c := clusterFrom(ctx)
	if c == nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errNoTarget}
	}
	return c.Dialer.Dial(ctx, addr)
}

// errNoTarget is a connection asked for outside a forwarded request.
var errNoTarget = errors.New("no upstream cluster for this connection")

// TargetKey is the request context key of the upstream the request
// path chose for a request (a clusterTarget). It travels in the request
// context because http.Transport keeps context values (not cancellation)
// when dialing.
type TargetKey struct{}

// clusterTarget is what dialing needs of a request's upstream target.
type clusterTarget interface {
	UpstreamCluster() *Cluster
}

// clusterFrom returns the cluster of the request whose context is ctx; nil
// outside a forwarded request.
func clusterFrom(ctx context.Context) *Cluster {
	t, _ := ctx.Value(TargetKey{}).(clusterTarget)
	if t == nil {
		return nil
	}
	return t.UpstreamCluster()
}
