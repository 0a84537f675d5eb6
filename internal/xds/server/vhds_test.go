package server

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// vhdsWorld is a configuration of plain-HTTP hosts, one cluster each, in which a
// changed host is a new VirtualHost and every other one keeps its pointer, as the
// incremental translator publishes them.
type vhdsWorld struct {
	t        testing.TB
	rc       string // the route configuration's name
	listener types.Resource
	hosts    map[string]*routev3.VirtualHost
	variant  map[string]int
	clusters map[string][2]types.Resource // a host's cluster and load assignment
}

func newVHDSWorld(t testing.TB, hosts ...string) *vhdsWorld {
	return newVHDSWorldOf(t, translate.RouteHTTP, hosts...)
}

// newVHDSWorldOf is newVHDSWorld with the hosts in the route configuration named rc.
func newVHDSWorldOf(t testing.TB, rc string, hosts ...string) *vhdsWorld {
	w := &vhdsWorld{t: t, rc: rc, listener: httpListener(t, rc), hosts: map[string]*routev3.VirtualHost{}, variant: map[string]int{},
		clusters: map[string][2]types.Resource{}}
	for _, h := range hosts {
		w.set(h)
	}
	return w
}

// set adds host, or changes its content.
func (w *vhdsWorld) set(host string) {
	w.variant[host]++
	vh := routes(w.rc, host).VirtualHosts[0]
	vh.Domains = append(vh.Domains, fmt.Sprintf("v%d.%s.example.com", w.variant[host], host))
	w.hosts[host] = vh
	if _, ok := w.clusters[host]; !ok {
		w.clusters[host] = [2]types.Resource{edsCluster(host), assignment(host)}
	}
}

func (w *vhdsWorld) remove(host string) {
	delete(w.hosts, host)
	delete(w.clusters, host)
}

func (w *vhdsWorld) resources() *translate.Resources {
	rc := &routev3.RouteConfiguration{Name: w.rc}
	res := &translate.Resources{Listeners: []types.Resource{w.listener}, Routes: []types.Resource{rc}}
	for _, h := range slices.Sorted(maps.Keys(w.hosts)) {
		rc.VirtualHosts = append(rc.VirtualHosts, w.hosts[h])
		res.Clusters = append(res.Clusters, w.clusters[h][0])
		res.Endpoints = append(res.Endpoints, w.clusters[h][1])
	}
	return res
}

// newEnvoyLikeClient opens a delta ADS stream that asks for VHDS and subscribes as
// Envoy does: listeners and clusters by wildcard, the route configuration and the
// load assignments by name, and the VHDS namespace of the route configuration.
func newEnvoyLikeClient(t *testing.T, c discoveryv3.AggregatedDiscoveryServiceClient, clusters ...string) *deltaClient {
	t.Helper()
	return newEnvoyLikeClientOf(t, c, translate.RouteHTTP, clusters...)
}

