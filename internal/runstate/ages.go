package runstate

import (
	"cmp"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/portico-dev/portico/internal/source/manifest"
)

// ageless are the kinds whose age no decision looks at (only routing objects contest
// hosts and paths by age): most objects of a tree are of these kinds (a Service and its
// endpoints per application), and leaving them out makes the file and its writes a
// third as big. A kind not listed here is kept, so that a new kind whose age matters
// cannot be forgotten; one listed here is as old as its first reload after a restart.
var ageless = map[schema.GroupKind]bool{
	{Kind: "Service"}:   true,
	{Kind: "Endpoints"}: true,
	{Kind: "Secret"}:    true,
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"}: true,
}

func aged(id manifest.Identity) bool {
	return !ageless[schema.GroupKind{Group: id.Group, Kind: id.Kind}]
}

// ageTable is the ages of a tree's objects sorted as the file lists them (kind,
// namespace, name), kept sorted as reloads add and remove objects: a write then only
// formats them, where sorting 30,000 of them on every write cost more than the rest.
type ageTable struct {
	entries []ageEntry
	// kinds interns kind names ("HTTPProxy.projectcontour.io").
	kinds map[schema.GroupKind]string
}

type ageEntry struct {
	kind, ns, name string
	// line is the entry as the file has it (`"name":"time"`), formatted once: formatting
	// 10,000 of them was half of the CPU of a write.
	line string
}

func compareEntries(x, y ageEntry) int {
	return cmp.Or(strings.Compare(x.kind, y.kind), strings.Compare(x.ns, y.ns), strings.Compare(x.name, y.name))
}

// tableOf returns the table of ages.
func tableOf(ages map[manifest.Identity]time.Time) *ageTable {
	t := &ageTable{}
	for id, at := range ages {
		if aged(id) {
			t.entries = append(t.entries, t.entry(id, at))
		}
	}
	slices.SortFunc(t.entries, compareEntries)
	return t
}

func (t *ageTable) entry(id manifest.Identity, at time.Time) ageEntry {
	gk := schema.GroupKind{Group: id.Group, Kind: id.Kind}
	kind, ok := t.kinds[gk]
	if !ok {
		if t.kinds == nil {
			t.kinds = map[schema.GroupKind]string{}
		}
		kind = gk.String()
		t.kinds[gk] = kind
	}
	var line []byte
	if !at.IsZero() {
		line = appendJSONString(make([]byte, 0, len(id.Name)+40), id.Name)
		line = at.UTC().AppendFormat(append(line, `:"`...), time.RFC3339Nano)
		line = append(line, '"')
	}
	return ageEntry{kind, id.Namespace, id.Name, string(line)}
}

// apply brings t up to date with one reload's changes: an added object brings its age
// (its creationTimestamp), a removed one takes its age away, an edit keeps it.
func (t *ageTable) apply(changes []manifest.Change) {
	var adds, removes []ageEntry
	for _, c := range changes {
		switch {
		case c.Old == nil && c.New != nil:
			id := manifest.IdentityOf(c.New)
			acc, err := meta.Accessor(c.New)
			if err == nil && aged(id) {
				adds = append(adds, t.entry(id, acc.GetCreationTimestamp().Time))
			}
		case c.New == nil && c.Old != nil:
			if id := manifest.IdentityOf(c.Old); aged(id) {
				removes = append(removes, t.entry(id, time.Time{})) // a key only
			}
		}
	}
	// One at a time, each moves the entries after it; many at once (the first load, a
	// checkout), a merge and one sort.
	if len(adds)+len(removes) > 64 {
		t.merge(adds, removes)
		return
	}
	for _, e := range removes {
		if i, ok := slices.BinarySearchFunc(t.entries, e, compareEntries); ok {
			t.entries = slices.Delete(t.entries, i, i+1)
		}
	}
	for _, e := range adds {
		i, ok := slices.BinarySearchFunc(t.entries, e, compareEntries)
		if ok {
			t.entries[i] = e
		} else {
			t.entries = slices.Insert(t.entries, i, e)
		}
	}
}

func (t *ageTable) merge(adds, removes []ageEntry) {
	type key struct{ kind, ns, name string }
	gone := make(map[key]bool, len(removes)+len(adds))
	for _, e := range removes {
		gone[key{e.kind, e.ns, e.name}] = true
	}
	for _, e := range adds {
		gone[key{e.kind, e.ns, e.name}] = true // replaced
	}
	t.entries = slices.DeleteFunc(t.entries, func(e ageEntry) bool { return gone[key{e.kind, e.ns, e.name}] })
	t.entries = append(t.entries, adds...)
	slices.SortFunc(t.entries, compareEntries)
}

// writeJSON writes t to w as the JSON object of document.Ages, a line per name so that
// two files can be compared with diff.
func (t *ageTable) writeJSON(w io.Writer) error {
	b := make([]byte, 0, 64<<10)
	b = append(b, '{')
	for i, e := range t.entries {
		newKind := i == 0 || e.kind != t.entries[i-1].kind
		newNS := newKind || e.ns != t.entries[i-1].ns
		switch {
		case i == 0:
		case newKind:
			b = append(b, "}},"...)
		case newNS:
			b = append(b, "},"...)
		default:
			b = append(b, ',')
		}
		if newKind {
			b = appendJSONString(append(b, '\n'), e.kind)
			b = append(b, ":{"...)
		}
		if newNS {
			b = appendJSONString(append(b, "\n "...), e.ns)
			b = append(b, ":{"...)
		}
		b = append(append(b, "\n  "...), e.line...)
		if len(b) > cap(b)-512 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	if len(t.entries) > 0 {
		b = append(b, "}}\n"...)
	}
	b = append(b, '}')
	_, err := w.Write(b)
	return err
}

// appendJSONString appends s to b as a JSON string. strconv.AppendQuote is Go syntax,
// not JSON (\a, \x00, \U0001...), and run mode does not hold names to Kubernetes'
// rules: one odd name would make the whole state file unreadable. Bytes that are not
// UTF-8 become U+FFFD, as encoding/json writes them.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}
