package proxy

import (
	"crypto/tls"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestConvertContractListeners(t *testing.T) {
	ls, err := convertListener(httpListener(t))
	if err != nil {
		t.Fatal(err)
	}
	h := ls.chains[0].hcm
	got := map[string]any{
		"address": ls.address, "tls": ls.tls, "rds": h.RdsName, "server": h.ServerName,
		"xff": h.Client.UseRemoteAddress, "normalize": h.NormalizePath, "accessLog": h.AccessLog, "requestID": h.GenerateRequestID,
	}
	want := map[string]any{
		"address": "0.0.0.0:8080", "tls": false, "rds": "ingress_http", "server": "portico",
		"xff": true, "normalize": true, "accessLog": true, "requestID": true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HTTP listener (-want +got):\n%s", diff)
	}

	ls, err = convertListener(httpsListener(t, "a.example.com", "*.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if !ls.tls || len(ls.chains) != 2 {
		t.Fatalf("HTTPS listener: tls=%v chains=%d", ls.tls, len(ls.chains))
	}
	ts := ls.chains[1].tls
	gotTLS := map[string]any{"names": ls.chains[1].serverNames, "secrets": ts.SecretNames, "alpn": ts.Alpn, "min": ts.MinVersion, "max": ts.MaxVersion, "rds": ls.chains[1].hcm.RdsName}
	wantTLS := map[string]any{"names": []string{"*.example.com"}, "secrets": []string{"default/wildcard.example.com"}, "alpn": []string{"h2", "http/1.1"},
		"min": uint16(tls.VersionTLS12), "max": uint16(tls.VersionTLS13), "rds": "https/*.example.com"}
	if diff := cmp.Diff(wantTLS, gotTLS); diff != "" {
		t.Errorf("HTTPS chain (-want +got):\n%s", diff)
	}
}

// modifyHCM returns the contract listener with its HCM changed by f.
func modifyHCM(t testing.TB, f func(h *hcmv3.HttpConnectionManager)) *listenerv3.Listener {
	t.Helper()
	l := httpListener(t)
	var h hcmv3.HttpConnectionManager
	if err := l.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&h); err != nil {
		t.Fatal(err)
	}
	f(&h)
	l.FilterChains[0].Filters[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, &h)}
	return l
}

