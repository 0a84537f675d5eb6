package server

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// TestDeltaWatchesAnswerAsGoControlPlane drives the server's delta cache and
// go-control-plane's SnapshotCache (the one the server gives every snapshot to, for
// state-of-the-world clients) with the same random publishes and the same random
// clients, each client holding one subscription per cache as go-control-plane's
// stream does, and checks that every watch is answered alike: whether a response is
// sent, its resources and their versions, its removals, its system version, and the
// versions the client then holds. Clients that ask for VHDS are compared with a second
// SnapshotCache given the snapshots as such clients see them (vhdsSnapshot).
func TestDeltaWatchesAnswerAsGoControlPlane(t *testing.T) {
	for seed := range uint64(16) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 10))
			s := New(slog.New(slog.DiscardHandler), nil)
			if rng.IntN(2) == 0 {
				s.VersionByIdentity()
			}
			refVHDS := cachev3.NewSnapshotCache(true, allNodes{}, nil)
			w := newWorld(rng)
			var clients []*pairedStream
			for range 4 {
				for _, typeURL := range append(slices.Clone(allTypes), resource.ScopedRouteType, resource.VirtualHostType) {
					clients = append(clients, &pairedStream{t: t, s: s, rng: rng, typeURL: typeURL, refCache: s.cache.SnapshotCache})
				}
				for _, typeURL := range []string{resource.RouteType, resource.VirtualHostType} {
					clients = append(clients, &pairedStream{t: t, s: s, rng: rng, typeURL: typeURL, refCache: refVHDS, vhds: true})
				}
			}
			for step := range 200 {
				if rng.IntN(3) > 0 {
					w.change()
					publish(t, s, w.resources(t))
					if err := refVHDS.SetSnapshot(context.Background(), nodeGroup, vhdsSnapshot{s.current}); err != nil {
						t.Fatal(err)
					}
					for _, c := range clients {
						c.check(fmt.Sprintf("step %d, publish", step))
					}
				}
				for _, c := range clients {
					c.act(fmt.Sprintf("step %d", step), w)
				}
			}
			for _, c := range clients {
				c.close()
			}
			if n := s.cache.numWatches(); n != 0 {
				t.Errorf("%d delta watches left open", n)
			}
			for range clientStateTTL + 1 {
				publish(t, s, w.resources(t))
			}
			s.cache.mu.Lock()
			defer s.cache.mu.Unlock()
			if n := len(s.cache.clients); n != 0 {
				t.Errorf("%d client states kept after their streams closed", n)
			}
		})
	}
}

// world is a random configuration that changes a little at a time, passing unchanged
// resources mostly as the same pointers, as the incremental translator does.
type world struct {
	rng      *rand.Rand
	clusters map[string]int // name -> variant of its cluster
	backends map[string]int // name -> variant of its load assignment
	secrets  map[string]int
	made     map[string]types.Resource // by kind, name and variant
}

func newWorld(rng *rand.Rand) *world {
	return &world{rng: rng, clusters: map[string]int{}, backends: map[string]int{}, secrets: map[string]int{}, made: map[string]types.Resource{}}
}

func (w *world) change() {
	for range w.rng.IntN(4) {
		name := fmt.Sprintf("c%d", w.rng.IntN(12))
		switch _, present := w.clusters[name]; {
		case !present:
			w.clusters[name], w.backends[name] = w.rng.IntN(3), w.rng.IntN(3)
		case w.rng.IntN(3) == 0:
			delete(w.clusters, name)
			delete(w.backends, name)
		case w.rng.IntN(2) == 0:
			w.clusters[name] = w.rng.IntN(3)
		default:
			w.backends[name] = w.rng.IntN(3)
		}
		secret := fmt.Sprintf("s%d", w.rng.IntN(4))
		if _, present := w.secrets[secret]; present && w.rng.IntN(2) == 0 {
			delete(w.secrets, secret)
		} else {
			w.secrets[secret] = w.rng.IntN(2)
		}
	}
}

