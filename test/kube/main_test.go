// Package kube tests `portico serve` against a real kube-apiserver and etcd (built from
// Go modules by hack/kube, started once for the package), with backends in a network
// namespace standing in for the pod network.
package kube

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/echo"
	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/testutil"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &env)) }

// backend starts `portico echo` for service in pod network pn on port, and waits until
// it answers.
func backend(t *testing.T, pn *kubetest.PodNetwork, service string, port int) {
	t.Helper()
	addr := net.JoinHostPort(pn.PodIP, strconv.Itoa(port))
	pn.Start(t, testutil.PorticoBinary(t), "echo", "--listen", addr, "--service", service, "--log-level", "warn")
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("echo %s on %s never answered: %v", service, addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// objects creates a namespace, and per service a Service (port "http" 80) and an
// EndpointSlice pointing at the pod network's address on the given port.
func createService(t *testing.T, c kubernetes.Interface, ns, name, ip string, port int32) {
	t.Helper()
	ctx := context.Background()
	_, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	portName, ready := "http", true
	_, err = c.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// blueGreen starts backends "blue" and "green" in pod network pn (at bluePort and
// bluePort+1), creates namespace ns with a Service for each, and an Ingress "web" for
// web.test routing everything to blue: what tests that switch traffic start from.
func blueGreen(t *testing.T, c kubernetes.Interface, pn *kubetest.PodNetwork, ns string, bluePort int) {
	t.Helper()
	backend(t, pn, "blue", bluePort)
	backend(t, pn, "green", bluePort+1)
	createNamespace(t, c, ns)
	createService(t, c, ns, "blue", pn.PodIP, int32(bluePort))
	createService(t, c, ns, "green", pn.PodIP, int32(bluePort+1))
	if _, err := c.NetworkingV1().Ingresses(ns).Create(context.Background(), ingress("web", "web.test", "/", "blue"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createNamespace(t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func ingress(name, host, path, service string) *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: path, PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: service, Port: networkingv1.ServiceBackendPort{Name: "http"}}},
			}}}},
		}}},
	}
}

// controller is one in-process `portico serve` with the embedded proxy.
type controller struct {
	srv    *app.Server
	cancel context.CancelFunc
	done   chan error
}

func startController(t *testing.T, cfg *rest.Config, identity string, namespaces []string) *controller {
	t.Helper()
	return startControllerWith(t, cfg, identity, namespaces, nil)
}

// startControllerWith is startController with options changed by edit first.
func startControllerWith(t *testing.T, cfg *rest.Config, identity string, namespaces []string, edit func(*app.ServeOptions)) *controller {
	t.Helper()
	opts := app.ServeOptions{
		Config:                 cfg,
		XDSAddr:                "127.0.0.1:0",
		AdminAddr:              "127.0.0.1:0",
		WatchNamespaces:        namespaces,
		IngressStatusAddresses: []string{"192.0.2.10"},
		EmbeddedProxy:          true,
		HTTPAddr:               "127.0.0.1:0",
		HTTPSAddr:              "127.0.0.1:0",
		LeaderElection:         true,
		LeaseNamespace:         "default",
		LeaseName:              "portico-test-" + strings.ToLower(t.Name()),
		Identity:               identity,
		LeaseDuration:          2 * time.Second,
		RenewDeadline:          1500 * time.Millisecond,
		RetryPeriod:            250 * time.Millisecond,
		Holdoff:                50 * time.Millisecond,
		MaxDelay:               300 * time.Millisecond,
		Logger:                 slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if edit != nil {
		edit(&opts)
	}
	s, err := app.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &controller{srv: s, cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- s.Run(ctx) }()
	t.Cleanup(c.stop)
	return c
}

func (c *controller) stop() {
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
	}
}

func (c *controller) get(t *testing.T, host, path string) (int, echo.Response) {
	t.Helper()
	return c.getWith(host, path)
}

// eventually polls until cond holds, for at most timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return testutil.Eventually(t, timeout, what, cond)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
