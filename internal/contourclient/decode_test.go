package contourclient

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/portico-dev/portico/apis/contour/v1beta1"
)

// decoder is the decoder the REST client uses for JSON responses.
func decoder(t *testing.T) runtime.Decoder {
	t.Helper()
	ns := RESTConfig(&rest.Config{Host: "https://example.invalid"}).NegotiatedSerializer
	info, ok := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	return ns.DecoderToVersion(info.Serializer, v1beta1.SchemeGroupVersion)
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
		`not JSON`,
	} {
		if _, err := runtime.Decode(d, []byte(in)); err == nil {
			t.Errorf("%s: decoded without error", in)
		}
	}
}
