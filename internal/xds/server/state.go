package server

import (
	"fmt"
	"sync"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// The published sets, in the order go-control-plane answers ADS watches (clusters and
// their endpoints before the listeners and routes that use them). vhostIdx and
// vhdsRouteIdx are derived from the translator's route configurations for VHDS
// clients (see vhds.go): the VirtualHost resources, and the route configurations as
// those clients see them, served under the RouteConfiguration type in place of
// routeIdx's; the others are what the translator publishes.
const (
	clusterIdx = iota
	endpointIdx
	listenerIdx
	routeIdx
	vhostIdx
	secretIdx
	vhdsRouteIdx
	numTypes
)

var typeURLs = [numTypes]string{
	clusterIdx:   resource.ClusterType,
	endpointIdx:  resource.EndpointType,
	listenerIdx:  resource.ListenerType,
	routeIdx:     resource.RouteType,
	vhostIdx:     resource.VirtualHostType,
	secretIdx:    resource.SecretType,
	vhdsRouteIdx: resource.RouteType,
}

// typeIndex maps a type URL to its index as served to a client that is not a VHDS
// client, numTypes for a type never published.
func typeIndex(typeURL string) int {
	for i, u := range typeURLs {
		if u == typeURL {
			return i
		}
	}
	return numTypes
}

// typeSet is the published resources of one type. It is never modified once part of a
// published snapshot: the next one shares what did not change (see resourceSet), so a
// type that did not change is shared between snapshots at no cost.
type typeSet struct {
	// version is the type's version: the snapshot version of the publish that last
	// changed it. A SotW client is sent a type again only when it changes.
	version string
	// order is the slice it was built from: when the next Publish passes the same
	// pointers at the same positions, they are unchanged without a map lookup.
	order []types.Resource
	// set holds the resources by name, which delta responses are built from, with
	// their versions: a hash of the deterministic marshalling, so equal content has an
	// equal version across rebuilds and server restarts, and delta clients are sent
	// only what changed.
	set *resourceSet

	// withTTL is what SotW responses are built from, made on first use: a server
	// with delta clients only never needs it.
	withTTLOnce sync.Once
	withTTL     map[string]types.ResourceWithTTL
}

var emptyTypeSet = &typeSet{set: emptyResourceSet}

func (ts *typeSet) sotw() map[string]types.ResourceWithTTL {
	ts.withTTLOnce.Do(func() {
		resources := ts.set.flatten().resources
		ts.withTTL = make(map[string]types.ResourceWithTTL, len(resources))
		for name, r := range resources {
			ts.withTTL[name] = types.ResourceWithTTL{Resource: r}
		}
	})
	return ts.withTTL
}

// diff is what changed in one type between two typeSets.
type diff struct {
	changed []types.Resource // new or with new content
	removed []string
}

func (d diff) empty() bool { return len(d.changed) == 0 && len(d.removed) == 0 }

// next returns the typeSet holding items, sharing prev when nothing changed, and
// stamped with version when something did. A resource whose pointer is the one prev
// holds under its name is unchanged without further work; any other one is hashed,
// so an equal rebuild still changes nothing, unless byIdentity says that a new pointer
// is new content (see Server.VersionByIdentity): it is then versioned by the publish.
func (prev *typeSet) next(items []types.Resource, version string, byIdentity bool) (*typeSet, diff, error) {
	if samePointers(prev.order, items) {
		return prev, diff{}, nil
	}
	c := prev.change(version, byIdentity)
	seen := 0
	// j follows items through prev.order, so that a resource added or removed
	// does not shift every later one out of place (a new cluster sorts in among
	// 10,000): a resource is unchanged without a lookup when it is the one prev
	// has at j, or at j+1 after one prev resource that is gone or replaced.
	j := 0
	for _, r := range items {
		if j < len(prev.order) && prev.order[j] == r {
			seen++
			j++
			continue
		}
		if j+1 < len(prev.order) && prev.order[j+1] == r {
			seen++
			j += 2
			continue
		}
		known, err := c.add(r)
		if err != nil {
			return nil, diff{}, err
		}
		if known {
			seen++
		}
	}
	// Names are unique in a publish (the translator's contract), so every previous
	// name was seen exactly when none was removed.
	var removed []string
	if seen != prev.set.len() {
		removed = removedNames(prev.set, items)
	}
	ts, d := c.done(removed)
	ts.order = items
	return ts, d, nil
}

// nextByDiff is next for a publish given as what differs from prev: the resources
// that may have changed, and the names of those removed.
func (prev *typeSet) nextByDiff(changed []types.Resource, removed []string, version string, byIdentity bool) (*typeSet, diff, error) {
	if len(changed) == 0 && len(removed) == 0 && prev.version != "" {
		return prev, diff{}, nil
	}
	c := prev.change(version, byIdentity)
	for _, r := range changed {
		if _, err := c.add(r); err != nil {
			return nil, diff{}, err
		}
	}
	ts, d := c.done(removed)
	return ts, d, nil
}

// typeChange gathers what a publish changes in a typeSet.
type typeChange struct {
	prev       *typeSet
	version    string
	byIdentity bool
	d          diff
	stored     []*encoded // the changed resources, and equal ones under a new pointer
	versions   map[string]string
}

func (prev *typeSet) change(version string, byIdentity bool) *typeChange {
	return &typeChange{prev: prev, version: version, byIdentity: byIdentity, versions: map[string]string{}}
}

// add notes r, a resource of the publish other than the one prev has at its
// position, and reports whether prev has its name.
func (c *typeChange) add(r types.Resource) (known bool, err error) {
	name := cachev3.GetResourceName(r)
	old, known := c.prev.set.get(name)
	if known && old.resource.Resource == r {
		return true, nil
	}
	if _, dup := c.versions[name]; dup {
		return known, fmt.Errorf("%s %q: published twice", shortType(typeURLOf(r)), name)
	}
	e := encode(r, old.resource)
	v := c.version
	if !c.byIdentity {
		if v, err = resourceVersion(e); err != nil {
			return known, fmt.Errorf("%s %q: %w", shortType(typeURLOf(r)), name, err)
		}
	}
	c.versions[name] = v
	// Equal resources under new pointers are stored too, so that the next
	// Publish, which passes those pointers, finds them without hashing.
	c.stored = append(c.stored, e)
	if !known || old.version != v {
		c.d.changed = append(c.d.changed, r)
	}
	return known, nil
}

// done returns the typeSet with what was added, and removed (names prev has).
func (c *typeChange) done(removed []string) (*typeSet, diff) {
	c.d.removed = removed
	ts := c.prev.apply(c.stored, removed, c.versions)
	if !c.d.empty() || c.prev.version == "" {
		// A type is stamped at its first publish even when empty: a SotW client
		// must get an answer to complete its initialisation.
		ts.version = c.version
	}
	return ts, c.d
}

// apply returns a copy of prev with the changed resources (of the versions given by
// name) set and the removed names gone.
func (prev *typeSet) apply(changed []*encoded, removed []string, versions map[string]string) *typeSet {
	if len(changed) == 0 && len(removed) == 0 {
		return &typeSet{version: prev.version, set: prev.set}
	}
	return &typeSet{version: prev.version, set: prev.set.with(changed, versions, removed)}
}

// restore returns a copy of ts in which the named resources of prev are present again.
func (ts *typeSet) restore(prev *typeSet, names []string) *typeSet {
	var changed []*encoded
	versions := make(map[string]string, len(names))
	for _, name := range names {
		old, _ := prev.set.get(name)
		changed = append(changed, old.resource)
		versions[name] = old.version
	}
	return ts.apply(changed, nil, versions) // order stays nil: not a slice any Publish passed
}

func samePointers(a, b []types.Resource) bool {
	if len(a) != len(b) || a == nil {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func removedNames(prev *resourceSet, items []types.Resource) []string {
	present := make(map[string]struct{}, len(items))
	for _, r := range items {
		present[cachev3.GetResourceName(r)] = struct{}{}
	}
	var out []string
	for name := range prev.names {
		if _, ok := present[name]; !ok {
			out = append(out, name)
		}
	}
	return out
}

// resourceVersion is a resource's content hash, computed as go-control-plane computes the
// version it sends with the resource, from the encoding it sends (so a reconnecting
// client's initial_resource_versions match): equal content has an equal version across
// rebuilds and server restarts.
func resourceVersion(e *encoded) (string, error) {
	b, err := e.encoding()
	if err != nil {
		return "", err
	}
	return cachev3.HashResource(b), nil
}

// references lists the names r references in another type, as go-control-plane's
// consistency check sees them.
func references(r types.Resource) []string {
	var out []string
	for _, names := range cachev3.GetResourceReferences(map[string]types.ResourceWithTTL{"": {Resource: r}}) {
		for n := range names {
			out = append(out, n)
		}
	}
	return out
}

func typeURLOf(r types.Resource) string {
	return resource.APITypePrefix + string(r.ProtoReflect().Descriptor().FullName())
}

// refIndex follows the references from one type to another (clusters to their EDS
// names, listeners to their RDS names) across publishes, so that consistency is
// checked on what changed only. It belongs to the Server, under its lock.
type refIndex struct {
	from, to int
	refs     map[string][]string // referring resource -> the names it references
	count    map[string]int      // referenced name -> how many references it has
}

func newRefIndex(from, to int) *refIndex {
	return &refIndex{from: from, to: to, refs: map[string][]string{}, count: map[string]int{}}
}

// update applies the referring type's diff and checks what go-control-plane's
// Snapshot.Consistent checks, for the names that changed: every referenced resource
// of the target type exists in next, and every one in next is referenced. On error
// the index is left as it was; otherwise revert undoes the update.
func (x *refIndex) update(diffs [numTypes]diff, next *state) (revert func(), err error) {
	from, to := diffs[x.from], diffs[x.to]
	if from.empty() && to.empty() {
		return func() {}, nil
	}
	type undo struct {
		name string
		refs []string
		had  bool
	}
	var undos []undo
	revert = func() {
		for i := len(undos) - 1; i >= 0; i-- {
			u := undos[i]
			x.count = x.adjust(x.refs[u.name], -1, nil)
			delete(x.refs, u.name)
			if u.had {
				x.refs[u.name] = u.refs
			}
			x.count = x.adjust(u.refs, 1, nil)
		}
	}
	touched := map[string]struct{}{}
	set := func(name string, refs []string) {
		old, had := x.refs[name]
		undos = append(undos, undo{name, old, had})
		x.count = x.adjust(old, -1, touched)
		if len(refs) > 0 {
			x.refs[name] = refs
		} else {
			delete(x.refs, name)
		}
		x.count = x.adjust(refs, 1, touched)
	}
	for _, r := range from.changed {
		set(cachev3.GetResourceName(r), references(r))
	}
	for _, name := range from.removed {
		set(name, nil)
	}
	for _, r := range to.changed {
		touched[cachev3.GetResourceName(r)] = struct{}{}
	}
	for _, name := range to.removed {
		touched[name] = struct{}{}
	}
	targets := next.set(x.to).set
	for name := range touched {
		_, present := targets.get(name)
		referenced := x.count[name] > 0
		if present == referenced {
			continue
		}
		revert()
		if present {
			return nil, fmt.Errorf("%s %q is published but not referenced", shortType(typeURLs[x.to]), name)
		}
		return nil, fmt.Errorf("%s %q is referenced but not published", shortType(typeURLs[x.to]), name)
	}
	return revert, nil
}

// adjust adds delta to the count of each name, noting it in touched when not nil.
func (x *refIndex) adjust(names []string, delta int, touched map[string]struct{}) map[string]int {
	for _, n := range names {
		x.count[n] += delta
		if x.count[n] == 0 {
			delete(x.count, n)
		}
		if touched != nil {
			touched[n] = struct{}{}
		}
	}
	return x.count
}

// state is every type's published set. The zero value is an empty state.
type state [numTypes]*typeSet

func (s *state) set(i int) *typeSet {
	if s[i] == nil {
		return emptyTypeSet
	}
	return s[i]
}

// inputs orders res like the type indexes; the derived sets have none.
func inputs(res *translate.Resources) [numTypes][]types.Resource {
	return [numTypes][]types.Resource{
		clusterIdx:  res.Clusters,
		endpointIdx: res.Endpoints,
		listenerIdx: res.Listeners,
		routeIdx:    res.Routes,
		secretIdx:   res.Secrets,
	}
}

// snapshot is one published state, as go-control-plane's snapshot cache reads it:
// per-type versions (SotW clients are sent the types that changed) and the
// per-resource versions kept by Publish, instead of hashing every resource of every
// snapshot as cachev3.Snapshot does. Delta clients are answered by the deltaCache,
// from the state itself; the per-resource maps serve the snapshot cache's own delta
// watches, which the tests compare the deltaCache with.
type snapshot struct {
	sets state
}

var _ cachev3.ResourceSnapshot = (*snapshot)(nil)

func (s *snapshot) typeSet(typeURL string) *typeSet {
	i := typeIndex(typeURL)
	if i == numTypes {
		return nil
	}
	return s.sets.set(i)
}

// GetVersion implements cachev3.ResourceSnapshot.
func (s *snapshot) GetVersion(typeURL string) string {
	if ts := s.typeSet(typeURL); ts != nil {
		return ts.version
	}
	return ""
}

// GetResourcesAndTTL implements cachev3.ResourceSnapshot.
func (s *snapshot) GetResourcesAndTTL(typeURL string) map[string]types.ResourceWithTTL {
	if ts := s.typeSet(typeURL); ts != nil {
		return ts.sotw()
	}
	return nil
}

// GetResources implements cachev3.ResourceSnapshot.
func (s *snapshot) GetResources(typeURL string) map[string]types.Resource {
	if ts := s.typeSet(typeURL); ts != nil {
		return ts.set.flatten().resources
	}
	return nil
}

// ConstructVersionMap implements cachev3.ResourceSnapshot: the versions are kept
// up to date by Publish.
func (s *snapshot) ConstructVersionMap() error { return nil }

// GetVersionMap implements cachev3.ResourceSnapshot.
func (s *snapshot) GetVersionMap(typeURL string) map[string]string {
	if ts := s.typeSet(typeURL); ts != nil {
		return ts.set.flatten().versions
	}
	return nil
}

// restamped returns ts under another version.
func (ts *typeSet) restamped(version string) *typeSet {
	return &typeSet{version: version, order: ts.order, set: ts.set}
}
