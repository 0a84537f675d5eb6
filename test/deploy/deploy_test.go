// Package deploy tests the install manifests in deploy/ against a real kube-apiserver
// (internal/kubetest): that the API server accepts every object, and that the RBAC they
// grant is enough for the real `portico serve`, and no more than it needs.
package deploy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	contourv1beta1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/contourclient"
	"github.com/portico-dev/portico/internal/deploytest"
	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/source/kube"
	"github.com/portico-dev/portico/internal/testutil"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &env)) }

const (
	systemNamespace = "portico-system"
	fieldManager    = "portico-deploy-test"
)

// manifest is one object of deploy/, with the file it came from.
type manifest = deploytest.Manifest

// loadManifests reads deploy/kustomization.yaml and returns every object of every file
// in its resources, in order, as `kubectl apply -k` would apply them.
func loadManifests(t *testing.T) []manifest {
	t.Helper()
	ms, err := deploytest.LoadKustomization(deploytest.Dir())
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestEveryManifestIsListed keeps deploy/kustomization.yaml complete: a YAML file in
// deploy/ that it does not list would be neither installed nor tested.
func TestEveryManifestIsListed(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(deploytest.Dir(), "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{".", "crds"} {
		entries, err := os.ReadDir(filepath.Join(deploytest.Dir(), dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			name := filepath.ToSlash(filepath.Join(dir, e.Name()))
			if e.IsDir() || name == "kustomization.yaml" || (!strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml")) {
				continue
			}
			if !slices.Contains(k.Resources, name) {
				t.Errorf("deploy/%s is not listed in deploy/kustomization.yaml resources", name)
			}
		}
	}
}

// installCRDs applies deploy/'s CustomResourceDefinitions for real and waits until they
// are established: until then their objects cannot be created, nor watched by serve.
func installCRDs(t *testing.T, ctx context.Context, a *applier, manifests []manifest) {
	t.Helper()
	if err := a.InstallCRDs(ctx, manifests); err != nil {
		t.Fatalf("deploy/: %v", err)
	}
}

// ingressRoute is a root IngressRoute for host, sending everything to Service web:80.
func ingressRoute(name, host string) *contourv1beta1.IngressRoute {
	return &contourv1beta1.IngressRoute{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: contourv1beta1.IngressRouteSpec{
			VirtualHost: &contourv1beta1.VirtualHost{Fqdn: host},
			Routes:      []contourv1beta1.Route{{Match: "/", Services: []contourv1beta1.Service{{Name: "web", Port: 80}}}},
		},
	}
}

// applier applies manifests with server-side apply, collecting the API server's
// warnings (deprecations, and Pod Security violations of workload templates in a
// namespace that enforces a profile).
type applier = deploytest.Applier

func newApplier(t *testing.T, cfg *rest.Config) *applier {
	t.Helper()
	a, err := deploytest.NewApplier(cfg, fieldManager)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestManifestsApplyWithServerSideDryRun(t *testing.T) {
	cfg := env.AdminConfig(t)
	ctx := context.Background()
	manifests := loadManifests(t)
	a := newApplier(t, cfg)

	// Dry-run of a namespaced object needs its namespace to exist: create that for real.
	var namespaces int
	for _, m := range manifests {
		if m.Obj.GetKind() == "Namespace" {
			namespaces++
			if err := a.Apply(ctx, m, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if namespaces == 0 {
		t.Fatal("deploy/ creates no Namespace")
	}
	installCRDs(t, ctx, a, manifests)
	a.Warnings()

	kinds := map[string]int{}
	for _, m := range manifests {
		kinds[m.Obj.GetKind()]++
		if err := a.Apply(ctx, m, true); err != nil {
			t.Error(err)
		}
		for _, w := range a.Warnings() {
			t.Errorf("%v: API server warning: %s", m, w)
		}
	}
	want := map[string]int{
		"Namespace": 2, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 3, "RoleBinding": 3,
		"Deployment": 1, "DaemonSet": 1, "Service": 3, "IngressClass": 1, "CustomResourceDefinition": 5,
		"ValidatingWebhookConfiguration": 1, "NetworkPolicy": 2,
	}
	for kind, n := range want {
		if kinds[kind] != n {
			t.Errorf("deploy/ has %d %s, want %d", kinds[kind], kind, n)
		}
	}
	t.Logf("%d objects accepted by the API server (dry run): %v", len(manifests), kinds)

	// The installed CRDs serve their kinds.
	contour := kubetest.ContourClient(t, cfg)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := contour.IngressRoutes(systemNamespace).Create(ctx, ingressRoute("dry-run", "dry-run.deploy.test"), dryRun); err != nil {
		t.Errorf("creating an IngressRoute (dry run): %v", err)
	}
	if _, err := contour.TLSCertificateDelegations(systemNamespace).Create(ctx, &contourv1beta1.TLSCertificateDelegation{
		ObjectMeta: metav1.ObjectMeta{Name: "dry-run"},
		Spec:       contourv1beta1.TLSCertificateDelegationSpec{Delegations: []contourv1beta1.CertificateDelegation{{SecretName: "s", TargetNamespaces: []string{"*"}}}},
	}, dryRun); err != nil {
		t.Errorf("creating a TLSCertificateDelegation (dry run): %v", err)
	}
	if _, err := contour.HTTPProxies(systemNamespace).Create(ctx, httpProxy("dry-run", "dry-run-proxy.deploy.test"), dryRun); err != nil {
		t.Errorf("creating an HTTPProxy (dry run): %v", err)
	}
	if _, err := contour.ProjectTLSCertificateDelegations(systemNamespace).Create(ctx, &contourv1.TLSCertificateDelegation{
		ObjectMeta: metav1.ObjectMeta{Name: "dry-run"},
		Spec:       contourv1.TLSCertificateDelegationSpec{Delegations: []contourv1.CertificateDelegation{{SecretName: "s", TargetNamespaces: []string{"*"}}}},
	}, dryRun); err != nil {
		t.Errorf("creating a projectcontour.io TLSCertificateDelegation (dry run): %v", err)
	}
	es := `{"apiVersion": "projectcontour.io/v1alpha1", "kind": "ExtensionService", "metadata": {"name": "dry-run"}, "spec": {"protocol": "h2c", "services": [{"name": "s", "port": 80}]}}`
	if err := contour.ExtensionREST().Post().Namespace(systemNamespace).Resource(contourclient.ResourceExtensionServices).
		Param("dryRun", metav1.DryRunAll).Body([]byte(es)).Do(ctx).Error(); err != nil {
		t.Errorf("creating an ExtensionService (dry run): %v", err)
	}
}

// httpProxy is a root HTTPProxy for host routing everything to Service "web".
func httpProxy(name, host string) *contourv1.HTTPProxy {
	return &contourv1.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: contourv1.HTTPProxySpec{
			VirtualHost: &contourv1.VirtualHost{Fqdn: host},
			Routes:      []contourv1.Route{{Services: []contourv1.Service{{Name: "web", Port: 80}}}},
		},
	}
}

// rbacKinds are the objects TestRBACIsSufficient creates for real: the identity and its
// permissions, not the workloads (nothing would run them: there is no kubelet).
var rbacKinds = []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "IngressClass"}

func TestRBACIsSufficient(t *testing.T) {
	cfg := env.AdminConfig(t)
	ctx := context.Background()
	bin := testutil.PorticoBinary(t)
	manifests := loadManifests(t)
	a := newApplier(t, cfg)
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	// The CRDs first: serve watches IngressRoutes only if they are established when it starts.
	installCRDs(t, ctx, a, manifests)
	contour := kubetest.ContourClient(t, cfg)
	env.InstallGatewayAPICRDs(t, kubetest.GatewayAPIStandard)

	var sa, crb *manifest
	for _, m := range manifests {
		if !slices.Contains(rbacKinds, m.Obj.GetKind()) {
			continue
		}
		if err := a.Apply(ctx, m, false); err != nil {
			t.Fatal(err)
		}
		switch m.Obj.GetKind() {
		case "ServiceAccount":
			sa = &m
		case "ClusterRoleBinding":
			crb = &m
		}
	}
	if sa == nil || crb == nil {
		t.Fatal("deploy/ has no ServiceAccount or no ClusterRoleBinding")
	}

	// The controller's identity, as the pod would get it: a token for the ServiceAccount.
	kubeconfig, err := env.ServiceAccountKubeconfig(ctx, sa.Obj.GetNamespace(), sa.Obj.GetName())
	if err != nil {
		t.Fatal(err)
	}

	const appNS = "deploy-apps"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	class := "portico"
	prefix := networkingv1.PathTypePrefix
	ing, err := admin.NetworkingV1().Ingresses(appNS).Create(ctx, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{
				Host: "web.deploy.test",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
				}}}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	route, err := contour.IngressRoutes(appNS).Create(ctx, ingressRoute("route", "route.deploy.test"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := contour.HTTPProxies(appNS).Create(ctx, httpProxy("proxy", "proxy.deploy.test"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("serve works with exactly these permissions", func(t *testing.T) {
		p := startServe(t, bin, kubeconfig)
		took := eventually(t, 30*time.Second, "/readyz to answer 200", p.Ready)
		t.Logf("ready after %v", took.Round(time.Millisecond))
		took = eventually(t, 30*time.Second, "the Ingress status to show 192.0.2.20", func() bool {
			cur, err := admin.NetworkingV1().Ingresses(appNS).Get(ctx, ing.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			lb := cur.Status.LoadBalancer.Ingress
			return len(lb) == 1 && lb[0].IP == "192.0.2.20"
		})
		t.Logf("Ingress status written after %v", took.Round(time.Millisecond))
		took = eventually(t, 30*time.Second, "the IngressRoute status to be written", func() bool {
			cur, err := contour.IngressRoutes(appNS).Get(ctx, route.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return slices.Contains([]string{"valid", "invalid", "orphaned"}, cur.Status.CurrentStatus) && cur.Status.Description != ""
		})
		t.Logf("IngressRoute status written after %v", took.Round(time.Millisecond))
		took = eventually(t, 30*time.Second, "the HTTPProxy status to be written", func() bool {
			cur, err := contour.HTTPProxies(appNS).Get(ctx, proxy.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return cur.Status.CurrentStatus == "valid" && len(cur.Status.Conditions) == 1
		})
		t.Logf("HTTPProxy status written after %v", took.Round(time.Millisecond))
		checkXDSIsMutualTLS(t, admin, p)
		if logs := p.Stop(t); strings.Contains(strings.ToLower(logs), "forbidden") {
			t.Error("portico serve logged forbidden with the deploy/ RBAC")
		}
	})

	t.Run("the IngressRoute access serve needs", func(t *testing.T) {
		irs := contourClientFor(t, kubeconfig)
		for what, do := range map[string]func() error{
			"list ingressroutes": func() error {
				return irs.REST().Get().Resource(contourclient.ResourceIngressRoutes).Do(ctx).Error()
			},
			"watch ingressroutes": func() error {
				return watchOnce(ctx, irs, contourclient.ResourceIngressRoutes)
			},
			"list tlscertificatedelegations": func() error {
				return irs.REST().Get().Resource(contourclient.ResourceTLSCertificateDelegations).Do(ctx).Error()
			},
			"watch tlscertificatedelegations": func() error {
				return watchOnce(ctx, irs, contourclient.ResourceTLSCertificateDelegations)
			},
			"patch ingressroutes/status": func() error {
				_, err := irs.IngressRoutes(appNS).Patch(ctx, route.Name, types.MergePatchType,
					[]byte(`{"status":{"description":"patched by the RBAC test"}}`), metav1.PatchOptions{FieldManager: fieldManager}, "status")
				return err
			},
			"list httpproxies": func() error {
				return irs.ProjectREST().Get().Resource(contourclient.ResourceHTTPProxies).Do(ctx).Error()
			},
			"watch httpproxies": func() error {
				w, err := irs.ProjectREST().Get().Resource(contourclient.ResourceHTTPProxies).Param("watch", "true").Timeout(time.Second).Watch(ctx)
				if err == nil {
					w.Stop()
				}
				return err
			},
			"list projectcontour.io tlscertificatedelegations": func() error {
				return irs.ProjectREST().Get().Resource(contourclient.ResourceTLSCertificateDelegations).Do(ctx).Error()
			},
			"patch httpproxies/status": func() error {
				_, err := irs.HTTPProxies(appNS).Patch(ctx, proxy.Name, types.MergePatchType,
					[]byte(`{"status":{"description":"patched by the RBAC test"}}`), metav1.PatchOptions{FieldManager: fieldManager}, "status")
				return err
			},
			"list extensionservices": func() error {
				return irs.ExtensionREST().Get().Resource(contourclient.ResourceExtensionServices).Do(ctx).Error()
			},
			"watch extensionservices": func() error {
				w, err := irs.ExtensionREST().Get().Resource(contourclient.ResourceExtensionServices).Param("watch", "true").Timeout(time.Second).Watch(ctx)
				if err == nil {
					w.Stop()
				}
				return err
			},
			// A missing object's status patch is refused by name (404), not by RBAC (403).
			"patch extensionservices/status": func() error {
				_, err := irs.ExtensionServices(appNS).Patch(ctx, "none", types.MergePatchType, []byte(`{"status":{}}`), metav1.PatchOptions{FieldManager: fieldManager}, "status")
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			},
		} {
			if err := do(); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
	})

	t.Run("the Gateway API access serve needs", func(t *testing.T) {
		testGatewayAPIAccess(t, cfg, kubeconfig, appNS)
	})

	t.Run("nothing beyond what serve needs", func(t *testing.T) {
		c := clientFor(t, kubeconfig)
		irs := contourClientFor(t, kubeconfig)
		forbidden := map[string]func() error{
			"list pods": func() error { _, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err },
			"create secrets": func() error {
				_, err := c.CoreV1().Secrets(appNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
				return err
			},
			"delete ingresses":        func() error { return c.NetworkingV1().Ingresses(appNS).Delete(ctx, ing.Name, metav1.DeleteOptions{}) },
			"update ingresses (spec)": func() error { return updateIngressSpec(ctx, c, admin, appNS, ing.Name) },
			"update services":         func() error { return updateService(ctx, c) },
			"list leases elsewhere": func() error {
				_, err := c.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{})
				return err
			},
			"delete leases": func() error {
				return c.CoordinationV1().Leases(systemNamespace).Delete(ctx, "portico-leader", metav1.DeleteOptions{})
			},
			"create ingressclasses": func() error {
				_, err := c.NetworkingV1().IngressClasses().Create(ctx, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: networkingv1.IngressClassSpec{Controller: "x.dev/x"}}, metav1.CreateOptions{})
				return err
			},
			// ConfigMaps are read (BackendTLSPolicies' CA certificates), never written.
			"create configmaps": func() error {
				_, err := c.CoreV1().ConfigMaps(appNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
				return err
			},
			"update another Secret of portico-system": func() error {
				if _, err := admin.CoreV1().Secrets(systemNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					return err
				}
				_, err := c.CoreV1().Secrets(systemNamespace).Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: systemNamespace}}, metav1.UpdateOptions{})
				return err
			},
			"update another webhook configuration": func() error {
				_, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}}, metav1.UpdateOptions{})
				return err
			},
			"create ingressroutes": func() error {
				_, err := irs.IngressRoutes(appNS).Create(ctx, ingressRoute("x", "x.deploy.test"), metav1.CreateOptions{})
				return err
			},
			"update ingressroutes (spec)": func() error {
				cur, err := contour.IngressRoutes(appNS).Get(ctx, route.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cur.Spec.Routes[0].PrefixRewrite = "/touched"
				_, err = irs.IngressRoutes(appNS).Update(ctx, cur, metav1.UpdateOptions{})
				return err
			},
			"delete ingressroutes": func() error { return irs.IngressRoutes(appNS).Delete(ctx, route.Name, metav1.DeleteOptions{}) },
			"create httpproxies": func() error {
				_, err := irs.HTTPProxies(appNS).Create(ctx, httpProxy("x", "x-proxy.deploy.test"), metav1.CreateOptions{})
				return err
			},
			"delete httpproxies": func() error { return irs.HTTPProxies(appNS).Delete(ctx, proxy.Name, metav1.DeleteOptions{}) },
			"create extensionservices": func() error {
				return irs.ExtensionREST().Post().Namespace(appNS).Resource(contourclient.ResourceExtensionServices).
					Body([]byte(`{"apiVersion": "projectcontour.io/v1alpha1", "kind": "ExtensionService", "metadata": {"name": "x"}, "spec": {"services": [{"name": "s", "port": 80}]}}`)).Do(ctx).Error()
			},
			"create tlscertificatedelegations": func() error {
				_, err := irs.TLSCertificateDelegations(appNS).Create(ctx, &contourv1beta1.TLSCertificateDelegation{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
				return err
			},
			"create namespaces": func() error {
				_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
				return err
			},
		}
		for what, do := range forbidden {
			if err := do(); !apierrors.IsForbidden(err) {
				t.Errorf("%s: want Forbidden, got %v", what, err)
			}
		}
	})

	// Without the ClusterRoleBinding the same process must fail: this is what shows the
	// test above can fail at all.
	t.Run("serve fails without the ClusterRoleBinding", func(t *testing.T) {
		if err := admin.RbacV1().ClusterRoleBindings().Delete(ctx, crb.Obj.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := a.Apply(context.Background(), *crb, false); err != nil {
				t.Errorf("restoring the ClusterRoleBinding: %v", err)
			}
		})
		p := startServe(t, bin, kubeconfig)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if p.Ready() {
				t.Fatal("portico serve became ready without the ClusterRoleBinding")
			}
			time.Sleep(100 * time.Millisecond)
		}
		if logs := p.Stop(t); !strings.Contains(strings.ToLower(logs), "forbidden") {
			t.Error("portico serve without the ClusterRoleBinding logged no forbidden")
		}
	})
}

// TestWebhookWithoutAControllerAdmits registers deploy/webhook.yaml for real with no
// controller behind its Service (no kubelet runs pods here, so the Service has no
// endpoints): with failurePolicy Ignore, Ingresses and IngressRoutes are admitted, even
// ones Portico would refuse, as when the webhook is not installed; and so are
// HTTPRoutes, through the Gateway API webhook.
func TestWebhookWithoutAControllerAdmits(t *testing.T) {
	cfg := env.AdminConfig(t)
	ctx := context.Background()
	manifests := loadManifests(t)
	a := newApplier(t, cfg)
	admin := kubetest.Clientset(t, cfg)
	installCRDs(t, ctx, a, manifests)
	env.InstallGatewayAPICRDs(t, kubetest.GatewayAPIStandard)
	var webhooks int
	for _, m := range manifests {
		switch {
		case m.Obj.GetKind() == "Namespace", m.File == "webhook.yaml":
		default:
			continue
		}
		if err := a.Apply(ctx, m, false); err != nil {
			t.Fatal(err)
		}
		if m.Obj.GetKind() == "ValidatingWebhookConfiguration" {
			webhooks++
			name := m.Obj.GetName()
			t.Cleanup(func() {
				if err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
					t.Errorf("removing the webhook configuration: %v", err)
				}
			})
		}
	}
	if webhooks != 1 {
		t.Fatalf("webhook.yaml has %d ValidatingWebhookConfigurations, want 1", webhooks)
	}

	const ns = "deploy-webhook"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	class := "portico"
	implementationSpecific := networkingv1.PathTypeImplementationSpecific
	// Portico would refuse this path ("//"); the API server itself accepts it.
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{
				Host: "web.deploy.test",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/static//assets", PathType: &implementationSpecific,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
				}}}},
			}},
		},
	}
	// The API server picks the configuration up asynchronously: wait until it calls
	// the webhook (and fails open), so that what follows is admitted by the policy and
	// not because the webhook is not known yet.
	eventually(t, 30*time.Second, "the API server to call the webhook and fail open", func() bool {
		before := failOpens(ctx, t, admin, "validate.portico.dev")
		if _, err := admin.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("creating an Ingress (dry run): %v", err)
		}
		return failOpens(ctx, t, admin, "validate.portico.dev") > before
	})

	before, start := failOpens(ctx, t, admin, "validate.portico.dev"), time.Now()
	if _, err := admin.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating an Ingress with the webhook registered and no controller: %v", err)
	}
	t.Logf("Ingress admitted after %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	bad := ingressRoute("route", "route.deploy.test")
	bad.Spec.Routes[0].Match = "api"
	if _, err := kubetest.ContourClient(t, cfg).IngressRoutes(ns).Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating an IngressRoute with the webhook registered and no controller: %v", err)
	}
	t.Logf("IngressRoute admitted after %v", time.Since(start).Round(time.Millisecond))
	if n := failOpens(ctx, t, admin, "validate.portico.dev") - before; n != 2 {
		t.Errorf("the webhook failed open %v times for the two creations, want 2", n)
	}

	// An HTTPRoute to a Service that does not exist: the Gateway API webhook never
	// refuses, and without a controller it is not even heard.
	gw, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
		Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
			BackendObjectReference: gatewayv1.BackendObjectReference{Name: "missing", Port: new(gatewayv1.PortNumber(80))}}}}}},
	}}
	before, start = failOpens(ctx, t, admin, "gateway.validate.portico.dev"), time.Now()
	eventually(t, 30*time.Second, "the API server to call the Gateway API webhook and fail open", func() bool {
		if _, err := gw.GatewayV1().HTTPRoutes(ns).Create(ctx, route, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating an HTTPRoute with the webhook registered and no controller: %v", err)
		}
		return failOpens(ctx, t, admin, "gateway.validate.portico.dev") > before
	})
	t.Logf("HTTPRoute admitted after %v", time.Since(start).Round(time.Millisecond))
}

