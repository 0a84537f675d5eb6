// Package deploytest is for the tests of Portico's install manifests (test/deploy for
// deploy/, test/helm for the Helm chart): it reads manifests into objects, as kubectl
// would, and applies them to an API server with server-side apply, collecting the
// warnings the API server answers with (deprecations, Pod Security violations), which
// those tests count as failures.
package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/kubetest"
)

// Dir is the repository's deploy/ directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy")
}

// Manifest is one object of a manifest file, with the file it came from.
type Manifest struct {
	File string
	Obj  *unstructured.Unstructured
}

func (m Manifest) String() string {
	return fmt.Sprintf("%s %s (%s)", m.Obj.GetKind(), Key(m.Obj), m.File)
}

// Key is namespace/name, or name for a cluster-scoped object.
func Key(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// LoadKustomization reads dir/kustomization.yaml and returns every object of every
// file in its resources, in order. It does what `kubectl apply -k` does for a
// kustomization with nothing but a resources list, and fails on anything else: any
// other field (namespace, images, patches, ...) would change the objects.
func LoadKustomization(dir string) ([]Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k map[string]any
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("kustomization.yaml: %w", err)
	}
	for field := range k {
		if !slices.Contains([]string{"apiVersion", "kind", "resources"}, field) {
			return nil, fmt.Errorf("kustomization.yaml: field %q is not supported by this loader", field)
		}
	}
	raw, _ := k["resources"].([]any)
	if len(raw) == 0 {
		return nil, errors.New("kustomization.yaml: no resources")
	}
	var out []Manifest
	for _, r := range raw {
		name, ok := r.(string)
		if !ok {
			return nil, fmt.Errorf("kustomization.yaml: resource %v is not a string", r)
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("kustomization.yaml lists %s: %w", name, err)
		}
		ms, err := Decode(name, data)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	return out, nil
}

// Decode splits a multi-document YAML file into its objects, skipping empty documents
// (nothing but comments or separators, as kubectl does).
func Decode(file string, data []byte) ([]Manifest, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []Manifest
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		if bytes.Equal(js, []byte("null")) {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		out = append(out, Manifest{File: file, Obj: obj})
	}
}

// warnings collects the API server's Warning headers.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// Applier applies manifests with server-side apply through the dynamic client.
type Applier struct {
	cfg          *rest.Config
	dyn          dynamic.Interface
	mapper       meta.RESTMapper
	warn         *warnings
	fieldManager string
}

// NewApplier is an Applier with cfg's credentials, applying as fieldManager. It reads
// the API server's discovery once: CRDs installed later are not known to it.
func NewApplier(cfg *rest.Config, fieldManager string) (*Applier, error) {
	cfg = rest.CopyConfig(cfg)
	w := &warnings{}
	cfg.WarningHandler = w
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{cfg: cfg, dyn: dyn, mapper: restmapper.NewDiscoveryRESTMapper(groups), warn: w, fieldManager: fieldManager}, nil
}

// Apply applies m (forcing conflicts), or only asks the API server whether it would,
// with dryRun: every admission and validation step runs, nothing is stored. A
// namespaced object must name its namespace and a cluster-scoped one must not: either
// mistake would put the object somewhere the manifest does not say.
func (a *Applier) Apply(ctx context.Context, m Manifest, dryRun bool) error {
	gvk := m.Obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%v: %w", m, err)
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if m.Obj.GetNamespace() == "" {
			return fmt.Errorf("%v: a namespaced kind without metadata.namespace would land in whatever namespace kubectl defaults to", m)
		}
		ri = a.dyn.Resource(mapping.Resource).Namespace(m.Obj.GetNamespace())
	} else if m.Obj.GetNamespace() != "" {
		return fmt.Errorf("%v: cluster-scoped kind with metadata.namespace", m)
	}
	opts := metav1.ApplyOptions{FieldManager: a.fieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := ri.Apply(ctx, m.Obj.GetName(), m.Obj, opts); err != nil {
		return fmt.Errorf("%v: %w", m, err)
	}
	return nil
}

// InstallCRDs applies the CustomResourceDefinitions among ms for real and waits, up to
// a minute, until they are established: until then their objects cannot be created
// (nor dry-run), nor watched by serve.
func (a *Applier) InstallCRDs(ctx context.Context, ms []Manifest) error {
	var names []string
	for _, m := range ms {
		if m.Obj.GetKind() == "CustomResourceDefinition" {
			if err := a.Apply(ctx, m, false); err != nil {
				return err
			}
			names = append(names, m.Obj.GetName())
		}
	}
	if len(names) == 0 {
		return errors.New("no CustomResourceDefinition to install")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return kubetest.WaitForCRDs(ctx, a.cfg, names...)
}

// Warnings returns the warnings the API server sent since the last call, and forgets them.
func (a *Applier) Warnings() []string {
	a.warn.mu.Lock()
	defer a.warn.mu.Unlock()
	m := a.warn.msgs
	a.warn.msgs = nil
	return m
}
