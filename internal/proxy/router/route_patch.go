package router

import (
	"slices"
)

// A one-host edit of a large route configuration would cost a whole new
// domain index, and a stats lookup for every route, if every version were
// built from scratch. Instead the next table is patched from the one in
// force: it keeps that table's virtual hosts (and their slots) where the defs
// are the same, shares its exact-domain map under a small overlay of changes,
// and records what it added and removed for whatever is indexed by slot (the
// route stats' slot array is still copied, see patchRouteStats).

// TableEntry is a virtual host of the next version of a table: def when
// set, converted for this version (fresh, see buildRouteTable), else the one
// at position prev of the table it is patched from; or, when run is more
// than 1, the run virtual hosts from prev on, which no other entry names (a
// change of a few hosts of a sorted table is a few runs, see vhdsEntries).
type TableEntry struct {
	// int32: the entries of a large table are many, and 16 bytes each.
	Prev, Run int32
	Def       *VhostDef
}

// entriesLen is the number of virtual hosts entries stand for.
func entriesLen(entries []TableEntry) int {
	n := 0
	for _, e := range entries {
		n += max(int(e.Run), 1)
	}
	return n
}

// expandRuns returns entries with each run as entries of one.
func expandRuns(entries []TableEntry) []TableEntry {
	n := entriesLen(entries)
	if n == len(entries) {
		return entries
	}
	out := make([]TableEntry, 0, n)
	for _, e := range entries {
		if e.Run <= 1 {
			out = append(out, e)
			continue
		}
		for j := range e.Run {
			out = append(out, TableEntry{Prev: e.Prev + j})
		}
	}
	return out
}

// maxPatch is the number of virtual hosts added and removed past which a
// table of n is built in full rather than patched: patching costs in
// proportion to the change, building in proportion to n.
func maxPatch(n int) int { return n/8 + 16 }

// patchRouteTable builds the next version of prev, whose virtual hosts are
// entries, by patching prev; prev is not modified (requests may be reading
// it). ok is false when too much changed for a patch to pay; an error is
// what a full build would refuse (a duplicate domain, a direct response
// too long), though the full build is left to say it.
func patchRouteTable(prev *RouteTable, entries []TableEntry) (t *RouteTable, ok bool, err error) {
	n := entriesLen(entries)
	t = &RouteTable{Name: prev.Name, Level: prev.Level, Shell: prev.Shell, Vhds: prev.Vhds, Inline: prev.Inline, id: new(tableID),
		Slots: prev.Slots, Domains: prev.Domains, Vhosts: make([]*VirtualHost, 0, n)}
	kept := make([]bool, len(prev.Vhosts))
	patch := &tablePatch{from: prev.id}
	var fresh []bool
	for _, e := range entries {
		if e.Run > 1 {
			t.Vhosts = append(t.Vhosts, prev.Vhosts[e.Prev:e.Prev+e.Run]...)
			for j := e.Prev; j < e.Prev+e.Run; j++ {
				kept[j] = true
			}
			continue
		}
		if e.Def == nil && !kept[e.Prev] {
			kept[e.Prev] = true
			t.Vhosts = append(t.Vhosts, prev.Vhosts[e.Prev])
			continue
		}
		vh := &VirtualHost{VhostDef: e.Def}
		if e.Def == nil {
			vh.VhostDef = prev.Vhosts[e.Prev].VhostDef
		}
		t.Vhosts = append(t.Vhosts, vh)
		patch.Added = append(patch.Added, vh)
		fresh = append(fresh, e.Def != nil)
		if len(patch.Added) > maxPatch(n) {
			return nil, false, nil
		}
	}
	for j, k := range kept {
		if !k {
			patch.Removed = append(patch.Removed, prev.Vhosts[j])
		}
	}
	if len(patch.Added)+len(patch.Removed) > maxPatch(n) {
		return nil, false, nil
	}
	t.Patch = patch
	t.freeSlots = slices.Clone(prev.freeSlots)
	ed := t.Domains.edit()
	for _, vh := range patch.Removed {
		ed.remove(vh)
		t.freeSlots = append(t.freeSlots, vh.Slot)
	}
	for i, vh := range patch.Added {
		vh.Slot = t.takeSlot()
		if err := t.fileVirtualHost(vh, fresh[i], nil); err != nil {
			return nil, true, err
		}
	}
	ed.done()
	return t, true, nil
}