// failOpens is the API server's count of calls to the webhook named name that failed
// and were ignored (failurePolicy Ignore).
func failOpens(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) float64 {
	t.Helper()
	body, err := c.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "apiserver_admission_webhook_fail_open_count{") && strings.Contains(line, `name="`+name+`"`) {
			fields := strings.Fields(line)
			v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			n += v
		}
	}
	return n
}

func contourClientFor(t *testing.T, kubeconfig string) *contourclient.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kubetest.ContourClient(t, cfg)
}

// watchOnce opens a watch of resource in every namespace, as an informer does, and closes it.
func watchOnce(ctx context.Context, c *contourclient.Client, resource string) error {
	w, err := c.REST().Get().Resource(resource).Param("watch", "true").Timeout(time.Second).Watch(ctx)
	if err != nil {
		return err
	}
	w.Stop()
	return nil
}

func clientFor(t *testing.T, kubeconfig string) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// updateIngressSpec tries, as c, to change an Ingress's spec (not its status).
func updateIngressSpec(ctx context.Context, c, admin kubernetes.Interface, ns, name string) error {
	cur, err := admin.NetworkingV1().Ingresses(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cur = cur.DeepCopy()
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations["deploy.test/touched"] = "true"
	_, err = c.NetworkingV1().Ingresses(ns).Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

func updateService(ctx context.Context, c kubernetes.Interface) error {
	_, err := c.CoreV1().Services(systemNamespace).Update(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "envoy", Namespace: systemNamespace},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.UpdateOptions{})
	return err
}

// serveProcess is a `portico serve` subprocess.
type serveProcess = deploytest.Serve

// startServe runs `portico serve` as deploy/portico.yaml starts it: the controller
// container's arguments, with $(POD_NAMESPACE) expanded as the kubelet does, each
// listening port moved to a free one (the host part kept), and the credentials of
// kubeconfig in place of the in-cluster ones. --ingress-status-address is added (there
// is no load balancer to copy an address from).
func startServe(t *testing.T, bin, kubeconfig string) *serveProcess {
	t.Helper()
	args := append(shippedServeArgs(t, loadManifests(t)), "--ingress-status-address", "192.0.2.20")
	return deploytest.StartServe(t, bin, args, kubeconfig)
}

// shippedServeArgs are the arguments of the controller container of deploy/portico.yaml
// (after its command, `portico`), with $(VAR) references to the container's downward-API
// environment expanded as the kubelet would in namespace systemNamespace.
func shippedServeArgs(t *testing.T, manifests []manifest) []string {
	t.Helper()
	args, err := deploytest.ServeArgs(container(t, manifests, "Deployment", "portico", "portico"), systemNamespace)
	if err != nil {
		t.Fatalf("deploy/portico.yaml: %v", err)
	}
	return args
}

// container returns the named container (or init container) of the pod template of the
// workload kind/name in deploy/.
func container(t *testing.T, manifests []manifest, kind, name, containerName string) corev1.Container {
	t.Helper()
	spec, _ := podSpec(t, manifests, kind, name)
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		if c.Name == containerName {
			return c
		}
	}
	t.Fatalf("%s %s has no container %s", kind, name, containerName)
	return corev1.Container{}
}

