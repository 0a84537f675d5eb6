package app

import (
	"log/slog"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
)

// keptNote ends the status of an object whose edit made it invalid while its previous
// version keeps serving.
const keptNote = "The previous valid version of this object is still served; fix this version, or delete the object to stop serving it."

// LastValid makes one team's bad edit harmless in `portico run`, where no admission
// webhook stands between a file and the controller: an object that was valid and whose
// new version is invalid keeps serving its last valid version, and its status says both
// what is wrong with the new version and that the previous one is still served.
//
// It only ever undoes an object's own edit, whatever made the new version invalid (a
// typo, or a host that conflicts with another object's): the substitute is the version
// the previous build served. An object that turns invalid with no edit of its own
// (others changed), or that is not served, is built as it is. Deleting an object removes
// its routes, last valid version included.
// Not safe for concurrent use; the pipeline calls it from one goroutine.
type LastValid struct {
	valid   map[dag.ObjectRef]runtime.Object // the last version of each object built valid
	present map[dag.ObjectRef]bool           // routing objects of the previous build
	// served are the previous versions serving in place of invalid current ones.
	served map[dag.ObjectRef]runtime.Object
	log    *slog.Logger
}

// NewLastValid returns a LastValid that logs removed objects to log.
func NewLastValid(log *slog.Logger) *LastValid {
	return &LastValid{valid: map[dag.ObjectRef]runtime.Object{}, present: map[dag.ObjectRef]bool{},
		served: map[dag.ObjectRef]runtime.Object{}, log: log}
}

// Served returns the previous versions that the last Build served in place of objects
// whose edit made them invalid, in the order of their references: what Restore needs
// after a restart for the same objects to be served.
func (k *LastValid) Served() []runtime.Object {
	if len(k.served) == 0 {
		return nil
	}
	refs := slices.SortedFunc(maps.Keys(k.served), dag.CompareObjectRefs)
	out := make([]runtime.Object, len(refs))
	for i, ref := range refs {
		out[i] = k.served[ref]
	}
	return out
}

// Restore makes objs (Ingresses, IngressRoutes, HTTPProxies, Gateway API objects) the last valid versions of
// their objects, before the first Build: an object whose current version is invalid
// then, and differs from its version here, is served as it is here, as if it had been
// edited while running. Restore is for a restart; other objects are ignored.
func (k *LastValid) Restore(objs []runtime.Object) {
	for _, o := range objs {
		if ref, ok := dag.RefOf(o); ok {
			k.valid[ref] = o
		}
	}
}

// Builder builds graphs for LastValid: dag.Incremental, or FullBuilder.
type Builder interface {
	Build(*store.Store) *dag.Graph
	// Touched returns the objects whose status or version the last Build may have
	// changed since the one before (added, edited, removed, or rebuilt with them), or
	// all=true when anything may have.
	Touched() (refs []dag.ObjectRef, all bool)
}

// FullBuilder builds every graph whole with dag.Build.
type FullBuilder struct{ Options dag.Options }

// Build returns dag.Build(s, b.Options), Gateway API included.
func (b FullBuilder) Build(s *store.Store) *dag.Graph { return dag.Build(s, withGatewayAPI(b.Options)) }

// Touched says that anything may have changed.
func (FullBuilder) Touched() ([]dag.ObjectRef, bool) { return nil, true }

// Build builds s with b, with the last valid version of each object whose current
// version is invalid. Its work is in proportion to the objects b says it touched.
func (k *LastValid) Build(s *store.Store, b Builder) *dag.Graph {
	g := b.Build(s)
	sc := newScope(b)
	k.noteRemoved(g, sc)
	kept := k.substitutes(s, g, sc)
	final := g
	// The previous version can itself be invalid now (a newer object took its host, a
	// Secret it needs went away): such an object is served as it is, and the build is
	// repeated without it. Each round drops at least one, so this ends.
	for len(kept) > 0 {
		final = b.Build(withObjects(s, kept))
		sc.add(b)
		dropped := false
		for _, st := range final.Statuses {
			if _, ok := kept[st.Object]; ok && st.Status != dag.StatusValid {
				delete(kept, st.Object)
				dropped = true
			}
		}
		if !dropped {
			break
		}
		if len(kept) == 0 {
			final = g
		}
	}
	if final != g {
		final = markKept(final, g, kept)
	}
	k.remember(s, final, kept, sc)
	return final
}

