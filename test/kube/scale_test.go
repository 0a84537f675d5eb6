package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/contourclient"
	"github.com/portico-dev/portico/internal/kubetest"
)

// TestScale measures `portico serve`, with its default coalescing, against the real API
// server with 5,000 Ingresses (and then 500 HTTPProxies) and logs the figures
// docs/performance.md quotes: the time to the first status on all of them, the time from
// creating one more to its status being readable, the time from editing one Ingress or
// HTTPProxy to the new route being in a data plane's xDS view, the time until a burst of
// 1,000 changes from 16 clients, and one of 500 from a single client, is served and how
// many rebuilds each caused, and the controller's live heap per object. Nothing here passes or fails on speed: the deadlines only catch a
// controller that never gets there. PORTICO_SCALE_CPUPROFILE=file writes a CPU profile of
// the process (controller, API clients and test) from the burst's first write until its
// last change is served.
func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("scale test")
	}
	if raceEnabled {
		t.Log("the race detector is on: the figures below are several times those without it")
	}
	cfg := env.AdminConfig(t)
	cfg.QPS, cfg.Burst = 2000, 4000
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	ctx := context.Background()
	const ns, n, proxies, changes = "scale", 5000, 500, 1000
	createNamespace(t, c, ns)
	// The Service the routes use, without endpoints: its routes answer 503, an unknown
	// host 404, and HTTPProxies are valid.
	if _, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctlCfg := env.AdminConfig(t)
	ctlCfg.QPS, ctlCfg.Burst = 100, 200 // portico serve's defaults

	// The same controller's heap with nothing to serve, for the per-object figure.
	empty := startControllerWith(t, ctlCfg, "scale-empty", []string{ns}, serveCoalescing)
	eventually(t, time.Minute, "the controller over no objects to be ready", func() bool { return readyz(empty.srv.Admin().Addr()) })
	heapEmpty := quietHeap()
	empty.stop()

	start := time.Now()
	parallel(t, n, func(i int) error {
		_, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ingress(fmt.Sprintf("app-%d", i), fmt.Sprintf("app-%d.scale.test", i), "/", "svc"), metav1.CreateOptions{})
		return err
	})
	t.Logf("created %d Ingresses in %s", n, time.Since(start).Round(time.Millisecond))

	ctl := startControllerWith(t, ctlCfg, "scale", []string{ns}, serveCoalescing)
	start = time.Now()
	eventually(t, 5*time.Minute, "status on all Ingresses", func() bool { return withStatus(t, c, ns) == n })
	t.Logf("initial status on %d Ingresses after %s (status writes are paced by the controller's API client, %g requests/s)",
		n, time.Since(start).Round(time.Millisecond), ctlCfg.QPS)
	heapFull := quietHeap()
	t.Logf("controller live heap: %.1f MB with 0 objects, %.1f MB with %d Ingresses: %.1f kB per Ingress (runtime.MemStats.HeapAlloc after a forced GC, test process included)",
		float64(heapEmpty)/1e6, float64(heapFull)/1e6, n, (float64(heapFull)-float64(heapEmpty))/n/1e3)

	// One new Ingress at a time, each once the previous one's status is written.
	const newcomers = 5
	latencies := make([]time.Duration, newcomers)
	for i := range latencies {
		latencies[i] = newcomerStatus(t, c, ns, fmt.Sprintf("newcomer-%d", i))
	}
	t.Logf("status of a new Ingress at %d Ingresses, from the create request to the status being readable: median %s of %v",
		n+1, median(latencies).Round(time.Millisecond), roundAll(latencies))

	parallel(t, proxies, func(i int) error {
		return createHTTPProxyJSON(ctx, cc, ns, fmt.Sprintf("hp-%d", i), proxySpec(i, "/"))
	})
	eventually(t, 5*time.Minute, "status on all HTTPProxies", func() bool { return validProxies(t, cc, ns) == proxies })
	editToXDS(t, c, cc, ctl, ns, n)

	time.Sleep(time.Second) // let the newcomers' rebuilds and status writes settle
	stopProfile := cpuProfile(t, os.Getenv("PORTICO_SCALE_CPUPROFILE"))
	burstServed(t, c, ctl, ns, 0, changes, 16, stopProfile)
	// The same from one client, as `kubectl apply` of many objects writes them: one
	// change after another, each arriving on its own.
	time.Sleep(time.Second)
	burstServed(t, c, ctl, ns, changes, changes/2, 1, func() {})
}

