package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/echo"
	"github.com/portico-dev/portico/internal/testutil"
)

// TestRunScale measures `portico run` over a directory of N application files, each an
// Ingress (or an HTTPProxy, or an HTTPRoute: PORTICO_KIND) with its own host, Service
// and Endpoints (all pointing at one echo backend): time to ready,
// RSS, and the latency from editing one file (its path) or adding one to the new route
// answering through the embedded proxy, with the CPU each takes; then the time to ready
// again after a restart (with the state file the first process left). It is a measurement,
// not a check, and is skipped unless PORTICO_SCALE is set:
//
//	PORTICO_SCALE=1000,10000            file counts to measure
//	PORTICO_BINS=old=/tmp/a,new=/tmp/b  portico binaries, measured in alternation (default:
//	                                    the tree, in process)
//	PORTICO_OPS=10                      edits, and as many additions, per round
//	PORTICO_KIND=ingress,httproute      the applications' API, each measured in turn:
//	                                    ingress (default), httpproxy (a root with one
//	                                    route), httproute (on one of four Gateways, to a
//	                                    Service of another namespace that a
//	                                    ReferenceGrant opens to it)
//	PORTICO_PROFILE=/tmp/edits.pprof    in process: CPU profile of the edits and additions
//	PORTICO_HEAPPROFILE=/tmp/heap       heap profiles, each after a collection, once ready
//	                                    (/tmp/heap.<bin>.ready) and after the edits and
//	                                    additions (/tmp/heap.<bin>.after; its alloc_space
//	                                    less the first's is what they allocated)
//
// The live heap is the heap after a forced collection, and the allocation per edit or
// addition the growth of go_memstats_alloc_bytes_total, both read from the admin
// endpoint (in process, they include the test's own).
//
//	PORTICO_SCALE=1000,10000 go test -run TestRunScale -v -timeout 1h ./bench/
func TestRunScale(t *testing.T) {
	scales := os.Getenv("PORTICO_SCALE")
	if scales == "" {
		t.Skip("set PORTICO_SCALE=1000,10000 to measure portico run at scale")
	}
	ops := 10
	if s := os.Getenv("PORTICO_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("PORTICO_OPS=%q: want a positive number", s)
		}
		ops = n
	}
	bins := [][2]string{{"in-process", ""}}
	if s := os.Getenv("PORTICO_BINS"); s != "" {
		bins = nil
		for _, b := range strings.Split(s, ",") {
			name, path, ok := strings.Cut(b, "=")
			if !ok {
				t.Fatalf("PORTICO_BINS: %q is not name=path", b)
			}
			bins = append(bins, [2]string{name, path})
		}
	}
	kinds := []runKind{runKinds["ingress"]}
	if s := os.Getenv("PORTICO_KIND"); s != "" {
		kinds = nil
		for _, name := range strings.Split(s, ",") {
			k, ok := runKinds[name]
			if !ok {
				t.Fatalf("PORTICO_KIND: %q is none of ingress, httpproxy, httproute", name)
			}
			kinds = append(kinds, k)
		}
	}
	backend := startBackend(t)
	var rows []string
	for _, s := range strings.Split(scales, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			t.Fatalf("PORTICO_SCALE: %q is not a file count", s)
		}
		for _, kind := range kinds {
			for _, b := range bins {
				m := measureRun(t, b, newRunScenario(t, kind, backend), n, ops)
				row := fmt.Sprintf("%-10s %-9s %6d files: ready %7s (restarted %7s), RSS %4d MB ready / %4d MB after, live heap %4d MB ready / %4d MB after; edit→answer median %7s (min %s, max %s), CPU %s/edit, %.1f MB allocated/edit; add→answer median %7s, CPU %s/add, %.1f MB allocated/add",
					b[0], kind.name, n, m.ready.Round(time.Millisecond), m.restart.Round(time.Millisecond), m.rssReady>>20, m.rssAfter>>20, m.heapReady>>20, m.heapAfter>>20,
					median(m.edits), slices.Min(m.edits).Round(time.Millisecond), slices.Max(m.edits).Round(time.Millisecond), m.editCPU.Round(time.Millisecond), m.editAlloc/(1<<20),
					median(m.adds), m.addCPU.Round(time.Millisecond), m.addAlloc/(1<<20))
				t.Log(row)
				rows = append(rows, row)
			}
		}
	}
	t.Logf("results:\n%s", strings.Join(rows, "\n"))
}

