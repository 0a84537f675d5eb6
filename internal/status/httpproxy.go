package status

import (
	"context"
	"log/slog"
	"slices"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/contourclient"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/source/kube"
	"github.com/portico-dev/portico/internal/store"
)

// The Valid condition of an HTTPProxy, as HTTPProxy users (and their tooling) read it:
// True when the object is served; False with the errors otherwise.
const (
	ConditionValid       = "Valid"
	ReasonErrorPresent   = "ErrorPresent"
	ReasonOrphaned       = "Orphaned"
	ReasonWarningPresent = "WarningPresent"
)

// HTTPProxyStatus is the status an HTTPProxy with build status st should have. prev is
// the status it has now: the condition's lastTransitionTime moves only when the
// condition's truth does, as Kubernetes API conventions ask.
func HTTPProxyStatus(st *dag.Status, generation int64, prev contourv1.HTTPProxyStatus, now time.Time) contourv1.HTTPProxyStatus {
	out := contourv1.HTTPProxyStatus{
		CurrentStatus: string(st.Status),
		Description:   st.Description,
		LoadBalancer:  prev.LoadBalancer,
	}
	c := contourv1.DetailedCondition{Condition: metav1.Condition{
		Type:               ConditionValid,
		ObservedGeneration: generation,
		Message:            truncateMessage(st.Description),
	}}
	switch st.Status {
	case dag.StatusValid:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonValid
		if len(st.Warnings) > 0 {
			c.Reason = ReasonWarningPresent
		}
	case dag.StatusOrphaned:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonOrphaned
	default:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonErrorPresent
	}
	for _, p := range errorsOf(st) {
		c.Errors = append(c.Errors, contourv1.SubCondition{Type: p.Type, Status: metav1.ConditionTrue, Reason: p.Reason, Message: p.Message})
	}
	for _, p := range st.Warnings {
		c.Warnings = append(c.Warnings, contourv1.SubCondition{Type: p.Type, Status: metav1.ConditionTrue, Reason: p.Reason, Message: p.Message})
	}
	c.LastTransitionTime = metav1.NewTime(now.UTC().Truncate(time.Second))
	if old := validCondition(prev); old != nil && old.Status == c.Status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	out.Conditions = []contourv1.DetailedCondition{c}
	return out
}

func validCondition(s contourv1.HTTPProxyStatus) *contourv1.DetailedCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == ConditionValid {
			return &s.Conditions[i]
		}
	}
	return nil
}

// sameHTTPProxyStatus reports whether two statuses say the same thing: what a writer
// compares before writing again (transition times aside).
func sameHTTPProxyStatus(a, b contourv1.HTTPProxyStatus) bool {
	if a.CurrentStatus != b.CurrentStatus || a.Description != b.Description || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message ||
			x.ObservedGeneration != y.ObservedGeneration || !slices.Equal(x.Errors, y.Errors) || !slices.Equal(x.Warnings, y.Warnings) {
			return false
		}
	}
	return true
}

// HTTPProxyWriter writes the status of the HTTPProxies Portico processed (valid, invalid
// or orphaned), and of the ExtensionServices they use, only when it differs from what
// the API server has, from a few parallel workers. HTTPProxies of another ingress class
// are left alone.
type HTTPProxyWriter struct {
	Client  *contourclient.Client
	Workers int
	Logger  *slog.Logger
	// OnWrite is called after each successful write (for metrics); may be nil.
	OnWrite func(kind string)
	// Now is the clock for condition transition times; nil means time.Now.
	Now func() time.Time
}

type httpProxyUpdate struct {
	key  types.NamespacedName
	want contourv1.HTTPProxyStatus
}

// Sync makes every processed HTTPProxy's status match its build status and returns how
// many writes failed. ctx should end when this replica stops leading.
// Roots also get lb, the addresses the proxy is reached at, as Ingresses do.
func (w *HTTPProxyWriter) Sync(ctx context.Context, s *store.Store, statuses []*dag.Status, lb []networkingv1.IngressLoadBalancerIngress) int {
	if w.Client == nil {
		return 0
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	var updates []httpProxyUpdate
	for _, st := range statuses {
		if st.Object.Kind != dag.KindHTTPProxy || st.Status == dag.StatusIgnored {
			continue
		}
		key := types.NamespacedName{Namespace: st.Object.Namespace, Name: st.Object.Name}
		p := s.HTTPProxies[key]
		if p == nil {
			continue
		}
		want := HTTPProxyStatus(st, p.Generation, p.Status, now())
		want.LoadBalancer = corev1.LoadBalancerStatus{}
		if st.Root && st.Status == dag.StatusValid {
			want.LoadBalancer = serviceLoadBalancer(lb)
		}
		if !sameHTTPProxyStatus(p.Status, want) || !equality.Semantic.DeepEqual(p.Status.LoadBalancer, want.LoadBalancer) {
			updates = append(updates, httpProxyUpdate{key, want})
		}
	}
	return writeAll(ctx, w.Workers, updates, w.write) + w.syncExtensionServices(ctx, s, statuses, now)
}

// write replaces the status with a merge patch of the status subresource (conditions are
// a list, which a merge patch replaces whole).
func (w *HTTPProxyWriter) write(ctx context.Context, u httpProxyUpdate) bool {
	status := map[string]any{
		"currentStatus": u.want.CurrentStatus, "description": u.want.Description, "conditions": u.want.Conditions,
		"loadBalancer": u.want.LoadBalancer,
	}
	return patchStatus(ctx, w.Logger, w.OnWrite, dag.KindHTTPProxy, u.key, status, func(patch []byte) error {
		_, err := w.Client.HTTPProxies(u.key.Namespace).Patch(ctx, u.key.Name, types.MergePatchType, patch,
			metav1.PatchOptions{FieldManager: kube.FieldManager}, "status")
		return err
	})
}

// serviceLoadBalancer converts Ingress load-balancer addresses to the Service form that
// HTTPProxy status uses.
func serviceLoadBalancer(lb []networkingv1.IngressLoadBalancerIngress) corev1.LoadBalancerStatus {
	var out corev1.LoadBalancerStatus
	for _, in := range lb {
		out.Ingress = append(out.Ingress, corev1.LoadBalancerIngress{IP: in.IP, Hostname: in.Hostname})
	}
	return out
}

// maxConditionMessage is the API's limit on a condition message.
const maxConditionMessage = 32768

// truncateMessage keeps a message within the limit (on a rune boundary), so that a long
// description never makes the whole status write fail.
func truncateMessage(m string) string {
	if len(m) <= maxConditionMessage {
		return m
	}
	cut := maxConditionMessage - len("…")
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return m[:cut] + "…"
}
