package helm

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/deploytest"
)

// chartDir is the chart under test.
func chartDir() string { return filepath.Join(deploytest.Dir(), "helm", "portico") }

// loadChart reads the chart as `helm install deploy/helm/portico` does.
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// values parses a YAML document of values, as `helm install -f` reads one.
func values(t *testing.T, doc string) map[string]any {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("values %q: %v", doc, err)
	}
	return v
}

// rendered is what the chart renders for one release.
type rendered struct {
	objects []deploytest.Manifest
	notes   string
}

// renderChart renders the chart as `helm template --include-crds` (a client-side dry
// run of an install) for a release named release in namespace, with vals over the
// chart's values. An error is the chart's (a template failing, or values.schema.json
// refusing the values).
func renderChart(t *testing.T, release, namespace string, vals map[string]any) (rendered, error) {
	t.Helper()
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler))
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = release
	install.Namespace = namespace
	install.IncludeCRDs = true
	rel, err := install.RunWithContext(context.Background(), loadChart(t), vals)
	if err != nil {
		return rendered{}, err
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		t.Fatalf("install returned a %T, not a v1 release", rel)
	}
	objs, err := deploytest.Decode("helm template "+release, []byte(r.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	return rendered{objects: objs, notes: r.Info.Notes}, nil
}

// render is renderChart for values the chart must accept.
func render(t *testing.T, release, namespace string, vals map[string]any) rendered {
	t.Helper()
	r, err := renderChart(t, release, namespace, vals)
	if err != nil {
		t.Fatalf("rendering the chart (release %s, namespace %s, values %v): %v", release, namespace, vals, err)
	}
	return r
}

// find returns the rendered object kind/name, or nil.
func (r rendered) find(kind, name string) *unstructured.Unstructured {
	for _, m := range r.objects {
		if m.Obj.GetKind() == kind && m.Obj.GetName() == name {
			return m.Obj
		}
	}
	return nil
}

// get returns the rendered object kind/name converted to into, failing when there is none.
func get[T any](t *testing.T, r rendered, kind, name string) *T {
	t.Helper()
	o := r.find(kind, name)
	if o == nil {
		t.Fatalf("the chart renders no %s %s", kind, name)
	}
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &out); err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
	return &out
}

// chartMeta is the chart's Chart.yaml.
func chartMeta(t *testing.T) *chart.Metadata {
	t.Helper()
	return loadChart(t).Metadata
}

// sourceVersion is internal/version/VERSION, the release this source tree builds.
func sourceVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deploytest.Dir(), "..", "internal", "version", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}
