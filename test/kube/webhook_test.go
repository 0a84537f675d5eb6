package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/portico-dev/portico/internal/cli"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/deploytest"
	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/webhook"
)

// TestWebhook runs `portico serve --webhook-addr --webhook-cert-dir` (the command line,
// in-process) with a certificate from `portico certgen --webhook`, registers it with the
// API server as deploy/webhook.yaml does (a URL instead of a Service: no pod network
// reaches the API server here), and creates objects through the API server: those
// invalid on their own are refused with their status message, the rest are admitted.
func TestWebhook(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	warned := &warningLog{}
	cfg.WarningHandler = warned
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	ctx := context.Background()
	const ns = "webhook"
	createNamespace(t, c, ns)

	// Created before the webhook exists, as by a cluster that had none: the controller
	// writes its status, which the webhook's refusal of the same spec must repeat.
	const badRouteSpec = `{"virtualhost": {"fqdn": "bad.webhook.test"}, "routes": [{"match": "api", "services": [{"name": "web", "port": 80}]}]}`
	if err := createIngressRouteJSON(ctx, cc, ns, "before", badRouteSpec); err != nil {
		t.Fatal(err)
	}
	badIngress := func(name string) *networkingv1.Ingress {
		ing := ingress(name, "bad.webhook.test", "/", "web")
		implementationSpecific := networkingv1.PathTypeImplementationSpecific
		p := &ing.Spec.Rules[0].HTTP.Paths[0]
		p.PathType, p.Path = &implementationSpecific, "/static//assets" // the API server accepts this path; Portico does not
		return ing
	}
	if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, badIngress("before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	certs, caBundle := webhookCertificate(t)
	webhookAddr, adminAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	runServe(t, "serve", "--kubeconfig", env.Kubeconfig,
		"--webhook-addr", webhookAddr, "--webhook-cert-dir", certs,
		"--watch-namespaces", ns, "--leader-elect=false",
		"--xds-addr", testutil.FreeAddr(t), "--admin-addr", adminAddr,
		"--log-level", "warn")
	eventually(t, 30*time.Second, "serve to become ready", func() bool { return readyz(adminAddr) })
	eventually(t, 10*time.Second, "the webhook to answer over TLS", func() bool { return answersTLS(webhookAddr, caBundle) })

	const wantIngress = `not served: spec.rules[0].http.paths[0].path "/static//assets": must not contain consecutive "/" characters`
	const wantRoute = `not served: spec.routes[0] (match "api"): match "api" must start with "/"`
	var statusDesc string
	eventually(t, 20*time.Second, "the status of the IngressRoute created before the webhook", func() bool {
		ir, err := cc.IngressRoutes(ns).Get(ctx, "before", metav1.GetOptions{})
		if err != nil {
			return false
		}
		statusDesc = ir.Status.Description
		return ir.Status.CurrentStatus == "invalid"
	})
	if statusDesc != wantRoute {
		t.Fatalf("the status says %q, want %q", statusDesc, wantRoute)
	}

	registerWebhook(t, c, webhookAddr, caBundle, ns)
	// The API server picks the configuration up asynchronously: probe with dry runs.
	eventually(t, 20*time.Second, "the API server to call the webhook", func() bool {
		_, err := c.NetworkingV1().Ingresses(ns).Create(ctx, badIngress("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil
	})

	t.Run("invalid Ingress refused with its status message", func(t *testing.T) {
		_, err := c.NetworkingV1().Ingresses(ns).Create(ctx, badIngress("bad"), metav1.CreateOptions{})
		refusedWith(t, err, wantIngress)
	})
	t.Run("invalid IngressRoute refused with its status message", func(t *testing.T) {
		refusedWith(t, createIngressRouteJSON(ctx, cc, ns, "bad", badRouteSpec), statusDesc)
	})
	t.Run("undecodable IngressRoute refused", func(t *testing.T) {
		// "service" has an open schema: the API server would store this typo.
		err := createIngressRouteJSON(ctx, cc, ns, "typo", `{"routes": [{"match": "/", "service": {"name": "s", "prot": 80}}]}`)
		refusedWith(t, err, `not served: its spec cannot be read: spec.routes[0].service: unknown field "prot"; fix that field`)
	})
	t.Run("invalid HTTPProxy refused with its status message", func(t *testing.T) {
		err := createHTTPProxyJSON(ctx, cc, ns, "bad", `{"virtualhost": {"fqdn": "proxy.webhook.test"}, "routes": [{"conditions": [{"header": {"name": "x-a", "exact": "a", "contains": "b"}}], "services": [{"name": "web", "port": 80}]}]}`)
		refusedWith(t, err, `not served: spec.routes[0].conditions[0].header: header "x-a" must set exactly one of present, notpresent, exact, notexact, contains, notcontains, regex (it sets 2)`)
		err = createHTTPProxyJSON(ctx, cc, ns, "unprotected", `{"virtualhost": {"fqdn": "proxy.webhook.test", "ipAllowPolicy": [{"source": "Peer", "cidr": "10.0.0.0/33"}]}, "routes": [{"services": [{"name": "web", "port": 80}]}]}`)
		refusedWith(t, err, `not served: spec.virtualhost.ipAllowPolicy[0].cidr "10.0.0.0/33" is not an IP address or CIDR block`)
		err = createHTTPProxyJSON(ctx, cc, ns, "badlimit", `{"virtualhost": {"fqdn": "proxy.webhook.test"}, "routes": [{"services": [{"name": "web", "port": 80}], "rateLimitPolicy": {"local": {"requests": 1, "unit": "hour", "responseStatusCode": 418}}}]}`)
		refusedWith(t, err, `not served: spec.routes[0].rateLimitPolicy.local.responseStatusCode 418 is not a 4xx or 5xx status the data planes can answer`)
	})
	t.Run("valid HTTPProxy admitted, with a warning for what Portico ignores", func(t *testing.T) {
		warned.take()
		if err := createHTTPProxyJSON(ctx, cc, ns, "good", `{"virtualhost": {"fqdn": "good-proxy.webhook.test", "corsPolicy": {"allowOrigin": ["*"], "allowMethods": ["GET"]}}, "httpVersions": ["HTTP/1.1"], "routes": [{"services": [{"name": "nothere", "port": 80}]}]}`); err != nil {
			t.Fatalf("HTTPProxy: %v", err)
		}
		if got := strings.Join(warned.take(), "\n"); !strings.Contains(got, "spec.httpVersions is ignored without TLS termination") || strings.Contains(got, "corsPolicy") {
			t.Errorf("warnings %q, want the httpVersions one and none about corsPolicy", got)
		}
	})
	t.Run("valid objects admitted", func(t *testing.T) {
		if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ingress("good", "good.webhook.test", "/", "web"), metav1.CreateOptions{}); err != nil {
			t.Errorf("Ingress: %v", err)
		}
		if err := createIngressRouteJSON(ctx, cc, ns, "good", `{"virtualhost": {"fqdn": "good-route.webhook.test"}, "routes": [{"match": "/", "services": [{"name": "web", "port": 80}]}]}`); err != nil {
			t.Errorf("IngressRoute: %v", err)
		}
	})
	t.Run("another class's Ingress admitted", func(t *testing.T) {
		other := badIngress("other-class")
		class := "nginx"
		other.Spec.IngressClassName = &class
		if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
			t.Error(err)
		}
	})
	t.Run("objects invalid only because of others admitted", func(t *testing.T) {
		// The same host and path as "good", which is older; and an orphan IngressRoute.
		if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ingress("conflict", "good.webhook.test", "/", "web"), metav1.CreateOptions{}); err != nil {
			t.Errorf("conflicting Ingress: %v", err)
		}
		if err := createIngressRouteJSON(ctx, cc, ns, "orphan", `{"routes": [{"match": "/", "services": [{"name": "web", "port": 80}]}]}`); err != nil {
			t.Errorf("orphan IngressRoute: %v", err)
		}
	})
	t.Run("values that fall back to defaults admitted with a warning", func(t *testing.T) {
		ing := ingress("slow", "slow.webhook.test", "/", "web")
		ing.Annotations = map[string]string{"portico.dev/request-timeout": "soon"}
		warned.take()
		if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		const want = `annotation portico.dev/request-timeout "soon" is not a duration (e.g. "10s", or "infinity"); the proxy default (15s) applies`
		if got := warned.take(); !slices.Contains(got, want) {
			t.Errorf("warnings %q, want %q", got, want)
		}
	})
	t.Run("an object invalid before the webhook can still be edited, not made worse", func(t *testing.T) {
		ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "before", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ing.Labels = map[string]string{"team": "web"}
		warned.take()
		ing, err = c.NetworkingV1().Ingresses(ns).Update(ctx, ing, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("a label change: %v", err)
		}
		if got := warned.take(); !slices.Contains(got, wantIngress) {
			t.Errorf("warnings %q, want %q", got, wantIngress)
		}
		ing.Spec.Rules = append(ing.Spec.Rules, *ing.Spec.Rules[0].DeepCopy())
		ing.Spec.Rules[1].HTTP.Paths[0].Path = "/x?y"
		_, err = c.NetworkingV1().Ingresses(ns).Update(ctx, ing, metav1.UpdateOptions{})
		refusedWith(t, err, wantIngress+`; spec.rules[1].http.paths[0].path "/x?y": must not contain "?" or "#": the query and fragment are not part of the matched path`)
	})
}

