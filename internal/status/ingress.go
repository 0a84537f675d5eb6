package status

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/source/kube"
	"github.com/portico-dev/portico/internal/store"
)

// IngressWriter writes status.loadBalancer on the Ingresses Portico serves, and clears
// it on Ingresses it stops serving. Writes happen only when the value differs from what
// the API server has, from a few parallel workers.
type IngressWriter struct {
	Client  kubernetes.Interface
	Workers int
	Logger  *slog.Logger
	// OnWrite is called after each successful write (for metrics); may be nil.
	OnWrite func(kind string)
}

// LoadBalancerFromAddresses turns --ingress-status-address values (IPs or host names)
// into load-balancer entries.
func LoadBalancerFromAddresses(addrs []string) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, err := netip.ParseAddr(a); err == nil {
			out = append(out, networkingv1.IngressLoadBalancerIngress{IP: a})
		} else {
			out = append(out, networkingv1.IngressLoadBalancerIngress{Hostname: a})
		}
	}
	return out
}

// LoadBalancerFromService copies a Service's load-balancer status (the Envoy Service's).
func LoadBalancerFromService(svc *corev1.Service) []networkingv1.IngressLoadBalancerIngress {
	if svc == nil {
		return nil
	}
	var out []networkingv1.IngressLoadBalancerIngress
	for _, lb := range svc.Status.LoadBalancer.Ingress {
		out = append(out, networkingv1.IngressLoadBalancerIngress{IP: lb.IP, Hostname: lb.Hostname})
	}
	return out
}

type ingressUpdate struct {
	key  types.NamespacedName
	want []networkingv1.IngressLoadBalancerIngress
}

// Sync makes every Ingress's load-balancer status match: lb on those Portico serves
// (valid or invalid: they are Portico's either way), and nothing on ignored ones whose
// address Portico wrote (by managedFields, or equal to the current address). Another controller's status is never touched. It
// returns how many writes failed, so that the caller can retry. ctx should end when
// this replica stops leading: no write starts after that.
func (w *IngressWriter) Sync(ctx context.Context, s *store.Store, statuses []*dag.Status, lb []networkingv1.IngressLoadBalancerIngress) int {
	var updates []ingressUpdate
	for _, st := range statuses {
		if st.Object.Kind != dag.KindIngress {
			continue
		}
		key := types.NamespacedName{Namespace: st.Object.Namespace, Name: st.Object.Name}
		ing := s.Ingresses[key]
		if ing == nil {
			continue
		}
		have := ing.Status.LoadBalancer.Ingress
		switch {
		case st.Status != dag.StatusIgnored && !sameLB(have, lb):
			updates = append(updates, ingressUpdate{key, lb})
		case st.Status == dag.StatusIgnored && len(have) > 0 && (ownsLoadBalancer(ing) || (len(lb) > 0 && sameLB(have, lb))):
			updates = append(updates, ingressUpdate{key, nil})
		}
	}
	return w.apply(ctx, updates)
}

func (w *IngressWriter) apply(ctx context.Context, updates []ingressUpdate) int {
	return writeAll(ctx, w.Workers, updates, w.write)
}

// writeAll runs write on every update from a few parallel workers and returns how many
// failed. No write starts once ctx is done.
func writeAll[U any](ctx context.Context, workers int, updates []U, write func(context.Context, U) bool) int {
	work := make(chan U)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range work {
				if ctx.Err() == nil && !write(ctx, u) {
					failed.Add(1)
				}
			}
		}()
	}
	for _, u := range updates {
		select {
		case work <- u:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return int(failed.Load())
}

// write sets the load-balancer status with a merge patch of the status subresource: one
// request, no read first, and no conflict with concurrent changes to the spec. (The
// decision to write was taken on the cached object, so writes happen only on change.)
func (w *IngressWriter) write(ctx context.Context, u ingressUpdate) bool {
	lb := u.want
	if lb == nil {
		lb = []networkingv1.IngressLoadBalancerIngress{} // clear: null would be ignored by the merge
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": map[string]any{"ingress": lb}}})
	if err != nil {
		w.Logger.Error("encoding Ingress status", "ingress", u.key.String(), "err", err)
		return true // retrying cannot help
	}
	_, err = w.Client.NetworkingV1().Ingresses(u.key.Namespace).Patch(ctx, u.key.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: kube.FieldManager}, "status")
	if err != nil {
		if apierrors.IsNotFound(err) || ctx.Err() != nil {
			return true // deleted meanwhile, or no longer leading: nothing to retry
		}
		w.Logger.Warn("writing Ingress status; will retry", "ingress", u.key.String(), "err", err)
		return false
	}
	if w.OnWrite != nil {
		w.OnWrite(dag.KindIngress)
	}
	return true
}

// ownsLoadBalancer reports whether the API server records Portico as the last writer of
// the Ingress's status.loadBalancer: then an address there is Portico's, even one from
// an earlier configuration or run, and it is Portico's to clear.
func ownsLoadBalancer(ing *networkingv1.Ingress) bool {
	for _, e := range ing.ManagedFields {
		if e.Manager == kube.FieldManager && e.Subresource == "status" && e.FieldsV1 != nil &&
			bytes.Contains(e.FieldsV1.Raw, []byte(`"f:loadBalancer"`)) {
			return true
		}
	}
	return false
}

func sameLB(a, b []networkingv1.IngressLoadBalancerIngress) bool {
	return slices.EqualFunc(a, b, func(x, y networkingv1.IngressLoadBalancerIngress) bool {
		return x.IP == y.IP && x.Hostname == y.Hostname
	})
}
