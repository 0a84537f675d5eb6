// Package kubetest runs a real etcd and kube-apiserver for tests.
//
// The binaries are built from Go modules by hack/kube/build.sh (cached under
// ~/.cache/portico/kube, see there) the first time they are needed; set
// PORTICO_KUBE_BIN_DIR to a directory holding etcd, kube-apiserver,
// kube-controller-manager and echo-basic to use those instead. Nothing else runs at
// first: no controller-manager (so no namespace deletion, no EndpointSlices generated
// from Services, no ServiceAccount token controller), no scheduler, no kubelet. Tests
// create the objects they need, EndpointSlices included, or call Env.StartWorkloads
// for kube-controller-manager and a node agent that runs Pods (package nodeagent).
//
// Start the pair once per test binary, from TestMain:
//
//	var env *kubetest.Env
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &env)) }
//
//	func TestSomething(t *testing.T) {
//		env.Require(t) // skips under -short, where Main starts nothing
//		...
//	}
//
// CRDs are not installed by Start: Env.InstallContourCRDs installs deploy/crds and
// waits until they are established (ContourClient then reads and writes IngressRoutes
// and HTTPProxies); Env.InstallGatewayAPICRDs installs the Gateway API's from the
// sigs.k8s.io/gateway-api module.
//
// Env.Config (admin) and Env.TokenConfig (any bearer token, e.g. a ServiceAccount's
// from the TokenRequest API) are client-go rest.Configs; Env.Kubeconfig and
// Env.TokenKubeconfig are the same credentials as kubeconfig files, for
// clientcmd.BuildConfigFromFlags("", path) or `portico serve --kubeconfig`.
package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/portico-dev/portico/internal/contourclient"
	"github.com/portico-dev/portico/internal/testutil"
)

const (
	// AdminUser is the user name of the admin token (group system:masters).
	AdminUser = "kubetest-admin"
	// ServiceAccountIssuer is the --service-account-issuer; tokens from the TokenRequest
	// API carry it, and the API server's own audience is the same string.
	ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
	// ServiceCIDR is the --service-cluster-ip-range.
	ServiceCIDR = "10.96.0.0/16"

	// StartTimeout bounds Main's call to Start, a cold build of the binaries included.
	StartTimeout = 20 * time.Minute

	mainModule = "github.com/portico-dev/portico"
)

// Env is a running etcd and kube-apiserver.
type Env struct {
	Config     *rest.Config // admin (system:masters) token, trusting the generated CA
	Kubeconfig string       // path of a kubeconfig file with the same credentials
	URL        string       // https://127.0.0.1:<port>

	Dir          string // temporary directory: certificates, tokens, etcd data, logs
	BinDir       string // where etcd and kube-apiserver were found or built
	EtcdLog      string // etcd's stderr
	APIServerLog string // kube-apiserver's output, all runs appended
	// ControllerManagerLog is kube-controller-manager's output, once StartWorkloads
	// started it.
	ControllerManagerLog string

	mu        sync.Mutex
	etcd      *proc
	apiserver *proc
	// controllerManager runs from the first StartWorkloads until Stop.
	controllerManager *proc
	podURL            string // the API server as Pods reach it, while StartWorkloads' test runs
	apiArgs           []string
	pki               *pki
	stopped           bool
}

// Main is for TestMain: it starts an Env, stores it in *env, runs the tests, prints
// the end of both logs if they failed, stops the Env and returns the exit code. Under
// -short it starts nothing, leaves *env nil and runs the tests (see Env.Require).
func Main(m *testing.M, env **Env) int {
	flag.Parse()
	defer testutil.RemovePorticoBinary()
	if testing.Short() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	begin := time.Now()
	e, err := Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubetest:", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "kubetest: kube-apiserver ready at %s after %v (dir %s)\n", e.URL, time.Since(begin).Round(time.Millisecond), e.Dir)
	}
	*env = e
	code := m.Run()
	if code != 0 {
		e.WriteLogs(os.Stderr, 60)
	}
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "kubetest: stop:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Require skips t when e is nil, that is when Main started nothing (-short).
func (e *Env) Require(t testing.TB) {
	t.Helper()
	if e == nil {
		t.Skip("kubetest: no kube-apiserver under -short")
	}
}

// Start builds the binaries if need be (hack/kube/build.sh, cached), then starts etcd
// and kube-apiserver on free loopback ports with freshly generated certificates and
// returns once /readyz answers ok. On failure it stops what it started and the error
// holds the end of the logs.
func Start(ctx context.Context) (*Env, error) {
	bin, err := binDir(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, err
	}
	e := &Env{
		Dir:          dir,
		BinDir:       bin,
		EtcdLog:      filepath.Join(dir, "etcd.log"),
		APIServerLog: filepath.Join(dir, "kube-apiserver.log"),
	}
	if err := e.start(ctx); err != nil {
		var logs bytes.Buffer
		e.WriteLogs(&logs, 40)
		_ = e.Stop()
		return nil, fmt.Errorf("%w\n%s", err, logs.String())
	}
	return e, nil
}

