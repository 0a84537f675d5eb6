package server

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/internal/xds/translate"
)

var allTypes = []string{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType, resource.SecretType}

var ads = &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}

func edsCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads},
	}
}

func assignment(name string) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: name}
}

func httpListener(t testing.TB, rds string) *listenerv3.Listener {
	t.Helper()
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		t.Fatal(err)
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix:     "http",
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{ConfigSource: ads, RouteConfigName: rds}},
		HttpFilters:    []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.Listener{
		Name: rds,
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080},
		}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
		}}}},
	}
}

// routes is a route configuration with one virtual host per cluster.
func routes(name string, clusters ...string) *routev3.RouteConfiguration {
	rc := &routev3.RouteConfiguration{Name: name}
	for _, c := range clusters {
		rc.VirtualHosts = append(rc.VirtualHosts, &routev3.VirtualHost{
			Name: c, Domains: []string{c + ".example.com"},
			Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: c}}},
			}},
		})
	}
	return rc
}

// config is a listener and route configuration routing to clusters, each with its EDS.
func config(t testing.TB, clusters ...string) *translate.Resources {
	res := &translate.Resources{
		Listeners: []types.Resource{httpListener(t, "ingress_http")},
		Routes:    []types.Resource{routes("ingress_http", clusters...)},
	}
	for _, c := range clusters {
		res.Clusters = append(res.Clusters, edsCluster(c))
		res.Endpoints = append(res.Endpoints, assignment(c))
	}
	return res
}

// clone returns res with every resource copied: equal content, new pointers.
func clone(res *translate.Resources) *translate.Resources {
	cp := func(in []types.Resource) []types.Resource {
		out := make([]types.Resource, len(in))
		for i, r := range in {
			out[i] = proto.Clone(r)
		}
		return out
	}
	return &translate.Resources{Listeners: cp(res.Listeners), Routes: cp(res.Routes), Clusters: cp(res.Clusters),
		Endpoints: cp(res.Endpoints), Secrets: cp(res.Secrets)}
}

func serve(t *testing.T, s *Server) discoveryv3.AggregatedDiscoveryServiceClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Serve(ctx, ln); err != nil {
			t.Error(err)
		}
	}()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		<-done
	})
	return discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
}

func publish(t *testing.T, s *Server, res *translate.Resources) string {
	t.Helper()
	v, err := s.Publish(context.Background(), res)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// deltaClient subscribes to every type with a wildcard and ACKs every response.
type deltaClient struct {
	t *testing.T
	s discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
}

func newDeltaClient(t *testing.T, c discoveryv3.AggregatedDiscoveryServiceClient, known map[string]map[string]string) *deltaClient {
	t.Helper()
	s := openDeltaStream(t, c)
	for _, typeURL := range allTypes {
		req := &discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "test"}, TypeUrl: typeURL,
			ResourceNamesSubscribe: []string{"*"}, InitialResourceVersions: known[typeURL]}
		if err := s.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	return &deltaClient{t: t, s: s}
}

func (c *deltaClient) recv() *discoveryv3.DeltaDiscoveryResponse {
	c.t.Helper()
	resp, err := c.s.Recv()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}); err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// openDeltaStream opens a delta ADS stream, closed when the test ends.
func openDeltaStream(t *testing.T, c discoveryv3.AggregatedDiscoveryServiceClient) discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := c.DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// summaries receives n responses and returns their summaries.
func (c *deltaClient) summaries(n int) []string {
	c.t.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = summary(c.recv())
	}
	return out
}

// summary is a delta response as "Type v<version> +updated -removed".
func summary(resp *discoveryv3.DeltaDiscoveryResponse) string {
	s := shortType(resp.GetTypeUrl()) + " v" + resp.GetSystemVersionInfo()
	var names []string
	for _, r := range resp.GetResources() {
		names = append(names, r.GetName())
	}
	slices.Sort(names)
	for _, n := range names {
		s += " +" + n
	}
	removed := slices.Sorted(slices.Values(resp.GetRemovedResources()))
	for _, n := range removed {
		s += " -" + n
	}
	return s
}