type runMeasure struct {
	ready, restart       time.Duration
	rssReady, rssAfter   int64
	heapReady, heapAfter int64 // live, after a collection
	edits, adds          []time.Duration
	editCPU, addCPU      time.Duration // per operation
	editAlloc, addAlloc  float64       // bytes allocated per operation
}

// process is a running `portico run`, whichever way it was started.
type process interface {
	adminAddr() string
	// profilesAddr serves /debug/pprof: --pprof-addr, or the admin address of builds
	// from before profiles moved off it.
	profilesAddr() string
	httpAddr() string
	cpu() time.Duration
	rss() int64
	stop()
}

func measureRun(t *testing.T, nameBin [2]string, sc *runScenario, n, ops int) runMeasure {
	name, bin := nameBin[0], nameBin[1]
	dir := t.TempDir()
	writeApps(t, sc, dir, n)
	stateHome := t.TempDir() // where the state file goes, kept for the restart
	var m runMeasure
	start := time.Now()
	p := startPortico(t, bin, dir, stateHome)
	stopped := false
	defer func() {
		if !stopped {
			p.stop()
		}
	}()
	client := &http.Client{Timeout: 10 * time.Second}
	waitReady(t, client, p)
	m.ready = time.Since(start)
	waitUntil(t, "the first host answering", time.Minute, answers(client, sc.addr(p, 0), appHost(0), "/v0"))
	m.rssReady = p.rss()
	heapProfile := os.Getenv("PORTICO_HEAPPROFILE")
	liveHeap := func(stage string) int64 {
		path := ""
		if heapProfile != "" {
			path = heapProfile + "." + name + "." + stage
		}
		return collectHeap(t, client, p, path)
	}
	m.heapReady = liveHeap("ready")

	if path := os.Getenv("PORTICO_PROFILE"); path != "" && bin == "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	timed := func(what string, change func(), i int, path string) (time.Duration, time.Duration, float64) {
		time.Sleep(300 * time.Millisecond) // let the previous change settle
		addr, host := sc.addr(p, i), appHost(i)
		if answers(client, addr, host, path)() {
			t.Fatalf("%s: %s%s answers before the change", what, host, path)
		}
		cpu, alloc := p.cpu(), allocated(t, client, p.adminAddr())
		begin := time.Now()
		change()
		waitUntil(t, what, 10*time.Minute, answers(client, addr, host, path))
		d := time.Since(begin)
		// The CPU of the whole change, including what follows the answer (the rest of a
		// publish, the garbage collection it drives): wait for it to settle.
		time.Sleep(300 * time.Millisecond)
		return d, p.cpu() - cpu, allocated(t, client, p.adminAddr()) - alloc
	}
	for i := range ops {
		k := (i*7919 + 13) % n
		d, cpu, alloc := timed(fmt.Sprintf("edit %d", i), func() {
			writeAtomic(t, dir, appFile(k), sc.manifest(k, k/10, fmt.Sprintf("/v%d", i+1)))
		}, k, fmt.Sprintf("/v%d", i+1))
		m.edits = append(m.edits, d)
		m.editCPU += cpu / time.Duration(ops)
		m.editAlloc += alloc / float64(ops)
	}
	for i := range ops {
		k := n + i
		d, cpu, alloc := timed(fmt.Sprintf("add %d", i), func() {
			// Into a directory already there: a new directory is another case.
			writeAtomic(t, dir, fmt.Sprintf("team-0/app-%d.yaml", k), sc.manifest(k, 0, "/v0"))
		}, k, "/v0")
		m.adds = append(m.adds, d)
		m.addCPU += cpu / time.Duration(ops)
		m.addAlloc += alloc / float64(ops)
	}
	m.rssAfter = p.rss()
	m.heapAfter = liveHeap("after")

	// A restart on the same tree, with the state the first process left.
	p.stop()
	stopped = true
	start = time.Now()
	again := startPortico(t, bin, dir, stateHome)
	defer again.stop()
	waitReady(t, client, again)
	m.restart = time.Since(start)
	return m
}

