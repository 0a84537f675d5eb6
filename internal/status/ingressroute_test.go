package status

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	contourv1beta1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
)

func TestIngressRouteUpdatesOnlyWhatChanged(t *testing.T) {
	route := func(name string, have contourv1beta1.Status) *contourv1beta1.IngressRoute {
		return &contourv1beta1.IngressRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name}, Status: have}
	}
	st := func(kind, name string, v dag.StatusValue, desc string) *dag.Status {
		return &dag.Status{Object: dag.ObjectRef{Kind: kind, Namespace: "web", Name: name}, Status: v, Description: desc}
	}
	s := store.FromObjects([]runtime.Object{
		route("new", contourv1beta1.Status{}),
		route("same", contourv1beta1.Status{CurrentStatus: "valid", Description: "valid IngressRoute"}),
		route("changed", contourv1beta1.Status{CurrentStatus: "valid", Description: "valid IngressRoute"}),
		route("description", contourv1beta1.Status{CurrentStatus: "invalid", Description: "old reason"}),
		route("other-class", contourv1beta1.Status{CurrentStatus: "valid", Description: "theirs"}),
	})
	statuses := []*dag.Status{
		st(dag.KindIngress, "new", dag.StatusValid, "an Ingress of the same name"),
		st(dag.KindIngressRoute, "new", dag.StatusOrphaned, "not part of a delegation chain"),
		st(dag.KindIngressRoute, "same", dag.StatusValid, "valid IngressRoute"),
		st(dag.KindIngressRoute, "changed", dag.StatusInvalid, "route /: no service"),
		st(dag.KindIngressRoute, "description", dag.StatusInvalid, "new reason"),
		st(dag.KindIngressRoute, "other-class", dag.StatusIgnored, "ingress class nginx"),
		st(dag.KindIngressRoute, "deleted", dag.StatusValid, "not in the store any more"),
	}
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "web", Name: name} }
	want := []ingressRouteUpdate{
		{key("new"), contourv1beta1.Status{CurrentStatus: "orphaned", Description: "not part of a delegation chain"}},
		{key("changed"), contourv1beta1.Status{CurrentStatus: "invalid", Description: "route /: no service"}},
		{key("description"), contourv1beta1.Status{CurrentStatus: "invalid", Description: "new reason"}},
	}
	if diff := cmp.Diff(want, ingressRouteUpdates(s, statuses), cmp.AllowUnexported(ingressRouteUpdate{})); diff != "" {
		t.Errorf("updates (-want +got):\n%s", diff)
	}
}
