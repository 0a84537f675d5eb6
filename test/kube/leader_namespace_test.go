package kube

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/testutil"
)

// TestLeaderElectionNamespaceMissing: when the Lease's namespace does not exist, serve
// says so once, in one line that names the fix, writes no status meanwhile, and starts
// leading as soon as the namespace is created.
func TestLeaderElectionNamespaceMissing(t *testing.T) {
	cfg := env.AdminConfig(t)
	c := kubetest.Clientset(t, cfg)
	ctx := context.Background()
	const ns, leaseNS = "lease-missing", "portico-lease-later"
	createNamespace(t, c, ns)
	if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ingress("web", "web.test", "/", "svc"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var logs testutil.SyncBuffer
	ctl := startControllerWith(t, cfg, "replica", []string{ns}, func(o *app.ServeOptions) {
		o.LeaseNamespace = leaseNS
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	eventually(t, 20*time.Second, "the missing namespace to be reported", func() bool {
		return strings.Contains(logs.String(), "does not exist")
	})
	// Several retry periods (250ms) go by: the report stays a single line.
	eventually(t, 20*time.Second, "routes to be served meanwhile", func() bool {
		code, _ := ctl.get(t, "web.test", "/")
		return code == 503 || code == 200
	})
	time.Sleep(time.Second)
	var reports []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "does not exist") {
			reports = append(reports, line)
		}
	}
	if len(reports) != 1 {
		t.Fatalf("the missing namespace was reported %d times, want once:\n%s", len(reports), strings.Join(reports, "\n"))
	}
	for _, want := range []string{leaseNS, "kubectl create namespace " + leaseNS, "--leader-election-namespace", "status is not written"} {
		if !strings.Contains(reports[0], want) {
			t.Errorf("report %q does not mention %q", reports[0], want)
		}
	}
	if ctl.srv.Leading() {
		t.Fatal("leading without a Lease namespace")
	}
	ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ing.Status.LoadBalancer.Ingress) != 0 {
		t.Fatalf("status written without leadership: %v", ing.Status.LoadBalancer.Ingress)
	}

	createNamespace(t, c, leaseNS)
	eventually(t, 20*time.Second, "leading once the namespace exists", ctl.srv.Leading)
	eventually(t, 10*time.Second, "status written", func() bool {
		ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && len(ing.Status.LoadBalancer.Ingress) == 1
	})
}
