package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-dev/portico/internal/kubetest"
)

// TestScale measures, against the real API server, with 5,000 Ingresses: how soon a
// new Ingress's status appears, and how many rebuilds a burst of 1,000 changes causes.
func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("scale test")
	}
	cfg := env.AdminConfig(t)
	cfg.QPS, cfg.Burst = 2000, 4000
	c := kubetest.Clientset(t, cfg)
	ctx := context.Background()
	const ns, n = "scale", 5000
	createNamespace(t, c, ns)
	start := time.Now()
	parallel(t, n, func(i int) error {
		_, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ingress(fmt.Sprintf("app-%d", i), fmt.Sprintf("app-%d.scale.test", i), "/", "svc"), metav1.CreateOptions{})
		return err
	})
	t.Logf("created %d Ingresses in %s", n, time.Since(start).Round(time.Millisecond))

	ctlCfg := env.AdminConfig(t)
	ctlCfg.QPS, ctlCfg.Burst = 100, 200 // portico serve's defaults
	ctl := startController(t, ctlCfg, "scale", []string{ns})
	start = time.Now()
	eventually(t, 3*time.Minute, "status on all Ingresses", func() bool { return withStatus(t, c, ns) == n })
	t.Logf("initial status on %d Ingresses after %s", n, time.Since(start).Round(time.Millisecond))

	// One new Ingress among 5,000: time until its status is written.
	start = time.Now()
	if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ingress("newcomer", "newcomer.scale.test", "/", "svc"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the newcomer's status", func() bool {
		ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "newcomer", metav1.GetOptions{})
		return err == nil && len(ing.Status.LoadBalancer.Ingress) == 1
	})
	latency := time.Since(start) // from the create request to the status being readable
	t.Logf("status of a new Ingress at %d Ingresses: %s", n+1, latency.Round(time.Millisecond))
	bound := time.Second
	if raceEnabled {
		bound = 4 * time.Second
	}
	if latency > bound {
		t.Errorf("a new Ingress's status took %s at %d objects, want under %s", latency, n, bound)
	}

	// A burst of 1,000 changes.
	time.Sleep(time.Second) // let the status writes above settle
	before := rebuilds(t, ctl)
	start = time.Now()
	parallel(t, 1000, func(i int) error {
		ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, fmt.Sprintf("app-%d", i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		ing.Annotations = map[string]string{"burst": strconv.Itoa(i)}
		_, err = c.NetworkingV1().Ingresses(ns).Update(ctx, ing, metav1.UpdateOptions{})
		return err
	})
	burst := time.Since(start)
	time.Sleep(2 * time.Second)
	count := rebuilds(t, ctl) - before
	t.Logf("a burst of 1,000 changes over %s caused %d rebuilds", burst.Round(time.Millisecond), count)
	if limit := int(burst/(300*time.Millisecond)) + 5; count > limit {
		t.Errorf("%d rebuilds for 1,000 changes over %s, want at most %d", count, burst, limit)
	}
}

func withStatus(t *testing.T, c kubernetes.Interface, ns string) int {
	list, err := c.NetworkingV1().Ingresses(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, ing := range list.Items {
		if len(ing.Status.LoadBalancer.Ingress) == 1 {
			done++
		}
	}
	return done
}

// parallel runs fn(0..n-1) on 16 workers and fails the test on the first error.
func parallel(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := fn(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

var rebuildsLine = regexp.MustCompile(`(?m)^portico_rebuilds_total (\d+)`)

// rebuilds scrapes the controller's /metrics.
func rebuilds(t *testing.T, ctl *controller) int {
	t.Helper()
	resp, err := http.Get("http://" + ctl.srv.Admin().Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := rebuildsLine.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no portico_rebuilds_total in /metrics")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
