package kube

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/status"
)

// TestServe runs the controller against the API server: traffic flows to backends in
// the pod network, status is written, updates and deletions propagate, and restarting
// the API server loses nothing.
func TestServe(t *testing.T) {
	cfg := env.AdminConfig(t)
	c := kubetest.Clientset(t, cfg)
	ctx := context.Background()
	pn := kubetest.NewPodNetwork(t, 1)
	const ns = "serve"
	blueGreen(t, c, pn, ns, 9001)

	ctl := startController(t, cfg, "only", []string{ns})
	eventually(t, 20*time.Second, "traffic to blue", func() bool {
		code, r := ctl.get(t, "web.test", "/")
		return code == 200 && r.Service == "blue"
	})
	eventually(t, 10*time.Second, "Ingress status", func() bool {
		ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && len(ing.Status.LoadBalancer.Ingress) == 1 && ing.Status.LoadBalancer.Ingress[0].IP == "192.0.2.10"
	})

	// Update: point the Ingress at green.
	ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "green"
	if _, err := c.NetworkingV1().Ingresses(ns).Update(ctx, ing, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := eventually(t, 10*time.Second, "traffic to green", func() bool {
		code, r := ctl.get(t, "web.test", "/")
		return code == 200 && r.Service == "green"
	})
	t.Logf("update applied after %s", d)

	// Another controller's class: its status is not touched, its routes not served.
	other := ingress("other", "other.test", "/", "blue")
	cls := "nginx"
	other.Spec.IngressClassName = &cls
	if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every object's status is on the admin endpoint, as `portico check -o json` has it.
	eventually(t, 10*time.Second, "both Ingresses on /statuses", func() bool {
		got := adminStatuses(ctl.srv.Admin().Addr())
		return got[ns+"/web"] == "valid" && got[ns+"/other"] == "ignored"
	})

	// Restart the API server: watches reconnect, and changes made after still arrive.
	if err := env.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if code, r := ctl.get(t, "web.test", "/"); code != 200 || r.Service != "green" {
		t.Errorf("during/after API server restart: %d from %q", code, r.Service)
	}
	if err := c.NetworkingV1().Ingresses(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the deleted Ingress's route to disappear", func() bool {
		code, _ := ctl.get(t, "web.test", "/")
		return code == 404
	})
	if code, _ := ctl.get(t, "other.test", "/"); code != 404 {
		t.Errorf("another class's Ingress is served: %d", code)
	}
	got, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("status written on another class's Ingress: %v", got.Status.LoadBalancer.Ingress)
	}
}

// adminStatuses returns the status of each Ingress, IngressRoute and HTTPProxy
// (namespace/name) that the admin endpoint at addr serves on /statuses.
func adminStatuses(addr string) map[string]string {
	resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + addr + "/statuses")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var entries []status.Entry
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&entries) != nil {
		return nil
	}
	out := map[string]string{}
	for _, e := range entries {
		out[e.Namespace+"/"+e.Name] = e.Status
	}
	return out
}

// TestLeaderElection: two replicas, one leader writes status; when it stops, the other
// takes over and writes.
func TestLeaderElection(t *testing.T) {
	cfg := env.AdminConfig(t)
	c := kubetest.Clientset(t, cfg)
	ctx := context.Background()
	const ns = "leader"
	createNamespace(t, c, ns)
	a := startController(t, cfg, "replica-a", []string{ns})
	eventually(t, 20*time.Second, "replica-a to lead", a.srv.Leading)
	b := startController(t, cfg, "replica-b", []string{ns})
	time.Sleep(time.Second)
	if b.srv.Leading() {
		t.Fatal("two leaders")
	}
	a.stop()
	d := eventually(t, 15*time.Second, "replica-b to take over", b.srv.Leading)
	t.Logf("failover took %s", d)
	if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ingress("after", "after.test", "/", "svc"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the new leader to write status", func() bool {
		ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "after", metav1.GetOptions{})
		return err == nil && len(ing.Status.LoadBalancer.Ingress) == 1
	})
}
