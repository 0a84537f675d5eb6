package kube

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/kubetest"
)

// TestServeAListOfClasses: `serve` with the classes contour and team1 takes the
// Ingresses of both (status written) and leaves team2's alone (ignored, no status).
func TestServeAListOfClasses(t *testing.T) {
	cfg := env.AdminConfig(t)
	c := kubetest.Clientset(t, cfg)
	ctx := context.Background()
	const ns = "classes"
	createNamespace(t, c, ns)
	for _, class := range []string{"contour", "team1", "team2"} {
		ing := ingress(class, class+".test", "/", "web")
		ing.Spec.IngressClassName = &class
		if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctl := startControllerWith(t, cfg, "classes", []string{ns}, func(o *app.ServeOptions) {
		o.IngressClassNames = []string{"contour", "team1"}
	})
	eventually(t, 20*time.Second, "statuses of the three Ingresses", func() bool {
		got := adminStatuses(ctl.srv.Admin().Addr())
		return got[ns+"/contour"] != "ignored" && got[ns+"/team1"] != "ignored" && got[ns+"/team2"] == "ignored" &&
			got[ns+"/contour"] != "" && got[ns+"/team1"] != ""
	})
	for _, class := range []string{"contour", "team1"} {
		eventually(t, 20*time.Second, class+"'s Ingress status", func() bool {
			ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, class, metav1.GetOptions{})
			return err == nil && len(ing.Status.LoadBalancer.Ingress) == 1
		})
	}
	ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "team2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ing.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("status written on team2's Ingress: %v", ing.Status.LoadBalancer.Ingress)
	}
}