// substitutes returns the last valid version of each object that g found invalid and
// that changed since it was last valid.
func (k *LastValid) substitutes(s *store.Store, g *dag.Graph, sc *scope) map[dag.ObjectRef]runtime.Object {
	var kept map[dag.ObjectRef]runtime.Object
	for _, st := range sc.statuses(g) {
		if st.Status != dag.StatusInvalid {
			continue
		}
		prev, ok := k.valid[st.Object]
		if !ok {
			continue
		}
		cur := lookup(s, st.Object)
		if cur == nil || equality.Semantic.DeepEqual(cur, prev) {
			// The very version that was valid is invalid now: because of other objects,
			// so nothing earlier can help.
			continue
		}
		if kept == nil {
			kept = map[dag.ObjectRef]runtime.Object{}
		}
		kept[st.Object] = prev
	}
	return kept
}

// markKept returns the graph built with the kept objects' previous versions, each kept
// object given the status its current version got (invalid, and why), noting that the
// previous one serves.
func markKept(built, current *dag.Graph, kept map[dag.ObjectRef]runtime.Object) *dag.Graph {
	// The builder may keep the graph it returned (an incremental one does): change a copy.
	final := &dag.Graph{HTTP: built.HTTP, HTTPS: built.HTTPS, Gateways: built.Gateways, Statuses: slices.Clone(built.Statuses)}
	why := map[dag.ObjectRef]*dag.Status{}
	for _, st := range current.Statuses {
		if _, ok := kept[st.Object]; ok {
			why[st.Object] = st
		}
	}
	for i, st := range final.Statuses {
		if w, ok := why[st.Object]; ok {
			// The built graph's status may be shared with other graphs: replace, not modify.
			marked := *st
			marked.Status = dag.StatusInvalid
			marked.Description = keptDescription(w.Description)
			marked.Errors = w.Errors
			marked.GatewayAPI = w.GatewayAPI // the conditions say what is wrong with this version
			// Hosts stay those the previous version serves: they are still answered.
			final.Statuses[i] = &marked
		}
	}
	return final
}

// keptDescription is the status of an object whose invalid edit is not served while its
// previous version is: what is wrong with the edit, then that the previous one serves.
func keptDescription(why string) string {
	why = strings.TrimSuffix(strings.TrimPrefix(why, "not served: "), ".")
	return "this version is not served: " + why + ". " + keptNote
}

// remember records the current version of every object built valid and forgets every
// object that is not served now: gone, ignored (another class), orphaned or invalid. A
// version is only ever kept while it is the one serving, never brought back after a
// time off the air.
func (k *LastValid) remember(s *store.Store, final *dag.Graph, kept map[dag.ObjectRef]runtime.Object, sc *scope) {
	for _, st := range sc.statuses(final) {
		if prev, ok := kept[st.Object]; ok {
			k.served[st.Object] = prev
			continue
		}
		delete(k.served, st.Object)
		cur := lookup(s, st.Object)
		if st.Status != dag.StatusValid || cur == nil {
			delete(k.valid, st.Object)
			continue
		}
		k.valid[st.Object] = cur
	}
	forget := func(ref dag.ObjectRef) {
		if !k.present[ref] {
			delete(k.valid, ref)
			delete(k.served, ref)
		}
	}
	if sc.all {
		for ref := range k.valid {
			forget(ref)
		}
		for ref := range k.served {
			forget(ref)
		}
		return
	}
	for ref := range sc.refs {
		forget(ref)
	}
}

// noteRemoved logs each routing object of the previous build that g no longer has (a
// build gives every routing object a status): its routes, including any last valid
// version, are gone.
func (k *LastValid) noteRemoved(g *dag.Graph, sc *scope) {
	if sc.all {
		now := make(map[dag.ObjectRef]bool, len(g.Statuses))
		for _, st := range g.Statuses {
			now[st.Object] = true
		}
		for ref := range k.present {
			if !now[ref] {
				k.logRemoved(ref)
			}
		}
		k.present = now
		return
	}
	for ref := range sc.refs {
		switch has := hasStatus(g, ref); {
		case has:
			k.present[ref] = true
		case k.present[ref]:
			k.logRemoved(ref)
			delete(k.present, ref)
		}
	}
}