func TestDeltaSendsWhatChangedOnly(t *testing.T) {
	s := New(slog.New(slog.DiscardHandler), nil)
	c := newDeltaClient(t, serve(t, s), nil)
	v1 := config(t, "a", "b")
	publish(t, s, v1)
	first := c.summaries(len(allTypes))
	want := []string{"Cluster v1 +a +b", "ClusterLoadAssignment v1 +a +b", "Listener v1 +ingress_http",
		"RouteConfiguration v1 +ingress_http", "Secret v1"}
	if !slices.Equal(first, want) {
		t.Fatalf("first responses %q, want %q", first, want)
	}

	// The same content again, as new pointers (a full rebuild): nothing to send.
	publish(t, s, clone(v1))
	// Then one new cluster, routed to: only it, its endpoints and the routes go out.
	v3 := publish(t, s, config(t, "a", "b", "c"))
	got := c.summaries(3)
	want = []string{"Cluster v" + v3 + " +c", "ClusterLoadAssignment v" + v3 + " +c", "RouteConfiguration v" + v3 + " +ingress_http"}
	if !slices.Equal(got, want) {
		t.Errorf("after adding a cluster: %q, want %q", got, want)
	}
}

// TestRemovalsFollowTheRoutesThatStopUsingThem checks Envoy's make-before-break
// order: a cluster disappears only after the routes that no longer use it.
func TestRemovalsFollowTheRoutesThatStopUsingThem(t *testing.T) {
	s := New(slog.New(slog.DiscardHandler), nil)
	c := newDeltaClient(t, serve(t, s), nil)
	publish(t, s, config(t, "a", "b"))
	for range allTypes {
		c.recv()
	}
	// The server can only push on a type once the client has ACKed its previous
	// response of that type: wait for those ACKs, as a client at rest has sent them.
	waitFor(t, "the client's ACKs", func() bool {
		return s.cache.numWatches() == len(allTypes)
	})
	v := publish(t, s, config(t, "a"))
	got := c.summaries(3)
	// The routes go out with the interim snapshot that still has the cluster.
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatal(err)
	}
	interim := strconv.Itoa(n - 1)
	want := []string{"RouteConfiguration v" + interim + " +ingress_http", "Cluster v" + v + " -b", "ClusterLoadAssignment v" + v + " -b"}
	if !slices.Equal(got, want) {
		t.Errorf("responses %q, want %q", got, want)
	}
}

func TestReconnectSendsOnlyWhatChangedMeanwhile(t *testing.T) {
	s := New(slog.New(slog.DiscardHandler), nil)
	client := serve(t, s)
	publish(t, s, config(t, "a", "b"))
	c := newDeltaClient(t, client, nil)
	known := map[string]map[string]string{}
	for range allTypes {
		resp := c.recv()
		known[resp.GetTypeUrl()] = map[string]string{}
		for _, r := range resp.GetResources() {
			known[resp.GetTypeUrl()][r.GetName()] = r.GetVersion()
		}
	}
	// A new stream with the versions held: only the changed cluster's endpoints
	// (and the empty first answers of wildcard subscriptions) come back.
	changed := config(t, "a", "b")
	changed.Endpoints[1] = &endpointv3.ClusterLoadAssignment{ClusterName: "b", Endpoints: []*endpointv3.LocalityLbEndpoints{{}}}
	v := publish(t, s, changed)
	c2 := newDeltaClient(t, client, known)
	got := c2.summaries(len(allTypes))
	// Each type keeps the version of the publish that last changed it.
	want := []string{"Cluster v1", "ClusterLoadAssignment v" + v + " +b", "Listener v1", "RouteConfiguration v1", "Secret v1"}
	if !slices.Equal(got, want) {
		t.Errorf("after reconnecting: %q, want %q", got, want)
	}
}

