package proxy

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/portico-dev/portico/internal/proxy/hcm"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"google.golang.org/protobuf/proto"
)

// clusterEditor makes random delta responses of clusters, endpoints, routes
// and listeners: two listeners whose route configurations share clusters,
// EDS clusters that share assignments, inline-endpoint clusters, routes to
// clusters that are missing, clusters removed while routes use them.
type clusterEditor struct {
	rng   *rand.Rand
	t     *testing.T
	p     *Proxy
	step  int
	names []string
}

func (e *clusterEditor) cluster() string { return e.names[e.rng.IntN(len(e.names))] }

// routes is a route configuration whose hosts go to random clusters.
func (e *clusterEditor) routes(name string) *routev3.RouteConfiguration {
	rc := routeConfig(name)
	for i := range 1 + e.rng.IntN(6) {
		var r *routev3.Route
		if e.rng.IntN(3) == 0 {
			r = weighted(prefixMatch("/"), map[string]uint32{e.cluster(): 1, e.cluster() + "x": 0})
			r.GetRoute().GetWeightedClusters().Clusters[1].Name = e.cluster()
		} else {
			r = toCluster(e.cluster(), prefixMatch("/"))
		}
		rc.VirtualHosts = append(rc.VirtualHosts, vhost(fmt.Sprintf("h%d.example.com", i), r))
	}
	return rc
}

func (e *clusterEditor) secondListener() *listenerv3.Listener {
	return &listenerv3.Listener{
		Name:         "second",
		Address:      socketAddress("0.0.0.0", 8081),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{hcmFilter(e.t, "second")}}},
	}
}

// next sends one random response to the proxy.
func (e *clusterEditor) next() string {
	e.step++
	version := fmt.Sprint(e.step)
	switch n := e.rng.IntN(100); {
	case n < 25:
		var msgs []proto.Message
		for range 1 + e.rng.IntN(3) {
			name := e.cluster()
			c := edsCluster(name)
			switch e.rng.IntN(4) {
			case 0:
				c = dnsCluster(name, fmt.Sprintf("127.0.0.1:%d", 1+e.rng.IntN(3)))
			case 1:
				// Several clusters take their endpoints from one assignment.
				c.EdsClusterConfig.ServiceName = fmt.Sprintf("shared-%d", e.rng.IntN(2))
			}
			msgs = append(msgs, c)
		}
		feed(e.t, e.p, resourcev3.ClusterType, version, dedupe(msgs)...)
		return "clusters"
	case n < 50:
		var msgs []proto.Message
		for range 1 + e.rng.IntN(3) {
			name := e.cluster()
			if e.rng.IntN(3) == 0 {
				name = fmt.Sprintf("shared-%d", e.rng.IntN(2))
			}
			msgs = append(msgs, assignment(name, fmt.Sprintf("127.0.0.1:%d", 1+e.rng.IntN(3))))
		}
		feed(e.t, e.p, resourcev3.EndpointType, version, dedupe(msgs)...)
		return "endpoints"
	case n < 60:
		e.p.accept(context.Background(), resourcev3.ClusterType, version, nil, []string{e.cluster(), e.cluster()})
		return "clusters removed"
	case n < 67:
		e.p.accept(context.Background(), resourcev3.EndpointType, version, nil, []string{e.cluster(), "shared-0"})
		return "endpoints removed"
	case n < 90:
		name := []string{"ingress_http", "second"}[e.rng.IntN(2)]
		feed(e.t, e.p, resourcev3.RouteType, version, e.routes(name))
		return "routes of " + name
	case n < 95:
		e.p.accept(context.Background(), resourcev3.ListenerType, version, nil, []string{"second"})
		return "second listener removed"
	default:
		feed(e.t, e.p, resourcev3.ListenerType, version, e.secondListener())
		return "second listener"
	}
}

// dedupe keeps the last message of each name: a response names a resource once.
func dedupe(msgs []proto.Message) []proto.Message {
	byName := make(map[string]proto.Message)
	for _, m := range msgs {
		byName[resourceName(m)] = m
	}
	return slices.Collect(maps.Values(byName))
}

