package main

import (
	"bytes"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/portico-dev/portico/internal/source/manifest"
)

// newTestBench is a bench whose files are written in a temporary directory.
func newTestBench(t *testing.T) *bench {
	t.Helper()
	p, err := freePorts()
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{dir: t.TempDir(), ports: p}
	if err := b.writeFiles(); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNginxAcceptsVhosts checks the nginx under test's configuration with the
// vhosts10k scenario's 10,000 server blocks included, as its reload will read it,
// and that nginx builds its optimal server-name hash: when the names do not fit,
// nginx only warns and falls back to a slower one, which would not be nginx at its
// best.
func TestNginxAcceptsVhosts(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx is not installed (bench/proxy/run.sh installs it)")
	}
	b := newTestBench(t)
	if err := b.writeAtomic(filepath.Join(b.dir, "nginx-vhosts", "vhosts.conf"), b.nginxVhostsConf(10000)); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("nginx", "-t", "-p", b.dir, "-c", filepath.Join(b.dir, "nginx-proxy.conf")).CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("could not build")) {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
}

// TestVhostsManifests reads the manifests directory as portico run does, the
// vhosts10k scenario's file in it: every host an Ingress of the localhost one's
// shape, nothing refused.
func TestVhostsManifests(t *testing.T) {
	b := newTestBench(t)
	const n = 10000
	data, err := vhostsManifests(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.writeAtomic(filepath.Join(b.dir, "manifests", "vhosts.yaml"), data); err != nil {
		t.Fatal(err)
	}
	res, err := manifest.LoadDir(filepath.Join(b.dir, "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Problems {
		t.Errorf("problem: %s", p)
	}
	rules := map[string]*networkingv1.IngressRuleValue{}
	for _, o := range res.Objects {
		if ing, ok := o.(*networkingv1.Ingress); ok {
			for _, r := range ing.Spec.Rules {
				rules[r.Host] = &r.IngressRuleValue
			}
		}
	}
	if len(rules) != n+1 {
		t.Fatalf("%d hosts, want %d", len(rules), n+1)
	}
	for _, host := range []string{vhostName(0), vhostName(n - 1)} {
		r, ok := rules[host]
		if !ok {
			t.Fatalf("no Ingress for %s", host)
		}
		if got, want := r.String(), rules["localhost"].String(); got != want {
			t.Errorf("%s's rule: %s, want localhost's: %s", host, got, want)
		}
	}
}

// TestRSSCountsSharedPagesOnce measures an nginx master and its worker, which
// share the pages the master had when it forked: the side's memory is more
// than either process's RSS and less than their sum.
func TestRSSCountsSharedPagesOnce(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx is not installed (bench/proxy/run.sh installs it)")
	}
	b := newTestBench(t)
	b.nice, b.loadCore = 0, "0"
	ctx := t.Context()
	backend, err := b.startBackend(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer backend.stop()
	pids, err := processTree(backend.pid())
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 2 {
		t.Fatalf("nginx runs as %d processes, want a master and a worker", len(pids))
	}
	var sum, largest float64
	for _, p := range pids {
		m, err := memory(p)
		if err != nil {
			t.Fatal(err)
		}
		sum += float64(m.rss) / 1024
		largest = max(largest, float64(m.rss)/1024)
	}
	got, anon, err := rssMB(backend.pid())
	if err != nil {
		t.Fatal(err)
	}
	if got <= largest || got >= sum {
		t.Errorf("nginx's memory: %.1f MB, want more than its largest process's RSS (%.1f MB) and less than their sum (%.1f MB)", got, largest, sum)
	}
	if anon <= 0 || anon >= got {
		t.Errorf("nginx's anonymous memory: %.1f MB, want some, and less than all its resident memory (%.1f MB)", anon, got)
	}
}

// TestVhostsScriptSpreadsHosts runs wrk with the scenario's script against a
// server that records each request's Host: consecutive requests go to
// different hosts until every host has had one.
func TestVhostsScriptSpreadsHosts(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk is not installed (bench/proxy/run.sh installs it)")
	}
	const n = 100
	var mu sync.Mutex
	hosts := map[string]int{}
	total := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts[r.Host]++
		total++
		mu.Unlock()
	}))
	defer srv.Close()
	b := &bench{dir: t.TempDir()}
	if err := b.writeVhostsScript(n); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("wrk", "-t1", "-c2", "-d1s", "-s", b.vhostsScript(), srv.URL+"/").CombinedOutput()
	if err != nil {
		t.Fatalf("wrk: %v\n%s", err, out)
	}
	srv.Close() // waits for the requests in flight
	mu.Lock()
	defer mu.Unlock()
	if total == 0 {
		t.Fatalf("no requests reached the server:\n%s", out)
	}
	// Each of the 2 connections may have had its last request cut when wrk stopped:
	// those hosts never reached the handler, and the requests after them did.
	if want := min(total, n) - 2; len(hosts) < want {
		t.Errorf("%d requests went to %d hosts, want at least %d", total, len(hosts), want)
	}
	for h := range hosts {
		if !strings.HasPrefix(h, "vh") || !strings.HasSuffix(h, ".bench.test") {
			t.Errorf("request for host %q, not one of the scenario's", h)
		}
	}
}