// newEnvoyLikeClientOf is newEnvoyLikeClient for the route configuration named rc.
func newEnvoyLikeClientOf(t *testing.T, c discoveryv3.AggregatedDiscoveryServiceClient, rc string, clusters ...string) *deltaClient {
	t.Helper()
	s := openDeltaStream(t, c)
	subs := []struct {
		typeURL string
		names   []string
	}{
		{resource.ClusterType, []string{"*"}},
		{resource.EndpointType, clusters},
		{resource.ListenerType, []string{"*"}},
		{resource.RouteType, []string{rc}},
		{resource.VirtualHostType, []string{rc}},
	}
	for _, sub := range subs {
		req := &discoveryv3.DeltaDiscoveryRequest{Node: vhdsNode(), TypeUrl: sub.typeURL, ResourceNamesSubscribe: sub.names}
		if err := s.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	return &deltaClient{t: t, s: s}
}

// TestVHDSClientsAreSentTheHostsThatChanged checks what a client that asks for VHDS
// receives: the route configuration without its hosts, pointing at VHDS over ADS, then
// one VirtualHost resource per host, named and sent as Envoy expects; a one-host
// change sends that host only, where a client without VHDS is sent every host again.
// So for the shared HTTP listener's and for a Gateway HTTP port's.
func TestVHDSClientsAreSentTheHostsThatChanged(t *testing.T) {
	gateway := translate.GatewayListenerName(k8stypes.NamespacedName{Namespace: "infra", Name: "gw"}, 80)
	for _, tc := range []struct {
		rc         string
		byIdentity bool
	}{{translate.RouteHTTP, false}, {translate.RouteHTTP, true}, {gateway, true}} {
		rc, byIdentity := tc.rc, tc.byIdentity
		t.Run(fmt.Sprintf("rc=%s/byIdentity=%v", rc, byIdentity), func(t *testing.T) {
			s := New(slog.New(slog.DiscardHandler), nil)
			if byIdentity {
				s.VersionByIdentity()
			}
			w := newVHDSWorldOf(t, rc, "a", "b")
			publish(t, s, w.resources())
			conn := serve(t, s)
			c := newEnvoyLikeClientOf(t, conn, rc, "a", "b")
			plain := newDeltaClient(t, conn, nil)
			byType := map[string]*discoveryv3.DeltaDiscoveryResponse{}
			for range 5 {
				resp := c.recv()
				byType[resp.GetTypeUrl()] = resp
			}
			plain.summaries(len(allTypes))

			checkShell(t, byType[resource.RouteType])
			hosts := checkVirtualHosts(t, byType[resource.VirtualHostType])
			if got := slices.Sorted(maps.Keys(hosts)); !slices.Equal(got, []string{rc + "/a", rc + "/b"}) {
				t.Fatalf("virtual hosts %q, want %s/a and %s/b", got, rc, rc)
			}
			if got, want := hosts[rc+"/a"].GetDomains(), w.hosts["a"].GetDomains(); !slices.Equal(got, want) {
				t.Errorf("%s/a has domains %q, want the inline host's %q", rc, got, want)
			}

			// One host added: its cluster, its endpoints, and that host.
			w.set("c")
			v := publish(t, s, w.resources())
			got := c.summaries(2)
			if want := []string{"Cluster v" + v + " +c", "VirtualHost v" + v + " +" + rc + "/c"}; !slices.Equal(got, want) {
				t.Errorf("after adding a host: %q, want %q", got, want)
			}
			if got := plain.summaries(3); got[2] != "RouteConfiguration v"+v+" +"+rc {
				t.Errorf("a client without VHDS got %q, want the route configuration whole", got)
			}

			// One host changed: that host only, where the client without VHDS gets
			// the route configuration with every host.
			w.set("b")
			v = publish(t, s, w.resources())
			vhosts := c.recv()
			if got, want := summary(vhosts), "VirtualHost v"+v+" +"+rc+"/b"; got != want {
				t.Errorf("after changing a host: %q, want %q", got, want)
			}
			routes := plain.recv()
			if got, want := summary(routes), "RouteConfiguration v"+v+" +"+rc; got != want {
				t.Errorf("a client without VHDS got %q, want %q", got, want)
			}
			if got := checkVirtualHosts(t, vhosts)[rc+"/b"].GetDomains(); !slices.Equal(got, w.hosts["b"].GetDomains()) {
				t.Errorf("%s/b has domains %q, want %q", rc, got, w.hosts["b"].GetDomains())
			}

			// One host removed: its removal, then (make before break) its cluster's.
			// The server pushes a type once its previous response is ACKed: wait for
			// both clients' ACKs, as clients at rest have sent them.
			waitFor(t, "the clients' ACKs", func() bool { return s.cache.numWatches() == 2*5 })
			w.remove("a")
			v = publish(t, s, w.resources())
			got = c.summaries(3)
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"VirtualHost v" + fmt.Sprint(n-1) + " -" + rc + "/a", "Cluster v" + v + " -a", "ClusterLoadAssignment v" + v + " -a"}
			if !slices.Equal(got, want) {
				t.Errorf("after removing a host: %q, want %q", got, want)
			}
		})
	}
}

