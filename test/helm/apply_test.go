package helm

import (
	"context"
	"testing"

	"github.com/portico-dev/portico/internal/deploytest"
)

const fieldManager = "portico-helm-test"

// releaseNamespace is the Namespace of deploy/ renamed to name: the namespace a careful
// install would make (docs/install-helm.md), enforcing the restricted Pod Security
// profile, so that the API server warns of any pod template that breaks it.
func releaseNamespace(t *testing.T, name string) deploytest.Manifest {
	t.Helper()
	deployed, err := deploytest.LoadKustomization(deploytest.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range deployed {
		if m.Obj.GetKind() == "Namespace" {
			ns := m.Obj.DeepCopy()
			ns.SetName(name)
			return deploytest.Manifest{File: m.File, Obj: ns}
		}
	}
	t.Fatal("deploy/ has no Namespace")
	return deploytest.Manifest{}
}

// TestRenderedObjectsApplyWithServerSideDryRun sends every object the chart renders
// to a real kube-apiserver as a server-side apply dry run (validation, defaulting and
// admission, Pod Security included, with nothing stored), for the default values and
// for two sets of others. Any error fails, and so does any warning the API server
// answers with (a deprecated API, a pod template the namespace's profile forbids).
func TestRenderedObjectsApplyWithServerSideDryRun(t *testing.T) {
	env.Require(t)
	cfg := env.AdminConfig(t)
	ctx := context.Background()
	for _, c := range []struct {
		name, release, namespace string
		vals                     map[string]any
	}{
		{"defaults", defaultRelease, defaultNamespace, nil},
		{"non-defaults", "edge", "edge-system", values(t, nonDefaultValues)},
		{"webhook peers and a ClusterIP Service", "peers", "peers-system", values(t, `
networkPolicy: {webhookFrom: [{ipBlock: {cidr: 10.0.0.0/16}}, {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}}]}
envoy: {service: {type: ClusterIP}}
ingressStatusAddress: [192.0.2.7]
`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, c.release, c.namespace, c.vals)
			a, err := deploytest.NewApplier(cfg, fieldManager)
			if err != nil {
				t.Fatal(err)
			}
			// A dry run of a namespaced object needs its namespace, and of a custom
			// resource its CRD: those are created for real (as Helm does with crds/).
			if err := a.Apply(ctx, releaseNamespace(t, c.namespace), false); err != nil {
				t.Fatal(err)
			}
			if err := a.InstallCRDs(ctx, r.objects); err != nil {
				t.Fatal(err)
			}
			// The namespace the chart makes (the Gateways' data planes') too.
			for _, m := range r.objects {
				if m.Obj.GetKind() == "Namespace" {
					if err := a.Apply(ctx, m, false); err != nil {
						t.Fatal(err)
					}
				}
			}
			a.Warnings()

			kinds := map[string]int{}
			for _, m := range r.objects {
				kinds[m.Obj.GetKind()]++
				if err := a.Apply(ctx, m, true); err != nil {
					t.Error(err)
				}
				for _, w := range a.Warnings() {
					t.Errorf("%v: API server warning: %s", m, w)
				}
			}
			if kinds["Deployment"] != 1 || kinds["DaemonSet"] != 1 || kinds["CustomResourceDefinition"] != 5 {
				t.Errorf("rendered %v: want a Deployment, a DaemonSet and 5 CRDs", kinds)
			}
			if !t.Failed() {
				t.Logf("%d objects accepted by the API server (dry run): %v", len(r.objects), kinds)
			}
		})
	}
}
