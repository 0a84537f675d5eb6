package kube

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/portico-dev/portico/internal/contourclient"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/kubetest"
)

// gatewayScaleGateways is how many Gateways the HTTPRoutes of TestGatewayAPIScale spread
// over.
const gatewayScaleGateways = 4

// TestGatewayAPIScale measures `portico serve` against the real API server with N
// HTTPRoutes and N HTTPProxies (N is 200, or PORTICO_KUBE_SCALE: docs/performance.md
// quotes 5000), each HTTPRoute with its own host and two rules with header matches on
// one of four Gateways, sending to a Service of another namespace that a ReferenceGrant
// opens to it. It logs the time until every object's status is written, from creating
// one more HTTPRoute (and one more HTTPProxy) to its status being readable, and from
// editing one (PUT of an HTTPRoute, PATCH of an HTTPProxy) to the new route in a data
// plane's xDS view (delta ADS with VHDS: the Gateway's HTTP port's hosts come one by
// one, as the shared listener's do). It asserts what a user would see (every route
// accepted with its references resolved, every HTTPProxy valid, each edit served);
// figures are logged, never compared with a deadline.
func TestGatewayAPIScale(t *testing.T) {
	if testing.Short() {
		t.Skip("scale test")
	}
	n := 200
	if s := os.Getenv("PORTICO_KUBE_SCALE"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 20 {
			t.Fatalf("PORTICO_KUBE_SCALE=%q: want a number of objects of each kind, at least 20", s)
		}
		n = v
	}
	if raceEnabled {
		t.Log("the race detector is on: the figures below are several times those without it")
	}
	cfg := env.AdminConfig(t)
	cfg.QPS, cfg.Burst = 2000, 4000
	env.InstallContourCRDs(t)
	env.InstallGatewayAPICRDs(t, kubetest.GatewayAPIStandard)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	gc, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const ns, backends, infra = "gwscale", "gwscale-backends", "gwscale-infra"
	for _, name := range []string{ns, backends, infra} {
		createNamespace(t, c, name)
	}
	createGatewayScaleObjects(t, c, gc, ns, backends, infra)
	ctx := context.Background()
	start := time.Now()
	parallel(t, n, func(i int) error {
		_, err := gc.GatewayV1().HTTPRoutes(ns).Create(ctx, scaleRoute(i, "/api", backends, infra), metav1.CreateOptions{})
		return err
	})
	parallel(t, n, func(i int) error {
		return createHTTPProxyJSON(ctx, cc, ns, fmt.Sprintf("hp-%d", i), proxySpec(i, "/"))
	})
	t.Logf("created %d HTTPRoutes and %d HTTPProxies in %s", n, n, time.Since(start).Round(time.Millisecond))

	ctlCfg := env.AdminConfig(t)
	ctlCfg.QPS, ctlCfg.Burst = 100, 200 // portico serve's defaults
	ctl := startControllerWith(t, ctlCfg, "gwscale", []string{ns, backends, infra}, serveCoalescing)
	start = time.Now()
	eventually(t, 10*time.Minute, "status on every HTTPRoute and HTTPProxy", func() bool {
		return acceptedRoutes(t, gc, ns) == n && validProxies(t, cc, ns) == n
	})
	t.Logf("initial status on %d HTTPRoutes and %d HTTPProxies after %s (status writes are paced by the controller's API client, %g requests/s)",
		n, n, time.Since(start).Round(time.Millisecond), ctlCfg.QPS)

	// A new object at a time, each once the previous one's status is written, the two
	// kinds alternated.
	const newcomers = 5
	var toRoute, toProxy []time.Duration
	for i := range newcomers {
		toRoute = append(toRoute, timeToStatus(t, func() error {
			_, err := gc.GatewayV1().HTTPRoutes(ns).Create(ctx, scaleRoute(n+i, "/api", backends, infra), metav1.CreateOptions{})
			return err
		}, func() bool { return routeAccepted(t, gc, ns, fmt.Sprintf("app-%d", n+i)) }))
		toProxy = append(toProxy, timeToStatus(t, func() error {
			return createHTTPProxyJSON(ctx, cc, ns, fmt.Sprintf("hp-%d", n+i), proxySpec(n+i, "/"))
		}, func() bool { return proxyValid(t, cc, ns, fmt.Sprintf("hp-%d", n+i)) }))
	}
	t.Logf("status of a new object at %d HTTPRoutes and %d HTTPProxies, from the create request to the status being readable: HTTPRoute median %s of %v; HTTPProxy median %s of %v",
		n+1, n+1, median(toRoute).Round(time.Millisecond), roundAll(toRoute), median(toProxy).Round(time.Millisecond), roundAll(toProxy))

	editRoutesToXDS(t, gc, cc, ctl, ns, backends, infra, n)
}