// TestVHDSSendsInProportionToTheChange measures what one changed host sends at 1,000
// hosts, of the shared HTTP listener and of a Gateway's HTTP port: the VHDS client gets
// one host, the other client every host.
func TestVHDSSendsInProportionToTheChange(t *testing.T) {
	for _, rc := range []string{translate.RouteHTTP, translate.GatewayListenerName(k8stypes.NamespacedName{Namespace: "infra", Name: "gw"}, 80)} {
		s := New(slog.New(slog.DiscardHandler), nil)
		s.VersionByIdentity()
		var names []string
		for i := range 1000 {
			names = append(names, fmt.Sprintf("h%04d", i))
		}
		w := newVHDSWorldOf(t, rc, names...)
		publish(t, s, w.resources())
		conn := serve(t, s)
		c := newEnvoyLikeClientOf(t, conn, rc, names...)
		plain := newDeltaClient(t, conn, nil)
		c.summaries(5)
		plain.summaries(len(allTypes))

		w.set("h0500")
		publish(t, s, w.resources())
		vhds, whole := proto.Size(c.recv()), proto.Size(plain.recv())
		t.Logf("%s: one host changed among 1,000: %d bytes with VHDS, %d without", rc, vhds, whole)
		if vhds*100 > whole {
			t.Errorf("%s: one host changed among 1,000: %d bytes with VHDS, %d without: want less than 1%%", rc, vhds, whole)
		}
	}
}

// TestVHDSNamespaceSubscriptionIsAnswered checks that a subscription to a route
// configuration's virtual hosts is answered even when it has none: Envoy holds its
// initialisation until then.
func TestVHDSNamespaceSubscriptionIsAnswered(t *testing.T) {
	s := New(slog.New(slog.DiscardHandler), nil)
	w := newVHDSWorld(t)
	publish(t, s, w.resources())
	c := newEnvoyLikeClient(t, serve(t, s))
	var got []string
	for range 5 {
		got = append(got, summary(c.recv()))
	}
	slices.Sort(got)
	want := []string{"Cluster v1", "ClusterLoadAssignment v1", "Listener v1 +ingress_http", "RouteConfiguration v1 +ingress_http", "VirtualHost v1"}
	if !slices.Equal(got, want) {
		t.Fatalf("first responses %q, want %q", got, want)
	}
	w.set("a")
	v := publish(t, s, w.resources())
	if got, want := summary(c.recv()), "Cluster v"+v+" +a"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// The load assignments' first request named none: a legacy wildcard.
	if got, want := summary(c.recv()), "ClusterLoadAssignment v"+v+" +a"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := summary(c.recv()), "VirtualHost v"+v+" +ingress_http/a"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// checkShell checks that resp carries the route configuration as a VHDS client must
// see it: no virtual hosts, VHDS over ADS, valid.
func checkShell(t *testing.T, resp *discoveryv3.DeltaDiscoveryResponse) {
	t.Helper()
	if len(resp.GetResources()) != 1 {
		t.Fatalf("route configurations %q, want one", summary(resp))
	}
	rc := &routev3.RouteConfiguration{}
	if err := resp.GetResources()[0].GetResource().UnmarshalTo(rc); err != nil {
		t.Fatal(err)
	}
	if err := rc.ValidateAll(); err != nil {
		t.Errorf("route configuration: %v", err)
	}
	if len(rc.GetVirtualHosts()) != 0 || rc.GetVhds().GetConfigSource().GetAds() == nil ||
		rc.GetVhds().GetConfigSource().GetResourceApiVersion() != corev3.ApiVersion_V3 {
		t.Errorf("route configuration %v: want no virtual hosts and VHDS over ADS (v3)", rc)
	}
}

// checkVirtualHosts decodes the VirtualHost resources of resp, checking each is valid
// and that its message is named as its resource (Envoy keys its VHDS table so).
func checkVirtualHosts(t *testing.T, resp *discoveryv3.DeltaDiscoveryResponse) map[string]*routev3.VirtualHost {
	t.Helper()
	out := map[string]*routev3.VirtualHost{}
	for _, r := range resp.GetResources() {
		vh := &routev3.VirtualHost{}
		if err := r.GetResource().UnmarshalTo(vh); err != nil {
			t.Fatal(err)
		}
		if err := vh.ValidateAll(); err != nil {
			t.Errorf("virtual host %q: %v", r.GetName(), err)
		}
		if vh.GetName() != r.GetName() {
			t.Errorf("virtual host resource %q holds a message named %q", r.GetName(), vh.GetName())
		}
		out[r.GetName()] = vh
	}
	return out
}

// TestVHDSViewFollowsTheRouteConfiguration publishes random sequences of hosts added,
// changed, removed and reordered, with a publish that fails now and then and one
// that withdraws the route configuration, and checks
// after each that the VirtualHost resources are exactly the route configuration's
// hosts, renamed, and that what changed in them is the hosts that changed: the
// others keep their version, so no client is sent them again, even when the hosts
// were reordered.
func TestVHDSViewFollowsTheRouteConfiguration(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			s := New(slog.New(slog.DiscardHandler), nil)
			if seed%2 == 0 {
				s.VersionByIdentity()
			}
			w := newVHDSWorld(t)
			withdrawn := false // the last publish had no route configuration
			for step := range 150 {
				before, clusters := maps.Clone(w.hosts), maps.Clone(w.clusters)
				for range rng.IntN(4) {
					host := fmt.Sprintf("h%d", rng.IntN(20))
					if _, ok := w.hosts[host]; ok && rng.IntN(3) == 0 {
						w.remove(host)
					} else {
						w.set(host)
					}
				}
				res := w.resources()
				if rng.IntN(5) == 0 {
					rc := res.Routes[0].(*routev3.RouteConfiguration)
					rng.Shuffle(len(rc.VirtualHosts), func(i, j int) { rc.VirtualHosts[i], rc.VirtualHosts[j] = rc.VirtualHosts[j], rc.VirtualHosts[i] })
				}
				prev := s.current.set(vhostIdx).set.flatten().versions
				if rng.IntN(8) == 0 {
					// A cluster missing: the publish fails, the previous state stays.
					res.Clusters = res.Clusters[:0]
					if len(w.hosts) > 0 {
						if _, err := s.Publish(context.Background(), res); err == nil {
							t.Fatalf("step %d: a publish with routes to missing clusters succeeded", step)
						}
					}
					w.hosts, w.clusters = before, clusters
					continue
				}
				if rng.IntN(10) == 0 {
					// The route configuration withdrawn (with its listener): its hosts go.
					res.Listeners, res.Routes = nil, nil
					publish(t, s, res)
					if n := s.current.set(vhostIdx).set.len(); n != 0 {
						t.Fatalf("step %d: %d VirtualHost resources without their route configuration", step, n)
					}
					withdrawn = true
					continue
				}
				publish(t, s, res)
				if withdrawn {
					before, withdrawn = nil, false // every host is new again
				}
				checkVHDSView(t, step, s, w, before, prev)
			}
		})
	}
}

