package proxy

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"maps"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/portico-dev/portico/internal/logbatch"
	"github.com/portico-dev/portico/internal/proxy/accesslog"
	"github.com/portico-dev/portico/internal/proxy/internal/sorted"
	"github.com/portico-dev/portico/internal/proxy/xdsclient"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const testNode = "test-node"

// ---------------------------------------------------------------------------
// Control plane: a real go-control-plane snapshot cache + ADS gRPC server.

type controlPlane struct {
	t     testing.TB
	cache cachev3.SnapshotCache
	addr  string

	mu       sync.Mutex
	grpc     *grpc.Server
	requests []*discoveryv3.DeltaDiscoveryRequest
	// sent holds each response by stream and nonce.
	sent map[streamNonce]*discoveryv3.DeltaDiscoveryResponse
	// known is, per stream and type, the resource versions the proxy has
	// ACKed: what it has applied.
	known      map[int64]map[string]map[string]string
	lastStream int64
	// servers counts serve calls: stream ids start again with each server, so a
	// stream is known as servers<<32 + its id.
	servers int64
	// snaps are the snapshots set, by version.
	snaps map[string]*cachev3.Snapshot
	// held are the types whose responses wait until their channel is closed.
	held map[string]chan struct{}
}

type streamNonce struct {
	stream int64
	nonce  string
}

func startControlPlane(t testing.TB) *controlPlane {
	t.Helper()
	cp := &controlPlane{
		t:     t,
		cache: cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil),
		sent:  make(map[streamNonce]*discoveryv3.DeltaDiscoveryResponse),
		known: make(map[int64]map[string]map[string]string),
		snaps: make(map[string]*cachev3.Snapshot),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cp.addr = ln.Addr().String()
	cp.serve(ln)
	t.Cleanup(cp.stop)
	return cp
}

func (cp *controlPlane) serve(ln net.Listener) {
	cp.mu.Lock()
	cp.servers++
	base := cp.servers << 32
	cp.mu.Unlock()
	srv := serverv3.NewServer(context.Background(), cp.cache, serverv3.CallbackFuncs{
		StreamDeltaRequestFunc: func(stream int64, req *discoveryv3.DeltaDiscoveryRequest) error {
			cp.mu.Lock()
			defer cp.mu.Unlock()
			cp.requests = append(cp.requests, proto.Clone(req).(*discoveryv3.DeltaDiscoveryRequest))
			cp.track(base+stream, req)
			return nil
		},
		StreamDeltaResponseFunc: func(stream int64, _ *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
			cp.mu.Lock()
			cp.sent[streamNonce{base + stream, resp.GetNonce()}] = resp
			gate := cp.held[resp.GetTypeUrl()]
			cp.mu.Unlock()
			if gate != nil {
				<-gate // the server sends the response once this returns
			}
		},
	})
	g := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, srv)
	cp.mu.Lock()
	cp.grpc = g
	cp.mu.Unlock()
	go func() { _ = g.Serve(ln) }()
}

// hold keeps the responses of typeURL (and every response after them on their
// stream) from being sent until release is called.
func (cp *controlPlane) hold(typeURL string) (release func()) {
	gate := make(chan struct{})
	cp.mu.Lock()
	if cp.held == nil {
		cp.held = map[string]chan struct{}{}
	}
	cp.held[typeURL] = gate
	cp.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			cp.mu.Lock()
			delete(cp.held, typeURL)
			cp.mu.Unlock()
			close(gate)
		})
	}
	cp.t.Cleanup(release)
	return release
}

// stop kills the server and its streams (the proxy sees the server go away).
func (cp *controlPlane) stop() {
	cp.mu.Lock()
	g := cp.grpc
	cp.grpc = nil
	cp.mu.Unlock()
	if g != nil {
		g.Stop()
	}
}

// restart serves again on the same address with the same cache.
func (cp *controlPlane) restart() {
	cp.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the old socket may linger briefly
		if ln, err = net.Listen("tcp", cp.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		cp.t.Fatal(err)
	}
	cp.serve(ln)
}