func (e *Env) start(ctx context.Context) error {
	var err error
	if e.pki, err = writePKI(e.Dir); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	e.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	e.Config = e.TokenConfig(e.pki.adminToken)

	e.etcd, err = startProc(filepath.Join(e.BinDir, "etcd"), e.EtcdLog, []string{
		"--data-dir=" + filepath.Join(e.Dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=http://127.0.0.1:" + strconv.Itoa(ports[1]),
		"--unsafe-no-fsync",
	})
	if err != nil {
		return err
	}
	if err := waitFor(ctx, e.etcd, "etcd", func(ctx context.Context) bool {
		return probe(ctx, http.DefaultClient, etcdURL+"/health", `"health":"true"`)
	}); err != nil {
		return err
	}

	e.apiArgs = []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// The endpoint reconciler refuses a loopback advertise address, and the
		// kubernetes Service's endpoints are of no use without a pod network.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--tls-cert-file=" + e.pki.certFile,
		"--tls-private-key-file=" + e.pki.keyFile,
		"--client-ca-file=" + e.pki.caFile,
		"--token-auth-file=" + e.pki.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + ServiceAccountIssuer,
		"--service-account-key-file=" + e.pki.saKeyFile,
		"--service-account-signing-key-file=" + e.pki.saKeyFile,
		"--service-cluster-ip-range=" + ServiceCIDR,
		// No controller-manager creates the default ServiceAccount of a namespace, so
		// the admission plugin that requires it would reject every Pod.
		"--disable-admission-plugins=ServiceAccount",
		"--enable-priority-and-fairness=false",
		// On SIGTERM, answer new requests 429 until those in flight are done, then give
		// open watches 2s (instead of --request-timeout, 60s) before closing them.
		"--shutdown-send-retry-after=true",
		"--profiling=false",
	}
	if err := e.startAPIServer(ctx); err != nil {
		return err
	}
	e.Kubeconfig = filepath.Join(e.Dir, "kubeconfig")
	return e.writeKubeconfig(e.Kubeconfig, e.pki.adminToken)
}

func (e *Env) startAPIServer(ctx context.Context) error {
	p, err := startProc(filepath.Join(e.BinDir, "kube-apiserver"), e.APIServerLog, e.apiArgs)
	if err != nil {
		return err
	}
	e.apiserver = p
	client, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		return err
	}
	return waitFor(ctx, p, "kube-apiserver", func(ctx context.Context) bool {
		return probe(ctx, client, e.URL+"/readyz", "ok")
	})
}

// RestartAPIServer stops kube-apiserver (SIGTERM) and starts it again with the same
// etcd, port, certificates and tokens, returning once it is ready again. Watches that
// clients had open are cut, as on a control-plane upgrade.
func (e *Env) RestartAPIServer(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errors.New("kubetest: restart after Stop")
	}
	if err := e.apiserver.stop(); err != nil {
		return fmt.Errorf("kubetest: stopping kube-apiserver: %w", err)
	}
	if err := e.startAPIServer(ctx); err != nil {
		var logs bytes.Buffer
		e.WriteLogs(&logs, 40)
		return fmt.Errorf("kubetest: restarting kube-apiserver: %w\n%s", err, logs.String())
	}
	return nil
}

// Stop stops kube-apiserver, then etcd, and removes Dir (kept, and printed, when
// PORTICO_KUBETEST_KEEP is set). Calling it again does nothing.
func (e *Env) Stop() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil
	}
	e.stopped = true
	var errs []error
	for _, p := range []*proc{e.controllerManager, e.apiserver, e.etcd} {
		if p != nil {
			if err := p.stop(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", filepath.Base(p.cmd.Path), err))
			}
		}
	}
	if os.Getenv("PORTICO_KUBETEST_KEEP") != "" {
		fmt.Fprintln(os.Stderr, "kubetest: kept", e.Dir)
	} else if err := os.RemoveAll(e.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// TokenConfig returns a rest.Config for the same server that authenticates with token,
// for instance a ServiceAccount token from the TokenRequest API. Each call returns a
// new Config, free to modify.
func (e *Env) TokenConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            e.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.pki.caPEM},
		// Tests create objects in bursts; client-go's default 5 QPS would throttle them.
		QPS:   1000,
		Burst: 1000,
	}
}

// TokenKubeconfig writes a kubeconfig file that authenticates with token into Dir and
// returns its path.
func (e *Env) TokenKubeconfig(token string) (string, error) {
	f, err := os.CreateTemp(e.Dir, "kubeconfig-*")
	if err != nil {
		return "", err
	}
	f.Close()
	return f.Name(), e.writeKubeconfig(f.Name(), token)
}