// resource returns the resource of kind, name and variant: mostly the one made before.
func (w *world) resource(kind, name string, variant int, make func() types.Resource) types.Resource {
	key := fmt.Sprint(kind, "/", name, "/", variant)
	if r, ok := w.made[key]; ok && w.rng.IntN(5) > 0 {
		return r
	}
	w.made[key] = make()
	return w.made[key]
}

func (w *world) resources(t testing.TB) *translate.Resources {
	names := slices.Sorted(maps.Keys(w.clusters))
	if w.rng.IntN(10) == 0 {
		w.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	}
	res := &translate.Resources{
		Listeners: []types.Resource{w.resource("listener", "", 0, func() types.Resource { return httpListener(t, "ingress_http") })},
		Routes: []types.Resource{w.resource("routes", strings.Join(names, ","), 0, func() types.Resource {
			return routes("ingress_http", names...)
		})},
	}
	for _, n := range names {
		res.Clusters = append(res.Clusters, w.resource("cluster", n, w.clusters[n], func() types.Resource {
			c := edsCluster(n)
			c.ConnectTimeout = durationpb.New(time.Duration(w.clusters[n]+1) * time.Second)
			return c
		}))
		res.Endpoints = append(res.Endpoints, w.resource("endpoints", n, w.backends[n], func() types.Resource {
			a := assignment(n)
			for range w.backends[n] {
				a.Endpoints = append(a.Endpoints, &endpointv3.LocalityLbEndpoints{})
			}
			return a
		}))
	}
	for _, n := range slices.Sorted(maps.Keys(w.secrets)) {
		res.Secrets = append(res.Secrets, w.resource("secret", n, w.secrets[n], func() types.Resource {
			return &tlsv3.Secret{Name: n, Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{
				Secret: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: fmt.Sprint(w.secrets[n])}},
			}}}
		}))
	}
	return res
}

// pairedStream is one client's subscription to one type, kept twice: ours is served by
// the server's delta cache, ref by go-control-plane's SnapshotCache, each as
// go-control-plane's delta server keeps it (stream.Subscription).
type pairedStream struct {
	t        *testing.T
	s        *Server
	rng      *rand.Rand
	typeURL  string
	refCache cachev3.SnapshotCache // go-control-plane's, which ref is served by
	vhds     bool                  // the client asks for VHDS

	started, open      bool
	ours, ref          stream.Subscription
	oursOut, refOut    chan cachev3.DeltaResponse
	cancelOurs, cancel func()
	responses          int
	lagging            int // steps left without a request
}

// act does what a client may do at a step: nothing (lagging behind), ACK its last
// response, change its subscription, or reconnect with the versions it holds.
func (c *pairedStream) act(step string, w *world) {
	if c.lagging > 0 {
		c.lagging--
		return
	}
	switch r := c.rng.IntN(20); {
	case !c.started || r == 0:
		c.reconnect(step)
	case r < 3:
		c.request(step, c.names(w), c.names(w))
	case r == 3:
		c.lagging = c.rng.IntN(2 * changeLogLength)
	case !c.open:
		c.request(step, nil, nil)
	}
}

// names returns a few names, some published, some not, maybe the wildcard. A
// VirtualHost subscription to a route configuration's name (a namespace, which
// go-control-plane does not know) is tested by TestVHDSNamespaceSubscriptionIsAnswered
// and TestVHDSNamespaceResubscribeSendsTheHosts.
func (c *pairedStream) names(w *world) []string {
	var out []string
	for range c.rng.IntN(3) {
		switch r := c.rng.IntN(8); r {
		case 0:
			out = append(out, "*")
		case 1:
			if c.typeURL == resource.VirtualHostType {
				out = append(out, fmt.Sprintf("ingress_http/c%d", c.rng.IntN(14)))
				continue
			}
			out = append(out, "ingress_http")
		default:
			out = append(out, fmt.Sprintf("c%d", c.rng.IntN(14)), fmt.Sprintf("s%d", c.rng.IntN(5)))
		}
	}
	return out
}