// takeSlot returns a slot for a virtual host added to t.
func (t *RouteTable) takeSlot() int {
	if n := len(t.freeSlots); n > 0 {
		s := t.freeSlots[n-1]
		t.freeSlots = t.freeSlots[:n-1]
		return s
	}
	t.Slots++
	return t.Slots - 1
}

// indexEditor patches a copy of a domain index: the copy gets its own
// patch of the exact domains and wildcard lists before it changes them, so that the index it
// was copied from, and the exact map they share, stay as they were.
type indexEditor struct {
	x           *domainIndex
	ownSuffixes bool
	ownPrefixes bool
	// the original's lists, which done must not sort in place
	suffixes, prefixes []WildcardDomain
}

func (x *domainIndex) edit() *indexEditor {
	x.Exact = x.Exact.Patched()
	// Adding a wildcard domain appends to a list: a copy with no spare
	// capacity cannot append into the original's backing array.
	x.Suffixes = slices.Clip(x.Suffixes)
	x.Prefixes = slices.Clip(x.Prefixes)
	return &indexEditor{x: x, suffixes: x.Suffixes, prefixes: x.Prefixes}
}

// remove takes vh's domains out of the index.
func (ed *indexEditor) remove(vh *VirtualHost) {
	x := ed.x
	for _, d := range vh.domains {
		list, affix := x.wildcardList(d)
		switch {
		case d == "*":
			if x.Any == vh {
				x.Any = nil
			}
		case list != nil:
			*list = slices.DeleteFunc(ed.own(list), func(w WildcardDomain) bool { return w.Vhost == vh && w.Affix == affix })
		default:
			x.Exact.Remove(d)
		}
	}
}

// own returns list (one of the index's wildcard lists) after making it a
// copy of its own if it is still the original's.
func (ed *indexEditor) own(list *[]WildcardDomain) []WildcardDomain {
	owned := &ed.ownSuffixes
	if list == &ed.x.Prefixes {
		owned = &ed.ownPrefixes
	}
	if !*owned {
		*list, *owned = slices.Clone(*list), true
	}
	return *list
}

// done orders the wildcard lists again and settles the exact domains.
func (ed *indexEditor) done() {
	x := ed.x
	if !sameArray(x.Suffixes, ed.suffixes) {
		sortWildcards(x.Suffixes)
	}
	if !sameArray(x.Prefixes, ed.prefixes) {
		sortWildcards(x.Prefixes)
	}
	x.Exact.Settle()
}

// sameArray reports whether a and b are the same slice of the same array.
func sameArray[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// PatchedFrom reports whether t was patched from prev.
func (t *RouteTable) PatchedFrom(prev *RouteTable) bool {
	return t.Patch != nil && prev != nil && t.Patch.from == prev.id
}

// CountClusterUses counts in refs the clusters of the virtual hosts the
// patch removed as one use fewer and those of the ones it added as one more.
func (p *tablePatch) CountClusterUses(refs map[string]int) {
	for _, vh := range p.Removed {
		for _, c := range vh.Clusters {
			refs[c]--
		}
	}
	for _, vh := range p.Added {
		for _, c := range vh.Clusters {
			refs[c]++
		}
	}
}

// ClusterUses returns the clusters t's virtual hosts name, in order, each
// once per virtual host that names it.
func (t *RouteTable) ClusterUses() []string {
	var n int
	for _, vh := range t.Vhosts {
		n += len(vh.Clusters)
	}
	names := make([]string, 0, n)
	for _, vh := range t.Vhosts {
		names = append(names, vh.Clusters...)
	}
	return names
}
