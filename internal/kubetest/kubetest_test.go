package kubetest_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/portico-dev/portico/internal/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &env)) }

func TestObjectsSurviveAPIServerRestart(t *testing.T) {
	env.Require(t)
	ctx := t.Context()
	cs := kubetest.Clientset(t, env.Config)
	const ns = "shop"

	must(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))(t)
	must(cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080),
		}}},
	}, metav1.CreateOptions{}))(t)
	must(cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "web-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		// Not a loopback address: the API server rejects those in endpoints.
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
		Ports:     []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}))(t)
	ingresses := cs.NetworkingV1().Ingresses(ns)
	must(ingresses.Create(ctx, ingress("web"), metav1.CreateOptions{}))(t)

	check := func() string {
		t.Helper()
		svcs := must(cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}))(t)
		if len(svcs.Items) != 1 || svcs.Items[0].Spec.ClusterIP == "" {
			t.Fatalf("services = %+v, want web with a cluster IP", svcs.Items)
		}
		slices := must(cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"}))(t)
		if len(slices.Items) != 1 || slices.Items[0].Endpoints[0].Addresses[0] != "10.0.0.1" {
			t.Fatalf("endpointslices = %+v, want web-1 with 10.0.0.1", slices.Items)
		}
		ings := must(ingresses.List(ctx, metav1.ListOptions{}))(t)
		if len(ings.Items) != 1 || ings.Items[0].Spec.Rules[0].Host != "web.example.com" {
			t.Fatalf("ingresses = %+v, want web", ings.Items)
		}
		return ings.ResourceVersion
	}
	rv := check()

	// A watch open across the restart ends. The new kube-apiserver's watch cache starts
	// at the etcd revision of its start, past rv (the old one deletes its identity Lease
	// on the way out), so a watch from rv is refused with 410 Gone and the client must
	// relist, as informers do; a watch from a fresh list sees new changes.
	w := must(ingresses.Watch(ctx, metav1.ListOptions{ResourceVersion: rv}))(t)
	begin := time.Now()
	if err := env.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver restarted in %v", time.Since(begin).Round(time.Millisecond))
	if ev, ok := next(t, w); ok {
		t.Fatalf("watch open across the restart delivered %s, want the stream to end", ev.Type)
	}
	rv2 := check()

	w = must(ingresses.Watch(ctx, metav1.ListOptions{ResourceVersion: rv}))(t)
	ev, ok := next(t, w)
	w.Stop()
	if err := apierrors.FromObject(ev.Object); !ok || ev.Type != watch.Error || !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch from %s (before the restart): %s %v, want an Expired error", rv, ev.Type, err)
	} else {
		t.Logf("watch from the resource version before the restart: %v", err)
	}

	w = must(ingresses.Watch(ctx, metav1.ListOptions{ResourceVersion: rv2}))(t)
	defer w.Stop()
	must(ingresses.Create(ctx, ingress("after-restart"), metav1.CreateOptions{}))(t)
	ev, ok = next(t, w)
	if ing, _ := ev.Object.(*networkingv1.Ingress); !ok || ev.Type != watch.Added || ing == nil || ing.Name != "after-restart" {
		t.Fatalf("watch from %s after the restart: %s %v, want ADDED after-restart", rv2, ev.Type, ev.Object)
	}
}

// A ServiceAccount token from the TokenRequest API authenticates through
// Env.TokenConfig and Env.TokenKubeconfig, and RBAC decides what it may do.
func TestServiceAccountTokenAndRBAC(t *testing.T) {
	env.Require(t)
	ctx := t.Context()
	admin := kubetest.Clientset(t, env.Config)
	const ns = "rbac"
	must(admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))(t)
	must(admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "portico"}}, metav1.CreateOptions{}))(t)
	tr := must(admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "portico", &authenticationv1.TokenRequest{}, metav1.CreateOptions{}))(t)
	token := tr.Status.Token

	kc, err := env.TokenKubeconfig(token)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*rest.Config{"TokenConfig": env.TokenConfig(token), "TokenKubeconfig": fromFile} {
		sa := kubetest.Clientset(t, cfg)
		review := must(sa.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}))(t)
		if got, want := review.Status.UserInfo.Username, "system:serviceaccount:"+ns+":portico"; got != want {
			t.Errorf("%s: user %q, want %q", name, got, want)
		}
	}

	sa := kubetest.Clientset(t, env.TokenConfig(token))
	if _, err := sa.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list ingresses before the RoleBinding: %v, want Forbidden", err)
	}
	must(admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "ingress-reader"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{networkingv1.GroupName}, Resources: []string{"ingresses"}, Verbs: []string{"get", "list", "watch"},
		}},
	}, metav1.CreateOptions{}))(t)
	must(admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "portico"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "ingress-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "portico"}},
	}, metav1.CreateOptions{}))(t)
	// The RBAC authorizer reads bindings through an informer: allow it a moment.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err = sa.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("list ingresses after the RoleBinding: %v", err)
	}
	if _, err := sa.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list secrets: %v, want Forbidden", err)
	}

	data, err := os.ReadFile(env.Kubeconfig)
	if err != nil || !strings.Contains(string(data), env.URL) {
		t.Fatalf("admin kubeconfig: %v\n%s", err, data)
	}
}

// A second Env starts next to the first (as when several test binaries run at once) and
// Stop removes its directory; this also times a start with the binaries cached.
func TestSecondEnv(t *testing.T) {
	env.Require(t)
	begin := time.Now()
	e, err := kubetest.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second Env ready in %v at %s", time.Since(begin).Round(time.Millisecond), e.URL)
	if e.URL == env.URL {
		t.Errorf("both Envs at %s", e.URL)
	}
	etcdPID, apiPID := e.PIDs()
	t.Logf("etcd pid %d rss %s, kube-apiserver pid %d rss %s", etcdPID, rss(etcdPID), apiPID, rss(apiPID))
	nss := must(kubetest.Clientset(t, e.Config).CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}))(t)
	for _, n := range nss.Items {
		if n.Name == "shop" || n.Name == "rbac" {
			t.Errorf("second Env sees namespace %s of the first", n.Name)
		}
	}
	v := must(kubetest.Clientset(t, e.Config).Discovery().ServerVersion())(t)
	t.Logf("server version %s", v.GitVersion)
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Dir after Stop: %v, want it gone", err)
	}
	if err := e.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := http.Get(e.URL); err == nil {
		t.Errorf("%s still answers after Stop", e.URL)
	}
}

func ingress(name string) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: name + ".example.com",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: ptr(networkingv1.PathTypePrefix),
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: "web", Port: networkingv1.ServiceBackendPort{Name: "http"},
					}},
				}},
			}},
		}}},
	}
}

// next returns the watch's next event; ok is false when the stream ended. It fails the
// test after 30s without either.
func next(t *testing.T, w watch.Interface) (ev watch.Event, ok bool) {
	t.Helper()
	select {
	case ev, ok = <-w.ResultChan():
		return ev, ok
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event within 30s")
		return ev, false
	}
}

// must(f())(t) returns f's first result, failing t if f returned an error.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func rss(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return "?"
}

func ptr[T any](v T) *T { return &v }