func (c *pairedStream) reconnect(step string) {
	c.close()
	held := maps.Clone(c.ref.ReturnedResources())
	for name := range held {
		switch c.rng.IntN(6) {
		case 0:
			delete(held, name)
		case 1:
			held[name] = "stale"
		}
	}
	var subscribe []string
	if c.rng.IntN(3) == 0 {
		subscribe = []string{"*"}
	} else if c.rng.IntN(2) == 0 {
		subscribe = slices.Collect(maps.Keys(held))
	}
	legacy := c.rng.IntN(2) == 0
	c.ours = stream.NewDeltaSubscription(subscribe, nil, maps.Clone(held), legacy)
	c.ref = stream.NewDeltaSubscription(subscribe, nil, maps.Clone(held), legacy)
	c.started, c.responses = true, 0
	c.oursOut, c.refOut = make(chan cachev3.DeltaResponse, 1), make(chan cachev3.DeltaResponse, 1)
	c.watch(step+", reconnect", &discoveryv3.DeltaDiscoveryRequest{TypeUrl: c.typeURL, ResourceNamesSubscribe: subscribe, InitialResourceVersions: held})
}

// request sends a request on the stream, as go-control-plane's delta server handles it.
func (c *pairedStream) request(step string, subscribe, unsubscribe []string) {
	c.cancelWatches()
	c.ours.UpdateResourceSubscriptions(subscribe, unsubscribe)
	c.ref.UpdateResourceSubscriptions(subscribe, unsubscribe)
	req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: c.typeURL, ResourceNamesSubscribe: subscribe, ResourceNamesUnsubscribe: unsubscribe}
	if c.responses > 0 {
		req.ResponseNonce = fmt.Sprint(c.responses)
	}
	c.watch(fmt.Sprintf("%s, request +%q -%q", step, subscribe, unsubscribe), req)
}

func (c *pairedStream) watch(step string, req *discoveryv3.DeltaDiscoveryRequest) {
	req.Node = &corev3.Node{Id: "test"}
	if c.vhds {
		req.Node = vhdsNode()
	}
	var err error
	if c.cancelOurs, err = c.s.cache.CreateDeltaWatch(req, c.ours, c.oursOut); err != nil {
		c.t.Fatal(err)
	}
	if c.cancel, err = c.refCache.CreateDeltaWatch(req, c.ref, c.refOut); err != nil {
		c.t.Fatal(err)
	}
	c.open = true
	c.check(step)
}

func (c *pairedStream) cancelWatches() {
	for _, cancel := range []func(){c.cancelOurs, c.cancel} {
		if cancel != nil {
			cancel()
		}
	}
	c.cancelOurs, c.cancel, c.open = nil, nil, false
}

func (c *pairedStream) close() {
	c.cancelWatches()
	c.started = false
}

// check takes the responses the watches sent, if any, and compares them.
func (c *pairedStream) check(step string) {
	c.t.Helper()
	if !c.open {
		return
	}
	ours, ref := received(c.oursOut), received(c.refOut)
	if (ours == nil) != (ref == nil) {
		c.t.Fatalf("%s, %s: response %v, go-control-plane's %v", step, c.typeURL, describe(c.t, ours), describe(c.t, ref))
	}
	if ours == nil {
		return
	}
	if got, want := describe(c.t, ours), describe(c.t, ref); got != want {
		c.t.Fatalf("%s, %s: response\n%s\ngo-control-plane's\n%s", step, c.typeURL, got, want)
	}
	if got, want := ours.GetReturnedResources(), ref.GetReturnedResources(); !maps.Equal(got, want) {
		c.t.Fatalf("%s, %s: the client holds %v, with go-control-plane %v", step, c.typeURL, got, want)
	}
	c.ours.SetReturnedResources(ours.GetReturnedResources())
	c.ref.SetReturnedResources(ref.GetReturnedResources())
	c.open = false
	c.responses++
}