// TestClusterPatchCompilesAsFromScratch: for random sequences of cluster,
// endpoint, route and listener changes, the clusters a proxy applies by
// patching the previous snapshot's are those a compilation from scratch of
// the same resources links, a configuration is applied or kept exactly when
// that compilation succeeds or fails, the snapshot in force is never modified,
// and no state is kept for a cluster that is not applied.
func TestClusterPatchCompilesAsFromScratch(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := New(Config{ListenerAddrs: map[string]string{"ingress_http": "127.0.0.1:0", "second": "127.0.0.1:0"}})
			t.Cleanup(p.shutdown)
			e := &clusterEditor{rng: rand.New(rand.NewPCG(seed, 2)), t: t, p: p}
			for i := range 8 {
				e.names = append(e.names, fmt.Sprintf("c%d", i))
			}
			var clusters, assignments []proto.Message
			for _, name := range e.names {
				clusters = append(clusters, edsCluster(name))
				assignments = append(assignments, assignment(name, "127.0.0.1:1"))
			}
			feed(t, p, resourcev3.ClusterType, "0", clusters...)
			feed(t, p, resourcev3.EndpointType, "0", assignments...)
			feed(t, p, resourcev3.SecretType, "0")
			feed(t, p, resourcev3.ListenerType, "0", httpListener(t), e.secondListener())
			feed(t, p, resourcev3.RouteType, "0", e.routes("ingress_http"), e.routes("second"))
			var patched, clean int
			for range 300 {
				before := p.current.Load()
				var was snapshotMaps
				if before != nil {
					was = copyMaps(before)
				}
				what := e.next()
				if before != nil && !reflect.DeepEqual(was, copyMaps(before)) {
					t.Fatalf("step %d (%s): the snapshot in force was modified", e.step, what)
				}
				scratch := New(Config{})
				scratch.store = p.store
				want, wantErr := scratch.compile()
				applied := p.AppliedVersion() == fmt.Sprint(e.step)
				if applied != (wantErr == nil) {
					t.Fatalf("step %d (%s): applied %t, from scratch: %v", e.step, what, applied, wantErr)
				}
				if !applied {
					continue
				}
				got := p.current.Load()
				if got.patched {
					patched++
				}
				if got.routeStatsClean {
					clean++
				}
				checkClusters(t, fmt.Sprintf("step %d (%s)", e.step, what), got, want)
				checkRouteStats(t, fmt.Sprintf("step %d (%s)", e.step, what), p, got)
				if states := slices.Sorted(maps.Keys(p.clusterStates)); !slices.Equal(states, slices.Sorted(maps.Keys(got.clusters.Flat()))) {
					t.Fatalf("step %d (%s): cluster states %v for clusters %v", e.step, what, states, slices.Sorted(maps.Keys(got.clusters.Flat())))
				}
			}
			if patched == 0 || clean == 0 {
				t.Errorf("%d snapshots patched, %d with only their own route stats", patched, clean)
			}
		})
	}
}

type snapshotMaps struct {
	clusters map[string]*upstream.Cluster
	inputs   map[string]clusterInputs
	refs     map[string]int
}

func copyMaps(s *snapshot) snapshotMaps {
	return snapshotMaps{s.clusters.Flat(), s.clusterInputs.Flat(), s.clusterRefs.Flat()}
}

// checkClusters compares the clusters of a patched snapshot with those of a
// compilation from scratch: the same names, inputs and uses, and clusters
// linked to the same endpoints.
func checkClusters(t *testing.T, when string, got, want *snapshot) {
	t.Helper()
	g, w := copyMaps(got), copyMaps(want)
	if !maps.Equal(g.inputs, w.inputs) {
		t.Fatalf("%s: cluster inputs %v, from scratch %v", when, g.inputs, w.inputs)
	}
	if !maps.Equal(g.refs, w.refs) {
		t.Fatalf("%s: cluster uses %v, from scratch %v", when, g.refs, w.refs)
	}
	if len(g.clusters) != len(w.clusters) || got.clusters.Len() != len(g.clusters) {
		t.Fatalf("%s: %d clusters (len %d), from scratch %d", when, len(g.clusters), got.clusters.Len(), len(w.clusters))
	}
	for name, wc := range w.clusters {
		gc := g.clusters[name]
		if gc == nil || gc.Name != wc.Name || !slices.Equal(gc.Endpoints, wc.Endpoints) || gc.LB != wc.LB {
			t.Fatalf("%s: cluster %q is %+v, from scratch %+v", when, name, gc, wc)
		}
	}
	for _, lc := range got.listeners {
		if !maps.Equal(lc.Clusters.Flat(), g.clusters) {
			t.Fatalf("%s: listener %q has other clusters than its snapshot", when, lc.Name)
		}
	}
}

// checkRouteStats checks that the stats of every route of the applied
// snapshot are kept, and that those of routes it does not have are dropped
// (but for those that a compilation which failed since the previous apply
// resolved, which are never served, when the snapshot says so).
func checkRouteStats(t *testing.T, when string, p *Proxy, snap *snapshot) {
	t.Helper()
	used := make(map[hcm.RouteKey]bool)
	for _, lc := range snap.listeners {
		for _, fc := range lc.Chains {
			if fc.Stats == nil {
				continue
			}
			used[fc.Stats.NoVhost.Key] = true
			for _, vs := range fc.Stats.Vhosts {
				if vs.NoRoute == nil {
					continue // a free slot
				}
				used[vs.NoRoute.Key] = true
				for _, s := range vs.Routes {
					used[s.Key] = true
				}
			}
		}
	}
	for key := range used {
		if _, ok := p.routeStats[key]; !ok {
			t.Fatalf("%s: the stats of route %v were dropped", when, key)
		}
	}
	for key := range p.routeStats {
		if !used[key] && snap.routeStatsClean {
			t.Fatalf("%s: the stats of route %v, which the configuration does not have, were kept", when, key)
		}
	}
}
