package helm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/portico-dev/portico/internal/deploytest"
)

// controller is the controller container of the rendered Deployment portico.
func controller(t *testing.T, r rendered) corev1.Container {
	t.Helper()
	d := get[appsv1.Deployment](t, r, "Deployment", "portico")
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "portico" {
			return c
		}
	}
	t.Fatal("Deployment portico has no container portico")
	return corev1.Container{}
}

// flag returns the value that follows name in args, and whether name is there at all.
func flag(args []string, name string) (string, bool) {
	i := slices.Index(args, name)
	if i < 0 {
		return "", false
	}
	if i+1 < len(args) {
		return args[i+1], true
	}
	return "", true
}

// gatewayNamespace is the default namespace of the Gateways' data planes.
const gatewayNamespace = "portico-gateways"

func TestValuesNamespaceAndRelease(t *testing.T) {
	const ns = "edge-system"
	r := render(t, "edge", ns, nil)
	labels := helmLabels(t, "edge")
	for _, m := range r.objects {
		o := m.Obj
		if o.GetKind() != "CustomResourceDefinition" {
			withoutHelmLabels(t, o, labels)
		}
		// Everything namespaced goes to the release namespace, and nothing names
		// deploy/'s namespace: the rest say $(POD_NAMESPACE), which the kubelet expands.
		data, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), defaultNamespace) {
			t.Errorf("%v still names %s", m, defaultNamespace)
		}
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding", "IngressClass", "ValidatingWebhookConfiguration", "CustomResourceDefinition":
			if o.GetNamespace() != "" {
				t.Errorf("%v: a cluster-scoped kind with a namespace", m)
			}
		case "Namespace":
			// The one namespace the chart makes: the Gateways' data planes'.
			if o.GetName() != gatewayNamespace {
				t.Errorf("%v: the chart makes a namespace other than the data planes' %s", m, gatewayNamespace)
			}
		default:
			if o.GetName() == "portico-gateway-data-planes" && o.GetNamespace() == gatewayNamespace {
				continue // the controller's rights in the data planes' namespace
			}
			if o.GetNamespace() != ns {
				t.Errorf("%v: namespace %q, want the release's %q", m, o.GetNamespace(), ns)
			}
		}
	}
	crb := get[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", "portico")
	if len(crb.Subjects) != 1 || crb.Subjects[0].Namespace != ns {
		t.Errorf("ClusterRoleBinding subjects %+v, want the ServiceAccount of %s", crb.Subjects, ns)
	}
	for _, name := range []string{"portico-leader-election", "portico-certificates"} {
		rb := get[rbacv1.RoleBinding](t, r, "RoleBinding", name)
		if len(rb.Subjects) != 1 || rb.Subjects[0].Namespace != ns {
			t.Errorf("RoleBinding %s subjects %+v, want the ServiceAccount of %s", name, rb.Subjects, ns)
		}
	}
	for _, wh := range webhookConfiguration(t, r).Webhooks {
		if svc := wh.ClientConfig.Service; svc == nil || svc.Namespace != ns || svc.Name != "portico-webhook" {
			t.Errorf("webhook %s is called at %+v, want Service %s/portico-webhook", wh.Name, svc, ns)
		}
	}
	// The controller's managed certificates are for the Services of its own namespace
	// (portico.<ns>.svc, portico-webhook.<ns>.svc), and Envoy dials the same name.
	args := controller(t, r).Args
	for _, f := range []string{"--certificates-namespace", "--leader-election-namespace"} {
		if v, _ := flag(args, f); v != "$(POD_NAMESPACE)" {
			t.Errorf("%s %q, want $(POD_NAMESPACE)", f, v)
		}
	}
	if v, _ := flag(args, "--envoy-service"); v != "$(POD_NAMESPACE)/envoy" {
		t.Errorf("--envoy-service %q, want $(POD_NAMESPACE)/envoy", v)
	}
}