// track follows what the proxy holds on stream, from its requests: the
// versions it starts a subscription with, then each response it ACKs.
func (cp *controlPlane) track(stream int64, req *discoveryv3.DeltaDiscoveryRequest) {
	if cp.known[stream] == nil {
		cp.known[stream] = make(map[string]map[string]string)
		cp.lastStream = max(cp.lastStream, stream)
	}
	typeURL := req.GetTypeUrl()
	if len(req.GetResourceNamesSubscribe()) > 0 {
		cp.known[stream][typeURL] = maps.Clone(req.GetInitialResourceVersions())
	}
	resp := cp.sent[streamNonce{stream, req.GetResponseNonce()}]
	if resp == nil || req.GetErrorDetail() != nil {
		return
	}
	known := cp.known[stream][typeURL]
	if known == nil {
		known = make(map[string]string)
		cp.known[stream][typeURL] = known
	}
	for _, r := range resp.GetResources() {
		known[r.GetName()] = r.GetVersion()
	}
	for _, name := range resp.GetRemovedResources() {
		delete(known, name)
	}
}

func (cp *controlPlane) set(version string, res resources) {
	cp.t.Helper()
	snap, err := cachev3.NewSnapshot(version, res.byType())
	if err != nil {
		cp.t.Fatal(err)
	}
	if err := snap.ConstructVersionMap(); err != nil {
		cp.t.Fatal(err)
	}
	cp.mu.Lock()
	cp.snaps[version] = snap
	cp.mu.Unlock()
	if err := cp.cache.SetSnapshot(context.Background(), testNode, snap); err != nil {
		cp.t.Fatal(err)
	}
}

// nacks returns the NACKs (requests with error_detail) received so far.
func (cp *controlPlane) nacks() []*discoveryv3.DeltaDiscoveryRequest {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	var out []*discoveryv3.DeltaDiscoveryRequest
	for _, r := range cp.requests {
		if r.GetErrorDetail() != nil {
			out = append(out, r)
		}
	}
	return out
}

// expectNACK waits for a NACK of a response of typeURL, and checks that it
// is of version, with a detail containing want.
func (cp *controlPlane) expectNACK(t testing.TB, typeURL, version, want string) {
	t.Helper()
	var nack *discoveryv3.DeltaDiscoveryRequest
	waitFor(t, "NACK", func() bool {
		for _, n := range cp.nacks() {
			if n.GetTypeUrl() == typeURL {
				nack = n
				return true
			}
		}
		return false
	})
	if v := cp.responseVersion(nack); v != version || !strings.Contains(nack.GetErrorDetail().GetMessage(), want) {
		t.Errorf("NACK of the %q response, detail %q; want a NACK of %s with detail containing %q",
			v, nack.GetErrorDetail().GetMessage(), version, want)
	}
}

// responseVersion is the system version of the response nack answers.
func (cp *controlPlane) responseVersion(nack *discoveryv3.DeltaDiscoveryRequest) string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for k, resp := range cp.sent {
		if k.stream == cp.lastStream && k.nonce == nack.GetResponseNonce() {
			return resp.GetSystemVersionInfo()
		}
	}
	return ""
}

// acked reports whether the proxy has acknowledged a response of typeURL at version.
func (cp *controlPlane) acked(typeURL, version string) bool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, r := range cp.requests {
		if r.GetErrorDetail() != nil || r.GetResponseNonce() == "" {
			continue
		}
		for k, resp := range cp.sent {
			if k.nonce == r.GetResponseNonce() && resp.GetTypeUrl() == typeURL && resp.GetSystemVersionInfo() == version {
				return true
			}
		}
	}
	return false
}

// holds reports whether the proxy, on its latest stream, has ACKed every
// resource of the snapshot set as version, and holds nothing else: the proxy
// ACKs after applying, so that snapshot is in force. (A delta server sends
// only what differs from what the proxy holds, so a version may never be named
// in a response: the proxy can reach it through earlier ones.)
func (cp *controlPlane) holds(version string) bool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	snap := cp.snaps[version]
	if snap == nil {
		return false
	}
	for _, typeURL := range xdsclient.SubscribedTypes {
		if !maps.Equal(cp.known[cp.lastStream][typeURL], snap.GetVersionMap(typeURL)) {
			return false
		}
	}
	return true
}

// resources is one snapshot's content.
type resources struct {
	listeners []*listenerv3.Listener
	routes    []*routev3.RouteConfiguration
	clusters  []*clusterv3.Cluster
	endpoints []*endpointv3.ClusterLoadAssignment
	secrets   []*tlsv3.Secret
	vhosts    []*routev3.VirtualHost // VHDS
}

