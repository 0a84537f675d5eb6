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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"

	"github.com/portico-dev/portico/internal/kubetest"
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

// TestHelmInstallUpgradeUninstall does for real, through the Helm SDK, what
// docs/install-helm.md tells an operator to do: `helm install portico
// deploy/helm/portico --namespace ... --create-namespace`, then `helm upgrade` turning
// the webhook off, then `helm uninstall`, against a real kube-apiserver (which runs no
// pods: this checks what Helm and the API server make of the chart, not the controller).
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	env.Require(t)
	const ns = "portico-helm"
	ctx := context.Background()
	cfg := helmConfig(t, ns)
	admin := kubetest.Clientset(t, env.Config)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}

	install := action.NewInstall(cfg)
	install.ReleaseName = defaultRelease
	install.Namespace = ns
	install.CreateNamespace = true
	install.WaitStrategy = kube.HookOnlyStrategy
	install.Timeout = 2 * time.Minute
	rel, err := install.RunWithContext(ctx, loadChart(t), nil)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	if _, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Errorf("--create-namespace: %v", err)
	}
	// --create-namespace gives the namespace no Pod Security label: the notes say how.
	const labelHint = "kubectl label namespace " + ns + " pod-security.kubernetes.io/enforce=restricted"
	if notes := releaseNotes(t, rel); !strings.Contains(notes, labelHint) {
		t.Errorf("the notes of an install into an unlabelled namespace do not say %q:\n%s", labelHint, notes)
	}
	d, err := admin.AppsV1().Deployments(ns).Get(ctx, "portico", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after helm install: %v", err)
	}
	if d.Labels["app.kubernetes.io/managed-by"] != "Helm" || d.Annotations["meta.helm.sh/release-namespace"] != ns {
		t.Errorf("Deployment portico is not Helm's: labels %v, annotations %v", d.Labels, d.Annotations)
	}
	vwc, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "portico", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after helm install: %v", err)
	}
	if svc := vwc.Webhooks[0].ClientConfig.Service; svc == nil || svc.Namespace != ns {
		t.Errorf("the webhook's Service is %+v, want one in %s", svc, ns)
	}
	crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, name := range []string{"httpproxies.projectcontour.io", "ingressroutes.contour.heptio.com"} {
		if _, err := dyn.Resource(crd).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("CRD from crds/: %v", err)
		}
	}

	if _, err := admin.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = ns
	upgrade.WaitStrategy = kube.HookOnlyStrategy
	upgrade.Timeout = 2 * time.Minute
	rel, err = upgrade.RunWithContext(ctx, defaultRelease, loadChart(t), values(t, `webhook: {enabled: false}`))
	if err != nil {
		t.Fatalf("helm upgrade --set webhook.enabled=false: %v", err)
	}
	if notes := releaseNotes(t, rel); strings.Contains(notes, "pod-security") || strings.Contains(notes, "caBundle") {
		t.Errorf("the notes of an upgrade turning the webhook off, in a labelled namespace, speak of Pod Security or the caBundle:\n%s", notes)
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "portico", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the webhook configuration after the upgrade that turned it off: %v, want NotFound", err)
	}
	if _, err := admin.CoreV1().Services(ns).Get(ctx, "portico-webhook", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the webhook Service after the upgrade that turned it off: %v, want NotFound", err)
	}
	d, err = admin.AppsV1().Deployments(ns).Get(ctx, "portico", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; slices.Contains(args, "--webhook-addr") {
		t.Errorf("the controller's args after the upgrade that turned the webhook off: %q", args)
	}

	uninstall := action.NewUninstall(cfg)
	uninstall.WaitStrategy = kube.HookOnlyStrategy
	uninstall.Timeout = 2 * time.Minute
	if _, err := uninstall.Run(defaultRelease); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	if _, err := admin.AppsV1().Deployments(ns).Get(ctx, "portico", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment portico after helm uninstall: %v, want NotFound", err)
	}
	if _, err := admin.RbacV1().ClusterRoles().Get(ctx, "portico", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole portico after helm uninstall: %v, want NotFound", err)
	}
	// Helm never deletes what crds/ installed (that would delete every HTTPProxy).
	if _, err := dyn.Resource(crd).Get(ctx, "httpproxies.projectcontour.io", metav1.GetOptions{}); err != nil {
		t.Errorf("CRD after helm uninstall: %v", err)
	}
}