// podSpec returns the pod template of the workload kind/name in deploy/.
func podSpec(t *testing.T, manifests []manifest, kind, name string) (corev1.PodSpec, map[string]string) {
	t.Helper()
	for _, m := range manifests {
		if m.Obj.GetKind() != kind || m.Obj.GetName() != name {
			continue
		}
		var w struct {
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		data, err := m.Obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &w); err != nil {
			t.Fatal(err)
		}
		return w.Spec.Template.Spec, w.Spec.Template.Labels
	}
	t.Fatalf("deploy/ has no %s %s", kind, name)
	return corev1.PodSpec{}, nil
}

// eventually polls cond until it holds, for at most timeout, and returns how long it took.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return testutil.Eventually(t, timeout, what, cond)
}

// testGatewayAPIAccess checks that kubeconfig's identity reads every Gateway API kind
// serve watches and writes a route's status, and can do nothing else with them.
func testGatewayAPIAccess(t *testing.T, admin *rest.Config, kubeconfig, ns string) {
	ctx := t.Context()
	adminGW, err := gatewayclient.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	route, err := adminGW.GatewayV1().HTTPRoutes(ns).Create(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "rbac"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := gw.GatewayV1().RESTClient()
	for _, resource := range kube.GatewayAPIResources {
		if err := rc.Get().Resource(resource).Do(ctx).Error(); err != nil {
			t.Errorf("list %s: %v", resource, err)
		}
		w, err := rc.Get().Resource(resource).Param("watch", "true").Timeout(time.Second).Watch(ctx)
		if err != nil {
			t.Errorf("watch %s: %v", resource, err)
			continue
		}
		w.Stop()
	}
	route.Status.Parents = []gatewayv1.RouteParentStatus{}
	if _, err := gw.GatewayV1().HTTPRoutes(ns).UpdateStatus(ctx, route, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		t.Errorf("update httproutes/status: %v", err)
	}
	forbidden := map[string]func() error{
		"create httproutes": func() error {
			_, err := gw.GatewayV1().HTTPRoutes(ns).Create(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		},
		"update httproutes (spec)": func() error {
			cur, err := adminGW.GatewayV1().HTTPRoutes(ns).Get(ctx, route.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Hostnames = []gatewayv1.Hostname{"touched.example.com"}
			_, err = gw.GatewayV1().HTTPRoutes(ns).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		},
		"delete gateways": func() error { return gw.GatewayV1().Gateways(ns).Delete(ctx, "x", metav1.DeleteOptions{}) },
		"create referencegrants": func() error {
			_, err := gw.GatewayV1().ReferenceGrants(ns).Create(ctx, &gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		},
	}
	for what, do := range forbidden {
		if err := do(); !apierrors.IsForbidden(err) {
			t.Errorf("%s: err = %v, want forbidden", what, err)
		}
	}
}