func (r resources) byType() map[resourcev3.Type][]types.Resource {
	m := map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType: {}, resourcev3.RouteType: {}, resourcev3.ClusterType: {},
		resourcev3.EndpointType: {}, resourcev3.SecretType: {}, resourcev3.VirtualHostType: {},
	}
	for _, x := range r.listeners {
		m[resourcev3.ListenerType] = append(m[resourcev3.ListenerType], x)
	}
	for _, x := range r.routes {
		m[resourcev3.RouteType] = append(m[resourcev3.RouteType], x)
	}
	for _, x := range r.clusters {
		m[resourcev3.ClusterType] = append(m[resourcev3.ClusterType], x)
	}
	for _, x := range r.endpoints {
		m[resourcev3.EndpointType] = append(m[resourcev3.EndpointType], x)
	}
	for _, x := range r.secrets {
		m[resourcev3.SecretType] = append(m[resourcev3.SecretType], x)
	}
	for _, x := range r.vhosts {
		m[resourcev3.VirtualHostType] = append(m[resourcev3.VirtualHostType], x)
	}
	return m
}

// ---------------------------------------------------------------------------
// xDS builders: exactly the shapes of docs/dev/xds-contract.md.

func mustAny(t testing.TB, m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

func hcmFilter(t testing.TB, routeName string) *listenerv3.Filter {
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "ingress",
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource: adsSource(), RouteConfigName: routeName,
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})},
		}},
		UseRemoteAddress:             wrapperspb.Bool(true),
		ServerName:                   "portico",
		AlwaysSetRequestIdInResponse: true,
		NormalizePath:                wrapperspb.Bool(true),
		StripPortMode:                &hcmv3.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: true},
		AccessLog: []*accesslogv3.AccessLog{{
			Name:       "envoy.access_loggers.stdout",
			ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &streamv3.StdoutAccessLog{})},
		}},
	}
	return &listenerv3.Filter{
		Name:       "envoy.filters.network.http_connection_manager",
		ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, h)},
	}
}

func httpListener(t testing.TB) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name:         "ingress_http",
		Address:      socketAddress("0.0.0.0", 8080),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{hcmFilter(t, "ingress_http")}}},
	}
}

// httpsListener has one chain per server name, routing to "https/<name>" and
// using the secret "<ns>/<name>".
func httpsListener(t testing.TB, serverNames ...string) *listenerv3.Listener {
	l := &listenerv3.Listener{
		Name:    "ingress_https",
		Address: socketAddress("0.0.0.0", 8443),
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name:       "envoy.filters.listener.tls_inspector",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(t, &tlsinspectorv3.TlsInspector{})},
		}},
	}
	for _, n := range serverNames {
		dtc := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: secretName(n), SdsConfig: adsSource()}},
			AlpnProtocols:                  []string{"h2", "http/1.1"},
			TlsParams: &tlsv3.TlsParameters{
				TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2,
				TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
			},
		}}
		l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{
			FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{n}},
			TransportSocket: &corev3.TransportSocket{
				Name:       "envoy.transport_sockets.tls",
				ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, dtc)},
			},
			Filters: []*listenerv3.Filter{hcmFilter(t, "https/"+n)},
		})
	}
	return l
}

func secretName(serverName string) string {
	return "default/" + strings.ReplaceAll(serverName, "*", "wildcard")
}

func routeConfig(name string, vhosts ...*routev3.VirtualHost) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: vhosts}
}

func vhost(domain string, routes ...*routev3.Route) *routev3.VirtualHost {
	return &routev3.VirtualHost{Name: domain, Domains: []string{domain}, Routes: routes}
}

// wildcardVhost is how the translator emits "*.suffix" hosts: the vhost
// matches any depth, and every route pins exactly one label.
func wildcardVhost(domain string, routes ...*routev3.Route) *routev3.VirtualHost {
	suffix := strings.TrimPrefix(domain, "*")
	re := "^[^.]+" + strings.ReplaceAll(suffix, ".", `\.`) + "$"
	for _, r := range routes {
		r.Match.Headers = append(r.Match.Headers, &routev3.HeaderMatcher{
			Name: ":authority",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: re}},
			}},
		})
	}
	return vhost(domain, routes...)
}

