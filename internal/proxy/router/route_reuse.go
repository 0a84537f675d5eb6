package router

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// A route configuration holds every virtual host of a listener, and one
// edited Ingress changes one of them. Decoding, validating and converting
// the whole configuration for each edit would cost in proportion to all of
// them; instead the encoding is split at its top level, and the virtual hosts
// whose encoding is the same as in the version in force keep their converted
// form (same bytes, same message: it was validated and converted already).

// virtualHostsField is RouteConfiguration.virtual_hosts's field number.
const virtualHostsField protowire.Number = 2

// span is a part of an encoding, [start, end).
type span struct{ Start, End int }

// SplitRouteConfig splits the encoding of a RouteConfiguration into the
// encodings of its virtual hosts, in order, and the fields of everything else
// (its shell). ok is false for an encoding that does not parse. n is how
// many virtual hosts to expect: the spans are allocated once, not regrown.
func SplitRouteConfig(b []byte, n int) (shell []byte, vhosts []span, ok bool) {
	vhosts = make([]span, 0, n)
	for pos := 0; pos < len(b); {
		num, typ, n := protowire.ConsumeTag(b[pos:])
		if n < 0 {
			return nil, nil, false
		}
		if num == virtualHostsField && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b[pos+n:])
			if m < 0 {
				return nil, nil, false
			}
			start := pos + n + m - len(v)
			vhosts = append(vhosts, span{start, start + len(v)})
			pos += n + m
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b[pos+n:])
		if m < 0 {
			return nil, nil, false
		}
		shell = append(shell, b[pos:pos+n+m]...)
		pos += n + m
	}
	return shell, vhosts, true
}

// ReuseRouteConfig converts a, a RouteConfiguration, reusing the virtual
// hosts of prev (the version in force) whose encoding is unchanged: only new
// and changed ones are decoded, validated and converted. ok is false when
// there is nothing to reuse (no previous version, a field other than
// virtual_hosts changed) and when anything is wrong with a: the caller then
// converts it in full, which reports the problem as it always has.
func ReuseRouteConfig(a *anypb.Any, prev *RouteTable) (*RouteTable, bool) {
	if prev == nil || prev.Shell == "" {
		return nil, false
	}
	value := a.GetValue()
	// An edit adds a few virtual hosts at most.
	shell, spans, ok := SplitRouteConfig(value, len(prev.Vhosts)+16)
	if !ok || string(shell) != prev.Shell {
		return nil, false
	}
	match := NewAligner(prev.Vhosts, func(vh *VirtualHost) string { return vh.Raw })
	entries := make([]TableEntry, len(spans))
	for i, sp := range spans {
		raw := value[sp.Start:sp.End]
		if j, ok := findRaw(match, raw); ok {
			entries[i] = TableEntry{Prev: int32(j)}
			continue
		}
		// A copy: the def outlives the response, of which it would keep all alive.
		def, err := DecodeVirtualHost(string(raw), prev.Level)
		if err != nil {
			return nil, false
		}
		entries[i] = TableEntry{Prev: -1, Def: def}
	}
	t, err := NextTable(prev, entries)
	return t, err == nil
}

// NextTable returns the next version of prev, whose virtual hosts are
// entries: patched from prev when that pays, else built in full.
func NextTable(prev *RouteTable, entries []TableEntry) (*RouteTable, error) {
	if t, ok, err := patchRouteTable(prev, entries); ok {
		return t, err
	}
	entries = expandRuns(entries)
	t, err := BuildRouteTable(prev.Name, prev.Level, len(entries), func(i int) (*VhostDef, bool, error) {
		if e := entries[i]; e.Def != nil {
			return e.Def, true, nil
		}
		return prev.Vhosts[entries[i].Prev].VhostDef, false, nil
	})
	if err != nil {
		return nil, err
	}
	t.Shell, t.Vhds, t.Inline = prev.Shell, prev.Vhds, prev.Inline
	return t, nil
}

// DecodeVirtualHost decodes, validates and converts one virtual host of a
// route configuration converted at level.
func DecodeVirtualHost(raw string, level RouteConfigLevel) (*VhostDef, error) {
	pvh := &routev3.VirtualHost{}
	if err := proto.Unmarshal([]byte(raw), pvh); err != nil {
		return nil, err
	}
	if err := pvh.ValidateAll(); err != nil {
		return nil, err
	}
	def, err := level.ConvertVirtualHost(pvh)
	def.Raw = raw
	return def, err
}

// RecordEncoding keeps, in t converted in full from a, what the next version
// needs to reuse t's virtual hosts: the encoding of its shell and of each
// virtual host.
func RecordEncoding(t *RouteTable, a *anypb.Any) {
	shell, spans, ok := SplitRouteConfig(a.GetValue(), len(t.Vhosts))
	if !ok || len(spans) != len(t.Vhosts) {
		return
	}
	// Substrings of one copy: every def of t is converted from it.
	value := string(a.GetValue())
	for i, vh := range t.Vhosts {
		vh.Raw = value[spans[i].Start:spans[i].End]
	}
	t.Shell = string(shell)
}

// aligner finds, for each key of a new list in turn, the position of an
// equal key in the previous list. An update inserts, removes or replaces a
// few items and keeps the others in order, so the two items after the last
// match are tried first; the previous list is indexed only after two misses
// in a row, which one replaced item does not cause.
type aligner[T any, K comparable] struct {
	prev   []T
	key    func(T) K
	next   int // after the last match
	misses int // in a row
	index  map[K]int
}

// NewAligner returns an aligner of a new list with prev, items keyed by key.
func NewAligner[T any, K comparable](prev []T, key func(T) K) *aligner[T, K] {
	return &aligner[T, K]{prev: prev, key: key}
}

// Find returns the position in prev of an item keyed k, the next key of the
// new list.
func (a *aligner[T, K]) Find(k K) (int, bool) {
	return a.findBy(func(item T) bool { return a.key(item) == k },
		func(index map[K]int) (int, bool) { j, ok := index[k]; return j, ok })
}

// findRaw finds the virtual host whose encoding is raw without copying it,
// as a string key would: neither the comparisons nor the map lookup of
// string(raw) allocate.
func findRaw(a *aligner[*VirtualHost, string], raw []byte) (int, bool) {
	return a.findBy(func(vh *VirtualHost) bool { return vh.Raw == string(raw) },
		func(index map[string]int) (int, bool) { j, ok := index[string(raw)]; return j, ok })
}

// findBy is find for the key that eq compares an item with and lookup looks up.
func (a *aligner[T, K]) findBy(eq func(T) bool, lookup func(map[K]int) (int, bool)) (int, bool) {
	for j := a.next; j < min(a.next+2, len(a.prev)); j++ {
		if eq(a.prev[j]) {
			a.next, a.misses = j+1, 0
			return j, true
		}
	}
	if a.misses++; a.misses < 2 {
		return 0, false
	}
	if a.index == nil {
		a.index = make(map[K]int, len(a.prev))
		for j, item := range a.prev {
			a.index[a.key(item)] = j
		}
	}
	j, ok := lookup(a.index)
	if ok {
		a.next, a.misses = j+1, 0
	}
	return j, ok
}