// checkVHDSView checks the published VirtualHost resources against w, whose hosts were
// before at the previous publish (nil: none), when the resources had the versions prev.
func checkVHDSView(t *testing.T, step int, s *Server, w *vhdsWorld, before map[string]*routev3.VirtualHost, prev map[string]string) {
	t.Helper()
	set := s.current.set(vhostIdx).set.flatten()
	if len(set.resources) != len(w.hosts) {
		t.Fatalf("step %d: %d VirtualHost resources for %d hosts", step, len(set.resources), len(w.hosts))
	}
	for host, vh := range w.hosts {
		name := translate.RouteHTTP + "/" + host
		r, ok := set.resources[name]
		if !ok {
			t.Fatalf("step %d: no VirtualHost %q", step, name)
		}
		want := proto.Clone(vh).(*routev3.VirtualHost)
		want.Name = name
		b, err := r.(*encoded).encoding()
		if err != nil {
			t.Fatal(err)
		}
		got := &routev3.VirtualHost{}
		if err := proto.Unmarshal(b, got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("step %d: VirtualHost %q is sent as %v, want %v", step, name, got, want)
		}
		if before[host] == vh && set.versions[name] != prev[name] {
			t.Errorf("step %d: the unchanged host %q changed version %q -> %q", step, name, prev[name], set.versions[name])
		}
	}
}

// openVHDSStream opens a delta stream asking for VHDS, subscribed to every
// VirtualHost, starting from the versions known.
func openVHDSStream(t *testing.T, conn discoveryv3.AggregatedDiscoveryServiceClient, known map[string]string) *deltaClient {
	t.Helper()
	st := openDeltaStream(t, conn)
	if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: vhdsNode(), TypeUrl: resource.VirtualHostType,
		ResourceNamesSubscribe: []string{"*"}, InitialResourceVersions: known}); err != nil {
		t.Fatal(err)
	}
	return &deltaClient{t: t, s: st}
}

