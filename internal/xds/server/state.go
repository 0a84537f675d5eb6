package server

import (
	"fmt"
	"maps"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// The published types, in the order go-control-plane answers ADS watches (clusters and
// their endpoints before the listeners and routes that use them).
const (
	clusterIdx = iota
	endpointIdx
	listenerIdx
	routeIdx
	secretIdx
	numTypes
)

var typeURLs = [numTypes]string{
	clusterIdx:  resource.ClusterType,
	endpointIdx: resource.EndpointType,
	listenerIdx: resource.ListenerType,
	routeIdx:    resource.RouteType,
	secretIdx:   resource.SecretType,
}

// typeIndex maps a type URL to its index, numTypes for a type never published.
func typeIndex(typeURL string) int {
	for i, u := range typeURLs {
		if u == typeURL {
			return i
		}
	}
	return numTypes
}

// typeSet is the published resources of one type. It is never modified once part of a
// published snapshot: the next one clones what changes (copy on write), so a type that
// did not change is shared between snapshots at no cost.
type typeSet struct {
	// order is the slice it was built from: when the next Publish passes the same
	// pointers in the same order, the type is unchanged without a map lookup.
	order     []types.Resource
	withTTL   map[string]types.ResourceWithTTL // what SotW responses are built from
	resources map[string]types.Resource        // what delta responses are built from
	// versions are per resource: a hash of the deterministic marshalling, so equal
	// content has an equal version across rebuilds and server restarts, and delta
	// clients are sent only what changed.
	versions map[string]string
	// refs are the names each resource references in another type (a cluster's EDS
	// name, a listener's RDS names), kept to check consistency without re-reading
	// unchanged resources.
	refs map[string][]string
}

var emptyTypeSet = &typeSet{
	withTTL:   map[string]types.ResourceWithTTL{},
	resources: map[string]types.Resource{},
	versions:  map[string]string{},
	refs:      map[string][]string{},
}

// diff is what changed in one type between two typeSets.
type diff struct {
	changed []types.Resource // new or with new content
	removed []string
}

func (d diff) empty() bool { return len(d.changed) == 0 && len(d.removed) == 0 }

// next returns the typeSet holding items, sharing prev when nothing changed. A resource
// whose pointer is the one prev holds under its name is unchanged without further
// work; any other one is hashed, so an equal rebuild still changes nothing.
func (prev *typeSet) next(items []types.Resource) (*typeSet, diff, error) {
	if samePointers(prev.order, items) {
		return prev, diff{}, nil
	}
	var d diff
	var repointed []types.Resource // equal content under a new pointer
	versions := make(map[string]string)
	seen := 0
	for _, r := range items {
		name := cachev3.GetResourceName(r)
		old, known := prev.resources[name]
		if known {
			seen++
			if old == r {
				continue
			}
		}
		if _, dup := versions[name]; dup {
			return nil, diff{}, fmt.Errorf("%s %q: published twice", shortType(typeURLOf(r)), name)
		}
		v, err := version(r)
		if err != nil {
			return nil, diff{}, fmt.Errorf("%s %q: %w", shortType(typeURLOf(r)), name, err)
		}
		versions[name] = v
		if known && prev.versions[name] == v {
			repointed = append(repointed, r)
			continue
		}
		d.changed = append(d.changed, r)
	}
	if seen < len(prev.resources) {
		d.removed = removedNames(prev.resources, items)
	}
	// Equal resources under new pointers are stored too, so that the next Publish,
	// which passes those pointers, finds them without hashing.
	ts := prev.apply(diff{changed: append(repointed, d.changed...), removed: d.removed}, versions)
	ts.order = items
	return ts, d, nil
}

// apply returns a copy of prev with d applied; versions holds the changed resources'.
func (prev *typeSet) apply(d diff, versions map[string]string) *typeSet {
	ts := &typeSet{
		withTTL:   maps.Clone(prev.withTTL),
		resources: maps.Clone(prev.resources),
		versions:  maps.Clone(prev.versions),
		refs:      maps.Clone(prev.refs),
	}
	for _, r := range d.changed {
		name := cachev3.GetResourceName(r)
		ts.withTTL[name] = types.ResourceWithTTL{Resource: r}
		ts.resources[name] = r
		ts.versions[name] = versions[name]
		if refs := references(r); len(refs) > 0 {
			ts.refs[name] = refs
		} else {
			delete(ts.refs, name)
		}
	}
	for _, name := range d.removed {
		delete(ts.withTTL, name)
		delete(ts.resources, name)
		delete(ts.versions, name)
		delete(ts.refs, name)
	}
	return ts
}

// restore returns a copy of ts in which the named resources of prev are present again.
func (ts *typeSet) restore(prev *typeSet, names []string) *typeSet {
	d := diff{}
	versions := make(map[string]string, len(names))
	for _, name := range names {
		d.changed = append(d.changed, prev.resources[name])
		versions[name] = prev.versions[name]
	}
	out := ts.apply(d, versions)
	out.order = nil // not the slice any Publish passed
	return out
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

func removedNames(prev map[string]types.Resource, items []types.Resource) []string {
	present := make(map[string]struct{}, len(items))
	for _, r := range items {
		present[cachev3.GetResourceName(r)] = struct{}{}
	}
	var out []string
	for name := range prev {
		if _, ok := present[name]; !ok {
			out = append(out, name)
		}
	}
	return out
}

// version is a resource's content hash, computed as go-control-plane computes the
// version it sends with the resource (so a reconnecting client's
// initial_resource_versions match): equal content has an equal version across
// rebuilds and server restarts.
func version(r types.Resource) (string, error) {
	b, err := cachev3.MarshalResource(r)
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

// state is every type's published set. The zero value is an empty state.
type state [numTypes]*typeSet

func (s *state) set(i int) *typeSet {
	if s[i] == nil {
		return emptyTypeSet
	}
	return s[i]
}

// inputs orders res like the type indexes.
func inputs(res *translate.Resources) [numTypes][]types.Resource {
	return [numTypes][]types.Resource{
		clusterIdx:  res.Clusters,
		endpointIdx: res.Endpoints,
		listenerIdx: res.Listeners,
		routeIdx:    res.Routes,
		secretIdx:   res.Secrets,
	}
}

// consistent checks what go-control-plane's Snapshot.Consistent checks (every EDS and
// RDS resource is referenced, and every reference resolves), for the pairs of types
// that changed only.
func (s *state) consistent(changed [numTypes]bool) error {
	pairs := []struct{ from, to int }{{clusterIdx, endpointIdx}, {listenerIdx, routeIdx}}
	for _, p := range pairs {
		if !changed[p.from] && !changed[p.to] {
			continue
		}
		referenced := make(map[string]struct{}, len(s.set(p.to).resources))
		for _, names := range s.set(p.from).refs {
			for _, n := range names {
				referenced[n] = struct{}{}
			}
		}
		for n := range referenced {
			if _, ok := s.set(p.to).resources[n]; !ok {
				return fmt.Errorf("%s %q is referenced but not published", shortType(typeURLs[p.to]), n)
			}
		}
		for n := range s.set(p.to).resources {
			if _, ok := referenced[n]; !ok {
				return fmt.Errorf("%s %q is published but not referenced", shortType(typeURLs[p.to]), n)
			}
		}
	}
	return nil
}

// snapshot is one published state under one version, as the snapshot cache reads it.
// The cache uses one version for every type (SotW clients are answered per type when
// the version changes, as before), and the per-resource versions held here for delta
// clients, instead of hashing every resource of every snapshot as cachev3.Snapshot does.
type snapshot struct {
	version string
	sets    state
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
	if s.typeSet(typeURL) == nil {
		return ""
	}
	return s.version
}

// GetResourcesAndTTL implements cachev3.ResourceSnapshot.
func (s *snapshot) GetResourcesAndTTL(typeURL string) map[string]types.ResourceWithTTL {
	if ts := s.typeSet(typeURL); ts != nil {
		return ts.withTTL
	}
	return nil
}

// GetResources implements cachev3.ResourceSnapshot.
func (s *snapshot) GetResources(typeURL string) map[string]types.Resource {
	if ts := s.typeSet(typeURL); ts != nil {
		return ts.resources
	}
	return nil
}

// ConstructVersionMap implements cachev3.ResourceSnapshot: the versions are kept
// up to date by Publish.
func (s *snapshot) ConstructVersionMap() error { return nil }

// GetVersionMap implements cachev3.ResourceSnapshot.
func (s *snapshot) GetVersionMap(typeURL string) map[string]string {
	if ts := s.typeSet(typeURL); ts != nil {
		return ts.versions
	}
	return nil
}