// createGatewayScaleObjects creates the GatewayClass, the Gateways (one HTTP listener
// each, routes from every namespace), the backends' Service and the ReferenceGrant that
// opens it to the routes' namespace, and the HTTPProxies' Service.
func createGatewayScaleObjects(t *testing.T, c kubernetes.Interface, gc gatewayclient.Interface, ns, backends, infra string) {
	t.Helper()
	ctx := context.Background()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(gc.GatewayV1().GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "gwscale"},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: dag.GatewayControllerName}}, metav1.CreateOptions{}))
	all := gatewayv1.NamespacesFromAll
	for g := range gatewayScaleGateways {
		must(gc.GatewayV1().Gateways(infra).Create(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gw-%d", g)}, Spec: gatewayv1.GatewaySpec{
			GatewayClassName: "gwscale", Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType,
				AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &all}}}}}}, metav1.CreateOptions{}))
	}
	must(gc.GatewayV1beta1().ReferenceGrants(backends).Create(ctx, &gatewayv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Name: "routes"},
		Spec: gatewayv1beta1.ReferenceGrantSpec{
			From: []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(ns)}},
			To:   []gatewayv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		}}, metav1.CreateOptions{}))
	// The routes' Services, without endpoints: the routes are accepted with their
	// references resolved, and answer 503.
	for _, svc := range []types.NamespacedName{{Namespace: backends, Name: "web"}, {Namespace: backends, Name: "canary"}, {Namespace: ns, Name: "svc"}} {
		must(c.CoreV1().Services(svc.Namespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc.Name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}, metav1.CreateOptions{}))
	}
}

// scaleRoute is HTTPRoute app-<i> with host app-<i>.gw.scale.test on Gateway
// gw-<i%gatewayScaleGateways>: a rule sending x-canary: true to canary, and one sending
// the API prefix with x-tenant: a, and everything else, to web.
func scaleRoute(i int, apiPrefix, backends, infra string) *gatewayv1.HTTPRoute {
	gwNS, backendNS := gatewayv1.Namespace(infra), gatewayv1.Namespace(backends)
	port := gatewayv1.PortNumber(80)
	prefix := gatewayv1.PathMatchPathPrefix
	ref := func(name string) []gatewayv1.HTTPBackendRef {
		return []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
			Name: gatewayv1.ObjectName(name), Namespace: &backendNS, Port: &port}}}}
	}
	path := func(p string) *gatewayv1.HTTPPathMatch { return &gatewayv1.HTTPPathMatch{Type: &prefix, Value: &p} }
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", i)},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
				Name: gatewayv1.ObjectName(fmt.Sprintf("gw-%d", i%gatewayScaleGateways)), Namespace: &gwNS}}},
			Hostnames: []gatewayv1.Hostname{gatewayv1.Hostname(scaleRouteHost(i))},
			Rules: []gatewayv1.HTTPRouteRule{
				{Matches: []gatewayv1.HTTPRouteMatch{{Path: path("/"), Headers: []gatewayv1.HTTPHeaderMatch{{Name: "x-canary", Value: "true"}}}}, BackendRefs: ref("canary")},
				{Matches: []gatewayv1.HTTPRouteMatch{{Path: path(apiPrefix), Headers: []gatewayv1.HTTPHeaderMatch{{Name: "x-tenant", Value: "a"}}}, {Path: path("/")}}, BackendRefs: ref("web")},
			},
		},
	}
}

