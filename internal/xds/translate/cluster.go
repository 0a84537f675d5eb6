package translate

import (
	"strconv"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// cluster translates a Service port. Kubernetes endpoints arrive over EDS so that an
// endpoint change does not touch the cluster; ExternalName Services resolve by DNS.
func cluster(c *dag.Cluster, connectTimeout time.Duration) *clusterv3.Cluster {
	out := &clusterv3.Cluster{
		Name:           c.Name,
		AltStatName:    c.Service.Namespace + "_" + c.Service.Name + "_" + portString(c),
		ConnectTimeout: durationpb.New(connectTimeout),
		LbPolicy:       lbPolicy(c.LoadBalancer),
		HealthChecks:   healthChecks(c.HealthCheck),
	}
	if c.ExternalName != "" {
		out.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}
		out.LoadAssignment = &endpointv3.ClusterLoadAssignment{
			ClusterName: c.Name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{lbEndpoint(c.ExternalName, c.Port)},
			}},
		}
		return out
	}
	out.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}
	out.EdsClusterConfig = &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource(), ServiceName: c.Name}
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

// healthChecks translates an active HTTP health check. no_traffic_interval is the
// interval too: Envoy would otherwise check a cluster that has not had traffic yet only
// once a minute, and a bad endpoint would get the first requests.
func healthChecks(hc *dag.HealthCheck) []*corev3.HealthCheck {
	if hc == nil {
		return nil
	}
	return []*corev3.HealthCheck{{
		Timeout:            durationpb.New(hc.Timeout),
		Interval:           durationpb.New(hc.Interval),
		NoTrafficInterval:  durationpb.New(hc.Interval),
		UnhealthyThreshold: wrapperspb.UInt32(hc.UnhealthyThreshold),
		HealthyThreshold:   wrapperspb.UInt32(hc.HealthyThreshold),
		HealthChecker: &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{
			Path:              hc.Path,
			Host:              hc.Host,
			RetriableStatuses: countedFailures(),
		}},
	}}
}

// countedFailures are the check answers that count towards unhealthy_threshold: every
// status but 503, which seed 003 says takes an endpoint out at once (Envoy would
// otherwise take it out on the first non-200 answer). Ranges are [start, end).
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
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: c.Name}
	if len(c.Endpoints) == 0 {
		return cla
	}
	lle := &endpointv3.LocalityLbEndpoints{}
	for _, ep := range c.Endpoints {
		lle.LbEndpoints = append(lle.LbEndpoints, lbEndpoint(ep.Address, ep.Port))
	}
	cla.Endpoints = []*endpointv3.LocalityLbEndpoints{lle}
	return cla
}

func lbEndpoint(host string, port int32) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
		Address: address(hostPort{host: host, port: uint32(port)}),
	}}}
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
