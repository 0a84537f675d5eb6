package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// scenario is one load pattern, run against each side in alternation.
type scenario struct {
	name    string
	title   string
	conns   int
	path    string
	tls     bool
	close   bool // a new connection per request
	streams int  // > 0: HTTP/2 with h2load, this many concurrent streams per connection
	// vhosts > 0: this many more virtual hosts are configured on the sides that route
	// (vhosts.go), and wrk spreads its requests over them.
	vhosts int
}

var allScenarios = []scenario{
	{name: "c1", title: "HTTP/1.1 keep-alive, 1 connection", conns: 1, path: "/"},
	{name: "c32", title: "HTTP/1.1 keep-alive, 32 connections", conns: 32, path: "/"},
	{name: "c256", title: "HTTP/1.1 keep-alive, 256 connections", conns: 256, path: "/"},
	{name: "close", title: "new connection per request, 32 clients", conns: 32, path: "/", close: true},
	{name: "tls", title: "TLS HTTP/1.1, 32 connections", conns: 32, path: "/", tls: true},
	{name: "h2", title: "HTTP/2 over TLS, 32 connections x 10 streams", conns: 32, path: "/", tls: true, streams: 10},
	{name: "1mb", title: "1 MiB response, 8 connections", conns: 8, path: "/1mb"},
	{name: "vhosts10k", title: "HTTP/1.1 keep-alive, 32 connections, 10,000 virtual hosts", conns: 32, path: "/", vhosts: 10000},
}

// selectScenarios returns the scenarios named in only (all when empty), in
// that order except that those with virtual hosts come last: once a proxy has
// loaded 10,000 hosts, its memory and heap are no longer those of one host, so
// no one-host scenario may follow.
func selectScenarios(only string) ([]scenario, error) {
	out := allScenarios
	if only != "" {
		out = nil
		for _, name := range strings.Split(only, ",") {
			sc, ok := scenarioNamed(name)
			if !ok {
				return nil, fmt.Errorf("unknown scenario %q", name)
			}
			out = append(out, sc)
		}
	}
	out = slices.Clone(out)
	slices.SortStableFunc(out, func(a, b scenario) int { return cmp.Compare(min(a.vhosts, 1), min(b.vhosts, 1)) })
	return out, nil
}

func scenarioNamed(name string) (scenario, bool) {
	i := slices.IndexFunc(allScenarios, func(s scenario) bool { return s.name == name })
	if i < 0 {
		return scenario{}, false
	}
	return allScenarios[i], true
}

// sample is the outcome of one round of one side.
type sample struct {
	rps      float64
	p99ms    float64 // NaN when the tool does not report it (h2load)
	requests int64
	failed   int64   // non-2xx responses and socket errors
	cpuSec   float64 // proxy CPU (user+system) during the round
	sysSec   float64 // of which in the kernel (system time)
	rssMB    float64 // proxy RSS at the end of the round
	// anonMB is the part of rssMB in anonymous pages (heap, stacks); the rest
	// is file pages, mostly the binary's own code and read-only data.
	anonMB float64
}

// cpuPer100k is the proxy's CPU seconds per 100,000 requests.
func (s sample) cpuPer100k() float64 {
	if s.requests == 0 {
		return math.NaN()
	}
	return s.cpuSec / float64(s.requests) * 1e5
}

// userPerRequest and sysPerRequest are the proxy's CPU microseconds per
// request in user space and in the kernel: the kernel's share (system calls,
// loopback TCP, waking the peer) is the part a faster codec cannot remove.
func (s sample) userPerRequest() float64 { return s.perRequestMicros(s.cpuSec - s.sysSec) }
func (s sample) sysPerRequest() float64  { return s.perRequestMicros(s.sysSec) }

func (s sample) perRequestMicros(sec float64) float64 {
	if s.requests == 0 {
		return math.NaN()
	}
	return sec / float64(s.requests) * 1e6
}

type scenarioResult struct {
	sc      scenario
	samples map[string][]sample // by side name
}

// maxExtraRounds bounds the rounds added when a side's rounds disagree.
const maxExtraRounds = 1

// disturbedSpread is the spread of req/s across a side's rounds, relative
// to their median, beyond which other load on the machine is suspected.
const disturbedSpread = 0.25

func (b *bench) runScenario(ctx context.Context, sc scenario, all []*side) (scenarioResult, error) {
	res := scenarioResult{sc: sc, samples: map[string][]sample{}}
	sides := sidesFor(sc, all)
	warm := min(time.Second, b.duration)
	for _, s := range sides {
		if _, err := b.measure(ctx, sc, s, warm, ""); err != nil {
			return res, err
		}
	}
	rounds := b.rounds
	for r := 0; r < rounds; r++ {
		for _, s := range sides {
			profile := ""
			if r == 0 && s.pprof != "" && b.profile != "" {
				profile = sideProfile(b.profile, s.name)
			}
			smp, err := b.measure(ctx, sc, s, b.duration, profile)
			if err != nil {
				return res, err
			}
			res.samples[s.name] = append(res.samples[s.name], smp)
			fmt.Printf("%-6s round %d %-8s %9.0f req/s  p99 %7s  CPU %6.2f s/100k (user %4.1f, kernel %4.1f µs/req)  RSS %5.1f MB (anon %5.1f)%s\n",
				sc.name, r+1, s.name, smp.rps, formatMS(smp.p99ms), smp.cpuPer100k(), smp.userPerRequest(), smp.sysPerRequest(), smp.rssMB, smp.anonMB, failedNote(smp))
		}
		if r == rounds-1 && rounds < b.rounds+maxExtraRounds && res.disturbed() {
			fmt.Printf("%-6s rounds disagree by more than %.0f%%: one more round each\n", sc.name, disturbedSpread*100)
			rounds++
		}
	}
	return res, nil
}

