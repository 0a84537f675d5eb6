package contourclient

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// decoder is the decoder the contour.heptio.com REST client uses for JSON responses.
func decoder(t *testing.T) runtime.Decoder {
	t.Helper()
	return decoderOf(t, RESTConfig(&rest.Config{Host: "https://example.invalid"}))
}

// projectDecoder is the decoder the projectcontour.io REST client uses.
func projectDecoder(t *testing.T) runtime.Decoder {
	t.Helper()
	return decoderOf(t, ProjectRESTConfig(&rest.Config{Host: "https://example.invalid"}))
}

func decoderOf(t *testing.T, cfg *rest.Config) runtime.Decoder {
	t.Helper()
	ns := cfg.NegotiatedSerializer
	info, ok := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	return ns.DecoderToVersion(info.Serializer, *cfg.GroupVersion)
}

const (
	goodRoute = `{"apiVersion": "contour.heptio.com/v1beta1", "kind": "IngressRoute",
  "metadata": {"name": "good", "namespace": "web", "resourceVersion": "7", "annotations": {"portico.dev/decode-error": "forged"}},
  "spec": {"routes": [{"match": "/", "service": {"name": "s", "port": 80}}]}}`
	// The API server accepts anything under "service" (its schema is open).
	badRoute = `{"apiVersion": "contour.heptio.com/v1beta1", "kind": "IngressRoute",
  "metadata": {"name": "bad", "namespace": "web", "resourceVersion": "8"},
  "spec": {"routes": [{"match": "/", "service": {"name": "s", "prot": 80}}]},
  "status": {"currentStatus": "valid", "description": "valid IngressRoute"}}`
)

func TestDecodeMarksUndecodableIngressRoutes(t *testing.T) {
	d := decoder(t)

	list := `{"apiVersion": "contour.heptio.com/v1beta1", "kind": "IngressRouteList", "metadata": {"resourceVersion": "9"},
  "items": [` + goodRoute + `, ` + badRoute + `]}`
	obj, err := runtime.Decode(d, []byte(list))
	if err != nil {
		t.Fatalf("one bad item failed the whole list: %v", err)
	}
	l := obj.(*v1beta1.IngressRouteList)
	if l.ResourceVersion != "9" || len(l.Items) != 2 {
		t.Fatalf("list = %+v, want resourceVersion 9 and both items", l)
	}
	good, bad := &l.Items[0], &l.Items[1]
	if _, marked := Undecodable(good); marked || len(good.Spec.Routes) != 1 || len(good.Spec.Routes[0].Service) != 1 {
		t.Errorf("good item = %+v, want its spec and no mark (a forged one is dropped)", good)
	}
	checkMarked(t, bad)

	// Alone, as a watch event carries it, and decoded into a typed object, as Get does.
	obj, err = runtime.Decode(d, []byte(badRoute))
	if err != nil {
		t.Fatal(err)
	}
	checkMarked(t, obj.(*v1beta1.IngressRoute))
	var into v1beta1.IngressRoute
	if _, _, err := d.Decode([]byte(badRoute), nil, &into); err != nil {
		t.Fatal(err)
	}
	checkMarked(t, &into)

	obj, err = runtime.Decode(d, []byte(goodRoute))
	if err != nil {
		t.Fatal(err)
	}
	if _, marked := Undecodable(obj.(*v1beta1.IngressRoute)); marked {
		t.Error("a user-set decode-error annotation was kept")
	}
}

func checkMarked(t *testing.T, ir *v1beta1.IngressRoute) {
	t.Helper()
	reason, marked := Undecodable(ir)
	if !marked || !strings.Contains(reason, `spec.routes[0].service: unknown field "prot"`) {
		t.Errorf("reason = %q (marked %v), want it to name the unknown field", reason, marked)
	}
	if ir.Name != "bad" || ir.Namespace != "web" || ir.ResourceVersion != "8" {
		t.Errorf("metadata not kept: %+v", ir.ObjectMeta)
	}
	if diff := cmp.Diff(v1beta1.Status{CurrentStatus: "valid", Description: "valid IngressRoute"}, ir.Status); diff != "" {
		t.Errorf("status not kept (-want +got):\n%s", diff)
	}
	if len(ir.Spec.Routes) != 0 || ir.Spec.VirtualHost != nil {
		t.Errorf("spec of an undecodable object = %+v, want none", ir.Spec)
	}
}

func TestDecodeErrorsOfOtherKindsAreKept(t *testing.T) {
	d := decoder(t)
	for _, in := range []string{
		`{"apiVersion": "contour.heptio.com/v1beta1", "kind": "TLSCertificateDelegation", "metadata": {"name": "d"}, "spec": {"delegations": 3}}`,
		`{"apiVersion": "contour.heptio.com/v1beta1", "kind": "IngressRoute", "metadata": 3}`,
		`{"apiVersion": "projectcontour.io/v1", "kind": "TLSCertificateDelegation", "metadata": {"name": "d"}, "spec": {"delegations": 3}}`,
		`{"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy", "metadata": 3}`,
		`not JSON`,
	} {
		if _, err := runtime.Decode(d, []byte(in)); err == nil {
			t.Errorf("%s: decoded without error", in)
		}
	}
}