// logRemoved says that ref is gone, and that its routes are too if it was served (it has
// a last valid version until remember forgets it): an object that was never served
// takes no route with it.
func (k *LastValid) logRemoved(ref dag.ObjectRef) {
	if _, served := k.valid[ref]; served {
		k.log.Info("object removed; its routes are no longer served", "object", ref.String())
		return
	}
	k.log.Info("object removed", "object", ref.String())
}

// scope is what one LastValid.Build looks at: every status, or those of the objects
// its builds touched (an object they did not touch has the status and version it had).
type scope struct {
	all  bool
	refs map[dag.ObjectRef]struct{}
}

func newScope(b Builder) *scope {
	sc := &scope{refs: map[dag.ObjectRef]struct{}{}}
	sc.add(b)
	return sc
}

// add widens the scope by what b's last build touched.
func (sc *scope) add(b Builder) {
	refs, all := b.Touched()
	sc.all = sc.all || all
	for _, r := range refs {
		sc.refs[r] = struct{}{}
	}
}

// statuses returns the statuses of g in the scope.
func (sc *scope) statuses(g *dag.Graph) []*dag.Status {
	if sc.all {
		return g.Statuses
	}
	var out []*dag.Status
	for ref := range sc.refs {
		out = append(out, dag.StatusesOf(g.Statuses, ref)...)
	}
	return out
}

func hasStatus(g *dag.Graph, ref dag.ObjectRef) bool { return len(dag.StatusesOf(g.Statuses, ref)) > 0 }

// lookup returns the routing object ref names in s, or nil.
func lookup(s *store.Store, ref dag.ObjectRef) runtime.Object {
	nn := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	switch ref.Kind {
	case dag.KindIngress:
		if o, ok := s.Ingresses[nn]; ok {
			return o
		}
	case dag.KindIngressRoute:
		if o, ok := s.IngressRoutes[nn]; ok {
			return o
		}
	case dag.KindHTTPProxy:
		if o, ok := s.HTTPProxies[nn]; ok {
			return o
		}
	case dag.KindGatewayClass:
		if o, ok := s.GatewayClasses[ref.Name]; ok {
			return o
		}
	case dag.KindGateway:
		return found(s.Gateways, nn)
	case dag.KindListenerSet:
		return found(s.ListenerSets, nn)
	case dag.KindHTTPRoute:
		return found(s.HTTPRoutes, nn)
	case dag.KindGRPCRoute:
		return found(s.GRPCRoutes, nn)
	case dag.KindTLSRoute:
		return found(s.TLSRoutes, nn)
	case dag.KindBackendTLSPolicy:
		return found(s.BackendTLSPolicies, nn)
	case dag.KindExtensionService:
		return found(s.ExtensionServices, nn)
	}
	return nil
}

// found returns m's object for nn, or nil (not a nil pointer of the object's type).
func found[T runtime.Object](m map[types.NamespacedName]T, nn types.NamespacedName) runtime.Object {
	if o, ok := m[nn]; ok {
		return o
	}
	return nil
}

// withObjects returns a copy of s in which objs replace the objects of the same names;
// s itself is left as it is.
func withObjects(s *store.Store, objs map[dag.ObjectRef]runtime.Object) *store.Store {
	c := *s
	c.Ingresses = maps.Clone(s.Ingresses)
	c.IngressRoutes = maps.Clone(s.IngressRoutes)
	c.HTTPProxies = maps.Clone(s.HTTPProxies)
	c.GatewayClasses = maps.Clone(s.GatewayClasses)
	c.Gateways = maps.Clone(s.Gateways)
	c.ListenerSets = maps.Clone(s.ListenerSets)
	c.HTTPRoutes = maps.Clone(s.HTTPRoutes)
	c.GRPCRoutes = maps.Clone(s.GRPCRoutes)
	c.TLSRoutes = maps.Clone(s.TLSRoutes)
	c.BackendTLSPolicies = maps.Clone(s.BackendTLSPolicies)
	for _, o := range objs {
		c.Upsert(o)
	}
	return &c
}
