package kube

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	contourv1beta1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/contourclient"
	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/testutil"
)

// env is a real kube-apiserver for the tests that need one (skipped under -short).
var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &env)) }

func createNamespace(t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	if _, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runSource runs a Source until the test ends and waits for its caches to sync.
func runSource(t *testing.T, cfg Config) *Source {
	t.Helper()
	src := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("source: %v", err)
		}
	})
	eventually(t, 20*time.Second, "the source's caches to sync", src.Synced)
	return src
}

// eventually polls cond until it holds, failing t after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// createProxyJSON creates an HTTPProxy from the JSON of its spec, as kubectl would send
// it: values the Go types cannot hold reach the API server this way.
func createProxyJSON(ctx context.Context, c *contourclient.Client, ns, name, spec string) error {
	body := `{"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy", "metadata": {"name": "` + name + `"}, "spec": ` + spec + `}`
	return c.ProjectREST().Post().Namespace(ns).Resource(contourclient.ResourceHTTPProxies).Body([]byte(body)).Do(ctx).Error()
}

// TestSourceWatchesHTTPProxies: with deploy/crds installed, HTTPProxies and
// projectcontour.io TLSCertificateDelegations of the watched namespaces reach the store
// as the API server holds them (Portico's additions to the schema included), follow
// updates, status writes and deletions; one that the API server holds but that cannot be
// decoded is kept marked without hiding the others; contour.heptio.com's delegation of
// the same name is a separate object.
func TestSourceWatchesHTTPProxies(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	ctx := t.Context()
	const ns, elsewhere = "proxy-source", "proxy-source-other"
	createNamespace(t, c, ns)
	createNamespace(t, c, elsewhere)

	three, five := int64(3), int64(5)
	spec := contourv1.HTTPProxySpec{
		VirtualHost: &contourv1.VirtualHost{
			Fqdn: "app.example.com",
			TLS:  &contourv1.TLS{SecretName: "certs/wildcard", MinimumProtocolVersion: "1.2"},
		},
		Includes: []contourv1.Include{{
			Name: "blog", Namespace: "marketing", PermitInsecure: true,
			Conditions: []contourv1.MatchCondition{{Prefix: "/blog"}, {Header: &contourv1.HeaderMatchCondition{Name: "x-team", Exact: "blue"}}},
		}},
		Routes: []contourv1.Route{{
			Conditions: []contourv1.MatchCondition{{Prefix: "/"}, {Cookie: "user=test"}, {UserAgent: "Chrome"}},
			Services:   []contourv1.Service{{Name: "web", Port: 80, Weight: 100}},
			RetryPolicy: &contourv1.RetryPolicy{
				NumRetries: 2, RetryOn: []contourv1.RetryOn{"retriable-status-codes"}, RetriableStatusCodes: []uint32{503},
			},
			FailurePolicy: &contourv1.FailurePolicy{Count: &three, Consecutive5xx: &five, Interval: "5s"},
		}},
		HTTPVersions: []contourv1.HTTPVersionType{contourv1.HTTPVersion2},
	}
	if _, err := cc.HTTPProxies(ns).Create(ctx, &contourv1.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Name: "root"}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.HTTPProxies(elsewhere).Create(ctx, &contourv1.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Name: "not-watched"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The schema has no bounds on retriableStatusCodes; the Go type is []uint32.
	const undecodable = `{"routes": [{"services": [{"name": "s", "port": 80}], "retryPolicy": {"retriableStatusCodes": [-1]}}]}`
	if err := createProxyJSON(ctx, cc, ns, "broken-before-start", undecodable); err != nil {
		t.Fatal(err)
	}
	delegations := []contourv1.CertificateDelegation{{SecretName: "wildcard", TargetNamespaces: []string{"*"}}}
	if _, err := cc.ProjectTLSCertificateDelegations(ns).Create(ctx, &contourv1.TLSCertificateDelegation{
		ObjectMeta: metav1.ObjectMeta{Name: "certs"}, Spec: contourv1.TLSCertificateDelegationSpec{Delegations: delegations},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.TLSCertificateDelegations(ns).Create(ctx, &contourv1beta1.TLSCertificateDelegation{
		ObjectMeta: metav1.ObjectMeta{Name: "certs"},
		Spec:       contourv1beta1.TLSCertificateDelegationSpec{Delegations: []contourv1beta1.CertificateDelegation{{SecretName: "old", TargetNamespaces: []string{"web"}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	logs := &testutil.SyncBuffer{}
	src := runSource(t, Config{
		Client: c, Contour: cc, Namespaces: []string{ns},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	snap := src.Snapshot()
	root := snap.HTTPProxies[key(ns, "root")]
	if root == nil {
		t.Fatalf("after sync: HTTPProxies %v", keys(snap.HTTPProxies))
	}
	if diff := cmp.Diff(spec, root.Spec); diff != "" {
		t.Errorf("spec in the store, as the API server keeps it (-created +stored):\n%s", diff)
	}
	if root.Status.CurrentStatus != "NotReconciled" {
		t.Errorf("status of a new HTTPProxy = %+v, want the CRD's default", root.Status)
	}
	if len(snap.HTTPProxies) != 2 {
		t.Errorf("HTTPProxies in the store = %v, want %s/root and the marked broken one (the unwatched namespace left out)", keys(snap.HTTPProxies), ns)
	}
	if reason, bad := contourclient.Undecodable(snap.HTTPProxies[key(ns, "broken-before-start")]); !bad || !strings.Contains(reason, "retriableStatusCodes") {
		t.Errorf("the undecodable HTTPProxy: reason %q, marked %v; want it marked, naming the field", reason, bad)
	}
	if !strings.Contains(logs.String(), "HTTPProxy cannot be read") || !strings.Contains(logs.String(), "broken-before-start") {
		t.Errorf("no warning naming the unreadable HTTPProxy:\n%s", logs.String())
	}
	if d := snap.ProjectTLSCertificateDelegations[key(ns, "certs")]; d == nil || !cmp.Equal(delegations, d.Spec.Delegations) {
		t.Errorf("projectcontour.io delegation in the store = %+v", d)
	}
	if d := snap.TLSCertificateDelegations[key(ns, "certs")]; d == nil || d.Spec.Delegations[0].SecretName != "old" {
		t.Errorf("contour.heptio.com delegation in the store = %+v", d)
	}

	// Through the watch: a new object, a spec update, a status written by the
	// controller through the status subresource.
	if err := createProxyJSON(ctx, cc, ns, "broken-after-start", undecodable); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.HTTPProxies(ns).Create(ctx, &contourv1.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Name: "child"},
		Spec:       contourv1.HTTPProxySpec{Routes: []contourv1.Route{{Services: []contourv1.Service{{Name: "s", Port: 80}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "HTTPProxy child in the store", func() bool {
		return src.Snapshot().HTTPProxies[key(ns, "child")] != nil
	})
	patch := []byte(`{"spec": {"virtualhost": {"fqdn": "patched.example.com"}}}`)
	if _, err := cc.HTTPProxies(ns).Patch(ctx, "root", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the patched host in the store", func() bool {
		return src.Snapshot().HTTPProxies[key(ns, "root")].Spec.VirtualHost.Fqdn == "patched.example.com"
	})
	cur, err := cc.HTTPProxies(ns).Get(ctx, "root", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status = contourv1.HTTPProxyStatus{
		CurrentStatus: "invalid", Description: "Secret certs/wildcard is not delegated",
		Conditions: []contourv1.DetailedCondition{{
			Condition: metav1.Condition{Type: "Valid", Status: metav1.ConditionFalse, Reason: "ErrorPresent", Message: "at least one error present", LastTransitionTime: metav1.Now()},
			Errors:    []contourv1.SubCondition{{Type: "TLSError", Status: metav1.ConditionTrue, Reason: "DelegationNotPermitted", Message: "Secret certs/wildcard is not delegated"}},
		}},
	}
	cur.Spec.VirtualHost.Fqdn = "ignored.example.com" // the status subresource keeps the spec
	if _, err := cc.HTTPProxies(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the written status in the store", func() bool {
		st := src.Snapshot().HTTPProxies[key(ns, "root")].Status
		return st.CurrentStatus == "invalid" && len(st.Conditions) == 1 && len(st.Conditions[0].Errors) == 1
	})
	if fqdn := src.Snapshot().HTTPProxies[key(ns, "root")].Spec.VirtualHost.Fqdn; fqdn != "patched.example.com" {
		t.Errorf("fqdn after a status update = %q, want the spec unchanged", fqdn)
	}

	for _, name := range []string{"root", "child", "broken-before-start", "broken-after-start"} {
		if err := cc.HTTPProxies(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cc.ProjectTLSCertificateDelegations(ns).Delete(ctx, "certs", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "deletions to reach the store", func() bool {
		s := src.Snapshot()
		return len(s.HTTPProxies) == 0 && len(s.ProjectTLSCertificateDelegations) == 0
	})
	if len(src.Snapshot().TLSCertificateDelegations) != 1 {
		t.Error("deleting the projectcontour.io delegation removed contour.heptio.com's of the same name")
	}
}

// TestHTTPProxyCRDSchema: the generated CRD enforces the schema's rules, the CEL ones
// included, and keeps what it accepts.
func TestHTTPProxyCRDSchema(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	cc := kubetest.ContourClient(t, cfg)
	ctx := t.Context()
	const ns = "proxy-schema"
	createNamespace(t, kubetest.Clientset(t, cfg), ns)

	accepted := `{"virtualhost": {"fqdn": "*.example.com", "jwtProviders": [{"name": "p", "localJWKS": {"secretName": "s", "key": "k"}}]},
  "routes": [{"conditions": [{"prefix": "/"}], "services": [{"name": "s", "port": 65535, "validation": {"caSecret": "ca", "subjectName": "a", "subjectNames": ["a", "b"]}}],
    "requestRedirectPolicy": {"hostname": "example.com"}, "failurePolicy": {"maxEjectionPercent": 100}}]}`
	if err := createProxyJSON(ctx, cc, ns, "accepted", accepted); err != nil {
		t.Fatalf("the API server rejected a valid HTTPProxy: %v", err)
	}
	got, err := cc.HTTPProxies(ns).Get(ctx, "accepted", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rp := got.Spec.Routes[0].RequestRedirectPolicy; rp.StatusCode == nil || *rp.StatusCode != 302 {
		t.Errorf("redirect status code = %v, want the schema's default 302", rp.StatusCode)
	}
	if fp := got.Spec.Routes[0].FailurePolicy; fp.MaxEjectionPercent == nil || *fp.MaxEjectionPercent != 100 || fp.Count != nil {
		t.Errorf("failurePolicy = %+v, want maxEjectionPercent kept and nothing defaulted", fp)
	}

	for name, tc := range map[string]struct{ spec, field string }{
		"port out of range":       {`{"routes": [{"services": [{"name": "s", "port": 65536}]}]}`, "spec.routes[0].services[0].port"},
		"unknown protocol":        {`{"routes": [{"services": [{"name": "s", "port": 80, "protocol": "h3"}]}]}`, "spec.routes[0].services[0].protocol"},
		"both JWKS sources (CEL)": {`{"virtualhost": {"fqdn": "a.example.com", "jwtProviders": [{"name": "p", "localJWKS": {"secretName": "s", "key": "k"}, "remoteJWKS": {"uri": "https://a"}}]}}`, "spec.virtualhost.jwtProviders[0]"},
		"subject names (CEL)":     {`{"routes": [{"services": [{"name": "s", "port": 80, "validation": {"caSecret": "ca", "subjectName": "a", "subjectNames": ["b"]}}]}]}`, "spec.routes[0].services[0].validation"},
		"bad duration":            {`{"routes": [{"services": [{"name": "s", "port": 80}], "timeoutPolicy": {"response": "soon"}}]}`, "spec.routes[0].timeoutPolicy.response"},
		"ejection over 100%":      {`{"routes": [{"services": [{"name": "s", "port": 80}], "failurePolicy": {"maxEjectionPercent": 101}}]}`, "spec.routes[0].failurePolicy.maxEjectionPercent"},
		"HTTP version":            {`{"httpVersions": ["HTTP/3"]}`, "spec.httpVersions[0]"},
	} {
		err := createProxyJSON(ctx, cc, ns, "rejected", tc.spec)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: want Invalid naming %s, got %v", name, tc.field, err)
		}
	}
}

// TestSourceWithoutContourCRDs: against an API server without the CRDs, the source
// syncs, watches none of Contour's kinds, and says so once per kind.
func TestSourceWithoutContourCRDs(t *testing.T) {
	env.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	bare, err := kubetest.Start(ctx) // the shared one has the CRDs once any test installed them
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := bare.Stop(); err != nil {
			t.Error(err)
		}
	})
	cfg := rest.CopyConfig(bare.Config)
	logs := &testutil.SyncBuffer{}
	src := runSource(t, Config{
		Client: kubetest.Clientset(t, cfg), Contour: kubetest.ContourClient(t, cfg),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	for _, warning := range []string{
		"IngressRoute CRD not installed",
		"level=WARN msg=\"TLSCertificateDelegation CRD not installed",
		"HTTPProxy CRD not installed; HTTPProxies are ignored — kubectl apply -f deploy/crds",
		"projectcontour.io TLSCertificateDelegation CRD not installed",
	} {
		if n := strings.Count(logs.String(), warning); n != 1 {
			t.Errorf("warning %q logged %d times, want once; logs:\n%s", warning, n, logs.String())
		}
	}
	if c := src.Snapshot().Counts(); c["HTTPProxy"] != 0 || c["IngressRoute"] != 0 {
		t.Errorf("counts without the CRDs: %v", c)
	}
}

func keys[V any](m map[types.NamespacedName]V) []string {
	var out []string
	for k := range m {
		out = append(out, k.String())
	}
	return out
}