// burstServed moves Ingresses app-<first> to app-<first+count-1> to new hosts from
// clients writers, and logs how soon the last change written was served, how many
// rebuilds the burst caused and the process's CPU until then (when stop is called).
func burstServed(t *testing.T, c kubernetes.Interface, ctl *controller, ns string, first, count, clients int, stop func()) {
	t.Helper()
	ctx := context.Background()
	before, cpuBefore := rebuilds(t, ctl), processCPU(t)
	start := time.Now()
	var lastWritten atomic.Int64 // the change whose write was acknowledged last
	parallelWith(t, clients, count, func(k int) error {
		i := first + k
		ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, fmt.Sprintf("app-%d", i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		ing.Spec.Rules[0].Host = burstHost(i)
		if _, err = c.NetworkingV1().Ingresses(ns).Update(ctx, ing, metav1.UpdateOptions{}); err != nil {
			return err
		}
		lastWritten.Store(int64(i))
		return nil
	})
	written := time.Since(start)
	// Each change moves an Ingress to a new host; a route to a Service without endpoints
	// answers 503, an unknown host 404. The last change written is waited for first, so
	// that the figure is not the time it takes this test to ask for every host; then
	// every host is checked (once served, a host stays served).
	isServed := func(i int) func() bool {
		return func() bool {
			code, _ := ctl.get(t, burstHost(i), "/")
			return code != 0 && code != http.StatusNotFound
		}
	}
	last := int(lastWritten.Load())
	eventually(t, 5*time.Minute, "host "+burstHost(last)+" to be served", isServed(last))
	lastServed := time.Since(start)
	stop()
	cpu := processCPU(t) - cpuBefore
	for i := first; i < first+count; i++ {
		eventually(t, 5*time.Minute, "host "+burstHost(i)+" to be served", isServed(i))
	}
	served := time.Since(start)
	n := rebuilds(t, ctl) - before
	t.Logf("a burst of %d changes (new hosts), written in %s by %d clients: the last one served by the embedded proxy %s after the first write (%s after the last), all of them checked by %s; %d rebuilds; %s CPU in this process (controller and clients) until the last was served",
		count, written.Round(time.Millisecond), clients, lastServed.Round(time.Millisecond), (lastServed - written).Round(time.Millisecond), served.Round(time.Millisecond), n, cpu.Round(10*time.Millisecond))
	// How many rebuilds coalescing makes of a burst depends on how the changes arrive in
	// time, so the count is logged, not asserted; but a rebuild needs a change to start
	// it (one more for a status write's event, should it come late).
	if n > count+1 {
		t.Errorf("%d rebuilds for %d changes: coalescing should never rebuild more often than changes arrive", n, count)
	}
}

// serveCoalescing gives the controller `portico serve`'s own hold-off and maximum delay.
func serveCoalescing(o *app.ServeOptions) { o.Holdoff, o.MaxDelay = 0, 0 }

func proxySpec(i int, prefix string) string {
	return fmt.Sprintf(`{"virtualhost": {"fqdn": "hp-%d.scale.test"}, "routes": [{"conditions": [{"prefix": %q}], "services": [{"name": "svc", "port": 80}]}]}`, i, prefix)
}

// editToXDS edits Ingresses and HTTPProxies one at a time, each a lone change (the
// previous one in force and a pause after it, as between a user's edits), and logs the
// time from sending the edit to its new route being in a data plane's xDS view.
func editToXDS(t *testing.T, c kubernetes.Interface, cc *contourclient.Client, ctl *controller, ns string, ingresses int) {
	t.Helper()
	ctx := context.Background()
	view := watchXDS(t, ctl.srv.XDSAddr())
	view.waitFor(t, "hp-0.scale.test", "/", time.Minute)
	const edits = 11
	var toIngress, toProxy []time.Duration
	for k := range edits {
		path := fmt.Sprintf("/edit-%d", k)
		name := fmt.Sprintf("app-%d", ingresses-1-k) // not among the burst's
		ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ing.Spec.Rules[0].HTTP.Paths[0].Path = path
		start := time.Now()
		if _, err := c.NetworkingV1().Ingresses(ns).Update(ctx, ing, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		toIngress = append(toIngress, view.waitFor(t, ing.Spec.Rules[0].Host, path, time.Minute).Sub(start))
		time.Sleep(300 * time.Millisecond)

		patch := fmt.Sprintf(`{"spec": %s}`, proxySpec(k, path))
		start = time.Now()
		if _, err := cc.HTTPProxies(ns).Patch(ctx, fmt.Sprintf("hp-%d", k), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		toProxy = append(toProxy, view.waitFor(t, fmt.Sprintf("hp-%d.scale.test", k), path, time.Minute).Sub(start))
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("one edit → its route in a data plane's xDS view (delta ADS with VHDS), at %d Ingresses and %d HTTPProxies: Ingress median %s of %v; HTTPProxy median %s of %v",
		ingresses+5, validProxies(t, cc, ns), median(toIngress).Round(100*time.Microsecond), roundAll(toIngress), median(toProxy).Round(100*time.Microsecond), roundAll(toProxy))
}

// validProxies counts the HTTPProxies of ns whose status says valid.
func validProxies(t *testing.T, cc *contourclient.Client, ns string) int {
	t.Helper()
	var list contourv1.HTTPProxyList
	if err := cc.ProjectREST().Get().Namespace(ns).Resource(contourclient.ResourceHTTPProxies).Do(context.Background()).Into(&list); err != nil {
		t.Fatal(err)
	}
	valid := 0
	for _, p := range list.Items {
		if p.Status.CurrentStatus == "valid" {
			valid++
		}
	}
	return valid
}

// newcomerStatus creates an Ingress and returns the time until its status is readable.
func newcomerStatus(t *testing.T, c kubernetes.Interface, ns, name string) time.Duration {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ingress(name, name+".scale.test", "/", "svc"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, name+"'s status", func() bool {
		ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && len(ing.Status.LoadBalancer.Ingress) == 1
	})
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

func burstHost(i int) string { return fmt.Sprintf("app-%d.burst.scale.test", i) }

// quietHeap is the smallest of three live heap readings a quarter second apart, after
// a second's rest: a reading taken while a rebuild or a status write is under way counts
// that work's garbage-to-be as live.
func quietHeap() uint64 {
	time.Sleep(time.Second)
	least := liveHeap()
	for range 2 {
		time.Sleep(250 * time.Millisecond)
		least = min(least, liveHeap())
	}
	return least
}

// processCPU is the user and system time this process has used.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// liveHeap is the process's live Go heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC() // the second collection frees what finalizers released in the first
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// cpuProfile starts a CPU profile into file when file is set, and returns its stop.
func cpuProfile(t *testing.T, file string) func() {
	t.Helper()
	if file == "" {
		return func() {}
	}
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			t.Error(err)
		}
		t.Logf("CPU profile of the burst in %s", file)
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
	parallelWith(t, 16, n, fn)
}

// parallelWith runs fn(0..n-1) on workers goroutines and fails the test on the first error.
func parallelWith(t *testing.T, workers, n int, fn func(i int) error) {
	t.Helper()
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range workers {
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