const (
	goodProxy = `{"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy",
  "metadata": {"name": "good", "namespace": "web", "resourceVersion": "7", "annotations": {"portico.dev/decode-error": "forged"}},
  "spec": {"virtualhost": {"fqdn": "good.example.com"}, "routes": [{"conditions": [{"prefix": "/"}], "services": [{"name": "s", "port": 80}]}]}}`
	// The schema has no bounds on retriableStatusCodes, whose Go type is []uint32.
	badProxy = `{"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy",
  "metadata": {"name": "bad", "namespace": "web", "resourceVersion": "8"},
  "spec": {"routes": [{"services": [{"name": "s", "port": 80}], "retryPolicy": {"retryOn": ["retriable-status-codes"], "retriableStatusCodes": [-1]}}]},
  "status": {"currentStatus": "valid", "description": "Valid HTTPProxy",
    "conditions": [{"type": "Valid", "status": "True", "reason": "Valid", "message": "", "lastTransitionTime": "2026-01-02T03:04:05Z"}]}}`
	// Another controller's condition that does not decode costs the status, not the object.
	badProxyBadStatus = `{"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy",
  "metadata": {"name": "bad-status", "namespace": "web"},
  "spec": {"routes": [{"services": [{"name": "s", "port": 99999999999999999999}]}]},
  "status": {"conditions": [{"type": "Valid", "observedGeneration": "one"}]}}`
)

func TestDecodeMarksUndecodableHTTPProxies(t *testing.T) {
	d := projectDecoder(t)

	list := `{"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxyList", "metadata": {"resourceVersion": "9", "continue": "more"},
  "items": [` + goodProxy + `, ` + badProxy + `, ` + badProxyBadStatus + `]}`
	obj, err := runtime.Decode(d, []byte(list))
	if err != nil {
		t.Fatalf("one bad item failed the whole list: %v", err)
	}
	l := obj.(*contourv1.HTTPProxyList)
	if l.ResourceVersion != "9" || l.Continue != "more" || len(l.Items) != 3 {
		t.Fatalf("list = %+v, want resourceVersion 9, continue and all items", l)
	}
	good := &l.Items[0]
	if _, marked := Undecodable(good); marked || good.Spec.VirtualHost == nil || len(good.Spec.Routes) != 1 {
		t.Errorf("good item = %+v, want its spec and no mark (a forged one is dropped)", good)
	}
	checkMarkedProxy(t, &l.Items[1])
	if reason, marked := Undecodable(&l.Items[2]); !marked || !strings.Contains(reason, "spec.routes.services.port") {
		t.Errorf("reason = %q (marked %v), want it to name the field", reason, marked)
	}
	if l.Items[2].Name != "bad-status" || len(l.Items[2].Status.Conditions) != 0 {
		t.Errorf("item with an undecodable status = %+v, want its metadata and no status", l.Items[2])
	}

	// Alone, as a watch event carries it, and decoded into a typed object, as Get does.
	obj, err = runtime.Decode(d, []byte(badProxy))
	if err != nil {
		t.Fatal(err)
	}
	checkMarkedProxy(t, obj.(*contourv1.HTTPProxy))
	var into contourv1.HTTPProxy
	if _, _, err := d.Decode([]byte(badProxy), nil, &into); err != nil {
		t.Fatal(err)
	}
	checkMarkedProxy(t, &into)
	// Into an object of another type it stays an error.
	if _, _, err := d.Decode([]byte(badProxy), nil, &v1beta1.IngressRoute{}); err == nil {
		t.Error("decoding a bad HTTPProxy into an IngressRoute succeeded")
	}

	obj, err = runtime.Decode(d, []byte(goodProxy))
	if err != nil {
		t.Fatal(err)
	}
	if _, marked := Undecodable(obj.(*contourv1.HTTPProxy)); marked {
		t.Error("a user-set decode-error annotation was kept")
	}
}

func checkMarkedProxy(t *testing.T, p *contourv1.HTTPProxy) {
	t.Helper()
	reason, marked := Undecodable(p)
	const want = "spec.routes.retryPolicy.retriableStatusCodes: number -1 is not an integer from 0 to 4294967295"
	if !marked || reason != want {
		t.Errorf("reason = %q (marked %v), want %q", reason, marked, want)
	}
	if p.Name != "bad" || p.Namespace != "web" || p.ResourceVersion != "8" {
		t.Errorf("metadata not kept: %+v", p.ObjectMeta)
	}
	if p.Status.CurrentStatus != "valid" || len(p.Status.Conditions) != 1 || p.Status.Conditions[0].Type != "Valid" {
		t.Errorf("status not kept: %+v", p.Status)
	}
	if diff := cmp.Diff(contourv1.HTTPProxySpec{}, p.Spec); diff != "" {
		t.Errorf("spec of an undecodable object, want none (-want +got):\n%s", diff)
	}
}

// Both clients decode both groups: the serializer's scheme holds them all, so a reader
// such as the admission webhook can use either.
func TestBothGroupsDecode(t *testing.T) {
	for _, d := range []runtime.Decoder{decoder(t), projectDecoder(t)} {
		for _, in := range []string{goodRoute, goodProxy,
			`{"apiVersion": "projectcontour.io/v1", "kind": "TLSCertificateDelegation", "metadata": {"name": "d"}, "spec": {"delegations": [{"secretName": "s", "targetNamespaces": ["*"]}]}}`,
		} {
			if _, err := runtime.Decode(d, []byte(in)); err != nil {
				t.Errorf("%s: %v", in, err)
			}
		}
	}
	if v1beta1.DecodeErrorAnnotation != contourv1.DecodeErrorAnnotation {
		t.Errorf("the API packages disagree on the decode error annotation: %q, %q", v1beta1.DecodeErrorAnnotation, contourv1.DecodeErrorAnnotation)
	}
}
