package proxy

import (
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// TestApplyRecompilesOnlyWhatChanged: a delta response replaces the specs of the
// resources it carries, and the compiled clusters and filter chains built from the
// others are kept as they are.
func TestApplyRecompilesOnlyWhatChanged(t *testing.T) {
	cp := startControlPlane(t)
	res, backends := threeBackends(t)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	routesWith := func(bPrefix string) []*routev3.RouteConfiguration {
		return []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			toCluster("B", prefixMatch(bPrefix)), toCluster("C", prefixMatch("/c")), toCluster("A", prefixMatch("/"))))}
	}
	res.routes = routesWith("/b")
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	before := p.current.Load()

	// New endpoints for B: B is recompiled; A, C and the filter chain are not.
	moved := res
	moved.endpoints = append([]*endpointv3.ClusterLoadAssignment(nil), res.endpoints...)
	moved.endpoints[1] = assignment("B", backends["C"].addr())
	cp.set("v2", moved)
	p.waitVersion(t, "v2")
	after := p.current.Load()
	for _, name := range []string{"A", "C"} {
		if after.clusters[name] != before.clusters[name] {
			t.Errorf("cluster %s was recompiled though nothing of it changed", name)
		}
	}
	if after.clusters["B"] == before.clusters["B"] {
		t.Error("cluster B was not recompiled with its new endpoints")
	}
	if after.listeners["ingress_http"].chains[""] != before.listeners["ingress_http"].chains[""] {
		t.Error("the filter chain was recompiled though its routes did not change")
	}
	if before.clusters["A"] == nil || before.clusters["C"] == nil {
		t.Fatal("clusters A and C are not in the configuration")
	}
	if r := get(t, noRedirectClient(), p.httpURL(t, "/b"), "x", nil); r.Backend != "C" {
		t.Errorf("after moving B's endpoints got %+v, want backend C", r)
	}

	// New routes: the chain is recompiled, the clusters are kept.
	rerouted := moved
	rerouted.routes = routesWith("/bb")
	cp.set("v3", rerouted)
	p.waitVersion(t, "v3")
	last := p.current.Load()
	if last.listeners["ingress_http"].chains[""] == after.listeners["ingress_http"].chains[""] {
		t.Error("the filter chain was not recompiled with its new routes")
	}
	for _, name := range []string{"A", "B", "C"} {
		if last.clusters[name] != after.clusters[name] {
			t.Errorf("cluster %s was recompiled by a route change", name)
		}
	}
	if r := get(t, noRedirectClient(), p.httpURL(t, "/b"), "x", nil); r.Backend != "A" {
		t.Errorf("after the route change /b got %+v, want backend A", r)
	}
}
