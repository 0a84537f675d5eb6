// Command proxy compares Portico's embedded proxy with nginx on loopback: the
// same backend, the proxy under test pinned to core 0, the load generator and
// the backend on core 1, rounds alternating between the two proxies. Run it
// through bench/proxy/run.sh, which installs nginx, wrk and h2load and builds
// portico. Each run's samples are saved in its work directory (results.json);
// -results prints a saved run's tables again, and -targets checks it against
// issue 22's targets (targets.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	portico := flag.String("portico", "bin/portico", "the portico binary under test")
	baseline := flag.String("baseline", "", "another portico binary (e.g. an older commit's), measured as a third side in the same rounds")
	work := flag.String("work", "", "working directory (default: a new temporary one)")
	rounds := flag.Int("rounds", 3, "rounds per side and scenario")
	duration := flag.Duration("duration", 4*time.Second, "length of one round")
	niceness := flag.Int("nice", -10, "niceness of every process of the benchmark (proxies, backend, load generator): below 0, other work on the machine disturbs the rounds less")
	only := flag.String("scenarios", "", "comma-separated scenario names to run (default: all)")
	proxyCore := flag.String("proxy-core", "0", "CPU the proxy under test is pinned to")
	loadCore := flag.String("load-core", "1", "CPU the load generator and the backend are pinned to")
	profile := flag.String("cpuprofile", "", "with -scenarios naming one scenario: write a CPU profile of Portico's first round there (served on --pprof-addr), and of each -bare side's next to it (c32.pprof: c32.bare-raw.pprof)")
	bare := flag.String("bare", "", "a build of bench/proxy/bare, measured as further sides in the same rounds, one per -bare-sides entry")
	bareSides := flag.String("bare-sides", "nethttp", "with -bare: comma-separated --bare selections of it (nethttp, direct, fasthttp, raw)")
	targets := flag.Bool("targets", false, "after the tables, say which of issue 22's targets (Portico against nginx) this run meets; a report, the exit status does not depend on it")
	saved := flag.String("results", "", "measure nothing: print the tables (and with -targets the check) of a run saved earlier (the results.json in its work directory)")
	flag.Parse()

	if *saved != "" {
		if err := reprint(*saved, *targets); err != nil {
			log.Fatal(err)
		}
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b := &bench{
		portico:   *portico,
		baseline:  *baseline,
		rounds:    *rounds,
		duration:  *duration,
		proxyCore: *proxyCore,
		loadCore:  *loadCore,
		profile:   *profile,
		nice:      *niceness,
		targets:   *targets,
	}
	if *bare != "" {
		b.bare, b.bareSides = *bare, strings.Split(*bareSides, ",")
	}
	if err := b.run(ctx, *work, *only); err != nil {
		log.Fatal(err)
	}
}

type bench struct {
	portico   string
	baseline  string
	rounds    int
	duration  time.Duration
	proxyCore string
	loadCore  string
	profile   string
	nice      int
	bare      string
	bareSides []string
	targets   bool

	dir   string
	ports ports
	// vhosts is how many virtual hosts the sides have next to localhost.
	vhosts int
}

func (b *bench) run(ctx context.Context, work, only string) error {
	scenarios, err := selectScenarios(only)
	if err != nil {
		return err
	}
	if b.dir, err = workDir(work); err != nil {
		return err
	}
	if b.ports, err = freePorts(); err != nil {
		return err
	}
	if err := b.writeFiles(); err != nil {
		return err
	}
	var procs []*process
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop()
		}
		trimLogs(b.dir)
	}()
	backend, err := b.startBackend(ctx)
	if err != nil {
		return err
	}
	procs = append(procs, backend)
	sides, err := b.startSides(ctx)
	for _, s := range sides {
		procs = append(procs, s.proc)
	}
	if err != nil {
		return err
	}
	fmt.Printf("work dir %s; proxies on core %s, load generator and backend on core %s; %d rounds of %s per side\n",
		b.dir, b.proxyCore, b.loadCore, b.rounds, b.duration)
	results := make([]scenarioResult, 0, len(scenarios))
	for _, sc := range scenarios {
		if sc.vhosts > 0 && sc.vhosts != b.vhosts {
			if err := b.applyVhosts(ctx, sc.vhosts, sides); err != nil {
				return fmt.Errorf("%s: %w", sc.name, err)
			}
			b.vhosts = sc.vhosts
		}
		r, err := b.runScenario(ctx, sc, sides)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		results = append(results, r)
	}
	names := make([]string, len(sides))
	for i, s := range sides {
		names[i] = s.name
	}
	saved := filepath.Join(b.dir, "results.json")
	if err := saveResults(saved, names, results); err != nil {
		return err
	}
	report(os.Stdout, results, names, b.targets)
	fmt.Printf("\nSamples saved in %s; go run ./bench/proxy -results %s -targets prints them again.\n", saved, saved)
	return nil
}

