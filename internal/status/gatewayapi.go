package status

// Status of the Gateway API kinds, written from what a build computed
// (dag.Status.GatewayAPI) following the API's rules for controllers: each condition
// carries the object's generation as observedGeneration and keeps its
// lastTransitionTime while its status holds; conditions of another party (a type with a
// domain prefix) are kept; a route's `parents` and a policy's `ancestors` entries of other
// controllers are left as they are; an object whose status already says it all is not
// written; a GatewayClass of another controller is never written. The write replaces the
// status subresource with the read object's resourceVersion, so a change made meanwhile
// (another controller's entry) is never overwritten: on a conflict the object is read
// again and the status merged into it once more.

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/source/kube"
	"github.com/portico-dev/portico/internal/source/manifest"
	"github.com/portico-dev/portico/internal/store"
)

// GatewayAPIWriter writes the status subresource of the Gateway API objects Portico
// processes (GatewayClasses of Portico's controller, their Gateways and ListenerSets,
// the routes attached to them and the BackendTLSPolicies they use), only when it
// differs from what the API server has, from a few parallel workers.
type GatewayAPIWriter struct {
	Client  gatewayclient.Interface
	Workers int
	Logger  *slog.Logger
	// OnWrite is called after each successful write (for metrics); may be nil.
	OnWrite func(kind string)
	// Now is the clock for condition transition times; nil means time.Now.
	Now func() time.Time

	// defaulted are the build statuses of the last Sync with the CRDs' defaults applied:
	// a status that a build kept (the same pointer) is not copied and defaulted again.
	mu        sync.Mutex
	defaulted map[*dag.GatewayAPIStatus]*dag.GatewayAPIStatus
}

// gatewayUpdate is one object whose status is to be written.
type gatewayUpdate struct {
	kind string
	key  types.NamespacedName
	// send writes the status it was planned with; again reads the object afresh and
	// plans its status anew (nil send: nothing to write any more).
	send  func(context.Context) error
	again func(context.Context) (gatewayUpdate, error)
}

// Sync makes the status of every Gateway API object match its build status and returns
// how many writes failed. ctx should end when this replica stops leading.
func (w *GatewayAPIWriter) Sync(ctx context.Context, s *store.Store, statuses []*dag.Status) int {
	if w.Client == nil {
		return 0
	}
	return writeAll(ctx, w.Workers, w.updates(s, statuses), w.write)
}

func (w *GatewayAPIWriter) now() metav1.Time {
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	return metav1.NewTime(now().UTC().Truncate(time.Second))
}