// rounds is one round of a side with the given req/s, CPU s/100k requests,
// p99 and RSS.
func rounds(rps, cpu100k, p99, rssMB float64) []sample {
	return []sample{{rps: rps, requests: 100000, cpuSec: cpu100k, p99ms: p99, rssMB: rssMB}}
}

func testResults(t *testing.T, names ...string) []scenarioResult {
	t.Helper()
	figures := map[string][2][]sample{ // portico, nginx
		"c1":        {rounds(9000, 5, 0.5, 30), rounds(8000, 5, 0.5, 20)},
		"c32":       {rounds(60000, 1.4, 1.0, 30), rounds(64000, 1.5, 2.0, 20)},
		"c256":      {rounds(70000, 1.4, 5.0, 50), rounds(64000, 1.5, 4.0, 20)},
		"h2":        {rounds(40000, 2, math.NaN(), 30), rounds(60000, 1.5, math.NaN(), 20)},
		"vhosts10k": {rounds(59000, 1.5, 1.0, 90), rounds(63000, 1.5, 2.0, 30)},
	}
	var out []scenarioResult
	for _, name := range names {
		sc, ok := scenarioNamed(name)
		if !ok {
			t.Fatalf("no scenario %s", name)
		}
		f := figures[name]
		out = append(out, scenarioResult{sc: sc, samples: map[string][]sample{porticoSide: f[0], nginxSide: f[1]}})
	}
	return out
}

func TestTargets(t *testing.T) {
	var buf bytes.Buffer
	printTargets(&buf, testResults(t, "c1", "c32", "c256", "h2", "vhosts10k"))
	out := buf.String()
	for _, want := range []string{
		"| HTTP/1.1 keep-alive, 32 connections: requests per second | ≥ 1.00x nginx's | 0.94x | 60000 against 64000 req/s | **missed** |",
		"| HTTP/1.1 keep-alive, 32 connections: CPU per request | ≤ 1.00x nginx's | 0.93x | 1.40 against 1.50 CPU s/100k req | met |",
		"| HTTP/1.1 keep-alive, 256 connections: p99 latency | ≤ 1.00x nginx's | 1.25x | 5.00 against 4.00 ms | **missed** |",
		"| HTTP/1.1 keep-alive, 1 connection: requests per second | ≥ 1.00x nginx's | 1.12x | 9000 against 8000 req/s | met |",
		"| HTTP/2 over TLS, 32 connections x 10 streams: requests per second | ≥ 0.50x nginx's | 0.67x |",
		"| new connection per request, 32 clients: requests per second | ≥ 0.80x nginx's |  |  | not measured |",
		// the worst scenario for memory is the one with 10,000 hosts
		"| RSS (largest at the end of a round), every scenario | ≤ 2.00x nginx's | 3.00x (vhosts10k) | 90 against 30 MB | **missed** |",
		"| HTTP/1.1 keep-alive, 32 connections, 10,000 virtual hosts: CPU per request | ≤ 1.00x one host's (c32) | 1.07x | 1.50 against 1.40 CPU s/100k req; req/s 0.98x; nginx's own: CPU 1.00x, req/s 0.98x | **missed** |",
		"Met 6 of 12; not measured: 2 (run their scenarios: -scenarios close,tls).",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the check lacks\n%s\nin\n%s", want, out)
		}
	}
}

// TestResultsReprint checks that a saved run prints the same tables again,
// p99 absent where it was (h2load) and the 10k hosts comparison included.
func TestResultsReprint(t *testing.T) {
	results := testResults(t, "c32", "h2", "vhosts10k")
	sides := []string{porticoSide, nginxSide}
	var direct bytes.Buffer
	report(&direct, results, sides, true)

	path := filepath.Join(t.TempDir(), "results.json")
	if err := saveResults(path, sides, results); err != nil {
		t.Fatal(err)
	}
	gotSides, loaded, err := loadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	report(&again, loaded, gotSides, true)
	if again.String() != direct.String() {
		t.Errorf("reprinted:\n%s\nwant:\n%s", again.String(), direct.String())
	}
	for _, want := range []string{"10k hosts vs 1 host, portico: req/s 0.98x, CPU per request 1.07x", "| n/a | n/a | n/a |"} {
		if !strings.Contains(direct.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, direct.String())
		}
	}
	if data, _ := os.ReadFile(path); bytes.Contains(data, []byte("NaN")) {
		t.Errorf("results.json holds a NaN:\n%s", data)
	}
}

