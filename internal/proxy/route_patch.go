package proxy

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

// tableEntry is a virtual host of the next version of a table: def when
// set, converted for this version (fresh, see buildRouteTable), else the one
// at position prev of the table it is patched from; or, when run is more
// than 1, the run virtual hosts from prev on, which no other entry names (a
// change of a few hosts of a sorted table is a few runs, see vhdsEntries).
type tableEntry struct {
	// int32: the entries of a large table are many, and 16 bytes each.
	prev, run int32
	def       *vhostDef
}

// entriesLen is the number of virtual hosts entries stand for.
func entriesLen(entries []tableEntry) int {
	n := 0
	for _, e := range entries {
		n += max(int(e.run), 1)
	}
	return n
}

// expandRuns returns entries with each run as entries of one.
func expandRuns(entries []tableEntry) []tableEntry {
	n := entriesLen(entries)
	if n == len(entries) {
		return entries
	}
	out := make([]tableEntry, 0, n)
	for _, e := range entries {
		if e.run <= 1 {
			out = append(out, e)
			continue
		}
		for j := range e.run {
			out = append(out, tableEntry{prev: e.prev + j})
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
func patchRouteTable(prev *routeTable, entries []tableEntry) (t *routeTable, ok bool, err error) {
	n := entriesLen(entries)
	t = &routeTable{name: prev.name, level: prev.level, shell: prev.shell, vhds: prev.vhds, inline: prev.inline, id: new(tableID),
		slots: prev.slots, domains: prev.domains, vhosts: make([]*virtualHost, 0, n)}
	kept := make([]bool, len(prev.vhosts))
	patch := &tablePatch{from: prev.id}
	var fresh []bool
	for _, e := range entries {
		if e.run > 1 {
			t.vhosts = append(t.vhosts, prev.vhosts[e.prev:e.prev+e.run]...)
			for j := e.prev; j < e.prev+e.run; j++ {
				kept[j] = true
			}
			continue
		}
		if e.def == nil && !kept[e.prev] {
			kept[e.prev] = true
			t.vhosts = append(t.vhosts, prev.vhosts[e.prev])
			continue
		}
		vh := &virtualHost{vhostDef: e.def}
		if e.def == nil {
			vh.vhostDef = prev.vhosts[e.prev].vhostDef
		}
		t.vhosts = append(t.vhosts, vh)
		patch.added = append(patch.added, vh)
		fresh = append(fresh, e.def != nil)
		if len(patch.added) > maxPatch(n) {
			return nil, false, nil
		}
	}
	for j, k := range kept {
		if !k {
			patch.removed = append(patch.removed, prev.vhosts[j])
		}
	}
	if len(patch.added)+len(patch.removed) > maxPatch(n) {
		return nil, false, nil
	}
	t.patch = patch
	t.freeSlots = slices.Clone(prev.freeSlots)
	ed := t.domains.edit()
	for _, vh := range patch.removed {
		ed.remove(vh)
		t.freeSlots = append(t.freeSlots, vh.slot)
	}
	for i, vh := range patch.added {
		vh.slot = t.takeSlot()
		if err := t.fileVirtualHost(vh, fresh[i], nil); err != nil {
			return nil, true, err
		}
	}
	ed.done()
	return t, true, nil
}

// takeSlot returns a slot for a virtual host added to t.
func (t *routeTable) takeSlot() int {
	if n := len(t.freeSlots); n > 0 {
		s := t.freeSlots[n-1]
		t.freeSlots = t.freeSlots[:n-1]
		return s
	}
	t.slots++
	return t.slots - 1
}

// indexEditor patches a copy of a domain index: the copy gets its own
// patch of the exact domains and wildcard lists before it changes them, so that the index it
// was copied from, and the exact map they share, stay as they were.
type indexEditor struct {
	x           *domainIndex
	ownSuffixes bool
	ownPrefixes bool
	// the original's lists, which done must not sort in place
	suffixes, prefixes []wildcardDomain
}

func (x *domainIndex) edit() *indexEditor {
	x.exact = x.exact.Patched()
	// Adding a wildcard domain appends to a list: a copy with no spare
	// capacity cannot append into the original's backing array.
	x.suffixes = slices.Clip(x.suffixes)
	x.prefixes = slices.Clip(x.prefixes)
	return &indexEditor{x: x, suffixes: x.suffixes, prefixes: x.prefixes}
}

// remove takes vh's domains out of the index.
func (ed *indexEditor) remove(vh *virtualHost) {
	x := ed.x
	for _, d := range vh.domains {
		list, affix := x.wildcardList(d)
		switch {
		case d == "*":
			if x.any == vh {
				x.any = nil
			}
		case list != nil:
			*list = slices.DeleteFunc(ed.own(list), func(w wildcardDomain) bool { return w.vhost == vh && w.affix == affix })
		default:
			x.exact.Remove(d)
		}
	}
}

// own returns list (one of the index's wildcard lists) after making it a
// copy of its own if it is still the original's.
func (ed *indexEditor) own(list *[]wildcardDomain) []wildcardDomain {
	owned := &ed.ownSuffixes
	if list == &ed.x.prefixes {
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
	if !sameArray(x.suffixes, ed.suffixes) {
		sortWildcards(x.suffixes)
	}
	if !sameArray(x.prefixes, ed.prefixes) {
		sortWildcards(x.prefixes)
	}
	x.exact.Settle()
}

// sameArray reports whether a and b are the same slice of the same array.
func sameArray[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// patchedFrom reports whether t was patched from prev.
func (t *routeTable) patchedFrom(prev *routeTable) bool {
	return t.patch != nil && prev != nil && t.patch.from == prev.id
}

// countClusterUses counts in refs the clusters of the virtual hosts the
// patch removed as one use fewer and those of the ones it added as one more.
func (p *tablePatch) countClusterUses(refs map[string]int) {
	for _, vh := range p.removed {
		for _, c := range vh.clusters {
			refs[c]--
		}
	}
	for _, vh := range p.added {
		for _, c := range vh.clusters {
			refs[c]++
		}
	}
}

// clusterUses returns the clusters t's virtual hosts name, in order, each
// once per virtual host that names it.
func (t *routeTable) clusterUses() []string {
	var n int
	for _, vh := range t.vhosts {
		n += len(vh.clusters)
	}
	names := make([]string, 0, n)
	for _, vh := range t.vhosts {
		names = append(names, vh.clusters...)
	}
	return names
}
