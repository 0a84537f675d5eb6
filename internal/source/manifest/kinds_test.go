package manifest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// In the API groups Portico reads, a kind or version that does not exist is reported
// with what to write instead, at the line of the field to fix.
func TestDecodeReportsMistakenKinds(t *testing.T) {
	tests := []struct {
		name, doc string
		line      int
		reason    string
	}{
		{"misspelt kind", "apiVersion: networking.k8s.io/v1\nkind: Ingres\nmetadata: {name: x}\n",
			2, `unknown kind "Ingres" in networking.k8s.io/v1; did you mean "Ingress"?`},
		{"unserved version", "apiVersion: networking.k8s.io/v2\nkind: Ingress\nmetadata: {name: x}\n",
			1, "networking.k8s.io/v2 is not a version Kubernetes serves; Ingress is networking.k8s.io/v1"},
		{"kind in the wrong case", "apiVersion: v1\nkind: service\nmetadata: {name: x}\n",
			2, `unknown kind "service" in v1; did you mean "Service"?`},
		{"transposed letters", "metadata: {name: x}\napiVersion: v1\nkind: Serivce\n",
			3, `unknown kind "Serivce" in v1; did you mean "Service"?`},
		{"kind of another group", "apiVersion: v1\nkind: Ingress\nmetadata: {name: x}\n",
			1, `unknown kind "Ingress" in v1; Ingress is networking.k8s.io/v1`},
		{"misspelt kind of another group", "apiVersion: v1\nkind: Ingres\nmetadata: {name: x}\n",
			2, `unknown kind "Ingres" in v1; did you mean "Ingress" (networking.k8s.io/v1)?`},
		{"apps kind in core", "apiVersion: v1\nkind: Deployment\nmetadata: {name: x}\n",
			1, `unknown kind "Deployment" in v1; Deployment is apps/v1`},
		{"core version that does not exist", "apiVersion: v2\nkind: Service\nmetadata: {name: x}\n",
			1, "v2 is not a version Kubernetes serves; Service is v1"},
		{"version Portico does not read", "apiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata: {name: x}\naddressType: IPv4\nendpoints: []\n",
			1, "Portico does not read discovery.k8s.io/v1beta1 EndpointSlice; EndpointSlice is discovery.k8s.io/v1 (change apiVersion)"},
		{"kind not served in that version", "apiVersion: networking.k8s.io/v1beta1\nkind: NetworkPolicy\nmetadata: {name: x}\n",
			1, "NetworkPolicy is not served in networking.k8s.io/v1beta1; NetworkPolicy is networking.k8s.io/v1"},
		{"unknown kind, nothing close", "apiVersion: networking.k8s.io/v1\nkind: Router\nmetadata: {name: x}\n",
			2, `unknown kind "Router" in networking.k8s.io/v1; the kinds Portico reads from networking.k8s.io are Ingress and IngressClass`},
		{"unknown kind and version", "apiVersion: networking.k8s.io/v3\nkind: Router\nmetadata: {name: x}\n",
			2, `unknown kind "Router" in networking.k8s.io/v3 (networking.k8s.io/v3 is not a version Kubernetes serves either); the kinds Portico reads from networking.k8s.io are Ingress and IngressClass`},
		{"HTTPProxy of a version Portico does not read", "apiVersion: projectcontour.io/v1alpha1\nkind: HTTPProxy\nmetadata: {name: x}\n",
			1, "Portico does not read projectcontour.io/v1alpha1 HTTPProxy; HTTPProxy is projectcontour.io/v1 (change apiVersion)"},
		{"TLSCertificateDelegation of a version neither group has", "apiVersion: projectcontour.io/v1beta1\nkind: TLSCertificateDelegation\nmetadata: {name: x}\n",
			1, "projectcontour.io/v1beta1 is not a version of the projectcontour.io API; TLSCertificateDelegation is projectcontour.io/v1"},
		{"TLSCertificateDelegation in core", "apiVersion: v1\nkind: TLSCertificateDelegation\nmetadata: {name: x}\n",
			1, `unknown kind "TLSCertificateDelegation" in v1; TLSCertificateDelegation is projectcontour.io/v1`},
		{"HTTPProxy of a version that does not exist", "apiVersion: projectcontour.io/v2\nkind: HTTPProxy\nmetadata: {name: x}\n",
			1, "projectcontour.io/v2 is not a version of the projectcontour.io API; HTTPProxy is projectcontour.io/v1"},
		{"misspelt HTTPProxy", "apiVersion: projectcontour.io/v1\nkind: HTTPProxies\nmetadata: {name: x}\n",
			2, `unknown kind "HTTPProxies" in projectcontour.io/v1; did you mean "HTTPProxy"?`},
		{"resource name for a kind", "apiVersion: networking.k8s.io/v1\nkind: ingresses\nmetadata: {name: x}\n",
			2, `unknown kind "ingresses" in networking.k8s.io/v1; did you mean "Ingress"?`},
		{"unknown projectcontour.io kind", "apiVersion: projectcontour.io/v1\nkind: Route\nmetadata: {name: x}\n",
			2, `unknown kind "Route" in projectcontour.io/v1; the kinds Portico reads from projectcontour.io are ExtensionService, HTTPProxy and TLSCertificateDelegation`},
		{"a Gateway API kind in Contour's group", "apiVersion: projectcontour.io/v1\nkind: Gateway\nmetadata: {name: x}\n",
			1, `unknown kind "Gateway" in projectcontour.io/v1; Gateway is gateway.networking.k8s.io/v1`},
		{"misspelt IngressRoute", "apiVersion: contour.heptio.com/v1beta1\nkind: IngresRoute\nmetadata: {name: x}\n",
			2, `unknown kind "IngresRoute" in contour.heptio.com/v1beta1; did you mean "IngressRoute"?`},
		{"IngressRoute of a version that does not exist", "apiVersion: contour.heptio.com/v1\nkind: IngressRoute\nmetadata: {name: x}\n",
			1, "contour.heptio.com/v1 is not a version of the contour.heptio.com API; IngressRoute is contour.heptio.com/v1beta1"},
		{"extensions has no IngressClass", "apiVersion: extensions/v1beta1\nkind: IngressClass\nmetadata: {name: x}\n",
			1, `unknown kind "IngressClass" in extensions/v1beta1; IngressClass is networking.k8s.io/v1`},
		{"list of a misspelt kind", "apiVersion: networking.k8s.io/v2\nkind: IngressList\nitems: []\n",
			1, "networking.k8s.io/v2 is not a version Kubernetes serves; IngressList is networking.k8s.io/v1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, probs := Decode("m.yaml", []byte("# leading comment\n"+tc.doc))
			if len(objs) != 0 {
				t.Errorf("objects: %v", names(objs))
			}
			want := []Problem{{File: "m.yaml", Line: tc.line + 1, Document: 1, Reason: tc.reason}}
			if diff := cmp.Diff(want, probs); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Inside a List, and in JSON, the problem is located at the item's kind and says which item.
func TestDecodeReportsMistakenKindsInLists(t *testing.T) {
	_, probs := Decode("l.json", []byte(`{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fine"}},
  {"apiVersion": "networking.k8s.io/v1", "kind": "Ingres", "metadata": {"name": "x"}}
]}`))
	want := []Problem{{File: "l.json", Line: 3, Document: 1, Reason: `items[1]: unknown kind "Ingres" in networking.k8s.io/v1; did you mean "Ingress"?`}}
	if diff := cmp.Diff(want, probs); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A directory of complete application manifests loads without a word: real kinds of
// the groups Portico reads that it has no use for, other groups, CRDs of other projects.
func TestLoadDirSkipsRealKindsQuietly(t *testing.T) {
	docs := []string{
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n",
		"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}]}\n",
		"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: pvc}\n",
		"apiVersion: v1\nkind: ConfigMapList\nitems: []\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
		"apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: d}\n", // not a group Portico reads
		"apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: j}\n",
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\n",
		"apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: pdb}\n",
		"apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\n",
		"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: np}\n",
		"apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: old}\n",
		"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: httpproxies.projectcontour.io}\n",
		"apiVersion: traefik.io/v1alpha1\nkind: IngressRoute\nmetadata: {name: t}\n",
		"apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: cert}\n",
		"apiVersion: gateway.networking.x-k8s.io/v1alpha1\nkind: XBackendTrafficPolicy\nmetadata: {name: r}\n",
		"apiVersion: projectcontour.io/v1alpha1\nkind: ContourConfiguration\nmetadata: {name: cc}\n",
		svcYAML("web", 80),
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"app.yaml": strings.Join(docs, "---\n")})
	res, err := LoadDir(dir)
	must(t, err)
	if len(res.Problems) != 0 {
		t.Errorf("problems: %v", res.Problems)
	}
	// Namespaces are read: Gateway listeners select route namespaces by their labels.
	if diff := cmp.Diff([]string{"Namespace /shop", "Service default/web"}, names(res.Objects)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Every kind Portico reads is known, and none of them is reported.
func TestKeptKindsAreKnown(t *testing.T) {
	for gvk := range keptKinds {
		if reason, _ := unreadKind(gvk); reason != "" {
			t.Errorf("%v: %s", gvk, reason)
		}
	}
	if reason, _ := unreadKind(schema.GroupVersionKind{Version: "v1", Kind: "Status"}); reason != "" {
		t.Errorf("v1 Status: %s", reason)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"ingress", "ingress", 0}, {"ingres", "ingress", 1}, {"ingerss", "ingress", 1},
		{"serivce", "service", 1}, {"sercive", "service", 2}, {"", "abc", 3}, {"router", "ingress", 6}, {"ca", "abc", 3},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
