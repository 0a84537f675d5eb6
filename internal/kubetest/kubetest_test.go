package kubetest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-dev/portico/internal/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &env)) }

const ns = "shop"

func TestObjectsSurviveAPIServerRestart(t *testing.T) {
	env.Require(t)
	ctx := t.Context()
	c := env.Config

	create(t, c, "/api/v1/namespaces", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	create(t, c, "/api/v1/namespaces/"+ns+"/services", &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080),
		}}},
	})
	ready := true
	create(t, c, "/apis/discovery.k8s.io/v1/namespaces/"+ns+"/endpointslices", &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "web-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		// Not a loopback address: the API server rejects those in endpoints.
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:     []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}},
	})
	create(t, c, "/apis/networking.k8s.io/v1/namespaces/"+ns+"/ingresses", ingress("web"))

	check := func() string {
		t.Helper()
		var svcs corev1.ServiceList
		do(t, c, http.MethodGet, "/api/v1/namespaces/"+ns+"/services", nil, &svcs)
		if len(svcs.Items) != 1 || svcs.Items[0].Spec.ClusterIP == "" {
			t.Fatalf("services = %+v, want web with a cluster IP", svcs.Items)
		}
		var slices discoveryv1.EndpointSliceList
		do(t, c, http.MethodGet, "/apis/discovery.k8s.io/v1/namespaces/"+ns+"/endpointslices?labelSelector="+discoveryv1.LabelServiceName+"%3Dweb", nil, &slices)
		if len(slices.Items) != 1 || slices.Items[0].Endpoints[0].Addresses[0] != "10.0.0.1" {
			t.Fatalf("endpointslices = %+v, want web-1 with 10.0.0.1", slices.Items)
		}
		var ings networkingv1.IngressList
		do(t, c, http.MethodGet, "/apis/networking.k8s.io/v1/namespaces/"+ns+"/ingresses", nil, &ings)
		if len(ings.Items) != 1 || ings.Items[0].Spec.Rules[0].Host != "web.example.com" {
			t.Fatalf("ingresses = %+v, want web", ings.Items)
		}
		return ings.ResourceVersion
	}
	rv := check()

	// A watch open across the restart ends. The new kube-apiserver's watch cache starts
	// at the current etcd revision, so a watch from an older resource version is refused
	// with 410 Gone (an informer then relists), and one from a fresh list sees changes.
	path := "/apis/networking.k8s.io/v1/namespaces/" + ns + "/ingresses"
	w := watch(t, c, path, rv)
	begin := time.Now()
	if err := env.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver restarted in %v", time.Since(begin).Round(time.Millisecond))
	if ev, err := w.next(); err == nil {
		t.Fatalf("watch open across the restart delivered %s, want the stream to end", ev.Type)
	}
	rv2 := check()
	w = watch(t, c, path, rv)
	ev, err := w.next()
	w.close()
	if err != nil || ev.Type != "ERROR" || ev.status().Code != http.StatusGone {
		t.Fatalf("watch from %s (before the restart): %v %s %s, want ERROR 410", rv, err, ev.Type, ev.Object)
	}
	t.Logf("watch from the resource version before the restart: %s", ev.status().Message)
	w = watch(t, c, path, rv2)
	defer w.close()
	create(t, c, path, ingress("after-restart"))
	ev, err = w.next()
	if err != nil || ev.Type != "ADDED" || ev.ingress().Name != "after-restart" {
		t.Fatalf("watch from %s after the restart: %v %s %s, want ADDED after-restart", rv2, err, ev.Type, ev.Object)
	}
}

// A ServiceAccount token from the TokenRequest API authenticates through
// Env.TokenConfig, and RBAC decides what it may do.
func TestServiceAccountTokenAndRBAC(t *testing.T) {
	env.Require(t)
	const ns = "rbac"
	c := env.Config
	create(t, c, "/api/v1/namespaces", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	create(t, c, "/api/v1/namespaces/"+ns+"/serviceaccounts", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "portico"}})
	var tr authenticationv1.TokenRequest
	do(t, c, http.MethodPost, "/api/v1/namespaces/"+ns+"/serviceaccounts/portico/token", &authenticationv1.TokenRequest{}, &tr)
	if tr.Status.Token == "" {
		t.Fatal("TokenRequest returned no token")
	}
	sa := env.TokenConfig(tr.Status.Token)

	path := "/apis/networking.k8s.io/v1/namespaces/" + ns + "/ingresses"
	if err := sa.Do(t.Context(), http.MethodGet, path, nil, nil); kubetest.StatusCode(err) != http.StatusForbidden {
		t.Fatalf("list ingresses before the RoleBinding: %v, want 403", err)
	}
	create(t, c, "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/roles", &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "ingress-reader"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: []string{"get", "list", "watch"},
		}},
	})
	create(t, c, "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/rolebindings", &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "portico"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "ingress-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "portico"}},
	})
	// RBAC reads bindings from an informer: allow a moment.
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = sa.Do(t.Context(), http.MethodGet, path, nil, nil); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("list ingresses after the RoleBinding: %v", err)
	}
	if err := sa.Do(t.Context(), http.MethodGet, "/api/v1/namespaces/"+ns+"/secrets", nil, nil); kubetest.StatusCode(err) != http.StatusForbidden {
		t.Fatalf("list secrets: %v, want 403", err)
	}

	// The kubeconfig files carry the same credentials.
	kc, err := env.TokenKubeconfig(tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{env.Kubeconfig, kc} {
		data, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(data), env.URL) {
			t.Fatalf("kubeconfig %s: %v\n%s", f, err, data)
		}
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
	var nss corev1.NamespaceList
	do(t, e.Config, http.MethodGet, "/api/v1/namespaces", nil, &nss)
	for _, n := range nss.Items {
		if n.Name == ns || n.Name == "rbac" {
			t.Errorf("second Env sees namespace %s of the first", n.Name)
		}
	}
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Dir after Stop: %v, want it gone", err)
	}
	if err := e.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func ingress(name string) *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: name + ".example.com",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: "web", Port: networkingv1.ServiceBackendPort{Name: "http"},
					}},
				}},
			}},
		}}},
	}
}

func create(t *testing.T, c *kubetest.Config, path string, obj any) {
	t.Helper()
	do(t, c, http.MethodPost, path, obj, nil)
}

func do(t *testing.T, c *kubetest.Config, method, path string, in, out any) {
	t.Helper()
	if err := c.Do(t.Context(), method, path, in, out); err != nil {
		t.Fatal(err)
	}
}

type event struct {
	Type   string
	Object json.RawMessage
}

func (ev event) ingress() (ing networkingv1.Ingress) {
	_ = json.Unmarshal(ev.Object, &ing)
	return ing
}

func (ev event) status() (s metav1.Status) {
	_ = json.Unmarshal(ev.Object, &s)
	return s
}

type watcher struct {
	body io.ReadCloser
	dec  *json.Decoder
}

func watch(t *testing.T, c *kubetest.Config, path, rv string) *watcher {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Host+path+"?watch=1&resourceVersion="+rv, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Not HTTPClient: its overall timeout would cut the stream.
	client := *c.HTTPClient()
	client.Timeout = 0
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("watch %s: %s: %s", path, resp.Status, body)
	}
	return &watcher{body: resp.Body, dec: json.NewDecoder(resp.Body)}
}

func (w *watcher) next() (event, error) {
	var ev event
	err := w.dec.Decode(&ev)
	return ev, err
}

func (w *watcher) close() { w.body.Close() }

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
