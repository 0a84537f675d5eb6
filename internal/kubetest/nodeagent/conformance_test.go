package nodeagent_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/testutil"
)

// conformanceModule holds the Gateway API conformance suite's manifests. Read from the
// module cache (the main module does not require it yet; once it does, its
// conformance.Manifests embed.FS holds the same file).
const conformanceModule = "sigs.k8s.io/gateway-api/conformance@v1.7.0"

// The suite's own base manifests, unchanged: every Deployment becomes available. The
// suite creates the Secrets its backends mount before applying them; so does this test.
func TestConformanceBaseManifests(t *testing.T) {
	env.Require(t)
	env.StartWorkloads(t, kubetest.WorkloadOptions{})
	ctx := t.Context()
	cs := kubetest.Clientset(t, env.Config)

	var namespaces []*corev1.Namespace
	var services []*corev1.Service
	var deployments []*appsv1.Deployment
	for _, obj := range baseManifests(t) {
		switch o := obj.(type) {
		case *corev1.Namespace:
			namespaces = append(namespaces, o)
		case *corev1.Service:
			services = append(services, o)
		case *appsv1.Deployment:
			deployments = append(deployments, o)
		}
	}
	if len(deployments) == 0 {
		t.Fatal("no Deployments in the conformance base manifests")
	}
	for _, ns := range namespaces {
		must(cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}))(t)
		cleanupNamespace(t, cs, ns.Name)
	}
	for _, d := range deployments {
		createSecretsOf(t, cs, d)
	}
	for _, s := range services {
		must(cs.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{}))(t)
	}
	for _, d := range deployments {
		must(cs.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{}))(t)
	}
	took := testutil.Eventually(t, wait, fmt.Sprintf("%d Deployments available", len(deployments)), func() bool {
		for _, d := range deployments {
			got := must(cs.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{}))(t)
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			if got.Status.AvailableReplicas != want || got.Status.UpdatedReplicas != want {
				return false
			}
		}
		return true
	})
	t.Logf("%d Deployments of the conformance base manifests available after %v", len(deployments), took)
}

// baseManifests decodes base/manifests.yaml; kinds outside client-go's scheme (the
// Gateways) are left out.
func baseManifests(t *testing.T) []any {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", conformanceModule).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", conformanceModule, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(mod.Dir, "base", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []any
	dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err == nil {
			objs = append(objs, obj)
		}
	}
}

// createSecretsOf creates each Secret a Deployment's volumes name, as the suite does:
// a self-signed certificate under tls.crt and tls.key.
func createSecretsOf(t *testing.T, cs kubernetes.Interface, d *appsv1.Deployment) {
	t.Helper()
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		cert := testutil.SelfSigned("abc.example.com")
		_, err := cs.CoreV1().Secrets(d.Namespace).Create(t.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: v.Secret.SecretName},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{"tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}