func TestValuesReplicasAndResources(t *testing.T) {
	r := render(t, defaultRelease, defaultNamespace, values(t, `
controller:
  replicas: 3
  resources: {requests: {cpu: 250m, memory: 256Mi}, limits: {memory: 1Gi}}
envoy:
  resources: {requests: {cpu: "1", memory: 512Mi}, limits: {memory: 2Gi}}
  bootstrapResources: {requests: {cpu: 20m, memory: 32Mi}, limits: {memory: 32Mi}}
`))
	d := get[appsv1.Deployment](t, r, "Deployment", "portico")
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("Deployment replicas %v, want 3", d.Spec.Replicas)
	}
	if got := controller(t, r).Resources; got.Requests.Cpu().String() != "250m" || got.Limits.Memory().String() != "1Gi" {
		t.Errorf("controller resources %v", got)
	}
	ds := get[appsv1.DaemonSet](t, r, "DaemonSet", "envoy")
	if got := ds.Spec.Template.Spec.Containers[0].Resources; got.Requests.Cpu().String() != "1" || got.Limits.Memory().String() != "2Gi" {
		t.Errorf("envoy resources %v", got)
	}
	if got := ds.Spec.Template.Spec.InitContainers[0].Resources; got.Requests.Memory().String() != "32Mi" {
		t.Errorf("bootstrap resources %v", got)
	}
}

func TestValuesImages(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	r := render(t, defaultRelease, defaultNamespace, values(t, `
image: {repository: registry.example.com/portico, digest: `+digest+`, pullPolicy: Always}
envoy:
  image: {repository: registry.example.com/envoy, tag: v1.36.2, pullPolicy: Always}
`))
	want := "registry.example.com/portico:" + sourceVersion(t) + "@" + digest
	c := controller(t, r)
	if c.Image != want || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("controller image %s (%s), want %s (Always)", c.Image, c.ImagePullPolicy, want)
	}
	ds := get[appsv1.DaemonSet](t, r, "DaemonSet", "envoy")
	if b := ds.Spec.Template.Spec.InitContainers[0]; b.Image != want || b.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("bootstrap image %s (%s), want %s (Always)", b.Image, b.ImagePullPolicy, want)
	}
	if e := ds.Spec.Template.Spec.Containers[0]; e.Image != "registry.example.com/envoy:v1.36.2" {
		t.Errorf("envoy image %s", e.Image)
	}

	r = render(t, defaultRelease, defaultNamespace, values(t, `image: {tag: v9.9.9}`))
	if got := controller(t, r).Image; got != "ghcr.io/portico-dev/portico:v9.9.9" {
		t.Errorf("with image.tag v9.9.9, controller image %s", got)
	}
}

func TestValuesNamespacesAndClass(t *testing.T) {
	r := render(t, defaultRelease, defaultNamespace, values(t, `
watchNamespaces: [team-a, team-b]
rootNamespaces: [platform]
ingressClass: {name: edge, default: true}
ingressStatusAddress: [edge.example.com, 192.0.2.7]
controller: {extraArgs: [--log-format, json]}
`))
	args := controller(t, r).Args
	want := map[string]string{
		// The release namespace joins a non-empty list: the envoy Service is read there.
		"--watch-namespaces":       "team-a,team-b,$(POD_NAMESPACE)",
		"--root-namespaces":        "platform",
		"--ingress-class-name":     "edge",
		"--ingress-status-address": "edge.example.com,192.0.2.7",
		"--log-format":             "json",
	}
	for f, v := range want {
		if got, _ := flag(args, f); got != v {
			t.Errorf("%s %q, want %q (args %q)", f, got, v, args)
		}
	}
	ic := get[networkingv1.IngressClass](t, r, "IngressClass", "edge")
	if ic.Spec.Controller != "portico.dev/ingress-controller" || ic.Annotations["ingressclass.kubernetes.io/is-default-class"] != "true" {
		t.Errorf("IngressClass edge: controller %q, annotations %v", ic.Spec.Controller, ic.Annotations)
	}
	if r.find("IngressClass", "portico") != nil {
		t.Error("IngressClass portico rendered with ingressClass.name edge")
	}

	// Listed already, the release namespace is not added twice.
	r = render(t, defaultRelease, defaultNamespace, values(t, `watchNamespaces: [portico-system, team-a]`))
	if got, _ := flag(controller(t, r).Args, "--watch-namespaces"); got != "portico-system,team-a" {
		t.Errorf("--watch-namespaces %q, want portico-system,team-a", got)
	}

	r = render(t, defaultRelease, defaultNamespace, values(t, `ingressClass: {create: false}`))
	if r.find("IngressClass", "portico") != nil {
		t.Error("IngressClass rendered with ingressClass.create false")
	}
	if _, ok := flag(controller(t, r).Args, "--ingress-class-name"); ok {
		t.Error("--ingress-class-name passed for the default class")
	}
}

