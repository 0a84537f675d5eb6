package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// crdResource is the CustomResourceDefinition resource (no typed client: the
// apiextensions module is not a dependency).
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRDFieldManager is the field manager InstallCRDs applies with.
const CRDFieldManager = "kubetest"

// ContourCRDFiles returns the paths of the repository's CRD manifests, deploy/crds/*.yaml.
func ContourCRDFiles() ([]string, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(root, "deploy", "crds", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("kubetest: no CRDs in %s", filepath.Join(root, "deploy", "crds"))
	}
	return files, nil
}

// InstallContourCRDs installs deploy/crds (contour.heptio.com IngressRoute and
// TLSCertificateDelegation, projectcontour.io HTTPProxy and TLSCertificateDelegation)
// into the API server and returns once they are established, so that their objects can
// be created. Installing them again is harmless: later tests of the same binary may all
// call it. It skips t under -short, like Require.
func (e *Env) InstallContourCRDs(t testing.TB) {
	t.Helper()
	e.Require(t)
	files, err := ContourCRDFiles()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := InstallCRDs(ctx, e.Config, files...); err != nil {
		t.Fatal(err)
	}
}

// InstallCRDs applies the CustomResourceDefinitions in files (server-side apply, one
// document per file) and waits until every one is established.
func InstallCRDs(ctx context.Context, cfg *rest.Config, files ...string) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var names []string
	for _, f := range files {
		crd, err := readCRD(f)
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(crdResource).Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: CRDFieldManager, Force: true}); err != nil {
			return fmt.Errorf("kubetest: applying %s: %w", f, err)
		}
		names = append(names, crd.GetName())
	}
	return WaitForCRDs(ctx, cfg, names...)
}

func readCRD(file string) (*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %s: %w", file, err)
	}
	crd := &unstructured.Unstructured{}
	if err := crd.UnmarshalJSON(js); err != nil {
		return nil, fmt.Errorf("kubetest: %s: %w", file, err)
	}
	if crd.GetKind() != "CustomResourceDefinition" {
		return nil, fmt.Errorf("kubetest: %s holds a %s, not one CustomResourceDefinition", file, crd.GetKind())
	}
	return crd, nil
}

// WaitForCRDs waits until the named CustomResourceDefinitions are established: the API
// server serves their resources (creating an object before that fails with NotFound).
func WaitForCRDs(ctx context.Context, cfg *rest.Config, names ...string) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for _, name := range names {
		for {
			crd, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err == nil && established(crd) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("kubetest: CRD %s not established (last error: %v): %w", name, err, context.Cause(ctx))
			case <-tick.C:
			}
		}
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	return slices.ContainsFunc(conds, func(c any) bool {
		m, _ := c.(map[string]any)
		return m["type"] == "Established" && m["status"] == "True"
	})
}