// TestWebhookWarnsAboutGatewayAPI runs serve's webhook registered as deploy/webhook.yaml
// registers it and creates Gateway API objects through the API server: every one is
// admitted, those with problems with a warning each, in the words the status then
// carries; a route written through v1beta1 reaches the webhook as v1 (matchPolicy
// Equivalent); another controller's objects get no warning.
func TestWebhookWarnsAboutGatewayAPI(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallGatewayAPICRDs(t, kubetest.GatewayAPIStandard)
	warned := &warningLog{}
	cfg.WarningHandler = warned
	c := kubetest.Clientset(t, cfg)
	gw, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, v1 := t.Context(), gw.GatewayV1()
	const ns, class = "webhook-gateway", "webhook-gateway"
	createNamespace(t, c, ns)
	if _, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	certs, caBundle := webhookCertificate(t)
	webhookAddr, adminAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	runServe(t, "serve", "--kubeconfig", env.Kubeconfig,
		"--webhook-addr", webhookAddr, "--webhook-cert-dir", certs,
		"--watch-namespaces", ns, "--leader-elect=false", "--gateway-data-plane", "none",
		"--xds-addr", testutil.FreeAddr(t), "--admin-addr", adminAddr,
		"--log-level", "warn")
	eventually(t, 30*time.Second, "serve to become ready", func() bool { return readyz(adminAddr) })
	registerWebhook(t, c, webhookAddr, caBundle, ns)

	// created(t)(creation) returns the warnings of a creation, which must succeed.
	created := func(t *testing.T) func(any, error) []string {
		return func(_ any, err error) []string {
			t.Helper()
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			return warned.take()
		}
	}
	if got := created(t)(v1.GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: dag.GatewayControllerName}}, metav1.CreateOptions{})); len(got) > 0 {
		t.Errorf("a valid GatewayClass: warnings %q", got)
	}
	if got := created(t)(v1.Gateways(ns).Create(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "gw"}, Spec: gatewayv1.GatewaySpec{
		GatewayClassName: class, Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}}}, metav1.CreateOptions{})); len(got) > 0 {
		t.Errorf("a valid Gateway: warnings %q", got)
	}
	route := func(name, backend string, parent gatewayv1.ObjectName) *gatewayv1.HTTPRoute {
		return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: parent}}},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(backend), Port: ptrTo(gatewayv1.PortNumber(80))}}}}}},
		}}
	}
	const missing = "spec.rules[0].backendRefs[0]: Service " + ns + "/missing not found (the requests the rule would send it are answered 500)"
	// The webhook decides with what the controller has read: wait until it has the
	// Gateway (server-side dry runs call the webhook and store nothing).
	eventually(t, 30*time.Second, "the webhook to warn about a route to a missing Service", func() bool {
		return slices.Contains(created(t)(v1.HTTPRoutes(ns).Create(ctx, route("probe", "missing", "gw"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})), missing)
	})

	t.Run("a route to a missing Service: admitted, with the warning", func(t *testing.T) {
		if got := created(t)(v1.HTTPRoutes(ns).Create(ctx, route("missing", "missing", "gw"), metav1.CreateOptions{})); !slices.Equal(got, []string{missing}) {
			t.Errorf("warnings %q, want %q", got, missing)
		}
		// The status the controller writes says the same.
		eventually(t, 30*time.Second, "the route's status", func() bool {
			r, err := v1.HTTPRoutes(ns).Get(ctx, "missing", metav1.GetOptions{})
			if err != nil || len(r.Status.Parents) != 1 {
				return false
			}
			for _, cond := range r.Status.Parents[0].Conditions {
				if cond.Type == "ResolvedRefs" && cond.Status == metav1.ConditionFalse && cond.Message != "" && strings.HasPrefix(missing, cond.Message) {
					return true
				}
			}
			return false
		})
	})
	t.Run("the same through v1beta1", func(t *testing.T) {
		r := route("missing-beta", "missing", "gw")
		beta := &gatewayv1beta1.HTTPRoute{ObjectMeta: r.ObjectMeta, Spec: r.Spec}
		if got := created(t)(gw.GatewayV1beta1().HTTPRoutes(ns).Create(ctx, beta, metav1.CreateOptions{})); !slices.Equal(got, []string{missing}) {
			t.Errorf("warnings %q, want %q", got, missing)
		}
	})
	t.Run("a valid route: no warning", func(t *testing.T) {
		if got := created(t)(v1.HTTPRoutes(ns).Create(ctx, route("web", "web", "gw"), metav1.CreateOptions{})); len(got) > 0 {
			t.Errorf("warnings %q", got)
		}
	})
	t.Run("a route of another controller's Gateway: no warning", func(t *testing.T) {
		if got := created(t)(v1.HTTPRoutes(ns).Create(ctx, route("theirs", "missing", "their-gw"), metav1.CreateOptions{})); len(got) > 0 {
			t.Errorf("warnings %q", got)
		}
	})
	t.Run("a Gateway whose certificate does not exist", func(t *testing.T) {
		https := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "secure"}, Spec: gatewayv1.GatewaySpec{
			GatewayClassName: class, Listeners: []gatewayv1.Listener{{Name: "https", Port: 443, Protocol: gatewayv1.HTTPSProtocolType,
				TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "missing"}}}}}}}
		want := []string{"no listener can be served (see their conditions)", "listener https: tls.certificateRefs[0]: Secret " + ns + "/missing not found"}
		if got := created(t)(v1.Gateways(ns).Create(ctx, https, metav1.CreateOptions{})); !slices.Equal(got, want) {
			t.Errorf("warnings %q, want %q", got, want)
		}
	})
}

