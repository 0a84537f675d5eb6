package status

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
)

// Event reasons.
const (
	ReasonInvalid = "Invalid"
	ReasonValid   = "Valid"
)

// EventWriter makes an Ingress's status description visible where users look for it,
// `kubectl describe ingress`, as Events: networking/v1 Ingress status has no field for
// it. An Event is emitted when an object's status changes, not on every rebuild.
type EventWriter struct {
	recorder    record.EventRecorder
	broadcaster record.EventBroadcaster
	last        map[dag.ObjectRef]*dag.Status
}

// NewEventWriter starts recording Events through client until Shutdown.
func NewEventWriter(client kubernetes.Interface, logger *slog.Logger) *EventWriter {
	b := record.NewBroadcaster(record.WithContext(context.Background()))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	b.StartStructuredLogging(0)
	return &EventWriter{
		recorder:    b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "portico"}),
		broadcaster: b,
		last:        map[dag.ObjectRef]*dag.Status{},
	}
}

// Shutdown stops the event pipeline.
func (w *EventWriter) Shutdown() { w.broadcaster.Shutdown() }

// Observe emits an Event for each Ingress whose status changed since the last call:
// a Warning when it is invalid, a Normal one when it becomes valid.
func (w *EventWriter) Observe(s *store.Store, statuses []*dag.Status) {
	next := make(map[dag.ObjectRef]*dag.Status, len(statuses))
	for _, st := range statuses {
		next[st.Object] = st
		if prev, seen := w.last[st.Object]; (seen && prev.Same(st)) || st.Object.Kind != dag.KindIngress {
			continue
		}
		ing := s.Ingresses[types.NamespacedName{Namespace: st.Object.Namespace, Name: st.Object.Name}]
		if ing == nil {
			continue
		}
		switch st.Status {
		case dag.StatusInvalid:
			w.recorder.Event(ing, corev1.EventTypeWarning, ReasonInvalid, st.Description)
		case dag.StatusValid:
			if _, seen := w.last[st.Object]; seen || st.Description != "valid Ingress" {
				w.recorder.Event(ing, corev1.EventTypeNormal, ReasonValid, st.Description)
			}
		}
	}
	w.last = next
}
