package helm

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/release"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-dev/portico/internal/deploytest"
	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/managedtls"
	"github.com/portico-dev/portico/internal/testutil"
)

// helmConfig is the SDK's configuration of the helm command for namespace, talking to
// the test's kube-apiserver as its admin, with releases stored in Secrets (Helm's
// default).
func helmConfig(t *testing.T, namespace string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig := env.Kubeconfig
	flags.KubeConfig = &kubeconfig
	flags.Namespace = &namespace
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler))
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func releaseNotes(t *testing.T, rel release.Releaser) string {
	t.Helper()
	r, ok := rel.(*releasev1.Release)
	if !ok {
		t.Fatalf("helm returned a %T, not a v1 release", rel)
	}
	return r.Info.Notes
}

const (
	helmNamespace = "portico-helm"
	appNamespace  = "helm-apps"
	statusAddress = "192.0.2.30" // no load balancer here: ingressStatusAddress
)

// TestHelmInstallUpgradeUninstall does for real, through the Helm SDK, what
// docs/install-helm.md tells an operator to do: `helm install portico
// deploy/helm/portico --namespace ... --create-namespace`, then `helm upgrade` turning
// the webhook off and narrowing the watched namespaces, then `helm uninstall`, against a
// real kube-apiserver. No kubelet runs the pods, so after the install and after the
// upgrade the test runs the real `portico serve` itself, with the arguments of the
// Deployment Helm created and the token of the ServiceAccount it created: the controller
// must become ready, write an Ingress's status and log no forbidden, that is, the
// chart's RBAC and flags work together for both settings of the webhook.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	cfg := helmConfig(t, helmNamespace)
	admin := kubetest.Clientset(t, env.Config)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	bin := testutil.PorticoBinary(t)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	install := action.NewInstall(cfg)
	install.ReleaseName = defaultRelease
	install.Namespace = helmNamespace
	install.CreateNamespace = true
	install.WaitStrategy = kube.HookOnlyStrategy
	install.Timeout = 2 * time.Minute
	// Its own data-plane namespace: another test applies the default one, outside Helm.
	rel, err := install.RunWithContext(ctx, loadChart(t), values(t, `ingressStatusAddress: [`+statusAddress+`]
gatewayDataPlanes: {namespace: portico-helm-gateways}`))
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	if _, err := admin.CoreV1().Namespaces().Get(ctx, helmNamespace, metav1.GetOptions{}); err != nil {
		t.Errorf("--create-namespace: %v", err)
	}
	// --create-namespace gives the namespace no Pod Security label: the notes say how.
	const labelHint = "kubectl label namespace " + helmNamespace + " pod-security.kubernetes.io/enforce=restricted"
	if notes := releaseNotes(t, rel); !strings.Contains(notes, labelHint) {
		t.Errorf("the notes of an install into an unlabelled namespace do not say %q:\n%s", labelHint, notes)
	}
	d, err := admin.AppsV1().Deployments(helmNamespace).Get(ctx, "portico", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after helm install: %v", err)
	}
	if d.Labels["app.kubernetes.io/managed-by"] != "Helm" || d.Annotations["meta.helm.sh/release-namespace"] != helmNamespace {
		t.Errorf("Deployment portico is not Helm's: labels %v, annotations %v", d.Labels, d.Annotations)
	}
	vwc, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "portico", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after helm install: %v", err)
	}
	if svc := vwc.Webhooks[0].ClientConfig.Service; svc == nil || svc.Namespace != helmNamespace {
		t.Errorf("the webhook's Service is %+v, want one in %s", svc, helmNamespace)
	}
	crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, name := range []string{"httpproxies.projectcontour.io", "ingressroutes.contour.heptio.com"} {
		if _, err := dyn.Resource(crd).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("CRD from crds/: %v", err)
		}
	}

	t.Run("the installed controller works with the installed RBAC", func(t *testing.T) {
		runInstalledController(t, admin, bin, "installed", func() {
			// With the webhook on, it keeps the configuration's caBundle: the
			// permission on the configuration, by name, is there and enough.
			testutil.Eventually(t, 30*time.Second, "the caBundle of both of the configuration's webhooks to be set", func() bool {
				vwc, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "portico", metav1.GetOptions{})
				return err == nil && len(vwc.Webhooks) == 2 && !slices.ContainsFunc(vwc.Webhooks, func(wh admissionregistrationv1.ValidatingWebhook) bool {
					return len(wh.ClientConfig.CABundle) == 0
				})
			})
		})
	})

	if _, err := admin.CoreV1().Namespaces().Patch(ctx, helmNamespace, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = helmNamespace
	upgrade.WaitStrategy = kube.HookOnlyStrategy
	upgrade.Timeout = 2 * time.Minute
	rel, err = upgrade.RunWithContext(ctx, defaultRelease, loadChart(t), values(t, `
ingressStatusAddress: [`+statusAddress+`]
webhook: {enabled: false}
watchNamespaces: [`+appNamespace+`]
gatewayDataPlanes: {namespace: portico-helm-gateways}
`))
	if err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	if notes := releaseNotes(t, rel); strings.Contains(notes, "pod-security") || strings.Contains(notes, "caBundle") {
		t.Errorf("the notes of an upgrade turning the webhook off, in a labelled namespace, speak of Pod Security or the caBundle:\n%s", notes)
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "portico", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the webhook configuration after the upgrade that turned it off: %v, want NotFound", err)
	}
	if _, err := admin.CoreV1().Services(helmNamespace).Get(ctx, "portico-webhook", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the webhook Service after the upgrade that turned it off: %v, want NotFound", err)
	}

	t.Run("the upgraded controller works without the webhook's permission", func(t *testing.T) {
		logs := runInstalledController(t, admin, bin, "upgraded", func() {})
		if strings.Contains(logs, "webhook") {
			t.Errorf("with the webhook off, the controller logged about a webhook:\n%s", logs)
		}
	})

	uninstall := action.NewUninstall(cfg)
	uninstall.WaitStrategy = kube.HookOnlyStrategy
	uninstall.Timeout = 2 * time.Minute
	if _, err := uninstall.Run(defaultRelease); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	if _, err := admin.AppsV1().Deployments(helmNamespace).Get(ctx, "portico", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment portico after helm uninstall: %v, want NotFound", err)
	}
	if _, err := admin.RbacV1().ClusterRoles().Get(ctx, "portico", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole portico after helm uninstall: %v, want NotFound", err)
	}
	// Helm never deletes what crds/ installed (that would delete every HTTPProxy), nor
	// the Secrets the controller made (docs/install-helm.md says to delete them).
	if _, err := dyn.Resource(crd).Get(ctx, "httpproxies.projectcontour.io", metav1.GetOptions{}); err != nil {
		t.Errorf("CRD after helm uninstall: %v", err)
	}
	for _, name := range []string{managedtls.DefaultCASecret, managedtls.DefaultClientSecret} {
		if _, err := admin.CoreV1().Secrets(helmNamespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("Secret %s after helm uninstall: %v", name, err)
		}
	}
}