func TestStateOfTheWorldClientsAreStillServed(t *testing.T) {
	s := New(slog.New(slog.DiscardHandler), nil)
	client := serve(t, s)
	publish(t, s, config(t, "a", "b"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := client.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// As Envoy does over SotW ADS: wildcards for listeners and clusters, names for
	// route configurations and endpoints.
	node := &corev3.Node{Id: "envoy"}
	for _, req := range []*discoveryv3.DiscoveryRequest{
		{Node: node, TypeUrl: resource.ClusterType},
		{Node: node, TypeUrl: resource.EndpointType, ResourceNames: []string{"a", "b"}},
		{Node: node, TypeUrl: resource.ListenerType},
		{Node: node, TypeUrl: resource.RouteType, ResourceNames: []string{"ingress_http"}},
	} {
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() *discoveryv3.DiscoveryResponse {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		ack := &discoveryv3.DiscoveryRequest{TypeUrl: resp.GetTypeUrl(), VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}
		if resp.GetTypeUrl() == resource.EndpointType {
			ack.ResourceNames = []string{"a", "b"}
		}
		if resp.GetTypeUrl() == resource.RouteType {
			ack.ResourceNames = []string{"ingress_http"}
		}
		if err := stream.Send(ack); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	counts := map[string]int{}
	for range 4 {
		resp := recv()
		counts[shortType(resp.GetTypeUrl())] = len(resp.GetResources())
	}
	want := map[string]int{"Cluster": 2, "ClusterLoadAssignment": 2, "Listener": 1, "RouteConfiguration": 1}
	if len(counts) != len(want) {
		t.Fatalf("SotW responses %v, want %v", counts, want)
	}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("SotW responses %v, want %v", counts, want)
		}
	}
	// A change reaches a SotW client too, as the full state of its type.
	changed := config(t, "a", "b")
	changed.Routes[0] = routes("ingress_http", "b", "a")
	v := publish(t, s, changed)
	for {
		resp := recv()
		if resp.GetTypeUrl() == resource.RouteType && resp.GetVersionInfo() == v {
			var rc routev3.RouteConfiguration
			if err := resp.GetResources()[0].UnmarshalTo(&rc); err != nil {
				t.Fatal(err)
			}
			if rc.GetVirtualHosts()[0].GetName() != "b" {
				t.Errorf("SotW client got the old route configuration")
			}
			return
		}
	}
}

func TestInconsistentPublishKeepsThePreviousState(t *testing.T) {
	s := New(slog.New(slog.DiscardHandler), nil)
	publish(t, s, config(t, "a"))
	bad := config(t, "a")
	bad.Endpoints = nil // cluster "a" references EDS "a"
	if _, err := s.Publish(context.Background(), bad); err == nil {
		t.Fatal("an inconsistent configuration was published")
	}
	// The state compared with is still the last published one: publishing it again
	// changes nothing, so the types keep the first publish's version.
	c := newDeltaClient(t, serve(t, s), nil)
	publish(t, s, config(t, "a"))
	if got := c.summaries(len(allTypes)); got[0] != "Cluster v1 +a" {
		t.Errorf("first responses %q", got)
	}
}

func TestUnchangedPointersAreNotRehashed(t *testing.T) {
	res := config(t, "a", "b")
	var st state
	for i, items := range inputs(res) {
		ts, _, err := st.set(i).next(items, "1", false)
		if err != nil {
			t.Fatal(err)
		}
		st[i] = ts
	}
	// The same slice: the same set, nothing looked at.
	if ts, d, _ := st[clusterIdx].next(res.Clusters, "2", false); ts != st[clusterIdx] || !d.empty() {
		t.Error("the same resources made a new set")
	}
	// A new slice reusing one pointer and changing the other.
	b := edsCluster("b")
	b.ConnectTimeout = durationpb.New(2 * time.Second)
	ts, d, err := st[clusterIdx].next([]types.Resource{res.Clusters[0], b}, "2", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.changed) != 1 || d.changed[0] != b || len(d.removed) != 0 {
		t.Errorf("diff %+v, want cluster b changed", d)
	}
	before, after := st[clusterIdx].set.flatten().versions, ts.set.flatten().versions
	if after["a"] != before["a"] || after["b"] == before["b"] {
		t.Errorf("versions %v -> %v", before, after)
	}
	if st[clusterIdx].set.flatten().resources["b"].(*encoded).Resource == b {
		t.Error("the previous set was modified")
	}
	if ts.version != "2" || st[clusterIdx].version != "1" {
		t.Errorf("type versions %q -> %q, want 1 -> 2", st[clusterIdx].version, ts.version)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestVersionByIdentity checks the mode the pipeline uses with its incremental
// translator: a resource under the same pointer is unchanged, one under a new pointer is
// sent (no hashing to find out that it is equal), and only those.
func TestVersionByIdentity(t *testing.T) {
	s := New(slog.New(slog.DiscardHandler), nil)
	s.VersionByIdentity()
	c := newDeltaClient(t, serve(t, s), nil)
	v1 := config(t, "a", "b")
	publish(t, s, v1)
	c.summaries(len(allTypes))

	v2 := *v1
	v2.Clusters = slices.Clone(v1.Clusters)
	b := edsCluster("b")
	v2.Clusters[1] = b // equal content, new pointer: taken as changed
	version := publish(t, s, &v2)
	if got := c.summaries(1); !slices.Equal(got, []string{"Cluster v" + version + " +b"}) {
		t.Errorf("after a new pointer for b: %q", got)
	}
	// The same pointers again: nothing is sent, so the next response is the next change.
	publish(t, s, &v2)
	v4 := v2
	v4.Clusters = slices.Clone(v2.Clusters)
	v4.Clusters[0] = edsCluster("a")
	version = publish(t, s, &v4)
	if got := c.summaries(1); !slices.Equal(got, []string{"Cluster v" + version + " +a"}) {
		t.Errorf("after a new pointer for a: %q", got)
	}
}