func received(ch chan cachev3.DeltaResponse) cachev3.DeltaResponse {
	select {
	case r := <-ch:
		return r
	default:
		return nil
	}
}

// describe is a response as its system version, its resources with their versions
// and its removals, sorted.
func describe(t *testing.T, r cachev3.DeltaResponse) string {
	t.Helper()
	if r == nil {
		return "none"
	}
	resp, err := r.GetDeltaDiscoveryResponse()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, res := range resp.GetResources() {
		out = append(out, "+"+res.GetName()+"@"+res.GetVersion())
	}
	for _, name := range resp.GetRemovedResources() {
		out = append(out, "-"+name)
	}
	slices.Sort(out)
	return fmt.Sprintf("v%q %s %s", resp.GetSystemVersionInfo(), resp.GetTypeUrl(), strings.Join(out, " "))
}

// TestDeltaClientConvergesUnderRapidPublishes runs a real delta ADS stream that ACKs
// every response while publishes follow each other without waiting for it: the
// versions the server updates in place for the stream race with the stream's own
// handling (under -race), and the client must end holding the last state published.
func TestDeltaClientConvergesUnderRapidPublishes(t *testing.T) {
	s := New(slog.New(slog.DiscardHandler), nil)
	w := newWorld(rand.New(rand.NewPCG(1, 2)))
	w.change()
	publish(t, s, w.resources(t))
	c := newDeltaClient(t, serve(t, s), nil)
	var mu sync.Mutex
	held := map[string]map[string]string{}
	go func() {
		for {
			resp, err := c.s.Recv()
			if err != nil {
				return
			}
			mu.Lock()
			got := held[resp.GetTypeUrl()]
			if got == nil {
				got = map[string]string{}
				held[resp.GetTypeUrl()] = got
			}
			for _, r := range resp.GetResources() {
				got[r.GetName()] = r.GetVersion()
			}
			for _, name := range resp.GetRemovedResources() {
				delete(got, name)
			}
			mu.Unlock()
			if c.s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}) != nil {
				return
			}
		}
	}()
	for range 300 {
		w.change()
		publish(t, s, w.resources(t))
	}
	want := map[string]map[string]string{}
	for _, typeURL := range allTypes {
		want[typeURL] = s.current.set(typeIndex(typeURL)).set.flatten().versions
	}
	waitFor(t, "the client to hold the last state", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, typeURL := range allTypes {
			if !maps.Equal(held[typeURL], want[typeURL]) {
				return false
			}
		}
		return true
	})
}

// vhdsSnapshot is a published state as a client that asks for VHDS is served it: the
// route configurations are vhdsRouteIdx's.
type vhdsSnapshot struct{ sets state }

func (s vhdsSnapshot) typeSet(typeURL string) *typeSet {
	if typeURL == resource.RouteType {
		return s.sets.set(vhdsRouteIdx)
	}
	if i := typeIndex(typeURL); i != numTypes {
		return s.sets.set(i)
	}
	return emptyTypeSet
}

func (s vhdsSnapshot) GetVersion(typeURL string) string { return s.typeSet(typeURL).version }
func (s vhdsSnapshot) GetResourcesAndTTL(typeURL string) map[string]types.ResourceWithTTL {
	return s.typeSet(typeURL).sotw()
}
func (s vhdsSnapshot) GetResources(typeURL string) map[string]types.Resource {
	return s.typeSet(typeURL).set.flatten().resources
}
func (s vhdsSnapshot) ConstructVersionMap() error { return nil }
func (s vhdsSnapshot) GetVersionMap(typeURL string) map[string]string {
	return s.typeSet(typeURL).set.flatten().versions
}

func vhdsNode() *corev3.Node {
	md, err := structpb.NewStruct(map[string]any{vhdsMetadataKey: true})
	if err != nil {
		panic(err)
	}
	return &corev3.Node{Id: "test", Metadata: md}
}