// TestH2loadNeedsH2 checks that an HTTP/2 round where h2load fell back to
// HTTP/1.1 (a side without h2 in its ALPN) is refused, not counted as HTTP/2.
func TestH2loadNeedsH2(t *testing.T) {
	const tail = `
finished in 1.00s, 52000.00 req/s, 6.00MB/s
requests: 52000 total, 52010 started, 52000 done, 52000 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 52000 2xx, 0 3xx, 0 4xx, 0 5xx
`
	if _, err := parseH2load("TLS Protocol: TLSv1.3\nApplication protocol: http/1.1\n" + tail); err == nil {
		t.Error("a run over HTTP/1.1 was taken for HTTP/2")
	}
	s, err := parseH2load("TLS Protocol: TLSv1.3\nApplication protocol: h2\n" + tail)
	if err != nil || s.rps != 52000 || s.requests != 52000 || s.failed != 0 {
		t.Errorf("an HTTP/2 run: %+v, %v", s, err)
	}
}

// TestUncacheDropsTheBinary writes an executable, as the linker does, and checks that
// starting a side drops it from the page cache: every side's binary is then paged in
// from disk, whatever built or copied it last.
func TestUncacheDropsTheBinary(t *testing.T) {
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("the temporary directory is on tmpfs, whose pages are the files themselves")
	}
	path := filepath.Join(dir, "side")
	if err := os.WriteFile(path, bytes.Repeat([]byte{0x90}, 1<<20), 0o755); err != nil {
		t.Fatal(err)
	}
	if n := residentPages(t, path); n == 0 {
		t.Fatalf("a file just written has no page in the page cache: this check cannot tell")
	}
	uncache(path)
	if n := residentPages(t, path); n != 0 {
		t.Errorf("after uncache, %d pages of the binary are still in the page cache, want none", n)
	}
}

// residentPages is how many pages of the file at path are in the page cache.
func residentPages(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	vec := make([]byte, (len(data)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

func TestTrimLogsKeepsTheEndOfLongLogs(t *testing.T) {
	dir := t.TempDir()
	long := bytes.Repeat([]byte("request line\n"), 300_000) // 3.9 MB
	long = append(long, "last line\n"...)
	short := []byte("started\n")
	if err := os.WriteFile(filepath.Join(dir, "portico.log"), long, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nginx-proxy.stderr"), short, 0o644); err != nil {
		t.Fatal(err)
	}
	trimLogs(dir)
	got, _ := os.ReadFile(filepath.Join(dir, "portico.log"))
	if len(got) != 1<<20 || !bytes.HasSuffix(got, []byte("last line\n")) {
		t.Errorf("long log after trim: %d bytes, ends %q; want its last 1 MiB", len(got), got[max(0, len(got)-20):])
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "nginx-proxy.stderr")); !bytes.Equal(got, short) {
		t.Errorf("short log after trim: %q, want it unchanged", got)
	}
}

// TestPairedAgainstBaseline: the baseline table pairs the builds round by
// round, says in how many rounds Portico did better, and leaves out a round
// without a figure.
func TestPairedAgainstBaseline(t *testing.T) {
	round := func(rps float64, requests int64, cpu, sys float64) sample {
		return sample{rps: rps, requests: requests, cpuSec: cpu, sysSec: sys}
	}
	portico := []sample{round(110, 1000, 1.0, 0.5), round(90, 1000, 0.9, 0.5), round(100, 1000, 0.8, 0.4), round(100, 0, 0, 0)}
	baseline := []sample{round(100, 1000, 1.0, 0.4), round(100, 1000, 1.0, 0.5), round(100, 1000, 1.0, 0.5), round(100, 1000, 1.0, 0.5)}
	if got, want := paired(portico, baseline, rpsOf, true), "1.00x (1 of 4)"; got != want {
		t.Errorf("paired req/s %q, want %q", got, want)
	}
	// Per request: 1.0, 0.9, 0.8 against 1.0 each; the fourth round has no requests.
	if got, want := paired(portico, baseline, sample.cpuPer100k, false), "0.90x (2 of 3)"; got != want {
		t.Errorf("paired CPU %q, want %q", got, want)
	}
	// User time per request: 0.5, 0.4 and 0.4 ms against 0.6, 0.5 and 0.5.
	if got, want := paired(portico, baseline, sample.userPerRequest, false), "0.80x (3 of 3)"; got != want {
		t.Errorf("paired user time %q, want %q", got, want)
	}
	if got := paired(nil, baseline, rpsOf, true); got != "n/a" {
		t.Errorf("paired with no rounds: %q, want n/a", got)
	}
	var out bytes.Buffer
	results := []scenarioResult{{sc: scenario{name: "c32", title: "32 connections"}, samples: map[string][]sample{porticoSide: portico, "baseline": baseline}}}
	printBaseline(&out, results, porticoSide, "baseline")
	if !strings.Contains(out.String(), "| 1.00x (1 of 4) | 0.90x (2 of 3) | 0.80x (3 of 3) |") {
		t.Errorf("the baseline table lacks the paired ratios:\n%s", out.String())
	}
}