// TestNACKedResourcesAreSentAgainWithTheNextPublish: a client refuses a response as a
// whole, so a good change that came with a bad one is not applied either. Both are
// sent again with the next publish (not at once, which would be refused again), so
// the good change does not wait for its resource to change once more. So too when
// the client takes a while to refuse it, while the controller publishes again and
// again (each publish a snapshot, changed or not).
func TestNACKedResourcesAreSentAgainWithTheNextPublish(t *testing.T) {
	for _, snapshots := range []int{0, clientStateTTL + 2} {
		t.Run(fmt.Sprint(snapshots, " snapshots before the NACK"), func(t *testing.T) {
			testNACKedResourcesSentAgain(t, snapshots)
		})
	}
}

func testNACKedResourcesSentAgain(t *testing.T, snapshots int) {
	s := New(slog.New(slog.DiscardHandler), nil)
	s.VersionByIdentity()
	w := newVHDSWorld(t, "a", "b")
	publish(t, s, w.resources())
	c := openVHDSStream(t, serve(t, s), nil)
	c.recv()
	w.set("b")
	w.set("x")
	v2 := publish(t, s, w.resources())
	resp, err := c.s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summary(resp), "VirtualHost v"+v2+" +ingress_http/b +ingress_http/x"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	for range snapshots {
		publish(t, s, w.resources())
	}
	if err := c.s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.VirtualHostType, ResponseNonce: resp.GetNonce(),
		ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: "x is bad"}}); err != nil {
		t.Fatal(err)
	}
	// Wait for the server to take the NACK, then fix x only.
	waitFor(t, "the NACK", func() bool { return s.cache.numWatches() == 1 })
	w.set("x")
	v3 := publish(t, s, w.resources())
	if got, want := summary(c.recv()), "VirtualHost v"+v3+" +ingress_http/b +ingress_http/x"; got != want {
		t.Errorf("after the NACK and a publish changing x: %q, want %q (b sent again)", got, want)
	}
	// Accepted this time: the next publish sends what it changes only.
	w.set("a")
	v4 := publish(t, s, w.resources())
	if got, want := summary(c.recv()), "VirtualHost v"+v4+" +ingress_http/a"; got != want {
		t.Errorf("then: %q, want %q", got, want)
	}
}

// TestReconnectWithTheVersionsSentIsSentNothing: a client reconnects with the versions
// it was sent (go-control-plane's hashes of the encodings) to a server that versions by
// identity; what it holds is not sent again, only what changed meanwhile.
func TestReconnectWithTheVersionsSentIsSentNothing(t *testing.T) {
	s := New(slog.New(slog.DiscardHandler), nil)
	s.VersionByIdentity()
	w := newVHDSWorld(t, "a", "b", "c")
	publish(t, s, w.resources())
	conn := serve(t, s)
	known := map[string]string{}
	for _, r := range openVHDSStream(t, conn, nil).recv().GetResources() {
		known[r.GetName()] = r.GetVersion()
	}
	if got, want := summary(openVHDSStream(t, conn, known).recv()), "VirtualHost v1"; got != want {
		t.Errorf("reconnect, nothing changed: %q, want nothing sent", got)
	}
	w.set("b")
	v := publish(t, s, w.resources())
	if got, want := summary(openVHDSStream(t, conn, known).recv()), "VirtualHost v"+v+" +ingress_http/b"; got != want {
		t.Errorf("reconnect, b changed: %q, want %q", got, want)
	}
}

// TestVHDSNamespaceResubscribeSendsTheHosts: Envoy drops its VHDS subscription with its
// route configuration and makes a new one; the new one is sent every host.
func TestVHDSNamespaceResubscribeSendsTheHosts(t *testing.T) {
	s := New(slog.New(slog.DiscardHandler), nil)
	w := newVHDSWorld(t, "a", "b")
	publish(t, s, w.resources())
	c := newEnvoyLikeClient(t, serve(t, s), "a", "b")
	c.summaries(5)
	for _, req := range []*discoveryv3.DeltaDiscoveryRequest{
		{TypeUrl: resource.VirtualHostType, ResourceNamesUnsubscribe: []string{translate.RouteHTTP}},
		{TypeUrl: resource.VirtualHostType, ResourceNamesSubscribe: []string{translate.RouteHTTP}},
	} {
		if err := c.s.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := summary(c.recv()), "VirtualHost v1 +ingress_http/a +ingress_http/b"; got != want {
		t.Errorf("after subscribing again: %q, want %q", got, want)
	}
}