// updates plans the writes: GatewayClasses first, then Gateways, ListenerSets, routes
// and policies, so that a watcher sees a class accepted before its Gateways.
func (w *GatewayAPIWriter) updates(s *store.Store, statuses []*dag.Status) []gatewayUpdate {
	byRef := w.withDefaults(statuses)
	now := w.now()
	c := w.Client.GatewayV1()
	var out []gatewayUpdate
	for _, gc := range s.GatewayClasses {
		want := byRef[dag.ObjectRef{Kind: dag.KindGatewayClass, Name: gc.Name}]
		if want == nil || want.GatewayClass == nil || gc.Spec.ControllerName != dag.GatewayControllerName {
			continue
		}
		out = appendPlan(out, dag.KindGatewayClass, gc, func(o *gatewayv1.GatewayClass) bool {
			return setStatus(&o.Status, gatewayClassStatus(o.Status, *want.GatewayClass, o.Generation, now), o.Generation, classConds)
		}, c.GatewayClasses())
	}
	for _, gw := range s.Gateways {
		want := byRef[refOf(dag.KindGateway, gw)]
		if want == nil || want.Gateway == nil {
			continue
		}
		out = appendPlan(out, dag.KindGateway, gw, func(o *gatewayv1.Gateway) bool {
			return setStatus(&o.Status, gatewayStatus(o.Status, *want.Gateway, o.Generation, now), o.Generation, gatewayConds)
		}, c.Gateways(gw.Namespace))
	}
	for _, ls := range s.ListenerSets {
		want := byRef[refOf(dag.KindListenerSet, ls)]
		if want == nil || want.ListenerSet == nil {
			continue
		}
		out = appendPlan(out, dag.KindListenerSet, ls, func(o *gatewayv1.ListenerSet) bool {
			return setStatus(&o.Status, listenerSetStatus(o.Status, *want.ListenerSet, o.Generation, now), o.Generation, listenerSetConds)
		}, c.ListenerSets(ls.Namespace))
	}
	// Routes and policies without a build status lose Portico's entries: they no longer
	// attach to (or are used by) one of its Gateways.
	routeWant := func(kind string, o metav1.Object) []gatewayv1.RouteParentStatus {
		if want := byRef[refOf(kind, o)]; want != nil && want.Route != nil {
			return want.Route.Parents
		}
		return nil
	}
	for _, r := range s.HTTPRoutes {
		want := routeWant(dag.KindHTTPRoute, r)
		out = appendPlan(out, dag.KindHTTPRoute, r, func(o *gatewayv1.HTTPRoute) bool {
			return setParents(&o.Status.RouteStatus, want, o.Generation, now)
		}, c.HTTPRoutes(r.Namespace))
	}
	for _, r := range s.GRPCRoutes {
		want := routeWant(dag.KindGRPCRoute, r)
		out = appendPlan(out, dag.KindGRPCRoute, r, func(o *gatewayv1.GRPCRoute) bool {
			return setParents(&o.Status.RouteStatus, want, o.Generation, now)
		}, c.GRPCRoutes(r.Namespace))
	}
	for _, r := range s.TLSRoutes {
		want := routeWant(dag.KindTLSRoute, r)
		out = appendPlan(out, dag.KindTLSRoute, r, func(o *gatewayv1.TLSRoute) bool {
			return setParents(&o.Status.RouteStatus, want, o.Generation, now)
		}, c.TLSRoutes(r.Namespace))
	}
	for _, p := range s.BackendTLSPolicies {
		var want []gatewayv1.PolicyAncestorStatus
		if st := byRef[refOf(dag.KindBackendTLSPolicy, p)]; st != nil && st.Policy != nil {
			want = st.Policy.Ancestors
		}
		out = appendPlan(out, dag.KindBackendTLSPolicy, p, func(o *gatewayv1.BackendTLSPolicy) bool {
			return setAncestors(&o.Status, want, o.Generation, now)
		}, c.BackendTLSPolicies(p.Namespace))
	}
	return out
}

// withDefaults returns the Gateway API statuses by object, defaulted.
func (w *GatewayAPIWriter) withDefaults(statuses []*dag.Status) map[dag.ObjectRef]*dag.GatewayAPIStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	byRef := map[dag.ObjectRef]*dag.GatewayAPIStatus{}
	cache := make(map[*dag.GatewayAPIStatus]*dag.GatewayAPIStatus, len(w.defaulted))
	for _, st := range statuses {
		if st.GatewayAPI == nil {
			continue
		}
		d, ok := w.defaulted[st.GatewayAPI]
		if !ok {
			d = defaulted(st.GatewayAPI)
		}
		cache[st.GatewayAPI] = d
		byRef[st.Object] = d
	}
	w.defaulted = cache
	return byRef
}

// defaulted returns a copy of st with the CRDs' defaults applied, as the stored status
// will have them: without them, a status that did not change would look changed.
func defaulted(st *dag.GatewayAPIStatus) *dag.GatewayAPIStatus {
	out := &dag.GatewayAPIStatus{
		GatewayClass: st.GatewayClass.DeepCopy(),
		Gateway:      st.Gateway.DeepCopy(),
		ListenerSet:  st.ListenerSet.DeepCopy(),
		Route:        st.Route.DeepCopy(),
		Policy:       st.Policy.DeepCopy(),
	}
	manifest.DefaultGatewayAPI(out)
	return out
}

func refOf(kind string, o metav1.Object) dag.ObjectRef {
	return dag.ObjectRef{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName()}
}

// gatewayObject is a Gateway API object of kind T.
type gatewayObject[T any] interface {
	*T
	metav1.Object
	DeepCopy() *T
}

// statusClient reads an object of one kind and writes its status.
type statusClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error)
	UpdateStatus(ctx context.Context, obj *T, opts metav1.UpdateOptions) (*T, error)
}

// appendPlan appends the update of obj if plan, applied to a copy of it, changes its
// status.
func appendPlan[T any, P gatewayObject[T]](out []gatewayUpdate, kind string, obj P, plan func(P) bool, client statusClient[T]) []gatewayUpdate {
	u, ok := planUpdate(kind, obj, plan, client)
	if !ok {
		return out
	}
	return append(out, u)
}

