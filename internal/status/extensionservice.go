package status

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	contourv1alpha1 "github.com/portico-dev/portico/apis/projectcontour/v1alpha1"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/source/kube"
	"github.com/portico-dev/portico/internal/store"
)

// ExtensionServiceStatus is the status an ExtensionService with build status st should
// have: a Valid condition like an HTTPProxy's, with the errors and warnings behind it.
func ExtensionServiceStatus(st *dag.Status, generation int64, prev contourv1alpha1.ExtensionServiceStatus, now time.Time) contourv1alpha1.ExtensionServiceStatus {
	p := HTTPProxyStatus(st, generation, contourv1.HTTPProxyStatus{Conditions: prev.Conditions}, now)
	return contourv1alpha1.ExtensionServiceStatus{Conditions: p.Conditions}
}

type extensionUpdate struct {
	key  types.NamespacedName
	want contourv1alpha1.ExtensionServiceStatus
}

// syncExtensionServices makes the ExtensionServices' statuses match their build
// statuses, as Sync does for HTTPProxies, and returns how many writes failed.
func (w *HTTPProxyWriter) syncExtensionServices(ctx context.Context, s *store.Store, statuses []*dag.Status, now func() time.Time) int {
	var updates []extensionUpdate
	for _, st := range statuses {
		if st.Object.Kind != dag.KindExtensionService {
			continue
		}
		key := types.NamespacedName{Namespace: st.Object.Namespace, Name: st.Object.Name}
		es := s.ExtensionServices[key]
		if es == nil {
			continue
		}
		want := ExtensionServiceStatus(st, es.Generation, es.Status, now())
		if !sameHTTPProxyStatus(contourv1.HTTPProxyStatus{Conditions: es.Status.Conditions}, contourv1.HTTPProxyStatus{Conditions: want.Conditions}) {
			updates = append(updates, extensionUpdate{key, want})
		}
	}
	return writeAll(ctx, w.Workers, updates, func(ctx context.Context, u extensionUpdate) bool {
		return patchStatus(ctx, w.Logger, w.OnWrite, dag.KindExtensionService, u.key, map[string]any{"conditions": u.want.Conditions}, func(patch []byte) error {
			_, err := w.Client.ExtensionServices(u.key.Namespace).Patch(ctx, u.key.Name, types.MergePatchType, patch,
				metav1.PatchOptions{FieldManager: kube.FieldManager}, "status")
			return err
		})
	})
}
