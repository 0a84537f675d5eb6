package conformance

import (
	"context"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientset "k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	"sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/tests"
	conformanceconfig "sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/kubetest/nodeagent"
	"github.com/portico-dev/portico/internal/provision"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/version"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &env)) }

// GatewayClassName is the class the suite's Gateways name.
const GatewayClassName = "portico"

// reportPath is where the ConformanceReport goes: PORTICO_CONFORMANCE_REPORT (the
// documented command sets docs/conformance/...), else the test's temporary directory.
func reportPath(t *testing.T) string {
	if p := os.Getenv("PORTICO_CONFORMANCE_REPORT"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	return filepath.Join(t.TempDir(), "report.yaml")
}

// TestGatewayAPIConformance runs the suite's GATEWAY-HTTP, GATEWAY-GRPC and GATEWAY-TLS
// profiles, with the features Portico's GatewayClass lists in its status (inferred, as
// for any implementation), against `portico serve` deploying each Gateway's data plane.
func TestGatewayAPIConformance(t *testing.T) {
	env.Require(t)
	ctx := t.Context()
	cfg := env.AdminConfig(t)
	admin := kubetest.Clientset(t, cfg)

	env.InstallGatewayAPICRDs(t, kubetest.GatewayAPIStandard)
	env.StartWorkloads(t, kubetest.WorkloadOptions{PorticoBinary: porticoOutsideTmp(t)})
	for _, ns := range []string{"portico-system", app.DefaultGatewayNamespace} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	startServe(t)
	createGatewayClass(t, ctx)

	opts := suiteOptions(t)
	conformance.RunConformanceWithOptions(t, opts)
	// Registered after the suite's cleanups, so it runs before them: the base
	// Gateways' data planes still exist.
	t.Cleanup(func() {
		if t.Failed() {
			logDataPlanes(t, admin)
		}
	})
}

// logDataPlanes logs the end of each Gateway data plane's log, for a failed run: what
// the proxies received and refused is where a wrong answer comes from.
func logDataPlanes(t *testing.T, cs clientset.Interface) {
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods(app.DefaultGatewayNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing the data planes' Pods: %v", err)
		return
	}
	tail := int64(200)
	for _, pod := range pods.Items {
		for _, c := range pod.Spec.Containers {
			out, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &tail}).DoRaw(ctx)
			if err != nil {
				t.Logf("data plane %s/%s: %v", pod.Name, c.Name, err)
				continue
			}
			t.Logf("data plane %s/%s, last %d lines:\n%s", pod.Name, c.Name, tail, out)
		}
	}
}