func planUpdate[T any, P gatewayObject[T]](kind string, obj P, plan func(P) bool, client statusClient[T]) (gatewayUpdate, bool) {
	// plan replaces the status's slices rather than changing them: a shallow copy keeps
	// the cached object as it is, and costs nothing for the many objects left unchanged.
	next := P(new(T))
	*next = *obj
	if !plan(next) {
		return gatewayUpdate{}, false
	}
	// The cache keeps only some managed fields: sending them would rewrite the others.
	next.SetManagedFields(nil)
	u := gatewayUpdate{kind: kind, key: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	u.send = func(ctx context.Context) error {
		_, err := client.UpdateStatus(ctx, (*T)(next), metav1.UpdateOptions{FieldManager: kube.FieldManager})
		return err
	}
	u.again = func(ctx context.Context) (gatewayUpdate, error) {
		fresh, err := client.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return gatewayUpdate{}, err
		}
		again, _ := planUpdate(kind, P(fresh), plan, client)
		again.again = nil // one more try per sync; the next build retries further
		return again, nil
	}
	return u, true
}

// write sends u, and on a conflict (the object changed since it was read) plans it
// again on the object as it is now. It says whether the write is settled.
func (w *GatewayAPIWriter) write(ctx context.Context, u gatewayUpdate) bool {
	err := u.send(ctx)
	if apierrors.IsConflict(err) && u.again != nil {
		var again gatewayUpdate
		if again, err = u.again(ctx); err == nil {
			if again.send == nil {
				return true // the object as it is now needs no write
			}
			err = again.send(ctx)
		}
	}
	switch {
	case err == nil:
		if w.OnWrite != nil {
			w.OnWrite(u.kind)
		}
		return true
	case apierrors.IsNotFound(err) || ctx.Err() != nil:
		return true
	}
	w.Logger.Warn("writing status; will retry", "kind", u.kind, "object", u.key.String(), "err", err)
	return false
}

// setStatus replaces *cur by next unless next says nothing new, or a condition of cur
// was observed at a later generation than the object read (a stale cache: the update
// that follows will bring the new generation). It reports whether *cur changed.
func setStatus[S any](cur *S, next S, generation int64, conds func(*S) [][]metav1.Condition) bool {
	for _, cs := range conds(cur) {
		if newerThan(cs, generation) {
			return false
		}
	}
	if equality.Semantic.DeepEqual(*cur, next) {
		return false
	}
	*cur = next
	return true
}

func classConds(s *gatewayv1.GatewayClassStatus) [][]metav1.Condition {
	return [][]metav1.Condition{s.Conditions}
}

func gatewayConds(s *gatewayv1.GatewayStatus) [][]metav1.Condition {
	out := [][]metav1.Condition{s.Conditions}
	for _, l := range s.Listeners {
		out = append(out, l.Conditions)
	}
	return out
}

func listenerSetConds(s *gatewayv1.ListenerSetStatus) [][]metav1.Condition {
	out := [][]metav1.Condition{s.Conditions}
	for _, l := range s.Listeners {
		out = append(out, l.Conditions)
	}
	return out
}

func newerThan(conds []metav1.Condition, generation int64) bool {
	for _, c := range conds {
		if c.ObservedGeneration > generation {
			return true
		}
	}
	return false
}

// mergeConditions returns want's conditions as the object should carry them: with
// observedGeneration set to generation, the lastTransitionTime of the same condition in
// prev when its status did not change (else now), and the conditions of prev that
// another party set (a type with a domain prefix, not one of the API's) kept after them.
func mergeConditions(prev, want []metav1.Condition, generation int64, now metav1.Time) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(want))
	for _, c := range want {
		c.ObservedGeneration = generation
		c.Message = truncateMessage(c.Message)
		c.LastTransitionTime = now
		if old := meta.FindStatusCondition(prev, c.Type); old != nil && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		out = append(out, c)
	}
	for _, c := range prev {
		if strings.Contains(c.Type, "/") && meta.FindStatusCondition(want, c.Type) == nil {
			out = append(out, c)
		}
	}
	return out
}

func gatewayClassStatus(prev, want gatewayv1.GatewayClassStatus, generation int64, now metav1.Time) gatewayv1.GatewayClassStatus {
	want.Conditions = mergeConditions(prev.Conditions, want.Conditions, generation, now)
	return want
}

func gatewayStatus(prev, want gatewayv1.GatewayStatus, generation int64, now metav1.Time) gatewayv1.GatewayStatus {
	want.Conditions = mergeConditions(prev.Conditions, want.Conditions, generation, now)
	listeners := make([]gatewayv1.ListenerStatus, len(want.Listeners))
	for i, l := range want.Listeners {
		var old []metav1.Condition
		for _, p := range prev.Listeners {
			if p.Name == l.Name {
				old = p.Conditions
			}
		}
		l.Conditions = mergeConditions(old, l.Conditions, generation, now)
		listeners[i] = l
	}
	want.Listeners = listeners
	return want
}

