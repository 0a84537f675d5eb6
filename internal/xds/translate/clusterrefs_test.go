package translate

import (
	"fmt"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/gatewayapi"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// unpublishedClusters returns the clusters that res's routes and TCP proxies send to
// and that res does not publish. A data plane cannot serve such a route: Envoy answers
// 503, and the embedded proxy keeps its previous configuration, every other change
// included, for as long as the reference stays. The xDS server does not check these
// references (go-control-plane's consistency covers EDS and RDS names only), so the
// translator must not make them.
func unpublishedClusters(t testing.TB, res *Resources) []string {
	t.Helper()
	published := map[string]bool{}
	for _, r := range res.Clusters {
		published[r.(*clusterv3.Cluster).GetName()] = true
	}
	var missing []string
	note := func(where, name string) {
		if !published[name] {
			missing = append(missing, fmt.Sprintf("%s -> %s", where, name))
		}
	}
	for _, r := range res.Routes {
		rc := r.(*routev3.RouteConfiguration)
		for _, vh := range rc.GetVirtualHosts() {
			for _, route := range vh.GetRoutes() {
				where := rc.GetName() + " " + vh.GetName() + " " + route.GetName()
				action := route.GetRoute()
				if c := action.GetCluster(); c != "" {
					note(where, c)
				}
				for _, wc := range action.GetWeightedClusters().GetClusters() {
					note(where, wc.GetName())
				}
			}
		}
	}
	for _, r := range res.Listeners {
		l := r.(*listenerv3.Listener)
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var tp tcpproxyv3.TcpProxy
				if f.GetTypedConfig().MessageIs(&tp) {
					if err := f.GetTypedConfig().UnmarshalTo(&tp); err != nil {
						t.Fatal(err)
					}
					where := l.GetName() + " " + fc.GetName()
					if c := tp.GetCluster(); c != "" {
						note(where, c)
					}
					for _, wc := range tp.GetWeightedClusters().GetClusters() {
						note(where, wc.GetName())
					}
				}
			}
		}
	}
	slices.Sort(missing)
	return missing
}

// httpsOnlyGateway is the conformance suite's Gateway with HTTPS listeners only, one
// without a hostname and one for second-example.org, and the routes of its
// HTTPRouteHTTPSListener test: example.org, which the hostname-less listener serves as
// a host of its own under the listener's "*" server name, and a route without
// hostnames on the other listener.
func httpsOnlyGateway(t *testing.T) []runtime.Object {
	objs := testutil.DecodeObjects(t, `
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
kind: Gateway
metadata: {name: same-namespace-with-https-listener, namespace: infra}
spec:
  gatewayClassName: portico
  listeners:
  - {name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: cert}]}}
  - {name: https-with-hostname, protocol: HTTPS, port: 443, hostname: second-example.org, tls: {certificateRefs: [{name: cert}]}}
---
kind: HTTPRoute
metadata: {name: httproute-https-test, namespace: infra}
spec:
  parentRefs: [{name: same-namespace-with-https-listener}]
  hostnames: [example.org]
  rules: [{backendRefs: [{name: infra-backend-v1, port: 8080}]}]
---
kind: HTTPRoute
metadata: {name: httproute-https-test-no-hostname, namespace: infra}
spec:
  parentRefs: [{name: same-namespace-with-https-listener, sectionName: https-with-hostname}]
  rules: [{backendRefs: [{name: infra-backend-v2, port: 8080}]}]`)
	for _, name := range []string{"infra-backend-v1", "infra-backend-v2"} {
		objs = append(objs, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}})
	}
	return append(objs, testutil.TLSSecret("infra", "cert", testutil.SelfSigned("example.org")))
}

// TestGatewayHTTPSRouteHostsHaveTheirClusters checks that a route that only an HTTPS
// listener without a hostname serves, under a host of its own, has its cluster
// published, by the full and the incremental translator: it was published only while
// some other route used the same Service port, and a Gateway data plane of the
// conformance run (HTTPRouteHTTPSListener) waited a minute for it and failed.
func TestGatewayHTTPSRouteHostsHaveTheirClusters(t *testing.T) {
	g := dag.Build(store.FromObjects(httpsOnlyGateway(t)), dag.Options{Processors: []dag.Processor{gatewayapi.Processor{}}})
	for _, st := range g.Statuses {
		if st.Status != dag.StatusValid {
			t.Fatalf("%s: %s: %s", st.Object, st.Status, st.Description)
		}
	}
	full, err := Translate(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	inc, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	incremental, err := inc.Translate(g)
	if err != nil {
		t.Fatal(err)
	}
	for name, res := range map[string]*Resources{"full": full, "incremental": incremental} {
		if missing := unpublishedClusters(t, res); len(missing) > 0 {
			t.Errorf("%s translation: routes to clusters it does not publish: %q", name, missing)
		}
		if len(res.Clusters) != 2 || len(res.Endpoints) != 2 {
			t.Errorf("%s translation: %d clusters, %d load assignments, want 2 of each (infra-backend-v1 and v2)",
				name, len(res.Clusters), len(res.Endpoints))
		}
	}
}