func prefixMatch(p string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
}

func exactMatch(p string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: p}}
}

func separatedMatch(p string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: p}}
}

func regexMatch(re string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: re}}}
}

func withHeaders(m *routev3.RouteMatch, hs ...*routev3.HeaderMatcher) *routev3.RouteMatch {
	m.Headers = append(m.Headers, hs...)
	return m
}

func headerString(name string, sm *matcherv3.StringMatcher) *routev3.HeaderMatcher {
	return &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: sm}}
}

func toCluster(name string, m *routev3.RouteMatch) *routev3.Route {
	return &routev3.Route{Name: "to-" + name, Match: m, Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name},
	}}}
}

func withAction(r *routev3.Route, f func(a *routev3.RouteAction)) *routev3.Route {
	f(r.GetRoute())
	return r
}

func weighted(m *routev3.RouteMatch, weights map[string]uint32) *routev3.Route {
	wc := &routev3.WeightedCluster{}
	for _, name := range sorted.Keys(weights) {
		wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{Name: name, Weight: wrapperspb.UInt32(weights[name])})
	}
	return &routev3.Route{Match: m, Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: wc},
	}}}
}

func edsCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource(), ServiceName: name},
		ConnectTimeout:       durationpb.New(2 * time.Second),
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
	}
}

func assignment(name string, addrs ...string) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	loc := &endpointv3.LocalityLbEndpoints{}
	for _, a := range addrs {
		host, port := splitHostPort(a)
		loc.LbEndpoints = append(loc.LbEndpoints, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socketAddress(host, port)}},
		})
	}
	if len(addrs) > 0 {
		cla.Endpoints = []*endpointv3.LocalityLbEndpoints{loc}
	}
	return cla
}

func dnsCluster(name, hostPort string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS},
		LoadAssignment:       assignment(name, hostPort),
		ConnectTimeout:       durationpb.New(2 * time.Second),
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
	}
}

func splitHostPort(a string) (string, uint32) {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		panic(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		panic(err)
	}
	return host, uint32(n)
}

func tlsSecret(name string, certPEM, keyPEM []byte) *tlsv3.Secret {
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: certPEM}},
		PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: keyPEM}},
	}}}
}

// ---------------------------------------------------------------------------
// Backends that echo who answered and what they received.

type echo struct {
	Backend string      `json:"backend"`
	Path    string      `json:"path"`
	Host    string      `json:"host"`
	Header  http.Header `json:"header"`
}

type backend struct {
	name string
	srv  *httptest.Server
}

func (b *backend) addr() string { return b.srv.Listener.Addr().String() }

// startBackend echoes the request as JSON. "?sleep=<duration>" delays the
// answer; the backend sets its own Server header, which the proxy overwrites.
func startBackend(t testing.TB, name string) *backend {
	t.Helper()
	srv := httptest.NewServer(backendHandler(name))
	t.Cleanup(srv.Close)
	return &backend{name: name, srv: srv}
}

// startBackendOn is startBackend serving on ln.
func startBackendOn(t testing.TB, name string, ln net.Listener) *backend {
	t.Helper()
	srv := httptest.NewUnstartedServer(backendHandler(name))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return &backend{name: name, srv: srv}
}

func backendHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Server", "backend-"+name)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echo{Backend: name, Path: r.URL.RequestURI(), Host: r.Host, Header: r.Header})
	})
}