// startServe runs `portico serve` in this process as deploy/ runs it (managed
// certificates, xDS over mutual TLS), with the embedded proxy as each Gateway's data
// plane: the node agent runs those Pods, which reach the xDS server at the node's address.
// It serves until the test's cleanup: the suite's parallel tests run after the test
// function has returned, so a context ended by the function would stop serve before them.
func startServe(t *testing.T) {
	t.Helper()
	port := freePort(t)
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: logLevel(t)}))
	s, err := app.NewServer(app.ServeOptions{
		PprofAddr:             os.Getenv("PORTICO_CONFORMANCE_PPROF"),
		Config:                env.AdminConfig(t),
		XDSAddr:               net.JoinHostPort("0.0.0.0", strconv.Itoa(port)),
		AdminAddr:             "127.0.0.1:0",
		ManagedTLS:            true,
		CertificatesNamespace: "portico-system",
		LeaderElection:        false,
		Logger:                logger,
		GatewayDataPlanes: provision.Options{
			DataPlane:    provision.DataPlanePortico,
			PorticoImage: "ghcr.io/portico-dev/portico:" + version.Version(),
			ServiceType:  corev1.ServiceTypeLoadBalancer,
			Replicas:     1,
			XDSAddress:   net.JoinHostPort(nodeagent.NodeIP, strconv.Itoa(port)),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
}

func createGatewayClass(t *testing.T, ctx context.Context) {
	t.Helper()
	c, err := client.New(env.AdminConfig(t), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := gatewayv1.Install(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	gc := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: GatewayClassName},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: dag.GatewayControllerName}}
	if err := c.Create(ctx, gc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The suite reads the features to test from the class's status: wait for serve to
	// accept the class and list them.
	testutil.Eventually(t, 2*time.Minute, "GatewayClass portico accepted with its supported features", func() bool {
		var cur gatewayv1.GatewayClass
		if err := c.Get(ctx, client.ObjectKeyFromObject(gc), &cur); err != nil {
			return false
		}
		return len(cur.Status.SupportedFeatures) > 0 && meta.IsStatusConditionTrue(cur.Status.Conditions, string(gatewayv1.GatewayClassConditionStatusAccepted))
	})
}

func suiteOptions(t *testing.T) suite.ConformanceOptions {
	t.Helper()
	log.SetLogger(zap.New(zap.WriteTo(testWriter{t}), zap.UseDevMode(true)))
	cfg := env.AdminConfig(t)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, install := range []func(*runtime.Scheme) error{xv1alpha1.Install, gatewayv1.Install, apiextensionsv1.AddToScheme} {
		if err := install(c.Scheme()); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	timeouts := conformanceconfig.DefaultTimeoutConfig()
	return suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     GatewayClassName,
			CleanupBaseResources: true,
			CleanupTestResources: true,
			TimeoutConfig:        timeouts,
			ReportOutputPath:     reportPath(t),
			Mode:                 "default",
			ConformanceProfiles: []suite.ConformanceProfileName{
				suite.GatewayHTTPConformanceProfileName, suite.GatewayGRPCConformanceProfileName, suite.GatewayTLSConformanceProfileName,
			},
			Implementation: confv1.Implementation{
				Organization: "portico-dev",
				Project:      "portico",
				URL:          "https://github.com/portico-dev/portico",
				Version:      version.Version(),
				Contact:      []string{"https://github.com/portico-dev/portico/issues"},
			},
			SkipTests: skipTests(t),
		},
		Client:     c,
		Clientset:  cs,
		RestConfig: cfg,
		ManifestFS: []fs.FS{&conformance.Manifests},
	}
}

// skipTests are the tests that fail today, listed in failing.txt with why, skipped in
// hack/test.sh's run so that it guards every test that passes. hack/conformance.sh
// (PORTICO_CONFORMANCE_ALL=1) runs them all, for the published report.
func skipTests(t *testing.T) []string {
	var out []string
	if run := os.Getenv("PORTICO_CONFORMANCE_RUN"); run != "" {
		return testsBut(strings.Split(run, ","))
	}
	switch only := os.Getenv("PORTICO_CONFORMANCE_ONLY"); only {
	case "":
	case "parallel":
		out = serialTests()
	default:
		t.Fatalf("PORTICO_CONFORMANCE_ONLY=%q: the only value is parallel", only)
	}
	if os.Getenv("PORTICO_CONFORMANCE_ALL") != "" {
		return out
	}
	data, err := os.ReadFile("failing.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if name, _, _ := strings.Cut(line, "#"); strings.TrimSpace(name) != "" {
			out = append(out, strings.TrimSpace(name))
		}
	}
	return out
}

// logLevel is serve's log level: PORTICO_CONFORMANCE_LOG (debug, info, warn, error),
// else warn, so that the suite's own lines stay readable.
func logLevel(t *testing.T) slog.Level {
	level := slog.LevelWarn
	if v := os.Getenv("PORTICO_CONFORMANCE_LOG"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			t.Fatalf("PORTICO_CONFORMANCE_LOG: %v", err)
		}
	}
	return level
}

// serialTests are the suite's tests that do not run in parallel, skipped when
// PORTICO_CONFORMANCE_ONLY=parallel: the parallel phase, where many Gateways come and go
// at once, then runs in minutes instead of the whole suite's half hour.
func serialTests() []string {
	var out []string
	for _, test := range tests.ConformanceTests {
		if !test.Parallel {
			out = append(out, test.ShortName)
		}
	}
	return out
}

// testsBut are the suite's tests but those named (PORTICO_CONFORMANCE_RUN: tests by
// their ShortName, comma-separated, for debugging; failing.txt does not apply).
func testsBut(names []string) []string {
	var out []string
	for _, test := range tests.ConformanceTests {
		if !slices.Contains(names, test.ShortName) {
			out = append(out, test.ShortName)
		}
	}
	return out
}

// testWriter sends log output to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// porticoOutsideTmp is the portico binary at a path outside /tmp: the data planes' Pods
// mount an emptyDir at /tmp, which would hide a binary there from their container.
func porticoOutsideTmp(t *testing.T) string {
	t.Helper()
	home, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, "portico", "conformance-bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(testutil.PorticoBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "portico-"+strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(bin) })
	return bin
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