// sidesFor are the sides that can serve sc.
func sidesFor(sc scenario, sides []*side) []*side {
	if sc.streams == 0 {
		return sides
	}
	var out []*side
	for _, s := range sides {
		if s.noH2 {
			fmt.Printf("%-6s skips %s: it has no HTTP/2\n", sc.name, s.name)
			continue
		}
		out = append(out, s)
	}
	return out
}

func failedNote(s sample) string {
	if s.failed == 0 {
		return ""
	}
	return fmt.Sprintf("  (%d failed)", s.failed)
}

// disturbed reports whether some side's rounds spread too far apart.
func (r scenarioResult) disturbed() bool {
	for _, ss := range r.samples {
		rps := values(ss, func(s sample) float64 { return s.rps })
		m := median(rps)
		if m > 0 && (slices.Max(rps)-slices.Min(rps))/m > disturbedSpread {
			return true
		}
	}
	return false
}

// measure runs one round of sc against s, accounting the proxy's CPU. With
// profile set, a CPU profile of the round is fetched from s.pprof into it.
func (b *bench) measure(ctx context.Context, sc scenario, s *side, d time.Duration, profile string) (sample, error) {
	base := s.http
	if sc.tls {
		base = s.https
	}
	profiled := make(chan error, 1)
	if profile != "" {
		go func() { profiled <- fetchProfile(ctx, s.pprof, d, profile) }()
	} else {
		profiled <- nil
	}
	before, err := cpuTicks(s.proc.pid())
	if err != nil {
		return sample{}, err
	}
	out, err := b.load(ctx, sc, base+sc.path, d)
	if err != nil {
		return sample{}, err
	}
	after, err := cpuTicks(s.proc.pid())
	if err != nil {
		return sample{}, err
	}
	if err := <-profiled; err != nil {
		return sample{}, fmt.Errorf("profile: %w", err)
	}
	var smp sample
	if sc.streams > 0 {
		smp, err = parseH2load(out)
	} else {
		smp, err = parseWrk(out)
	}
	if err != nil {
		return sample{}, fmt.Errorf("%s against %s: %w\n%s", sc.name, s.name, err, out)
	}
	smp.cpuSec = float64(after.total()-before.total()) / clockTicks
	smp.sysSec = float64(after.sys-before.sys) / clockTicks
	smp.rssMB, smp.anonMB, err = rssMB(s.proc.pid())
	return smp, err
}

