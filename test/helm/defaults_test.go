package helm

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/portico-dev/portico/internal/deploytest"
)

const (
	defaultRelease   = "portico"
	defaultNamespace = "portico-system" // deploy/'s namespace
)

// objectKey names an object as the API server does: group and kind, namespace, name.
func objectKey(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	return fmt.Sprintf("%s %s %s", gvk.GroupKind(), gvk.Version, deploytest.Key(o))
}

// helmLabels are the labels Helm's conventions put on every object a chart's templates
// render, with the values they must have for release (crds/ is not templated: the
// CustomResourceDefinitions carry none).
func helmLabels(t *testing.T, release string) map[string]string {
	return map[string]string{
		"helm.sh/chart":                "portico-" + chartMeta(t).Version,
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/instance":   release,
	}
}

// withoutHelmLabels checks that o carries exactly helmLabels (none for a
// CustomResourceDefinition), and returns a copy of o without them.
func withoutHelmLabels(t *testing.T, o *unstructured.Unstructured, want map[string]string) *unstructured.Unstructured {
	t.Helper()
	o = o.DeepCopy()
	labels := o.GetLabels()
	for k, v := range want {
		got, ok := labels[k]
		switch {
		case o.GetKind() == "CustomResourceDefinition" && ok:
			t.Errorf("%s: label %s=%s on a CRD (crds/ is copied from deploy/crds, never templated)", objectKey(o), k, got)
		case o.GetKind() != "CustomResourceDefinition" && got != v:
			t.Errorf("%s: label %s=%q, want %q", objectKey(o), k, got, v)
		}
		delete(labels, k)
	}
	if len(labels) == 0 {
		labels = nil
	}
	o.SetLabels(labels)
	return o
}

// TestDefaultsRenderDeploy: with its default values, in namespace portico-system, the
// chart renders the objects of deploy/ (kubectl apply -k deploy/), field for field,
// with exactly two differences:
//   - the Namespace portico-system is not rendered: Helm installs into a namespace that
//     exists or that `helm install --create-namespace` creates (a chart that also
//     rendered it would own it, and `helm uninstall` would delete it with everything in
//     it). docs/install-helm.md says how to give it deploy/'s Pod Security label. The
//     namespace of the Gateways' data planes, portico-gateways, is the chart's own and
//     is rendered as deploy/ has it;
//   - every templated object carries Helm's labels helm.sh/chart,
//     app.kubernetes.io/managed-by and app.kubernetes.io/instance in metadata.labels
//     (selectors and pod templates do not).
//
// Nothing else: same kinds, names, namespaces, labels, annotations, specs, and the same
// five CRDs (crds/, byte for byte deploy/crds: hack/generate.sh writes both).
func TestDefaultsRenderDeploy(t *testing.T) {
	deployed, err := deploytest.LoadKustomization(deploytest.Dir())
	if err != nil {
		t.Fatal(err)
	}
	r := render(t, defaultRelease, defaultNamespace, nil)
	charted := map[string]*unstructured.Unstructured{}
	for _, m := range r.objects {
		k := objectKey(m.Obj)
		if charted[k] != nil {
			t.Errorf("the chart renders %s twice", k)
		}
		charted[k] = m.Obj
	}

	labels := helmLabels(t, defaultRelease)
	compared := 0
	for _, m := range deployed {
		k := objectKey(m.Obj)
		got, ok := charted[k]
		delete(charted, k)
		if m.Obj.GetKind() == "Namespace" && m.Obj.GetName() == defaultNamespace {
			if ok {
				t.Errorf("the chart renders %s: the release namespace is Helm's (--create-namespace), not the chart's", k)
			}
			continue
		}
		if !ok {
			t.Errorf("the chart does not render %s (deploy/%s)", k, m.File)
			continue
		}
		if diff := cmp.Diff(m.Obj.Object, withoutHelmLabels(t, got, labels).Object); diff != "" {
			t.Errorf("%s differs from deploy/%s (-deploy +chart):\n%s", k, m.File, diff)
		}
		compared++
	}
	for _, k := range slices.Sorted(maps.Keys(charted)) {
		t.Errorf("the chart renders %s, which deploy/ does not have", k)
	}
	// deploy/ holds 22 objects besides its Namespace (test/deploy counts them by kind):
	// fewer compared would mean the loader lost some.
	if compared < 20 {
		t.Errorf("compared %d objects, want at least 20", compared)
	}
	t.Logf("%d objects of deploy/ compared with the chart's", compared)
}