func TestConvertListenerRejects(t *testing.T) {
	tests := []struct {
		name string
		l    func(t *testing.T) *listenerv3.Listener
		want string
	}{
		{"unknown http filter", func(t *testing.T) *listenerv3.Listener {
			return modifyHCM(t, func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "envoy.filters.http.ext_authz"}}, h.HttpFilters...)
			})
		}, "only typed_config is supported"},
		{"scoped routes", func(t *testing.T) *listenerv3.Listener {
			return modifyHCM(t, func(h *hcmv3.HttpConnectionManager) {
				h.RouteSpecifier = &hcmv3.HttpConnectionManager_ScopedRoutes{ScopedRoutes: &hcmv3.ScopedRoutes{}}
			})
		}, "route specifier"},
		{"non-ADS RDS source", func(t *testing.T) *listenerv3.Listener {
			return modifyHCM(t, func(h *hcmv3.HttpConnectionManager) {
				h.GetRds().ConfigSource = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Path{Path: "/etc/rds.yaml"}}
			})
		}, "only ads"},
		{"HTTP/3 codec", func(t *testing.T) *listenerv3.Listener {
			return modifyHCM(t, func(h *hcmv3.HttpConnectionManager) { h.CodecType = hcmv3.HttpConnectionManager_HTTP3 })
		}, "codec_type HTTP3"},
		{"unknown network filter", func(t *testing.T) *listenerv3.Listener {
			l := httpListener(t)
			l.FilterChains[0].Filters = append(l.FilterChains[0].Filters, &listenerv3.Filter{Name: "envoy.filters.network.tcp_proxy"})
			return l
		}, "exactly one network filter"},
		{"unknown listener filter", func(t *testing.T) *listenerv3.Listener {
			l := httpListener(t)
			l.ListenerFilters = []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.original_dst"}}
			return l
		}, "listener filter"},
		{"PROXY protocol after the TLS inspector", func(t *testing.T) *listenerv3.Listener {
			l := httpsListener(t, "a.example.com")
			l.ListenerFilters = append(l.ListenerFilters, &listenerv3.ListenerFilter{Name: "envoy.filters.listener.proxy_protocol"})
			return l
		}, "must come before the TLS inspector"},
		{"PROXY protocol TLV rules", func(t *testing.T) *listenerv3.Listener {
			l := httpListener(t)
			pp := &proxyprotocolv3.ProxyProtocol{Rules: []*proxyprotocolv3.ProxyProtocol_Rule{{TlvType: 0x04}}}
			l.ListenerFilters = []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.proxy_protocol",
				ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(t, pp)}}}
			return l
		}, "rules"},
		{"PROXY protocol twice", func(t *testing.T) *listenerv3.Listener {
			l := httpListener(t)
			l.ListenerFilters = []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.proxy_protocol"}, {Name: "envoy.filters.listener.proxy_protocol"}}
			return l
		}, "twice"},
		{"two plaintext chains", func(t *testing.T) *listenerv3.Listener {
			l := httpListener(t)
			l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{
				FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(1)},
				Filters:          l.FilterChains[0].Filters,
			})
			return l
		}, "destination_port"},
		{"duplicate server name", func(t *testing.T) *listenerv3.Listener {
			return httpsListener(t, "a.example.com", "A.example.com")
		}, "more than one filter chain"},
		{"client certificates", func(t *testing.T) *listenerv3.Listener {
			l := httpsListener(t, "a.example.com")
			var dtc tlsv3.DownstreamTlsContext
			_ = l.FilterChains[0].TransportSocket.GetTypedConfig().UnmarshalTo(&dtc)
			dtc.RequireClientCertificate = wrapperspb.Bool(true)
			l.FilterChains[0].TransportSocket.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, &dtc)}
			return l
		}, "require_client_certificate"},
		{"pipe address", func(t *testing.T) *listenerv3.Listener {
			l := httpListener(t)
			l.Address = &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: "/tmp/x"}}}
			return l
		}, "only socket_address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := convertListener(tc.l(t))
			if err == nil {
				t.Fatal("accepted, want a rejection")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestConvertClusters(t *testing.T) {
	spec, err := upstream.ConvertCluster(edsCluster("ns/svc/80"))
	if err != nil {
		t.Fatal(err)
	}
	if spec.Kind != upstream.ClusterEDS || spec.ServiceName != "ns/svc/80" || spec.ConnectTimeout.Seconds() != 2 {
		t.Errorf("EDS cluster: %+v", spec)
	}
	spec, err = upstream.ConvertCluster(dnsCluster("ns/ext/80", "example.org:80"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"example.org:80"}, spec.Endpoints); spec.Kind != upstream.ClusterInline || diff != "" {
		t.Errorf("STRICT_DNS cluster: %+v %s", spec, diff)
	}

	rejects := []struct {
		name   string
		mutate func(c *clusterv3.Cluster)
		want   string
	}{
		{"original dst", func(c *clusterv3.Cluster) {
			c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST}
		}, "cluster type ORIGINAL_DST"},
		{"cluster provided lb", func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_CLUSTER_PROVIDED }, "lb_policy CLUSTER_PROVIDED"},
		{"upstream TLS", func(c *clusterv3.Cluster) { c.TransportSocket = &corev3.TransportSocket{Name: "tls"} }, "transport_socket"},
		{"health checks", func(c *clusterv3.Cluster) { c.HealthChecks = []*corev3.HealthCheck{{}} }, "health_checks"},
		{"non-ADS EDS", func(c *clusterv3.Cluster) {
			c.EdsClusterConfig.EdsConfig = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Path{Path: "x"}}
		}, "only ads"},
	}
	for _, tc := range rejects {
		t.Run(tc.name, func(t *testing.T) {
			c := edsCluster("c")
			tc.mutate(c)
			_, err := upstream.ConvertCluster(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestConvertAssignment(t *testing.T) {
	cla := assignment("c", "10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80")
	cla.Endpoints[0].LbEndpoints[1].HealthStatus = corev3.HealthStatus_UNHEALTHY
	a, err := upstream.ConvertEDSAssignment(cla)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"10.0.0.1:80", "10.0.0.3:80"}, a.Endpoints); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
	if a, err := upstream.ConvertEDSAssignment(assignment("c")); err != nil || len(a.Endpoints) != 0 {
		t.Errorf("empty assignment: %v %v", a, err)
	}
	if _, err := upstream.ConvertEDSAssignment(assignment("c", "backend.local:80")); err == nil || !strings.Contains(err.Error(), "IP address") {
		t.Errorf("hostname in EDS: %v", err)
	}
	prio := assignment("c", "10.0.0.1:80")
	prio.Endpoints = append(prio.Endpoints, &endpointv3.LocalityLbEndpoints{Priority: 1})
	if _, err := upstream.ConvertEDSAssignment(prio); err == nil || !strings.Contains(err.Error(), "priorities") {
		t.Errorf("priority: %v", err)
	}
}

func TestDecode(t *testing.T) {
	p := New(Config{})
	ok := deltaResource("rc", mustAny(t, routeConfig("rc", vhost("*", toCluster("c", prefixMatch("/"))))))
	if got, err := p.decode(resourcev3.RouteType, []*discoveryv3.Resource{ok}, nil); err != nil || len(got) != 1 {
		t.Fatalf("decode: %v %v", got, err)
	}
	tests := []struct {
		name    string
		typeURL string
		res     []*discoveryv3.Resource
		want    string
	}{
		{"duplicate names", resourcev3.RouteType, []*discoveryv3.Resource{ok, ok}, `RouteConfiguration "rc": duplicate`},
		{"wrong type", resourcev3.ClusterType, []*discoveryv3.Resource{ok}, "in a response for"},
		{"unsupported type", resourcev3.RuntimeType, nil, "unsupported resource type"},
		{"name differs", resourcev3.RouteType, []*discoveryv3.Resource{deltaResource("other", ok.GetResource())}, `RouteConfiguration "rc": sent under the name "other"`},
		{"no resource", resourcev3.RouteType, []*discoveryv3.Resource{{Name: "rc"}}, `"rc": no resource`},
		{"fails ValidateAll", resourcev3.RouteType, []*discoveryv3.Resource{deltaResource("v", mustAny(t, &routev3.RouteConfiguration{
			Name: "v", VirtualHosts: []*routev3.VirtualHost{{Name: "no-domains"}},
		}))}, `RouteConfiguration "v": invalid`},
		{"broken secret", resourcev3.SecretType, []*discoveryv3.Resource{deltaResource("ns/s", mustAny(t, tlsSecret("ns/s", []byte("x"), []byte("y"))))}, `Secret "ns/s": invalid key pair`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.decode(tc.typeURL, tc.res, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// deltaResource wraps a as a delta response's resource.
func deltaResource(name string, a *anypb.Any) *discoveryv3.Resource {
	return &discoveryv3.Resource{Name: name, Version: "1", Resource: a}
}
