package provision

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &env)) }

func dataPlaneNames(t *testing.T, c kubernetes.Interface, ns string) (deployments, services []string) {
	t.Helper()
	ctx := context.Background()
	deps, err := c.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		deployments = append(deployments, d.Name)
	}
	svcs, err := c.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		services = append(services, s.Name)
	}
	slices.Sort(deployments)
	slices.Sort(services)
	return deployments, services
}

// TestEachGatewayGetsADataPlaneAndLosesItWithTheGateway runs the provisioner against a
// real API server: what it applies passes the API server's validation, each Gateway gets
// its Deployment and Service, an operator's annotation survives a re-apply, a Sync that
// changes nothing writes nothing, and a Gateway that goes loses its data plane while
// objects the provisioner did not make stay.
func TestEachGatewayGetsADataPlaneAndLosesItWithTheGateway(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	cfg := env.AdminConfig(t)
	var patches atomic.Int32
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPatch {
				patches.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	c := kubetest.Clientset(t, cfg)
	ns := "portico-provision"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bystander := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "portico", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8001}}}}
	if _, err := c.CoreV1().Services(ns).Create(ctx, bystander, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := New(c, Options{Namespace: ns, DataPlane: DataPlanePortico, PorticoImage: "ghcr.io/portico-dev/portico:test",
		XDSAddress: "portico." + ns + ".svc:8001", XDSClientSecret: "portico-xds-client"}, slog.New(slog.DiscardHandler))

	blue, green := gateway("infra", "blue", 80, 443), gateway("infra", "green", 80)
	if failed := p.Sync(ctx, []*gatewayv1.Gateway{blue, green}); failed != 0 {
		t.Fatalf("Sync failed %d times", failed)
	}
	blueName, greenName := Name(types.NamespacedName{Namespace: "infra", Name: "blue"}), Name(types.NamespacedName{Namespace: "infra", Name: "green"})
	deps, svcs := dataPlaneNames(t, c, ns)
	if want := slices.Sorted(slices.Values([]string{blueName, greenName})); !slices.Equal(deps, want) {
		t.Errorf("Deployments %q, want %q", deps, want)
	}
	if want := slices.Sorted(slices.Values([]string{blueName, greenName, "portico"})); !slices.Equal(svcs, want) {
		t.Errorf("Services %q, want %q", svcs, want)
	}

	// An operator annotates blue's Service (a cloud load balancer setting, say).
	svc, err := c.CoreV1().Services(ns).Get(ctx, blueName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Annotations = map[string]string{"example.com/lb-class": "internal"}
	if svc, err = c.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Nothing changed for the provisioner: no write.
	before := patches.Load()
	if failed := p.Sync(ctx, []*gatewayv1.Gateway{blue, green}); failed != 0 {
		t.Fatalf("second Sync failed %d times", failed)
	}
	if n := patches.Load() - before; n != 0 {
		t.Errorf("a Sync that changes nothing sent %d PATCH requests", n)
	}
	again, err := c.CoreV1().Services(ns).Get(ctx, blueName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != svc.ResourceVersion {
		t.Errorf("an unchanged Sync wrote blue's Service (resourceVersion %s → %s)", svc.ResourceVersion, again.ResourceVersion)
	}

	// Blue stops listening on 443, and green goes.
	blue = gateway("infra", "blue", 80)
	if failed := p.Sync(ctx, []*gatewayv1.Gateway{blue}); failed != 0 {
		t.Fatalf("third Sync failed %d times", failed)
	}
	deps, svcs = dataPlaneNames(t, c, ns)
	if !slices.Equal(deps, []string{blueName}) || !slices.Equal(svcs, slices.Sorted(slices.Values([]string{blueName, "portico"}))) {
		t.Errorf("after green went: Deployments %q, Services %q; want blue's only, and the bystander Service kept", deps, svcs)
	}
	got, err := c.CoreV1().Services(ns).Get(ctx, blueName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Ports) != 1 || got.Spec.Ports[0].Port != 80 {
		t.Errorf("blue's Service ports %+v, want 80 only", got.Spec.Ports)
	}
	if got.Annotations["example.com/lb-class"] != "internal" {
		t.Errorf("the operator's annotation was lost on re-apply: %v", got.Annotations)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