// webhookCertificate writes the webhook's certificate for 127.0.0.1 with `portico
// certgen --webhook` into a directory, and returns it with the CA bundle.
func webhookCertificate(t *testing.T) (dir string, caBundle []byte) {
	t.Helper()
	dir = t.TempDir()
	var out testutil.SyncBuffer
	if code := cli.Main(t.Context(), []string{"certgen", "--webhook", "--out-dir", dir, "--server-name", "127.0.0.1"}, &out, &out); code != 0 {
		t.Fatalf("certgen --webhook: exit %d: %s", code, out.String())
	}
	caBundle, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, caBundle
}

// runServe runs the command line in-process until the test ends.
func runServe(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	logs := testWriter{t}
	go func() { done <- cli.Main(ctx, args, logs, logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("portico %s exited %d", args[0], code)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("portico %s did not stop within 15s", args[0])
		}
	})
}

// answersTLS reports whether the webhook completes a request over TLS, trusting only ca.
func answersTLS(addr string, ca []byte) bool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Get("https://" + addr + webhook.Path)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusMethodNotAllowed
}

// registerWebhook registers the webhooks of deploy/webhook.yaml with clientConfig.url
// pointing at addr, for namespace ns only (other tests share the API server; cluster-
// scoped GatewayClasses are asked about whatever their namespace), the one that
// refuses failing closed so that an admitted object shows the webhook answered. It is
// removed when the test ends.
func registerWebhook(t *testing.T, c kubernetes.Interface, addr string, caBundle []byte, ns string) {
	t.Helper()
	url := "https://" + addr + webhook.Path
	fail := admissionregistrationv1.Fail
	webhooks := deployWebhooks(t)
	for i := range webhooks {
		wh := &webhooks[i]
		wh.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle}
		wh.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
		if wh.Name == "validate.portico.dev" {
			wh.FailurePolicy = &fail
		}
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "portico-" + ns}, Webhooks: webhooks}
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), vwc.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("removing the webhook configuration: %v", err)
		}
	})
}

