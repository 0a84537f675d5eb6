package status

import (
	"context"
	"encoding/json"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	contourv1beta1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	"github.com/portico-dev/portico/internal/contourclient"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/source/kube"
	"github.com/portico-dev/portico/internal/store"
)

// IngressRouteWriter writes status.currentStatus and status.description on the
// IngressRoutes Portico processed (valid, invalid or orphaned). Writes happen only when
// the value differs from what the API server has, from a few parallel workers.
// IngressRoutes of another ingress class (ignored) are left alone: their status is
// their own controller's.
type IngressRouteWriter struct {
	Client  *contourclient.Client
	Workers int
	Logger  *slog.Logger
	// OnWrite is called after each successful write (for metrics); may be nil.
	OnWrite func(kind string)
}

type ingressRouteUpdate struct {
	key  types.NamespacedName
	want contourv1beta1.Status
}

// Sync makes every processed IngressRoute's status match its build status. It returns
// how many writes failed, so that the caller can retry. ctx should end when this replica
// stops leading: no write starts after that.
func (w *IngressRouteWriter) Sync(ctx context.Context, s *store.Store, statuses []*dag.Status) int {
	if w.Client == nil {
		return 0
	}
	return writeAll(ctx, w.Workers, ingressRouteUpdates(s, statuses), w.write)
}

// ingressRouteUpdates returns the IngressRoutes whose status differs from their build
// status, with the status they should have.
func ingressRouteUpdates(s *store.Store, statuses []*dag.Status) []ingressRouteUpdate {
	var updates []ingressRouteUpdate
	for _, st := range statuses {
		if st.Object.Kind != dag.KindIngressRoute || st.Status == dag.StatusIgnored {
			continue
		}
		key := types.NamespacedName{Namespace: st.Object.Namespace, Name: st.Object.Name}
		ir := s.IngressRoutes[key]
		if ir == nil {
			continue
		}
		want := contourv1beta1.Status{CurrentStatus: string(st.Status), Description: st.Description}
		if ir.Status != want {
			updates = append(updates, ingressRouteUpdate{key, want})
		}
	}
	return updates
}

// write sets the status with a merge patch of the status subresource: one request, no
// read first, and no conflict with concurrent changes to the spec. (The decision to
// write was taken on the cached object, so writes happen only on change.)
func (w *IngressRouteWriter) write(ctx context.Context, u ingressRouteUpdate) bool {
	// Both fields always, even empty: a merge patch leaves out what it does not name.
	status := map[string]any{"currentStatus": u.want.CurrentStatus, "description": u.want.Description}
	return patchStatus(ctx, w.Logger, w.OnWrite, dag.KindIngressRoute, u.key, status, func(patch []byte) error {
		_, err := w.Client.IngressRoutes(u.key.Namespace).Patch(ctx, u.key.Name, types.MergePatchType, patch,
			metav1.PatchOptions{FieldManager: kube.FieldManager}, "status")
		return err
	})
}

// patchStatus sends status as a merge patch of an object's status subresource through
// send, and says whether the write is settled (done, or not worth retrying: the object
// is gone, or this replica stopped leading).
func patchStatus(ctx context.Context, log *slog.Logger, onWrite func(string), kind string, key types.NamespacedName, status map[string]any, send func([]byte) error) bool {
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		log.Error("encoding status", "kind", kind, "object", key.String(), "err", err)
		return true // retrying cannot help
	}
	if err := send(patch); err != nil {
		if apierrors.IsNotFound(err) || ctx.Err() != nil {
			return true
		}
		log.Warn("writing status; will retry", "kind", kind, "object", key.String(), "err", err)
		return false
	}
	if onWrite != nil {
		onWrite(kind)
	}
	return true
}