func scaleRouteHost(i int) string { return fmt.Sprintf("app-%d.gw.scale.test", i) }

// acceptedRoutes counts the HTTPRoutes of ns whose Portico parent entry says Accepted
// and ResolvedRefs.
func acceptedRoutes(t *testing.T, gc gatewayclient.Interface, ns string) int {
	t.Helper()
	list, err := gc.GatewayV1().HTTPRoutes(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range list.Items {
		if accepted(&list.Items[i]) {
			n++
		}
	}
	return n
}

// routeAccepted reports whether HTTPRoute ns/name has Portico's parent entry, Accepted
// with its references resolved.
func routeAccepted(t *testing.T, gc gatewayclient.Interface, ns, name string) bool {
	t.Helper()
	r, err := gc.GatewayV1().HTTPRoutes(ns).Get(context.Background(), name, metav1.GetOptions{})
	return err == nil && accepted(r)
}

func accepted(r *gatewayv1.HTTPRoute) bool {
	for _, p := range r.Status.Parents {
		if p.ControllerName != dag.GatewayControllerName {
			continue
		}
		ok := 0
		for _, c := range p.Conditions {
			if (c.Type == string(gatewayv1.RouteConditionAccepted) || c.Type == string(gatewayv1.RouteConditionResolvedRefs)) &&
				c.Status == metav1.ConditionTrue && c.ObservedGeneration == r.Generation {
				ok++
			}
		}
		return ok == 2
	}
	return false
}

// proxyValid reports whether HTTPProxy ns/name's status says valid.
func proxyValid(t *testing.T, cc *contourclient.Client, ns, name string) bool {
	t.Helper()
	p, err := cc.HTTPProxies(ns).Get(context.Background(), name, metav1.GetOptions{})
	return err == nil && p.Status.CurrentStatus == "valid"
}

// timeToStatus runs create and returns the time until written holds.
func timeToStatus(t *testing.T, create func() error, written func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if err := create(); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the new object's status", written)
	return time.Since(start)
}

// editRoutesToXDS edits HTTPRoutes and HTTPProxies one at a time, each a lone change
// (the previous one in force and a pause after it), and logs the time from sending the
// edit to its new route being in a data plane's xDS view.
func editRoutesToXDS(t *testing.T, gc gatewayclient.Interface, cc *contourclient.Client, ctl *controller, ns, backends, infra string, n int) {
	t.Helper()
	ctx := context.Background()
	view := watchXDS(t, ctl.srv.XDSAddr())
	view.waitFor(t, scaleRouteHost(0), "/api", time.Minute)
	const edits = 11
	var toRoute, toProxy []time.Duration
	for k := range edits {
		path := fmt.Sprintf("/edit-%d", k)
		i := n - 1 - k
		r, err := gc.GatewayV1().HTTPRoutes(ns).Get(ctx, fmt.Sprintf("app-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.Spec = scaleRoute(i, path, backends, infra).Spec
		start := time.Now()
		if _, err := gc.GatewayV1().HTTPRoutes(ns).Update(ctx, r, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		toRoute = append(toRoute, view.waitFor(t, scaleRouteHost(i), path, time.Minute).Sub(start))
		time.Sleep(300 * time.Millisecond)

		patch := fmt.Sprintf(`{"spec": %s}`, proxySpec(k, path))
		start = time.Now()
		if _, err := cc.HTTPProxies(ns).Patch(ctx, fmt.Sprintf("hp-%d", k), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		toProxy = append(toProxy, view.waitFor(t, fmt.Sprintf("hp-%d.scale.test", k), path, time.Minute).Sub(start))
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("one edit → its route in a data plane's xDS view (delta ADS with VHDS), at %d HTTPRoutes and %d HTTPProxies: HTTPRoute median %s of %v; HTTPProxy median %s of %v",
		n+5, n+5, median(toRoute).Round(100*time.Microsecond), roundAll(toRoute), median(toProxy).Round(100*time.Microsecond), roundAll(toProxy))
}