// runInstalledController runs `portico serve` as the Deployment portico that Helm
// installed would (its controller container's arguments, $(POD_NAMESPACE) expanded),
// as its ServiceAccount, and checks what any install must do: ready, its certificates in
// Secrets of the release namespace, the status of a new Ingress (named name) in
// appNamespace written, and no forbidden logged. It calls whileRunning before stopping
// it, and returns the logs.
func runInstalledController(t *testing.T, admin kubernetes.Interface, bin, name string, whileRunning func()) string {
	t.Helper()
	ctx := context.Background()
	d, err := admin.AppsV1().Deployments(helmNamespace).Get(ctx, "portico", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args, err := deploytest.ServeArgs(d.Spec.Template.Spec.Containers[0], helmNamespace)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := env.ServiceAccountKubeconfig(ctx, helmNamespace, d.Spec.Template.Spec.ServiceAccountName)
	if err != nil {
		t.Fatal(err)
	}

	p := deploytest.StartServe(t, bin, args, kubeconfig)
	testutil.Eventually(t, 60*time.Second, "/readyz to answer 200", p.Ready)
	for _, s := range []string{managedtls.DefaultCASecret, managedtls.DefaultClientSecret} {
		testutil.Eventually(t, 30*time.Second, "the Secret "+s, func() bool {
			_, err := admin.CoreV1().Secrets(helmNamespace).Get(ctx, s, metav1.GetOptions{})
			return err == nil
		})
	}
	ing := ingress(name)
	if _, err := admin.NetworkingV1().Ingresses(appNamespace).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the Ingress status to show "+statusAddress, func() bool {
		cur, err := admin.NetworkingV1().Ingresses(appNamespace).Get(ctx, ing.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lb := cur.Status.LoadBalancer.Ingress
		return len(lb) == 1 && lb[0].IP == statusAddress
	})
	whileRunning()
	logs := p.Stop(t)
	if strings.Contains(strings.ToLower(logs), "forbidden") {
		t.Errorf("portico serve logged forbidden with the chart's RBAC (args %q):\n%s", args, logs)
	}
	return logs
}

// ingress is an Ingress of class portico sending web.<name>.test to Service web:80.
func ingress(name string) *networkingv1.Ingress {
	class := "portico"
	prefix := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{
				Host: "web." + name + ".test",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
				}}}},
			}},
		},
	}
}