// report prints the tables of a run and, with targets, the check against issue 22's.
func report(w io.Writer, results []scenarioResult, sides []string, targets bool) {
	printTable(w, results, sides)
	printVhosts(w, results, sides)
	if targets {
		printTargets(w, results)
	}
}

// reprint reports a run saved by saveResults.
func reprint(path string, targets bool) error {
	sides, results, err := loadResults(path)
	if err != nil {
		return err
	}
	report(os.Stdout, results, sides, targets)
	return nil
}

// workDir returns dir, created, or a new temporary directory.
func workDir(dir string) (string, error) {
	if dir == "" {
		return os.MkdirTemp("", "portico-proxybench-")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return abs, os.MkdirAll(abs, 0o755)
}

// side is one proxy under test, started once and measured in every round.
type side struct {
	name  string
	kind  sideKind
	proc  *process
	http  string // base URLs
	https string
	// pprof is the address serving /debug/pprof for this side ("": none).
	pprof string
	// noH2: the side offers no HTTP/2 (bare raw and fasthttp); h2load would
	// fall back to pipelined HTTP/1.1, so the HTTP/2 scenario skips it.
	noH2 bool
}

// sideKind tells how a side takes its configuration.
type sideKind int

const (
	kindPortico sideKind = iota // portico run on the manifests directory
	kindNginx                   // the nginx under test, reloaded on SIGHUP
	kindBare                    // bench/proxy/bare: forwards everything to the backend
)

// The names of the two sides every run has; ratios are the first's to the second's.
const (
	porticoSide = "portico"
	nginxSide   = "nginx"
)

func (b *bench) startSides(ctx context.Context) ([]*side, error) {
	starts := []func(context.Context) (*side, error){
		func(ctx context.Context) (*side, error) {
			return b.startPortico(ctx, porticoSide, b.portico, b.ports.PorticoHTTP, b.ports.PorticoHTTPS, b.ports.PorticoAdmin)
		},
		b.startNginxProxy,
	}
	if b.baseline != "" {
		starts = append(starts, func(ctx context.Context) (*side, error) {
			return b.startPortico(ctx, "baseline", b.baseline, b.ports.BaselineHTTP, b.ports.BaselineHTTPS, b.ports.BaselineAdmin)
		})
	}
	for _, mode := range b.bareSides {
		starts = append(starts, func(ctx context.Context) (*side, error) { return b.startBare(ctx, mode) })
	}
	var sides []*side
	for _, start := range starts {
		s, err := start(ctx)
		if s != nil {
			sides = append(sides, s)
		}
		if err != nil {
			return sides, err
		}
	}
	return sides, nil
}

func (b *bench) startPortico(ctx context.Context, name, bin string, httpPort, httpsPort, adminPort int) (*side, error) {
	logFile := filepath.Join(b.dir, name+".log")
	args := []string{"run",
		"--manifests", filepath.Join(b.dir, "manifests"),
		"--http-addr", addr(httpPort),
		"--https-addr", addr(httpsPort),
		"--admin-addr", addr(adminPort)}
	if name == porticoSide {
		args = append(args, "--pprof-addr", addr(b.ports.PorticoPprof))
	}
	proc, err := b.start(ctx, b.proxyCore, logFile, bin, args...)
	if err != nil {
		return nil, err
	}
	s := &side{name: name, kind: kindPortico, proc: proc, http: url("http", httpPort), https: url("https", httpsPort)}
	if name == porticoSide {
		s.pprof = addr(b.ports.PorticoPprof)
	}
	return s, waitReady(ctx, s, logFile)
}

// startBare starts one selection of bench/proxy/bare as the side "bare-MODE", on
// ports of its own.
func (b *bench) startBare(ctx context.Context, mode string) (*side, error) {
	var p [3]int
	for i := range p {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		p[i] = port
	}
	name := "bare-" + mode
	logFile := filepath.Join(b.dir, name+".log")
	proc, err := b.start(ctx, b.proxyCore, logFile, b.bare, "run",
		"--manifests", filepath.Join(b.dir, "manifests"),
		"--http-addr", addr(p[0]), "--https-addr", addr(p[1]), "--pprof-addr", addr(p[2]), "--bare", mode)
	if err != nil {
		return nil, err
	}
	s := &side{name: name, kind: kindBare, proc: proc, http: url("http", p[0]), https: url("https", p[1]), pprof: addr(p[2]),
		noH2: mode == "raw" || mode == "fasthttp"}
	return s, waitReady(ctx, s, logFile)
}

func (b *bench) startNginxProxy(ctx context.Context) (*side, error) {
	logFile := filepath.Join(b.dir, "nginx-proxy.stderr")
	proc, err := b.start(ctx, b.proxyCore, logFile, "nginx", "-p", b.dir, "-c", filepath.Join(b.dir, "nginx-proxy.conf"))
	if err != nil {
		return nil, err
	}
	s := &side{name: nginxSide, kind: kindNginx, proc: proc, http: url("http", b.ports.NginxHTTP), https: url("https", b.ports.NginxHTTPS)}
	return s, waitReady(ctx, s, logFile)
}

func (b *bench) startBackend(ctx context.Context) (*process, error) {
	logFile := filepath.Join(b.dir, "nginx-backend.stderr")
	proc, err := b.start(ctx, b.loadCore, logFile, "nginx", "-p", b.dir, "-c", filepath.Join(b.dir, "nginx-backend.conf"))
	if err != nil {
		return nil, err
	}
	return proc, waitURL(ctx, url("http", b.ports.Backend)+"/", "", logFile)
}

// process is a started server; pid is the one /proc accounting starts from
// (taskset execs its command, so it is the server's own).
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// start runs name pinned to core, its output going to logFile.
func (b *bench) start(ctx context.Context, core, logFile, name string, args ...string) (*process, error) {
	uncache(name)
	out, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("nice", b.pinned(core, append([]string{name}, args...))...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	select {
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	default:
	}
	return p, nil
}

// uncache drops the executable name from the page cache, so that every side's
// binary is paged in from disk as it starts. How many pages a fault on a file maps
// depends on how the file came into the page cache: a Portico the linker has just
// written showed some 4 MB more RSS than the same file read back from disk, which
// would also set it apart from a baseline built earlier.
// It is best effort: where it fails, the page cache stays as it was.
func uncache(name string) {
	path, err := exec.LookPath(name)
	if err != nil {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	_ = f.Sync() // only written-back pages are dropped
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process (SIGTERM: nginx and portico both shut down cleanly
// on it) and, after a grace period, its whole process group.
func (p *process) stop() {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
	}
}

// pinned returns the arguments of nice that run command at the benchmark's
// niceness on core (nice and taskset exec the command: its PID is the one
// started).
func (b *bench) pinned(core string, command []string) []string {
	return append([]string{"-n", strconv.Itoa(b.nice), "taskset", "-c", core}, command...)
}

// tail returns the end of a log file, for error messages.
func tail(path string) string {
	return strings.TrimSpace(string(lastBytes(path, 2000)))
}

// lastBytes returns up to n bytes from the end of the file at path, without reading
// the rest: the proxies' access logs reach gigabytes in a full run.
func lastBytes(path string, n int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		if _, err := f.Seek(-n, io.SeekEnd); err != nil {
			return nil
		}
	}
	data, _ := io.ReadAll(f)
	return data
}

// trimLogs cuts every log in dir longer than keepLog to its last keepLog bytes once
// the sides are stopped. A full run logs every request of every side (Portico's
// defaults include the access log), gigabytes a run would otherwise leave in /tmp.
func trimLogs(dir string) {
	const keepLog = 1 << 20
	for _, pattern := range []string{"*.log", "*.stderr"} {
		paths, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, p := range paths {
			if fi, err := os.Stat(p); err != nil || fi.Size() <= keepLog {
				continue
			}
			_ = os.WriteFile(p, lastBytes(p, keepLog), 0o644)
		}
	}
}

var errNotReady = errors.New("not ready")