// deployWebhooks are the webhooks of the ValidatingWebhookConfiguration of
// deploy/webhook.yaml: their names, rules, policies and timeouts.
func deployWebhooks(t *testing.T) []admissionregistrationv1.ValidatingWebhook {
	t.Helper()
	file := filepath.Join(deploytest.Dir(), "webhook.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := deploytest.Decode(file, data)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Obj.GetKind() != "ValidatingWebhookConfiguration" {
			continue
		}
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.Obj.Object, &vwc); err != nil {
			t.Fatal(err)
		}
		return vwc.Webhooks
	}
	t.Fatalf("%s has no ValidatingWebhookConfiguration", file)
	return nil
}

// refusedWith checks that err is the webhook's refusal carrying message, as client-go
// reports it.
func refusedWith(t *testing.T, err error, message string) {
	t.Helper()
	want := `admission webhook "validate.portico.dev" denied the request: ` + message
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v\nwant an error containing %q", err, want)
		return
	}
	if !apierrors.IsInvalid(err) {
		t.Errorf("not an Invalid error: %#v", err)
	}
}

// warningLog collects the API server's Warning headers.
type warningLog struct {
	mu   sync.Mutex
	msgs []string
}

var _ rest.WarningHandler = (*warningLog)(nil)

func (w *warningLog) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// TestWebhookWithManagedCertificates runs the webhook as deploy/ does, with no
// certificate step: `serve --managed-certificates` issues the webhook's certificate and
// writes its CA into the caBundle of a ValidatingWebhookConfiguration registered
// without one, and the API server then calls the webhook and gets its refusals.
func TestWebhookWithManagedCertificates(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	ctx := context.Background()
	const ns = "webhook-managed"
	createNamespace(t, c, ns)
	webhookAddr, adminAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	registerWebhook(t, c, webhookAddr, nil, ns)
	runServe(t, "serve", "--kubeconfig", env.Kubeconfig,
		"--managed-certificates", "--certificates-namespace", ns,
		"--webhook-addr", webhookAddr, "--webhook-server-names", "127.0.0.1", "--webhook-configuration", "portico-"+ns,
		"--watch-namespaces", ns, "--leader-elect=false",
		"--xds-addr", testutil.FreeAddr(t), "--admin-addr", adminAddr,
		"--log-level", "warn")
	eventually(t, 30*time.Second, "serve to become ready", func() bool { return readyz(adminAddr) })
	var caBundle []byte
	eventually(t, 30*time.Second, "the controller to set the webhook configuration's caBundle", func() bool {
		vwc, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "portico-"+ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		caBundle = vwc.Webhooks[0].ClientConfig.CABundle
		return len(caBundle) > 0
	})
	if !answersTLS(webhookAddr, caBundle) {
		t.Fatal("the webhook's certificate does not verify against the caBundle the controller wrote")
	}
	bad := ingress("bad", "bad.webhook-managed.test", "/", "web")
	implementationSpecific := networkingv1.PathTypeImplementationSpecific
	bad.Spec.Rules[0].HTTP.Paths[0].PathType, bad.Spec.Rules[0].HTTP.Paths[0].Path = &implementationSpecific, "/static//assets"
	var err error
	eventually(t, 30*time.Second, "the API server to call the webhook and get its answer", func() bool {
		_, err = c.NetworkingV1().Ingresses(ns).Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "denied the request")
	})
	refusedWith(t, err, `not served: spec.rules[0].http.paths[0].path "/static//assets": must not contain consecutive "/" characters`)
	if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ingress("good", "good.webhook-managed.test", "/", "web"), metav1.CreateOptions{}); err != nil {
		t.Errorf("a valid Ingress: %v", err)
	}
}