// webhookConfiguration is the rendered ValidatingWebhookConfiguration portico: the
// webhook that refuses invalid Ingresses, IngressRoutes and HTTPProxies, and the one
// that warns about Gateway API objects.
func webhookConfiguration(t *testing.T, r rendered) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	vwc := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, r, "ValidatingWebhookConfiguration", "portico")
	var names []string
	for _, wh := range vwc.Webhooks {
		names = append(names, wh.Name)
	}
	if !slices.Equal(names, []string{"validate.portico.dev", "gateway.validate.portico.dev"}) {
		t.Fatalf("ValidatingWebhookConfiguration portico has webhooks %q, want validate.portico.dev and gateway.validate.portico.dev", names)
	}
	return vwc
}

// TestValuesWebhookOff: webhook.enabled false removes every trace of the webhook: its
// Service and configuration, the controller's --webhook-addr and port, the ClusterRole's
// rule on the configuration, and the NetworkPolicy rule for its port.
func TestValuesWebhookOff(t *testing.T) {
	on := render(t, defaultRelease, defaultNamespace, nil)
	off := render(t, defaultRelease, defaultNamespace, values(t, `webhook: {enabled: false}`))
	for _, c := range []struct {
		what string
		find func(rendered) bool
	}{
		{"Service portico-webhook", func(r rendered) bool { return r.find("Service", "portico-webhook") != nil }},
		{"ValidatingWebhookConfiguration portico", func(r rendered) bool { return r.find("ValidatingWebhookConfiguration", "portico") != nil }},
		{"--webhook-addr", func(r rendered) bool { _, ok := flag(controller(t, r).Args, "--webhook-addr"); return ok }},
		{"the container port webhook", func(r rendered) bool {
			return slices.ContainsFunc(controller(t, r).Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook" })
		}},
		{"the ClusterRole's rule on validatingwebhookconfigurations", func(r rendered) bool {
			cr := get[rbacv1.ClusterRole](t, r, "ClusterRole", "portico")
			return slices.ContainsFunc(cr.Rules, func(p rbacv1.PolicyRule) bool {
				return slices.Contains(p.Resources, "validatingwebhookconfigurations")
			})
		}},
		{"the NetworkPolicy rule for port webhook", func(r rendered) bool { return allowsPort(t, r, "webhook") }},
	} {
		if !c.find(on) {
			t.Errorf("%s: not rendered with the webhook on, so this test proves nothing", c.what)
		}
		if c.find(off) {
			t.Errorf("%s: rendered with webhook.enabled false", c.what)
		}
	}
	if !allowsPort(t, off, "admin") {
		t.Error("with the webhook off, the NetworkPolicy lost its admin rule too")
	}
	if !strings.Contains(on.notes, "caBundle") {
		t.Errorf("with the webhook on, the notes do not say that the controller sets its caBundle:\n%s", on.notes)
	}
	if strings.Contains(off.notes, "caBundle") {
		t.Errorf("with the webhook off, the notes speak of its caBundle:\n%s", off.notes)
	}
}

// allowsPort reports whether NetworkPolicy portico has a rule for the named port.
func allowsPort(t *testing.T, r rendered, port string) bool {
	t.Helper()
	np := get[networkingv1.NetworkPolicy](t, r, "NetworkPolicy", "portico")
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port != nil && p.Port.String() == port {
				return true
			}
		}
	}
	return false
}

