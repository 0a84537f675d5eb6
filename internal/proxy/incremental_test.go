package proxy

import (
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/portico-dev/portico/internal/proxy/xdsclient"
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
		if after.clusterNamed(name) != before.clusterNamed(name) {
			t.Errorf("cluster %s was recompiled though nothing of it changed", name)
		}
	}
	if after.clusterNamed("B") == before.clusterNamed("B") {
		t.Error("cluster B was not recompiled with its new endpoints")
	}
	if after.listeners["ingress_http"].Chains[""] != before.listeners["ingress_http"].Chains[""] {
		t.Error("the filter chain was recompiled though its routes did not change")
	}
	if before.clusterNamed("A") == nil || before.clusterNamed("C") == nil {
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
	if last.listeners["ingress_http"].Chains[""] == after.listeners["ingress_http"].Chains[""] {
		t.Error("the filter chain was not recompiled with its new routes")
	}
	for _, name := range []string{"A", "B", "C"} {
		if last.clusterNamed(name) != after.clusterNamed(name) {
			t.Errorf("cluster %s was recompiled by a route change", name)
		}
	}
	if r := get(t, noRedirectClient(), p.httpURL(t, "/b"), "x", nil); r.Backend != "A" {
		t.Errorf("after the route change /b got %+v, want backend A", r)
	}
}

// TestReconnectResendsOnlyWhatChanged: a new stream starts from the versions the
// proxy holds (initial_resource_versions), so the server sends only what changed
// while the proxy was away.
func TestReconnectResendsOnlyWhatChanged(t *testing.T) {
	cp, p, res := proxyRoutingAllTo(t, "A")
	cp.stop()
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("B", prefixMatch("/"))))}
	cp.set("v2", res)
	cp.restart()
	p.waitVersion(t, "v2")
	var sent []string
	cp.mu.Lock()
	for k, resp := range cp.sent {
		if k.stream != cp.lastStream {
			continue
		}
		for _, r := range resp.GetResources() {
			sent = append(sent, xdsclient.ShortTypeName(resp.GetTypeUrl())+" "+r.GetName())
		}
	}
	cp.mu.Unlock()
	if len(sent) != 1 || sent[0] != "RouteConfiguration ingress_http" {
		t.Errorf("resources sent after reconnecting: %q, want only the changed route configuration", sent)
	}
	if r := get(t, noRedirectClient(), p.httpURL(t, "/"), "x", nil); r.Backend != "B" {
		t.Errorf("after reconnecting got %+v, want backend B", r)
	}
}

// proxyRoutingAllTo starts a control plane with the three backends' clusters and
// every request routed to cluster, and a proxy that has applied it as "v1".
func proxyRoutingAllTo(t *testing.T, cluster string) (*controlPlane, *testProxy, resources) {
	t.Helper()
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster(cluster, prefixMatch("/"))))}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	return cp, p, res
}