// rawBackend accepts TCP connections, writes reply (if any), and closes
// them: a malformed HTTP response, or a reset when reply is empty.
func rawBackend(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				buf := make([]byte, 4096)
				_, _ = conn.Read(buf) // the request head
				if reply != "" {
					_, _ = conn.Write([]byte(reply))
				} else if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // RST instead of FIN
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// ---------------------------------------------------------------------------
// The proxy under test.

type testProxy struct {
	*Proxy
	cp   *controlPlane
	logs *logCapture
	reg  *prometheus.Registry
	// stop cancels Run and waits for it to return (the test's cleanup does it too).
	stop func()
}

func startProxy(t testing.TB, cp *controlPlane) *testProxy {
	t.Helper()
	return startProxyOn(t, cp, map[string]string{"ingress_http": "127.0.0.1:0", "ingress_https": "127.0.0.1:0"})
}

// startProxyOn starts a proxy binding its listeners at addrs.
func startProxyOn(t testing.TB, cp *controlPlane, addrs map[string]string) *testProxy {
	t.Helper()
	return startProxyWith(t, cp, addrs, nil, accesslog.Queue)
}

// startProxyWith starts a proxy binding its listeners at addrs, logging
// through sink (given the capture the test searches; nil: to it through a
// logbatch.Writer), with room for queue access log lines. A sink that is a
// LogBatcher batches the access log's lines.
func startProxyWith(t testing.TB, cp *controlPlane, addrs map[string]string, sink func(*logCapture) io.Writer, queue int) *testProxy {
	t.Helper()
	return startProxyConfig(t, cp, addrs, sink, queue, nil)
}

// startProxyConfig is startProxyWith with the Config changed by edit (nil: none).
func startProxyConfig(t testing.TB, cp *controlPlane, addrs map[string]string, sink func(*logCapture) io.Writer, queue int, edit func(*Config)) *testProxy {
	t.Helper()
	logs := &logCapture{}
	var w io.Writer = logbatch.New(logs) // as the command line's proxies log
	if sink != nil {
		w = sink(logs)
	}
	batcher, _ := w.(LogBatcher)
	reg := prometheus.NewRegistry()
	cfg := Config{
		XDSAddress:    cp.addr,
		NodeID:        testNode,
		ListenerAddrs: addrs,
		Logger:        accesslog.NewLogger(w, true, slog.LevelDebug), // request lines written by the access log itself, as portico run does
		Registerer:    reg,
		LogBatcher:    batcher,
	}
	if edit != nil {
		edit(&cfg)
	}
	p := New(cfg)
	p.accessLog = accesslog.New(p.log, batcher, p.metrics.accessLogDropped, queue)
	p.hcm.AccessLog = p.accessLog
	p.listeners.AccessLog = p.accessLog
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() || os.Getenv("PROXY_TEST_LOGS") != "" {
			t.Logf("proxy log:\n%s", logs.String())
		}
	})
	return &testProxy{Proxy: p, cp: cp, logs: logs, reg: reg, stop: stop}
}

// waitVersion waits until the snapshot set as version is applied in full:
// with delta xDS each type of an update arrives in its own response, and a
// version whose changes the proxy already has is not sent at all.
func (tp *testProxy) waitVersion(t testing.TB, version string) {
	t.Helper()
	waitFor(t, "applied version "+version, func() bool { return tp.cp.holds(version) })
}

func (tp *testProxy) httpURL(t *testing.T, path string) string {
	t.Helper()
	addr := tp.ListenerAddr("ingress_http")
	if addr == "" {
		t.Fatal("ingress_http is not bound")
	}
	return "http://" + addr + path
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logCapture is a concurrency-safe slog sink that tests can search.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logCapture) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logCapture) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// records returns the decoded JSON log records with the given message.
func (l *logCapture) records(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(l.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Clients.

// result is what a test checks about one response.
type result struct {
	Status  int
	Backend string
	Path    string
	Body    string
	Header  http.Header // response header
	Echo    echo
	Proto   string
}

func do(t *testing.T, c *http.Client, req *http.Request) result {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	res := result{Status: resp.StatusCode, Body: string(body), Header: resp.Header, Proto: resp.Proto}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(body, &res.Echo); err == nil {
			res.Backend, res.Path = res.Echo.Backend, res.Echo.Path
		}
	}
	return res
}

func get(t *testing.T, c *http.Client, url, host string, headers map[string]string) result {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return do(t, c, req)
}

func noRedirectClient() *http.Client {
	return &http.Client{
		Timeout:       10 * time.Second,
		Transport:     &http.Transport{MaxIdleConnsPerHost: 64},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// ---------------------------------------------------------------------------
// Certificates.

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "portico test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue returns PEM certificate and key for dnsName, carrying uris as URI SANs
// too (written as given: a scheme keeps its case).
func (ca *testCA) issue(t *testing.T, dnsName string, uris ...*url.URL) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: dnsName},
		DNSNames:     []string{dnsName},
		URIs:         uris,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// tlsClient connects every request to addr, whatever the URL's host, so that
// the URL's host becomes the SNI; HTTP/2 is offered through ALPN.
func tlsClient(addr string, roots *x509.CertPool) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			ForceAttemptHTTP2: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