func TestValuesNetworkPolicy(t *testing.T) {
	r := render(t, defaultRelease, defaultNamespace, values(t, `networkPolicy: {enabled: false}`))
	for _, m := range r.objects {
		if m.Obj.GetKind() == "NetworkPolicy" {
			t.Errorf("%v rendered with networkPolicy.enabled false", m)
		}
	}

	r = render(t, defaultRelease, defaultNamespace, values(t, `
networkPolicy:
  webhookFrom:
    - ipBlock: {cidr: 10.0.0.0/16}
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}
`))
	np := get[networkingv1.NetworkPolicy](t, r, "NetworkPolicy", "portico")
	var found bool
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) != 1 || rule.Ports[0].Port.String() != "webhook" {
			continue
		}
		found = true
		if len(rule.From) != 2 || rule.From[0].IPBlock == nil || rule.From[0].IPBlock.CIDR != "10.0.0.0/16" ||
			rule.From[1].NamespaceSelector == nil || rule.From[1].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "kube-system" {
			t.Errorf("the webhook rule allows %+v, want the two peers of networkPolicy.webhookFrom", rule.From)
		}
	}
	if !found {
		t.Error("no NetworkPolicy rule for port webhook")
	}
	def := render(t, defaultRelease, defaultNamespace, nil)
	for _, rule := range get[networkingv1.NetworkPolicy](t, def, "NetworkPolicy", "portico").Spec.Ingress {
		if len(rule.Ports) == 1 && rule.Ports[0].Port.String() == "webhook" && len(rule.From) != 0 {
			t.Errorf("by default the webhook port is open to anyone, not %+v", rule.From)
		}
	}
}

func TestValuesEnvoyService(t *testing.T) {
	r := render(t, defaultRelease, defaultNamespace, values(t, `
envoy:
  service:
    type: ClusterIP
    annotations: {service.beta.kubernetes.io/aws-load-balancer-type: nlb}
  logLevel: debug
`))
	svc := get[corev1.Service](t, r, "Service", "envoy")
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.ExternalTrafficPolicy != "" {
		t.Errorf("envoy Service type %s, externalTrafficPolicy %q; want ClusterIP and none (the API server refuses one)", svc.Spec.Type, svc.Spec.ExternalTrafficPolicy)
	}
	if svc.Annotations["service.beta.kubernetes.io/aws-load-balancer-type"] != "nlb" {
		t.Errorf("envoy Service annotations %v", svc.Annotations)
	}
	ds := get[appsv1.DaemonSet](t, r, "DaemonSet", "envoy")
	if v, _ := flag(ds.Spec.Template.Spec.Containers[0].Args, "--log-level"); v != "debug" {
		t.Errorf("envoy --log-level %q, want debug", v)
	}
}

// TestSchemaRefusesBadValues: values.schema.json stops a mistyped or misspelt value
// at `helm install`, before anything is applied, and says where it is.
func TestSchemaRefusesBadValues(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`replicas: 3`, `at '': additional properties 'replicas' not allowed`}, // controller.replicas
		{`controller: {replica: 3}`, `at '/controller': additional properties 'replica'`},
		{`controller: {replicas: "3"}`, `at '/controller/replicas'`},
		{`webhook: {enabled: "false"}`, `at '/webhook/enabled'`}, // a template would take it as true
		{`watchNamespaces: "team-a,team-b"`, `at '/watchNamespaces'`},
		{`watchNamespaces: [Team_A]`, `at '/watchNamespaces/0'`},
		{`image: {digest: "0123"}`, `at '/image/digest'`},
		{`envoy: {service: {type: External}}`, `at '/envoy/service/type'`},
		{`envoy: {image: {tag: ""}}`, `at '/envoy/image/tag'`}, // no appVersion to fall back on
	} {
		_, err := renderChart(t, defaultRelease, defaultNamespace, values(t, c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %s: error %v, want one saying %s", c.doc, err, c.want)
		}
	}
}

// TestDocsValuesExample renders the chart with the values file the install docs show
// (the ```yaml block that starts with "# portico-values.yaml", in any file of docs/), so
// that an operator who copies it gets an install, not a schema error.
func TestDocsValuesExample(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(deploytest.Dir(), "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var found int
	for _, file := range docs {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range strings.Split(string(data), "```yaml\n")[1:] {
			block, _, _ = strings.Cut(block, "```")
			if !strings.HasPrefix(block, "# portico-values.yaml\n") {
				continue
			}
			found++
			r := render(t, defaultRelease, defaultNamespace, values(t, block))
			if d := get[appsv1.Deployment](t, r, "Deployment", "portico"); d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
				t.Errorf("%s: the example asks for 3 replicas, the chart renders %v", file, d.Spec.Replicas)
			}
		}
	}
	if found == 0 {
		t.Error(`no values example ("# portico-values.yaml") in docs/`)
	}
}