func listenerSetStatus(prev, want gatewayv1.ListenerSetStatus, generation int64, now metav1.Time) gatewayv1.ListenerSetStatus {
	want.Conditions = mergeConditions(prev.Conditions, want.Conditions, generation, now)
	listeners := make([]gatewayv1.ListenerEntryStatus, len(want.Listeners))
	for i, l := range want.Listeners {
		var old []metav1.Condition
		for _, p := range prev.Listeners {
			if p.Name == l.Name {
				old = p.Conditions
			}
		}
		l.Conditions = mergeConditions(old, l.Conditions, generation, now)
		listeners[i] = l
	}
	want.Listeners = listeners
	return want
}

// setParents replaces Portico's entries of a route's status.parents by want (the
// build's, all Portico's), keeping the entries of other controllers where they are, and
// reports whether the status changed.
func setParents(cur *gatewayv1.RouteStatus, want []gatewayv1.RouteParentStatus, generation int64, now metav1.Time) bool {
	next := make([]gatewayv1.RouteParentStatus, 0, len(cur.Parents)+len(want))
	for _, p := range cur.Parents {
		if p.ControllerName != dag.GatewayControllerName {
			next = append(next, p)
		} else if newerThan(p.Conditions, generation) {
			return false
		}
	}
	for _, w := range want {
		var old []metav1.Condition
		for _, p := range cur.Parents {
			if p.ControllerName == dag.GatewayControllerName && sameParentRef(p.ParentRef, w.ParentRef) {
				old = p.Conditions
			}
		}
		w.ControllerName = dag.GatewayControllerName
		w.Conditions = mergeConditions(old, w.Conditions, generation, now)
		next = append(next, w)
	}
	if slices.EqualFunc(cur.Parents, next, func(a, b gatewayv1.RouteParentStatus) bool {
		return a.ControllerName == b.ControllerName && sameParentRef(a.ParentRef, b.ParentRef) && sameConditions(a.Conditions, b.Conditions)
	}) {
		return false
	}
	cur.Parents = next
	return true
}

// setAncestors is setParents for a policy's status.ancestors.
func setAncestors(cur *gatewayv1.PolicyStatus, want []gatewayv1.PolicyAncestorStatus, generation int64, now metav1.Time) bool {
	next := make([]gatewayv1.PolicyAncestorStatus, 0, len(cur.Ancestors)+len(want))
	for _, a := range cur.Ancestors {
		if a.ControllerName != dag.GatewayControllerName {
			next = append(next, a)
		} else if newerThan(a.Conditions, generation) {
			return false
		}
	}
	for _, w := range want {
		var old []metav1.Condition
		for _, a := range cur.Ancestors {
			if a.ControllerName == dag.GatewayControllerName && sameParentRef(a.AncestorRef, w.AncestorRef) {
				old = a.Conditions
			}
		}
		w.ControllerName = dag.GatewayControllerName
		w.Conditions = mergeConditions(old, w.Conditions, generation, now)
		next = append(next, w)
	}
	if slices.EqualFunc(cur.Ancestors, next, func(a, b gatewayv1.PolicyAncestorStatus) bool {
		return a.ControllerName == b.ControllerName && sameParentRef(a.AncestorRef, b.AncestorRef) && sameConditions(a.Conditions, b.Conditions)
	}) {
		return false
	}
	cur.Ancestors = next
	return true
}

// sameParentRef compares two references field by field: routes are many, and the
// reflection of a generic comparison was most of the cost of a sync that writes nothing.
func sameParentRef(a, b gatewayv1.ParentReference) bool {
	return a.Name == b.Name && samePtr(a.Group, b.Group) && samePtr(a.Kind, b.Kind) && samePtr(a.Namespace, b.Namespace) &&
		samePtr(a.SectionName, b.SectionName) && samePtr(a.Port, b.Port)
}

func samePtr[T comparable](a, b *T) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// sameConditions reports whether two lists hold the same conditions in the same order
// (transition times to the second, as the API keeps them).
func sameConditions(a, b []metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message &&
			x.ObservedGeneration == y.ObservedGeneration && x.LastTransitionTime.Equal(&y.LastTransitionTime)
	})
}
