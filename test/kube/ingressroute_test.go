package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"

	contourv1beta1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/contourclient"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/source/kube"
	"github.com/portico-dev/portico/internal/status"
	"github.com/portico-dev/portico/internal/testutil"
)

// createIngressRouteJSON creates an IngressRoute from the JSON of its spec as a user
// would write it: through the REST client with a raw body, so that spellings the Go
// type never produces (service as one object) reach the API server.
func createIngressRouteJSON(ctx context.Context, c *contourclient.Client, ns, name, spec string) error {
	body := `{"apiVersion": "contour.heptio.com/v1beta1", "kind": "IngressRoute", "metadata": {"name": "` + name + `"}, "spec": ` + spec + `}`
	return c.REST().Post().Namespace(ns).Resource(contourclient.ResourceIngressRoutes).Body([]byte(body)).Do(ctx).Error()
}

// TestIngressRouteCRDSchema: with deploy/crds installed, the API server accepts the
// spellings Portico reads (services and service, one object or a list; count and
// maxRetries; durations and status codes as strings or numbers), hands them back intact,
// and rejects what the schema rules out.
func TestIngressRouteCRDSchema(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	cc := kubetest.ContourClient(t, cfg)
	ctx := context.Background()
	const ns = "ir-schema"
	createNamespace(t, kubetest.Clientset(t, cfg), ns)

	const spellings = `{
  "virtualhost": {"fqdn": "schema.test", "tls": {"secretName": "certs/wildcard", "minimumProtocolVersion": "1.2"}},
  "strategy": "RingHash",
  "routes": [
    {"match": "/", "services": [{"name": "a", "port": 80, "weight": 90, "strategy": "Random"}, {"name": "b", "port": 80, "weight": 10}]},
    {"match": "/one", "service": {"name": "one", "port": 8080},
     "timeoutPolicy": {"request": "1s", "idle": "infinity"},
     "retryPolicy": {"count": 3, "onStatusCodes": ["50x", "501", 502], "perTryTimeout": ""}},
    {"match": "/list", "service": [{"name": "x", "port": 1}, {"name": "y", "port": 2}],
     "timeoutPolicy": {"request": 0, "idle": -1},
     "retryPolicy": {"maxRetries": "2", "perTryTimeout": 5}},
    {"match": "/blog", "delegate": {"name": "blog", "namespace": "marketing"}}
  ]}`
	if err := createIngressRouteJSON(ctx, cc, ns, "spellings", spellings); err != nil {
		t.Fatalf("the API server rejected the accepted spellings: %v", err)
	}
	got, err := cc.IngressRoutes(ns).Get(ctx, "spellings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, bad := contourclient.Undecodable(got); bad {
		t.Fatalf("the stored object does not decode: %v", got.Annotations)
	}
	is := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	weight := func(w int64) *int64 { return &w }
	want := contourv1beta1.IngressRouteSpec{
		VirtualHost: &contourv1beta1.VirtualHost{Fqdn: "schema.test", TLS: &contourv1beta1.TLS{SecretName: "certs/wildcard", MinimumProtocolVersion: "1.2"}},
		Strategy:    "RingHash",
		Routes: []contourv1beta1.Route{
			{Match: "/", Services: []contourv1beta1.Service{
				{Name: "a", Port: 80, Weight: weight(90), Strategy: "Random"}, {Name: "b", Port: 80, Weight: weight(10)},
			}},
			{
				Match: "/one", Service: contourv1beta1.ServiceList{{Name: "one", Port: 8080}},
				TimeoutPolicy: &contourv1beta1.TimeoutPolicy{Request: is(intstr.FromString("1s")), Idle: is(intstr.FromString("infinity"))},
				RetryPolicy: &contourv1beta1.RetryPolicy{
					Count:         is(intstr.FromInt32(3)),
					OnStatusCodes: []intstr.IntOrString{intstr.FromString("50x"), intstr.FromString("501"), intstr.FromInt32(502)},
					PerTryTimeout: is(intstr.FromString("")),
				},
			},
			{
				Match: "/list", Service: contourv1beta1.ServiceList{{Name: "x", Port: 1}, {Name: "y", Port: 2}},
				TimeoutPolicy: &contourv1beta1.TimeoutPolicy{Request: is(intstr.FromInt32(0)), Idle: is(intstr.FromInt32(-1))},
				RetryPolicy:   &contourv1beta1.RetryPolicy{MaxRetries: is(intstr.FromString("2")), PerTryTimeout: is(intstr.FromInt32(5))},
			},
			{Match: "/blog", Delegate: &contourv1beta1.Delegate{Name: "blog", Namespace: "marketing"}},
		},
	}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("stored spec (-want +got):\n%s", diff)
	}

	rejected := map[string]struct{ spec, field string }{
		"unknown strategy": {
			`{"strategy": "Fastest", "routes": [{"match": "/", "services": [{"name": "a", "port": 80}]}]}`, "spec.strategy"},
		"unknown service strategy": {
			`{"routes": [{"match": "/", "services": [{"name": "a", "port": 80, "strategy": "Fastest"}]}]}`, "spec.routes[0].services[0].strategy"},
		"port out of range": {
			`{"routes": [{"match": "/", "services": [{"name": "a", "port": 70000}]}]}`, "spec.routes[0].services[0].port"},
		"TLS version": {
			`{"virtualhost": {"fqdn": "a.test", "tls": {"secretName": "s", "minimumProtocolVersion": "1.0"}}, "routes": []}`, "spec.virtualhost.tls.minimumProtocolVersion"},
		"duration of the wrong type": {
			`{"routes": [{"match": "/", "services": [{"name": "a", "port": 80}], "timeoutPolicy": {"request": true}}]}`, "spec.routes[0].timeoutPolicy.request"},
	}
	for name, tc := range rejected {
		err := createIngressRouteJSON(ctx, cc, ns, "rejected", tc.spec)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: want Invalid naming %s, got %v", name, tc.field, err)
		}
	}

	d, err := cc.TLSCertificateDelegations(ns).Create(ctx, &contourv1beta1.TLSCertificateDelegation{
		ObjectMeta: metav1.ObjectMeta{Name: "wildcard"},
		Spec: contourv1beta1.TLSCertificateDelegationSpec{Delegations: []contourv1beta1.CertificateDelegation{
			{SecretName: "wildcard", TargetNamespaces: []string{"*"}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Delegations) != 1 || d.Spec.Delegations[0].TargetNamespaces[0] != "*" {
		t.Errorf("stored TLSCertificateDelegation = %+v", d.Spec)
	}
}

// runSource runs a kube.Source until the test ends and waits for its caches to sync.
func runSource(t *testing.T, cfg kube.Config) *kube.Source {
	t.Helper()
	src := kube.New(cfg)
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

func irKey(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// TestSourceWatchesIngressRoutes: IngressRoutes and TLSCertificateDelegations of the
// watched namespaces reach the store, follow updates and deletions, and one that the API
// server stored but that cannot be decoded is kept marked (the graph reports it invalid)
// without hiding the others.
func TestSourceWatchesIngressRoutes(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	ctx := context.Background()
	const ns, elsewhere = "ir-source", "ir-source-other"
	createNamespace(t, c, ns)
	createNamespace(t, c, elsewhere)
	const good = `{"routes": [{"match": "/", "service": {"name": "s", "port": 80}}]}`
	// "service" has an open schema: the API server stores a typo there.
	const undecodable = `{"routes": [{"match": "/", "service": {"name": "s", "prot": 80}}]}`
	for _, r := range []struct{ ns, name, spec string }{
		{ns, "a", good}, {ns, "broken-before-start", undecodable}, {elsewhere, "not-watched", good},
	} {
		if err := createIngressRouteJSON(ctx, cc, r.ns, r.name, r.spec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cc.TLSCertificateDelegations(ns).Create(ctx, &contourv1beta1.TLSCertificateDelegation{
		ObjectMeta: metav1.ObjectMeta{Name: "certs"},
		Spec:       contourv1beta1.TLSCertificateDelegationSpec{Delegations: []contourv1beta1.CertificateDelegation{{SecretName: "s", TargetNamespaces: []string{"*"}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	logs := &syncBuffer{}
	src := runSource(t, kube.Config{
		Client: c, Contour: cc, Namespaces: []string{ns},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	snap := src.Snapshot()
	if snap.IngressRoutes[irKey(ns, "a")] == nil || snap.TLSCertificateDelegations[irKey(ns, "certs")] == nil {
		t.Fatalf("after sync: IngressRoutes %v, delegations %v", keys(snap.IngressRoutes), keys(snap.TLSCertificateDelegations))
	}
	if len(snap.IngressRoutes) != 2 {
		t.Errorf("IngressRoutes in the store = %v, want %s/a and the marked broken one (the unwatched namespace left out)", keys(snap.IngressRoutes), ns)
	}
	if _, bad := contourclient.Undecodable(snap.IngressRoutes[irKey(ns, "broken-before-start")]); !bad {
		t.Errorf("the undecodable IngressRoute is not marked as such")
	}
	if !strings.Contains(logs.String(), "broken-before-start") || !strings.Contains(logs.String(), `unknown field \"prot\"`) {
		t.Errorf("no warning naming the unreadable IngressRoute and why:\n%s", logs.String())
	}

	// Through the watch: a broken object does not stall the events after it.
	if err := createIngressRouteJSON(ctx, cc, ns, "broken-after-start", undecodable); err != nil {
		t.Fatal(err)
	}
	if err := createIngressRouteJSON(ctx, cc, ns, "b", good); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "IngressRoute b in the store", func() bool {
		return src.Snapshot().IngressRoutes[irKey(ns, "b")] != nil
	})
	// An object that becomes unreadable stays, marked.
	patch := []byte(`{"spec": {"routes": [{"match": "/", "service": {"name": "s", "prot": 80}}]}}`)
	if _, err := cc.IngressRoutes(ns).Patch(ctx, "a", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "IngressRoute a to be marked undecodable", func() bool {
		_, bad := contourclient.Undecodable(src.Snapshot().IngressRoutes[irKey(ns, "a")])
		return bad
	})
	for _, name := range []string{"a", "b", "broken-before-start", "broken-after-start"} {
		if err := cc.IngressRoutes(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cc.TLSCertificateDelegations(ns).Delete(ctx, "certs", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "deletions to reach the store", func() bool {
		s := src.Snapshot()
		return len(s.IngressRoutes) == 0 && len(s.TLSCertificateDelegations) == 0
	})
	if n := len(src.Snapshot().IngressRoutes); n != 0 {
		t.Errorf("%d IngressRoutes left", n)
	}
}

func keys[V any](m map[types.NamespacedName]V) []string {
	var out []string
	for k := range m {
		out = append(out, k.String())
	}
	return out
}

// TestIngressRouteWriter: the writer sets status.currentStatus and description through
// the status subresource, as Portico's field manager, only when they differ from what
// the object has, updates them when the build's verdict changes, and leaves the spec and
// other controllers' IngressRoutes alone.
func TestIngressRouteWriter(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	ctx := context.Background()
	const ns = "ir-status"
	createNamespace(t, c, ns)
	for _, name := range []string{"root", "vertex", "theirs"} {
		if err := createIngressRouteJSON(ctx, cc, ns, name, `{"routes": [{"match": "/", "services": [{"name": "s", "port": 80}]}]}`); err != nil {
			t.Fatal(err)
		}
	}
	src := runSource(t, kube.Config{Client: c, Contour: cc, Namespaces: []string{ns}})
	var writes atomic.Int64
	w := &status.IngressRouteWriter{Client: cc, Workers: 2, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		OnWrite: func(kind string) {
			if kind != dag.KindIngressRoute {
				t.Errorf("write reported as kind %q", kind)
			}
			writes.Add(1)
		}}
	written := func() int { return int(writes.Load()) }
	st := func(name string, v dag.StatusValue, desc string) *dag.Status {
		return &dag.Status{Object: dag.ObjectRef{Kind: dag.KindIngressRoute, Namespace: ns, Name: name}, Status: v, Description: desc}
	}
	statusOf := func(name string) contourv1beta1.Status {
		t.Helper()
		ir, err := cc.IngressRoutes(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ir.Status
	}
	// write writes statuses, deciding on the source's cached objects as the serve loop
	// does, checks them on the API server, and waits for the source to see them.
	write := func(want map[string]contourv1beta1.Status, statuses ...*dag.Status) {
		t.Helper()
		if failed := w.Sync(ctx, src.Snapshot(), statuses); failed != 0 {
			t.Fatalf("%d writes failed", failed)
		}
		for name, s := range want {
			if got := statusOf(name); got != s {
				t.Errorf("%s status = %+v, want %+v", name, got, s)
			}
		}
		eventually(t, 10*time.Second, "the source to see the statuses", func() bool {
			snap := src.Snapshot()
			for name, s := range want {
				if ir := snap.IngressRoutes[irKey(ns, name)]; ir == nil || ir.Status != s {
					return false
				}
			}
			return true
		})
	}

	valid := contourv1beta1.Status{CurrentStatus: "valid", Description: "valid IngressRoute"}
	orphaned := contourv1beta1.Status{CurrentStatus: "orphaned", Description: "not part of a delegation chain from a root"}
	write(map[string]contourv1beta1.Status{"root": valid, "vertex": orphaned, "theirs": {}},
		st("root", dag.StatusValid, valid.Description),
		st("vertex", dag.StatusOrphaned, orphaned.Description),
		st("theirs", dag.StatusIgnored, "ingress class nginx"),
		st("gone", dag.StatusValid, "not in the store: nothing to write"),
	)
	if n := written(); n != 2 {
		t.Errorf("%d writes, want 2", n)
	}

	// Nothing changed: nothing is written.
	write(map[string]contourv1beta1.Status{"root": valid, "vertex": orphaned},
		st("root", dag.StatusValid, valid.Description), st("vertex", dag.StatusOrphaned, orphaned.Description))
	if n := written(); n != 2 {
		t.Errorf("%d writes after an unchanged build, want still 2", n)
	}

	// The verdict changes: only that object is written.
	invalid := contourv1beta1.Status{CurrentStatus: "invalid", Description: `not served: route "/": service "s" not found`}
	write(map[string]contourv1beta1.Status{"root": invalid, "vertex": orphaned},
		st("root", dag.StatusInvalid, invalid.Description), st("vertex", dag.StatusOrphaned, orphaned.Description))
	if n := written(); n != 3 {
		t.Errorf("%d writes, want 3", n)
	}

	root, err := cc.IngressRoutes(ns).Get(ctx, "root", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if root.Generation != 1 || len(root.Spec.Routes) != 1 || root.Spec.Routes[0].Services[0].Name != "s" {
		t.Errorf("the spec changed (generation %d): %+v", root.Generation, root.Spec)
	}
	var ours bool
	for _, e := range root.ManagedFields {
		ours = ours || (e.Manager == kube.FieldManager && e.Subresource == "status" && e.FieldsV1 != nil &&
			bytes.Contains(e.FieldsV1.Raw, []byte(`"f:currentStatus"`)))
	}
	if !ours {
		t.Errorf("managedFields do not record %q as the writer of status.currentStatus: %+v", kube.FieldManager, root.ManagedFields)
	}

	// Deleted after the build: not an error, nothing to retry.
	snap := src.Snapshot()
	if err := cc.IngressRoutes(ns).Delete(ctx, "vertex", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if failed := w.Sync(ctx, snap, []*dag.Status{st("vertex", dag.StatusValid, "valid delegated IngressRoute")}); failed != 0 {
		t.Errorf("writing the status of a deleted IngressRoute: %d failed, want 0", failed)
	}
}

// TestServeWritesIngressRouteStatus: `portico serve` watches IngressRoutes and writes
// the status the graph gives them.
func TestServeWritesIngressRouteStatus(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	ctx := context.Background()
	const infra, web, blog = "ir-serve", "ir-serve-web", "ir-serve-blog"
	for _, ns := range []string{infra, web, blog} {
		createNamespace(t, c, ns)
	}
	objects := []struct{ ns, name, spec string }{
		{infra, "root", `{"virtualhost": {"fqdn": "root.ir-serve.test"}, "routes": [
			{"match": "/", "delegate": {"name": "site", "namespace": "` + web + `"}},
			{"match": "/loop", "delegate": {"name": "loop-a", "namespace": "` + web + `"}}]}`},
		{web, "site", `{"routes": [{"match": "/", "services": [{"name": "svc", "port": 80}]},
			{"match": "/blog", "delegate": {"name": "blog", "namespace": "` + blog + `"}}]}`},
		{blog, "blog", `{"routes": [{"match": "/blog", "service": {"name": "svc", "port": 80}}]}`},
		{web, "loop-a", `{"routes": [{"match": "/loop", "delegate": {"name": "loop-b"}}]}`},
		{web, "loop-b", `{"routes": [{"match": "/loop", "delegate": {"name": "loop-a"}}]}`},
		{web, "green", `{"routes": [{"match": "/", "services": [{"name": "svc-green", "port": 80}]}]}`},
		// "service" has an open schema: the API server stores this typo, Portico reports it.
		{blog, "typo", `{"routes": [{"match": "/", "service": {"name": "s", "prot": 80}}]}`},
	}
	for _, o := range objects {
		if err := createIngressRouteJSON(ctx, cc, o.ns, o.name, o.spec); err != nil {
			t.Fatal(err)
		}
	}
	startController(t, cfg, "ir-serve", []string{infra, web, blog})

	type want struct{ status, desc string }
	check := func(what string, wants map[[2]string]want) {
		t.Helper()
		var last string
		ok := eventuallyOK(20*time.Second, func() bool {
			for key, w := range wants {
				ir, err := cc.IngressRoutes(key[0]).Get(ctx, key[1], metav1.GetOptions{})
				if err != nil || ir.Status.CurrentStatus != w.status || !strings.Contains(ir.Status.Description, w.desc) {
					if err == nil {
						last = fmt.Sprintf("%s/%s: %q %q, want %q containing %q", key[0], key[1], ir.Status.CurrentStatus, ir.Status.Description, w.status, w.desc)
					}
					return false
				}
			}
			return true
		})
		if !ok {
			t.Fatalf("%s: statuses not written; last mismatch: %s", what, last)
		}
	}
	check("initial", map[[2]string]want{
		{infra, "root"}: {"valid", "valid IngressRoute"},
		{web, "site"}:   {"valid", `"/" delegated by IngressRoute ` + infra + `/root on root.ir-serve.test`},
		{blog, "blog"}:  {"valid", `"/blog" delegated by IngressRoute ` + web + `/site`},
		// loop-b's delegation back to loop-a closes a cycle; loop-b is the newest object
		// on it (created later, or in the same second and later by name): it is invalid.
		{web, "loop-a"}: {"valid", `"/loop" delegated by IngressRoute ` + infra + `/root`},
		{web, "loop-b"}: {"invalid", "its delegation closes a cycle: IngressRoute " + web + "/loop-b -> IngressRoute " + web + "/loop-a -> IngressRoute " + web + "/loop-b"},
		{web, "green"}:  {"orphaned", "not part of a delegation chain from a root"},
		{blog, "typo"}:  {"invalid", `its spec cannot be read: spec.routes[0].service: unknown field "prot"`},
	})

	// Blue-green: the root switches to green; site becomes orphaned, and so does the blog
	// it delegated to.
	patch := []byte(`{"spec": {"routes": [{"match": "/", "delegate": {"name": "green", "namespace": "` + web + `"}}]}}`)
	if _, err := cc.IngressRoutes(infra).Patch(ctx, "root", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after the switch", map[[2]string]want{
		{infra, "root"}: {"valid", "valid IngressRoute"},
		{web, "green"}:  {"valid", `"/" delegated by IngressRoute ` + infra + `/root`},
		{web, "site"}:   {"orphaned", "not part of a delegation chain from a root"},
		{blog, "blog"}:  {"orphaned", "not part of a delegation chain from a root"},
	})
}

// eventuallyOK polls cond until it holds or timeout passes, and says which.
func eventuallyOK(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServeWithoutIngressRouteCRDs: against an API server without the CRDs, serve warns
// once, ignores IngressRoutes and serves everything else.
func TestServeWithoutIngressRouteCRDs(t *testing.T) {
	env.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	bare, err := kubetest.Start(ctx) // the shared one may have the CRDs by now
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
	c := kubetest.Clientset(t, cfg)
	const ns = "no-crds"
	createNamespace(t, c, ns)
	if _, err := c.NetworkingV1().Ingresses(ns).Create(context.Background(), ingress("web", "web.test", "/", "svc"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	s, err := app.NewServer(app.ServeOptions{
		Config: cfg, XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", WatchNamespaces: []string{ns},
		IngressStatusAddresses: []string{"192.0.2.30"},
		Holdoff:                50 * time.Millisecond, MaxDelay: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	eventually(t, 20*time.Second, "/readyz to answer 200", func() bool { return readyz(s.Admin().Addr()) })
	eventually(t, 10*time.Second, "the Ingress status", func() bool {
		ing, err := c.NetworkingV1().Ingresses(ns).Get(context.Background(), "web", metav1.GetOptions{})
		return err == nil && len(ing.Status.LoadBalancer.Ingress) == 1
	})
	const warning = "IngressRoute CRD not installed; IngressRoutes are ignored — kubectl apply -f deploy/crds"
	if n := strings.Count(logs.String(), warning); n != 1 {
		t.Errorf("warning %q logged %d times, want once; logs:\n%s", warning, n, logs.String())
	}
}

func readyz(addr string) bool {
	resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + addr + "/readyz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

type syncBuffer = testutil.SyncBuffer
