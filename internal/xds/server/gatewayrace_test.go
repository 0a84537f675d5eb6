package server

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/structpb"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// proxyTypes are the types the embedded proxy subscribes to, in its order.
var proxyTypes = []string{resource.ClusterType, resource.EndpointType, resource.ListenerType,
	resource.RouteType, resource.VirtualHostType, resource.SecretType}

// lazyClient is a Gateway's data plane as the embedded proxy is one (wildcard on every
// type, VHDS, node metadata naming its Gateway) that applies each response when it
// arrives but ACKs it only when the test says so: the server may not push a type again
// before its ACK, so the test decides which types lag behind while publishes go on.
type lazyClient struct {
	t *testing.T
	s discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient

	mu      sync.Mutex
	held    map[string]map[string]string                   // by type: name -> version
	pending map[string]*discoveryv3.DeltaDiscoveryResponse // by type: received, not ACKed
}

func newLazyClient(t *testing.T, c discoveryv3.AggregatedDiscoveryServiceClient, gateway string) *lazyClient {
	t.Helper()
	md, err := structpb.NewStruct(map[string]any{vhdsMetadataKey: true, NodeGatewayKey: gateway})
	if err != nil {
		t.Fatal(err)
	}
	lc := &lazyClient{t: t, s: openDeltaStream(t, c), held: map[string]map[string]string{},
		pending: map[string]*discoveryv3.DeltaDiscoveryResponse{}}
	for i, typeURL := range proxyTypes {
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: []string{"*"}}
		if i == 0 {
			req.Node = &corev3.Node{Id: "gateway-data-plane", Metadata: md}
		}
		if err := lc.s.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	go lc.receive()
	return lc
}

// receive applies every response and keeps it to be ACKed.
func (lc *lazyClient) receive() {
	for {
		resp, err := lc.s.Recv()
		if err != nil {
			return
		}
		lc.mu.Lock()
		typ := resp.GetTypeUrl()
		if lc.pending[typ] != nil {
			lc.mu.Unlock()
			lc.t.Errorf("%s response %s sent before the previous one was ACKed", shortType(typ), resp.GetNonce())
			return
		}
		held := lc.held[typ]
		if held == nil {
			held = map[string]string{}
			lc.held[typ] = held
		}
		for _, r := range resp.GetResources() {
			held[r.GetName()] = r.GetVersion()
		}
		for _, name := range resp.GetRemovedResources() {
			delete(held, name)
		}
		lc.pending[typ] = resp
		lc.mu.Unlock()
	}
}

// pendingTypes returns the types whose last response is not ACKed, in proxyTypes' order.
func (lc *lazyClient) pendingTypes() []string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	var out []string
	for _, typ := range proxyTypes {
		if lc.pending[typ] != nil {
			out = append(out, typ)
		}
	}
	return out
}

// ack ACKs the pending response of typ.
func (lc *lazyClient) ack(typ string) {
	lc.mu.Lock()
	resp := lc.pending[typ]
	delete(lc.pending, typ)
	lc.mu.Unlock()
	if resp == nil {
		return
	}
	if err := lc.s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResponseNonce: resp.GetNonce()}); err != nil {
		lc.t.Error(err)
	}
}

// quiescent reports whether every type has either a response waiting for its ACK at
// the client or a watch open at the server: nothing is on its way.
func (lc *lazyClient) quiescent(s *Server) bool {
	return len(lc.pendingTypes())+s.cache.numWatches() == len(proxyTypes)
}

// holds returns a copy of what the client holds of typ.
func (lc *lazyClient) holds(typ string) map[string]string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return maps.Clone(lc.held[typ])
}

// gatewayWorld is the configuration of two Gateways' routes, each routing to some of
// a few clusters, passing unchanged resources as the same pointers as the incremental
// translator does.
type gatewayWorld struct {
	t          *testing.T
	ours, them string // the Gateways' listener (and route configuration) names
	uses       map[string][]string
	made       map[string]types.Resource
}

func newGatewayWorld(t *testing.T) *gatewayWorld {
	return &gatewayWorld{t: t,
		ours: translate.GatewayListenerName(k8stypes.NamespacedName{Namespace: "infra", Name: "ours"}, 443),
		them: translate.GatewayListenerName(k8stypes.NamespacedName{Namespace: "infra", Name: "them"}, 80),
		uses: map[string][]string{}, made: map[string]types.Resource{}}
}

func (w *gatewayWorld) resource(key string, make func() types.Resource) types.Resource {
	if r, ok := w.made[key]; ok {
		return r
	}
	w.made[key] = make()
	return w.made[key]
}

