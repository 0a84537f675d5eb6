package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/kubetest"
)

// TestStatusFollowsEnvoyServiceAndOwnership: Ingresses report the Envoy Service's
// load-balancer address and follow it when it changes; an Ingress moved to another
// class has Portico's address cleared.
func TestStatusFollowsEnvoyServiceAndOwnership(t *testing.T) {
	cfg := env.AdminConfig(t)
	c := kubetest.Clientset(t, cfg)
	ctx := context.Background()
	const ns = "envoy-status"
	createNamespace(t, c, ns)
	envoy, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "envoy"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setLB := func(ip string) {
		t.Helper()
		envoy.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		if envoy, err = c.CoreV1().Services(ns).UpdateStatus(ctx, envoy, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setLB("198.51.100.1")
	if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ingress("web", "web.test", "/", "svc"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := app.NewServer(app.ServeOptions{
		Config: cfg, XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", WatchNamespaces: []string{ns},
		EnvoyService: types.NamespacedName{Namespace: ns, Name: "envoy"},
		Holdoff:      50 * time.Millisecond, MaxDelay: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() { cancel(); <-done }()

	lbIP := func() string {
		ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(ing.Status.LoadBalancer.Ingress) != 1 {
			return ""
		}
		return ing.Status.LoadBalancer.Ingress[0].IP
	}
	eventually(t, 20*time.Second, "the Envoy Service's address on the Ingress", func() bool { return lbIP() == "198.51.100.1" })
	setLB("198.51.100.2")
	eventually(t, 10*time.Second, "the Ingress to follow the Envoy Service", func() bool { return lbIP() == "198.51.100.2" })

	// Moving the Ingress to another controller's class clears Portico's address.
	ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing.Annotations = map[string]string{"kubernetes.io/ingress.class": "nginx"}
	if _, err := c.NetworkingV1().Ingresses(ns).Update(ctx, ing, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "Portico's address to be cleared", func() bool {
		ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && len(ing.Status.LoadBalancer.Ingress) == 0
	})
}

// TestInvalidIngressGetsAnEvent: the reason an Ingress is not served shows up in
// `kubectl describe ingress`, as a Warning Event.
func TestInvalidIngressGetsAnEvent(t *testing.T) {
	cfg := env.AdminConfig(t)
	c := kubetest.Clientset(t, cfg)
	ctx := context.Background()
	const ns = "events"
	createNamespace(t, c, ns)
	bucket := ingress("bucket", "bucket.test", "/", "svc")
	group := "acme.io"
	bucket.Spec.Rules[0].HTTP.Paths[0].Backend = networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "StorageBucket", Name: "assets"}}
	if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, bucket, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startController(t, cfg, "events", []string{ns})
	eventually(t, 20*time.Second, "a Warning Event on the invalid Ingress", func() bool {
		list, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=bucket"})
		if err != nil {
			return false
		}
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == "Invalid" && strings.Contains(e.Message, `kind "StorageBucket"`) && e.InvolvedObject.Kind == "Ingress" {
				return true
			}
		}
		return false
	})
}

// TestStaleAddressesAreClearedOnlyWhenPorticoWroteThem: an Ingress of another class that
// still carries an address Portico wrote earlier (another run, another address) is
// cleared; one whose address another controller wrote is left alone.
func TestStaleAddressesAreClearedOnlyWhenPorticoWroteThem(t *testing.T) {
	cfg := env.AdminConfig(t)
	c := kubetest.Clientset(t, cfg)
	ctx := context.Background()
	const ns = "stale"
	createNamespace(t, c, ns)
	for name, manager := range map[string]string{"ours-before": "portico", "theirs": "nginx-ingress-controller"} {
		ing := ingress(name, name+".test", "/", "svc")
		ing.Annotations = map[string]string{"kubernetes.io/ingress.class": "nginx"}
		if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		patch := []byte(`{"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.9"}]}}}`)
		if _, err := c.NetworkingV1().Ingresses(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: manager}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	startController(t, cfg, "stale", []string{ns}) // reports 192.0.2.10, not 203.0.113.9
	eventually(t, 20*time.Second, "the address Portico wrote earlier to be cleared", func() bool {
		ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "ours-before", metav1.GetOptions{})
		return err == nil && len(ing.Status.LoadBalancer.Ingress) == 0
	})
	ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "theirs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ing.Status.LoadBalancer.Ingress) != 1 || ing.Status.LoadBalancer.Ingress[0].IP != "203.0.113.9" {
		t.Errorf("another controller's status was changed: %v", ing.Status.LoadBalancer.Ingress)
	}
}