func waitReady(t *testing.T, client *http.Client, p process) {
	waitUntil(t, "ready", 10*time.Minute, func() bool {
		resp, err := client.Get("http://" + p.adminAddr() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// collectHeap has the process collect its garbage (fetching its heap profile does) and
// returns its live heap; it keeps the profile at path unless path is empty.
func collectHeap(t *testing.T, client *http.Client, p process, path string) int64 {
	t.Helper()
	resp, err := client.Get("http://" + p.profilesAddr() + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatal(err)
	}
	profile, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("heap profile: %v, status %d", err, resp.StatusCode)
	}
	if path != "" {
		if err := os.WriteFile(path, profile, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return int64(metric(t, client, p.adminAddr(), "go_memstats_heap_alloc_bytes"))
}

// allocated returns the bytes the process allocated since it started.
func allocated(t *testing.T, client *http.Client, admin string) float64 {
	return metric(t, client, admin, "go_memstats_alloc_bytes_total")
}

// metric returns the value of an unlabelled metric from the admin endpoint.
func metric(t *testing.T, client *http.Client, admin, name string) float64 {
	t.Helper()
	resp, err := client.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("%s: not in the metrics (%v)", name, sc.Err())
	return 0
}

func answers(client *http.Client, addr, host, path string) func() bool {
	return func() bool {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			return false
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

func waitUntil(t *testing.T, what string, limit time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}

func appFile(i int) string { return fmt.Sprintf("team-%d/app-%d.yaml", i/100, i) }
func appHost(i int) string { return fmt.Sprintf("app-%d.test", i) }

// writeApps writes the shared files and n applications, an hour old as a directory of
// manifests usually is.
func writeApps(t *testing.T, sc *runScenario, dir string, n int) {
	if sc.kind.shared != nil {
		sc.kind.shared(t, sc, dir, n)
	}
	for i := range n {
		writeOld(t, filepath.Join(dir, appFile(i)), sc.manifest(i, i/10, "/v0"))
	}
}

// writeAtomic writes a file as editors and kubectl-like tools do: a temporary file
// renamed over the original.
func writeAtomic(t *testing.T, dir, name, content string) {
	p := filepath.Join(dir, name)
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(name)+".tmp")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

func startBackend(t *testing.T) string {
	return testutil.StartEcho(t, echo.Config{Listen: "127.0.0.1:0", Service: "backend"})
}

// startPortico starts portico run on dir, keeping its state under stateHome (as
// XDG_STATE_HOME), in process when bin is "".
func startPortico(t *testing.T, bin, dir, stateHome string) process {
	plain, secure, admin, profiles := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	if bin == "" {
		return startInProcess(t, dir, plain, secure, admin, profiles, filepath.Join(stateHome, "state.json"))
	}
	args := []string{"run", "--manifests", dir, "--http-addr", plain, "--https-addr", secure, "--admin-addr", admin, "--log-level", "warn"}
	help, _ := exec.Command(bin, "run", "--help").CombinedOutput()
	if bytes.Contains(help, []byte("-pprof-addr")) {
		args = append(args, "--pprof-addr", profiles)
	} else {
		profiles = admin
	}
	if bytes.Contains(help, []byte("-gateway-port-offset")) {
		args = append(args, "--gateway-port-offset", "0") // Gateways listen on free ports of their own
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+stateHome)
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return &child{cmd: cmd, http: plain, admin: admin, profiles: profiles}
}

// child is portico run as a process of its own.
type child struct {
	cmd                   *exec.Cmd
	http, admin, profiles string
}

func (c *child) adminAddr() string    { return c.admin }
func (c *child) profilesAddr() string { return c.profiles }
func (c *child) httpAddr() string     { return c.http }

func (c *child) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (in parentheses): utime and stime are the 12th and
	// 13th, in clock ticks of 1/100 s.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func (c *child) rss() int64 { return statusRSS(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid)) }

func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.cmd.Wait()
}

// inProcess is portico run in the test's process: its CPU and RSS include the test's.
type inProcess struct {
	runner                *app.Runner
	http, admin, profiles string
	cancel                context.CancelFunc
	done                  chan error
}

func startInProcess(t *testing.T, dir, plain, secure, admin, profiles, stateFile string) process {
	r, err := app.NewRunner(app.RunOptions{ManifestDir: dir, HTTPAddr: plain, HTTPSAddr: secure, AdminAddr: admin, PprofAddr: profiles,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), StateFile: stateFile})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{runner: r, http: plain, admin: admin, profiles: profiles, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- r.Run(ctx) }()
	return p
}

func (p *inProcess) adminAddr() string    { return p.admin }
func (p *inProcess) profilesAddr() string { return p.profiles }
func (p *inProcess) httpAddr() string     { return p.http }

func (p *inProcess) cpu() time.Duration { return processCPU() }

func (p *inProcess) rss() int64 { return statusRSS("/proc/self/status") }

func (p *inProcess) stop() {
	p.cancel()
	<-p.done
}

// statusRSS reads VmRSS from a /proc status file, in bytes.
func statusRSS(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