// ServiceAccountKubeconfig writes a kubeconfig file with a token (valid for an hour)
// of the ServiceAccount namespace/name, from the TokenRequest API, and returns its path:
// the identity a pod of that ServiceAccount gets.
func (e *Env) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	c, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return "", err
	}
	expiry := int64(3600)
	tr, err := c.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return e.TokenKubeconfig(tr.Status.Token)
}

func (e *Env) writeKubeconfig(path, token string) error {
	return os.WriteFile(path, kubeconfig(e.URL, e.pki.caPEM, token), 0o600)
}

// kubeconfig is a kubeconfig file for server, trusting ca, authenticating with token.
func kubeconfig(server string, ca []byte, token string) []byte {
	// JSON strings are valid YAML scalars, so %q quotes safely for any token.
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster:
    server: %q
    certificate-authority-data: %q
users:
- name: kubetest
  user:
    token: %q
contexts:
- name: kubetest
  context:
    cluster: kubetest
    user: kubetest
current-context: kubetest
`, server, base64.StdEncoding.EncodeToString(ca), token)
}

// PIDs returns the process ids of etcd and kube-apiserver (0 when not running).
func (e *Env) PIDs() (etcd, apiserver int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.etcd.pid(), e.apiserver.pid()
}

// WriteLogs writes the last lines of etcd's, kube-apiserver's and (when it ran)
// kube-controller-manager's logs to w.
func (e *Env) WriteLogs(w io.Writer, lines int) {
	for _, f := range []string{e.EtcdLog, e.APIServerLog, e.ControllerManagerLog} {
		if f == "" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(all) > lines {
			all = all[len(all)-lines:]
		}
		fmt.Fprintf(w, "--- last %d lines of %s ---\n%s\n", len(all), f, strings.Join(all, "\n"))
	}
}

// binDir returns the directory holding etcd and kube-apiserver: PORTICO_KUBE_BIN_DIR,
// or what hack/kube/build.sh prints (building them when they are not cached).
func binDir(ctx context.Context) (string, error) {
	if d := os.Getenv("PORTICO_KUBE_BIN_DIR"); d != "" {
		return d, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	gobin, err := exec.LookPath("go")
	if err != nil && os.Getenv("GOROOT") != "" {
		gobin, err = filepath.Join(os.Getenv("GOROOT"), "bin", "go"), nil
	}
	if err != nil {
		return "", fmt.Errorf("kubetest: building kube-apiserver needs the go command in PATH: %w", err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "kube", "build.sh"))
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(gobin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Stderr = os.Stderr // progress, and the compiler's errors
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubetest: hack/kube/build.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// repoRoot walks up from the working directory (a package directory under go test) to
// the directory whose go.mod declares the main module.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			s := bufio.NewScanner(f)
			for s.Scan() {
				if fields := strings.Fields(s.Text()); len(fields) == 2 && fields[0] == "module" && fields[1] == mainModule {
					f.Close()
					return dir, nil
				}
			}
			f.Close()
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("kubetest: no go.mod of %s above the working directory; set PORTICO_KUBE_BIN_DIR", mainModule)
		}
		dir = parent
	}
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// proc is a child process whose output goes to a log file.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited; err is then set
	err  error
}

func startProc(path, logFile string, args []string) (*proc, error) {
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own descriptor
	fmt.Fprintf(log, "=== %s: %s %s\n", time.Now().Format(time.RFC3339Nano), path, strings.Join(args, " "))
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int {
	if p == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// stop sends SIGTERM and waits; after 15s it kills. Exiting on SIGTERM with a
// non-zero status is not an error.
func (p *proc) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("did not exit within 15s of SIGTERM; killed")
	}
}

// waitFor polls ready every 100ms until it is true, p exits, or ctx ends.
func waitFor(ctx context.Context, p *proc, name string, ready func(context.Context) bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready(ctx) {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("kubetest: %s exited before it was ready: %v", name, p.err)
		case <-ctx.Done():
			return fmt.Errorf("kubetest: %s not ready: %w", name, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// probe reports whether GET url answers 200 with a body containing want.
func probe(ctx context.Context, client *http.Client, url, want string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), want)
}

// AdminConfig returns a copy of the admin configuration that the caller may change (QPS,
// timeouts). It skips t under -short, like Require.
func (e *Env) AdminConfig(t testing.TB) *rest.Config {
	t.Helper()
	e.Require(t)
	return rest.CopyConfig(e.Config)
}

// Clientset returns a clientset for cfg, failing t if it cannot be made.
func Clientset(t testing.TB, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// ContourClient returns a client of both Contour groups (IngressRoutes, HTTPProxies and
// TLSCertificateDelegations) for cfg, failing t if it cannot be made.
func ContourClient(t testing.TB, cfg *rest.Config) *contourclient.Client {
	t.Helper()
	c, err := contourclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