// resources is the configuration in which each Gateway's routes go to the clusters
// w.uses says, and only those clusters are published, as the translator does.
func (w *gatewayWorld) resources() *translate.Resources {
	res := &translate.Resources{}
	used := map[string]bool{}
	for _, gw := range []string{w.ours, w.them} {
		clusters := w.uses[gw]
		res.Listeners = append(res.Listeners, w.resource("listener "+gw, func() types.Resource { return httpListener(w.t, gw) }))
		res.Routes = append(res.Routes, w.resource(fmt.Sprint("routes ", gw, clusters), func() types.Resource {
			return routes(gw, clusters...)
		}))
		for _, c := range clusters {
			used[c] = true
		}
	}
	for _, c := range slices.Sorted(maps.Keys(used)) {
		res.Clusters = append(res.Clusters, w.resource("cluster "+c, func() types.Resource { return edsCluster(c) }))
		res.Endpoints = append(res.Endpoints, w.resource("endpoints "+c, func() types.Resource { return assignment(c) }))
	}
	return res
}

// TestGatewayDataPlaneGetsAClusterRemovedAndAddedBack follows one cluster through what a
// conformance run does to it: the routes of other Gateways that used it are deleted (it
// is withdrawn, after an interim snapshot that keeps it), and a route of this Gateway
// uses it again, while the Gateway's data plane ACKs its types at its own pace. Whatever
// the order, once it has ACKed everything the data plane must hold exactly the last
// published state of every type (its own listeners only): a cluster its routes use and
// that it never receives leaves the embedded proxy on its previous configuration.
func TestGatewayDataPlaneGetsAClusterRemovedAndAddedBack(t *testing.T) {
	for seed := range uint64(16) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 19))
			s := New(slog.New(slog.DiscardHandler), nil)
			if seed%2 == 0 {
				s.VersionByIdentity() // as the pipeline's incremental translator has it
			}
			w := newGatewayWorld(t)
			const shared = "infra/backend-v1/8080"
			w.uses[w.them] = []string{shared}
			w.uses[w.ours] = []string{"infra/backend-v2/8080"}
			publish(t, s, w.resources())
			lc := newLazyClient(t, serve(t, s), "infra/ours")
			for step := range 60 {
				switch rng.IntN(4) {
				case 0: // another Gateway's route uses the cluster, ours does not
					w.uses[w.them] = []string{shared}
					w.uses[w.ours] = []string{"infra/backend-v2/8080"}
				case 1: // no route uses it: withdrawn
					w.uses[w.them] = nil
					w.uses[w.ours] = []string{"infra/backend-v2/8080"}
				case 2: // our route uses it
					w.uses[w.them] = nil
					w.uses[w.ours] = []string{shared}
				default: // both
					w.uses[w.them] = []string{shared, "infra/backend-v3/8080"}
					w.uses[w.ours] = []string{shared}
				}
				publish(t, s, w.resources())
				waitFor(t, fmt.Sprintf("step %d: responses delivered", step), func() bool { return lc.quiescent(s) })
				for _, typ := range lc.pendingTypes() {
					if rng.IntN(3) == 0 {
						lc.ack(typ)
					}
				}
			}
			waitFor(t, "the data plane to hold the last state", func() bool {
				for _, typ := range lc.pendingTypes() {
					lc.ack(typ)
				}
				return lc.quiescent(s) && len(lc.pendingTypes()) == 0
			})
			checkHoldsLastState(t, s, lc, "infra/ours")
		})
	}
}

// checkHoldsLastState checks that lc, the data plane of gateway, holds exactly what
// the server last published for it, type by type.
func checkHoldsLastState(t *testing.T, s *Server, lc *lazyClient, gateway string) {
	t.Helper()
	sc := scopeOf(&corev3.Node{Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		NodeGatewayKey: structpb.NewStringValue(gateway)}}})
	for _, typ := range proxyTypes {
		i := typeIndex(typ)
		if typ == resource.RouteType {
			i = vhdsRouteIdx
		}
		// What goes on the wire is go-control-plane's hash of each resource's
		// encoding, whatever the server's own versions are (VersionByIdentity).
		want := map[string]string{}
		for name := range s.current.set(i).set.names {
			if !sc.serves(i, name) {
				continue
			}
			r, _ := s.current.set(i).set.get(name)
			v, err := resourceVersion(r.resource)
			if err != nil {
				t.Fatal(err)
			}
			want[name] = v
		}
		if got := lc.holds(typ); !maps.Equal(got, want) {
			t.Errorf("%s: the data plane holds %v, the server published %v", shortType(typ), got, want)
		}
	}
}
