package kubetest_test

import (
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/kubetest"
)

// TestGatewayAPICRDs: the module's standard-channel CRDs install (twice, harmlessly) and
// the API server enforces their CEL rules; the release's ValidatingAdmissionPolicy is in
// force: the experimental channel is refused over the standard one, as in a cluster.
func TestGatewayAPICRDs(t *testing.T) {
	env.InstallGatewayAPICRDs(t, kubetest.GatewayAPIStandard)
	env.InstallGatewayAPICRDs(t, kubetest.GatewayAPIStandard)
	ctx := t.Context()
	gw, err := gatewayclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	// A CEL rule of the HTTPRoute schema: a path prefix must start with "/".
	prefix := gatewayv1.PathMatchPathPrefix
	_, err = gw.GatewayV1().HTTPRoutes("default").Create(ctx, &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "relative"},
		Spec: gatewayv1.HTTPRouteSpec{Rules: []gatewayv1.HTTPRouteRule{{
			Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: &prefix, Value: ptr("api")}}},
		}}},
	}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "must be an absolute path") {
		t.Errorf("creating an HTTPRoute with path prefix \"api\": err = %v, want the CRD's CEL rule to refuse it", err)
	}

	// The policy is loaded by the API server some time after it is created.
	crds, _, err := kubetest.GatewayAPIFiles(kubetest.GatewayAPIExperimental)
	if err != nil {
		t.Fatal(err)
	}
	var experimental string
	for _, f := range crds {
		if strings.HasSuffix(f, "_httproutes.yaml") {
			experimental = f
		}
	}
	data, err := os.ReadFile(experimental)
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &crd.Object); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	crdClient := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	// A dry run goes through admission without changing anything, until the policy is in force.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := crdClient.Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: kubetest.CRDFieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "Installing experimental CRDs on top of standard channel CRDs is prohibited") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("installing the experimental HTTPRoute CRD (dry run): err = %v; want the safe-upgrades policy's refusal", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