// load runs the load generator pinned to the load core.
func (b *bench) load(ctx context.Context, sc scenario, target string, d time.Duration) (string, error) {
	secs := strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
	var args []string
	if sc.streams > 0 {
		args = []string{"h2load", "-t1", "-c" + strconv.Itoa(sc.conns), "-m" + strconv.Itoa(sc.streams), "-D", secs, target}
	} else {
		args = []string{"wrk", "-t1", "-c" + strconv.Itoa(sc.conns), "-d" + secs + "s", "--latency"}
		if sc.close {
			args = append(args, "-H", "Connection: close")
		}
		if sc.vhosts > 0 {
			args = append(args, "-s", b.vhostsScript())
		}
		args = append(args, target)
	}
	out, err := exec.CommandContext(ctx, "nice", b.pinned(b.loadCore, args)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// sideProfile is where side's profile goes: path itself for Portico, the side's
// name before the extension for the others.
func sideProfile(path, side string) string {
	if side == porticoSide {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "." + side + ext
}

func fetchProfile(ctx context.Context, admin string, d time.Duration, path string) error {
	secs := max(1, int(d/time.Second)-1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", admin, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var (
	wrkRPS      = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	wrkRequests = regexp.MustCompile(`(\d+) requests in`)
	wrkP99      = regexp.MustCompile(`\s99%\s+([\d.]+)(us|ms|s)`)
	wrkNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkSocket   = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)

	h2Proto    = regexp.MustCompile(`Application protocol: (\S+)`)
	h2RPS      = regexp.MustCompile(`finished in [\d.]+m?s, ([\d.]+) req/s`)
	h2Requests = regexp.MustCompile(`requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	h2Status   = regexp.MustCompile(`status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
)

func parseWrk(out string) (sample, error) {
	rps, err := floatMatch(wrkRPS, out)
	if err != nil {
		return sample{}, err
	}
	requests, err := floatMatch(wrkRequests, out)
	if err != nil {
		return sample{}, err
	}
	m := wrkP99.FindStringSubmatch(out)
	if m == nil {
		return sample{}, fmt.Errorf("no 99%% latency")
	}
	p99, _ := strconv.ParseFloat(m[1], 64)
	p99 *= map[string]float64{"us": 1e-3, "ms": 1, "s": 1e3}[m[2]]
	s := sample{rps: rps, p99ms: p99, requests: int64(requests)}
	s.failed = sumMatches(wrkNon2xx, out) + sumMatches(wrkSocket, out)
	return s, nil
}

func parseH2load(out string) (sample, error) {
	if m := h2Proto.FindStringSubmatch(out); m != nil && m[1] != "h2" {
		return sample{}, fmt.Errorf("negotiated %s, not h2", m[1])
	}
	rps, err := floatMatch(h2RPS, out)
	if err != nil {
		return sample{}, err
	}
	m := h2Requests.FindStringSubmatch(out)
	if m == nil {
		return sample{}, fmt.Errorf("no request counts")
	}
	ok, _ := strconv.ParseInt(m[1], 10, 64)
	s := sample{rps: rps, p99ms: math.NaN(), requests: ok}
	s.failed = sumMatches(h2Requests, out) - ok
	if sm := h2Status.FindStringSubmatch(out); sm != nil {
		for _, v := range sm[2:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			s.failed += n
		}
	}
	return s, nil
}

func floatMatch(re *regexp.Regexp, out string) (float64, error) {
	m := re.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no match for %s", re)
	}
	return strconv.ParseFloat(m[1], 64)
}

// sumMatches adds the submatches of re's first match.
func sumMatches(re *regexp.Regexp, out string) int64 {
	var n int64
	if m := re.FindStringSubmatch(out); m != nil {
		for _, v := range m[1:] {
			x, _ := strconv.ParseInt(v, 10, 64)
			n += x
		}
	}
	return n
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times (100 on Linux).
const clockTicks = 100

// ticks are CPU times in clock ticks.
type ticks struct{ user, sys int64 }

func (t ticks) total() int64 { return t.user + t.sys }

// cpuTicks is the user and system time of pid and its children (nginx's
// workers).
func cpuTicks(pid int) (ticks, error) {
	pids, err := processTree(pid)
	if err != nil {
		return ticks{}, err
	}
	var t ticks
	for _, p := range pids {
		f, err := statFields(p)
		if err != nil {
			continue // a process that just exited
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		t.user += utime
		t.sys += stime
	}
	return t, nil
}

// rssMB is the resident memory of pid and its children, the pages they share
// counted once: the sum of their private pages plus the shared pages of the one
// that has most. For one process (Portico, a bare side) that is its RSS. nginx's
// worker is forked from its master and shares the master's pages, the parsed
// configuration among them; adding up the two RSS counts those twice (with
// 10,000 server blocks, some 250 MB twice). Without smaps_rollup (kernels
// before 4.14), the RSS are added up. anon is the anonymous part (heap and
// stacks) added up over the processes: for nginx an upper bound, as a worker
// shares with its master the anonymous pages neither has written since the fork.
func rssMB(pid int) (rss, anon float64, err error) {
	pids, err := processTree(pid)
	if err != nil {
		return 0, 0, err
	}
	var private, sharedMax, summed, anonKB int64
	rollups := true
	for _, p := range pids {
		m, err := memory(p)
		if err != nil {
			continue // a process that just exited
		}
		rollups = rollups && m.rollup
		summed += m.rss
		anonKB += m.anon
		private += m.private
		sharedMax = max(sharedMax, m.rss-m.private)
	}
	if !rollups {
		return float64(summed) / 1024, float64(anonKB) / 1024, nil
	}
	return float64(private+sharedMax) / 1024, float64(anonKB) / 1024, nil
}

// mem is a process's resident memory in kB.
type mem struct {
	rss, private, anon int64
	rollup             bool // private is known (from smaps_rollup)
}

func memory(pid int) (mem, error) {
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid)); err == nil {
		f := kBFields(string(data))
		return mem{rss: f["Rss"], private: f["Private_Clean"] + f["Private_Dirty"], anon: f["Anonymous"], rollup: true}, nil
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return mem{}, err
	}
	f := kBFields(string(data))
	return mem{rss: f["VmRSS"], anon: f["RssAnon"]}, nil
}

// kBFields reads the "Name:   123 kB" lines of a /proc file.
func kBFields(text string) map[string]int64 {
	out := map[string]int64{}
	for _, line := range strings.Split(text, "\n") {
		name, rest, ok := strings.Cut(line, ":")
		value, unit, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if !ok || unit != "kB" {
			continue
		}
		if n, err := strconv.ParseInt(value, 10, 64); err == nil {
			out[name] = n
		}
	}
	return out
}

// processTree returns pid and its direct children.
func processTree(pid int) ([]int, error) {
	pids := []int{pid}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == pid {
			continue
		}
		if f, err := statFields(p); err == nil && f[1] == strconv.Itoa(pid) {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// statFields returns /proc/PID/stat's fields after the command name: [0] is
// the state (field 3 in proc(5)), [1] the parent, [11] utime, [12] stime.
func statFields(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}
