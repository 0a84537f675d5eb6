package manifest

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// Where in a file a problem is. Decoding goes through JSON (sigs.k8s.io/yaml converts
// YAML to JSON first), which loses every position, so the document of a problem is
// parsed again as a YAML node tree (JSON is YAML too) and the field the decoder names is
// looked up in it. Only documents with a problem pay for this: a directory of good files
// is decoded exactly as fast as before.

// segment is one step of a field path: a mapping key, or a list position.
type segment struct {
	key   string
	index int // the list position, or -1 for a key
}

// parsePath splits a decoder's field path, "spec.routes[0].services[1].port", into
// its segments.
func parsePath(path string) []segment {
	if path == "" {
		return nil
	}
	var out []segment
	for _, part := range strings.Split(path, ".") {
		// encoding/json (Go 1.27) names an element of a list type by its index alone, after
		// an empty type name (".0.port").
		if n, err := strconv.Atoi(part); err == nil && n >= 0 {
			out = append(out, segment{index: n})
			continue
		}
		key, indices := splitIndices(part)
		if key != "" || len(indices) == 0 {
			out = append(out, segment{key: key, index: -1})
		}
		for _, i := range indices {
			out = append(out, segment{index: i})
		}
	}
	return out
}

// splitIndices splits "routes[0][1]" into "routes" and [0 1]. A part whose brackets do
// not hold plain numbers is a key as it is.
func splitIndices(part string) (string, []int) {
	var indices []int
	rest := part
	for strings.HasSuffix(rest, "]") {
		open := strings.LastIndexByte(rest, '[')
		if open < 0 {
			return part, nil
		}
		n, err := strconv.Atoi(rest[open+1 : len(rest)-1])
		if err != nil || n < 0 {
			return part, nil
		}
		indices = append([]int{n}, indices...)
		rest = rest[:open]
	}
	return rest, indices
}

// formatPath writes segments back as a path, "items[3].spec".
func formatPath(segs []segment) string {
	var b strings.Builder
	for _, s := range segs {
		if s.index >= 0 {
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.key)
	}
	return b.String()
}

// query says which occurrence of a field to find.
type query struct {
	// loose: the path has no list positions (encoding/json's type errors name fields
	// so), and a key is looked for in every element of a list on the way.
	loose bool
	// kind, when set, is the JSON kind the value must have ("string", "number", ...):
	// of a loose path's matches, the one the decoder complained about.
	kind string
	// last picks the last of repeated keys in a mapping (a duplicated field's second
	// definition is the mistake).
	last bool
}

// match is a field found in a document.
type match struct {
	key   *yaml.Node // the field's key, nil for a list element
	value *yaml.Node
	path  string // the field's path, with list positions
}

// line is where a problem about the field points: its key for a mistaken name (keyLine),
// its value otherwise.
func (m match) line(keyLine bool) int {
	if keyLine && m.key != nil {
		return m.key.Line
	}
	return m.value.Line
}

// maxVisits bounds the nodes one lookup visits: aliases can make a small text a huge
// tree, and a loose lookup may visit every element of every list.
const maxVisits = 100000

// maxDepth bounds the nesting a lookup follows (aliases can refer to themselves).
const maxDepth = 200

// locator finds fields in the text of one document. It parses the text on first use,
// so that a document without a problem never is.
type locator struct {
	text   []byte
	parsed bool
	root   *yaml.Node // nil when the text does not parse
	visits int
}

func newLocator(text []byte) *locator { return &locator{text: text} }

// find looks path up below base (the position of a document inside Lists). The path
// of the match is relative to base, as the decoder names fields.
func (l *locator) find(base, path []segment, q query) (match, bool) {
	if !l.parsed {
		l.parsed = true
		var root yaml.Node
		if err := yaml.Unmarshal(l.text, &root); err == nil {
			l.root = &root
		}
	}
	if l.root == nil {
		return match{}, false
	}
	l.visits = 0
	m, ok := l.walk(l.root, append(append([]segment(nil), base...), path...), "", nil, q, 0)
	if ok && len(base) > 0 {
		m.path = strings.TrimPrefix(strings.TrimPrefix(m.path, formatPath(base)), ".")
	}
	return m, ok
}

func (l *locator) walk(n *yaml.Node, segs []segment, path string, key *yaml.Node, q query, depth int) (match, bool) {
	l.visits++
	if n == nil || l.visits > maxVisits || depth > maxDepth {
		return match{}, false
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return match{}, false
		}
		return l.walk(n.Content[0], segs, path, key, q, depth+1)
	case yaml.AliasNode:
		return l.walk(n.Alias, segs, path, key, q, depth+1)
	}
	if len(segs) == 0 {
		if q.kind == "" || jsonKind(n) == q.kind {
			return match{key: key, value: n, path: path}, true
		}
		return element(n, path, q.kind)
	}
	s := segs[0]
	switch {
	case s.index >= 0:
		if n.Kind != yaml.SequenceNode || s.index >= len(n.Content) {
			return match{}, false
		}
		return l.walk(n.Content[s.index], segs[1:], path+"["+strconv.Itoa(s.index)+"]", nil, q, depth+1)
	case n.Kind == yaml.MappingNode:
		return l.inMapping(n, segs, path, q, depth)
	case n.Kind == yaml.SequenceNode && q.loose:
		for i, e := range n.Content {
			if m, ok := l.walk(e, segs, path+"["+strconv.Itoa(i)+"]", nil, q, depth+1); ok {
				return m, true
			}
		}
	}
	return match{}, false
}

// element finds, in a mapping or list n, the first value of the given JSON kind:
// encoding/json names a map's or a list's field, not the entry, whose value has the wrong
// type ("metadata.annotations" for an annotation written as a number).
func element(n *yaml.Node, path, kind string) (match, bool) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k, v := n.Content[i], n.Content[i+1]; jsonKind(v) == kind {
				return match{key: k, value: v, path: path + "." + k.Value}, true
			}
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			if jsonKind(v) == kind {
				return match{value: v, path: path + "[" + strconv.Itoa(i) + "]"}, true
			}
		}
	}
	return match{}, false
}

// inMapping looks the first key of segs up in mapping n. A key can hold dots itself (an
// annotation such as kubernetes.io/ingress.class), so the following keys joined with
// dots are tried too; keys merged in with `<<` count as the mapping's own.
func (l *locator) inMapping(n *yaml.Node, segs []segment, path string, q query, depth int) (match, bool) {
	key := ""
	for j, s := range segs {
		if s.index >= 0 {
			break
		}
		if j > 0 {
			key += "."
		}
		key += s.key
		k, v := l.pair(n, key, q.last, depth)
		if k == nil {
			continue
		}
		p := key
		if path != "" {
			p = path + "." + key
		}
		if m, ok := l.walk(v, segs[j+1:], p, k, q, depth+1); ok {
			return m, true
		}
	}
	return match{}, false
}

// pair returns the key and value of name in mapping n (the last of repeated ones when
// last is set), looking into merged mappings when n has no such key of its own.
func (l *locator) pair(n *yaml.Node, name string, last bool, depth int) (*yaml.Node, *yaml.Node) {
	var key, value *yaml.Node
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind == yaml.ScalarNode && k.Tag == "!!merge":
			merges = append(merges, v)
		case k.Kind == yaml.ScalarNode && k.Value == name:
			if key == nil || last {
				key, value = k, v
			}
		}
	}
	if key != nil || depth > maxDepth {
		return key, value
	}
	for _, m := range merges {
		for _, src := range mergeSources(m) {
			if k, v := l.pair(src, name, last, depth+1); k != nil {
				return k, v
			}
		}
	}
	return nil, nil
}

// mergeSources are the mappings a `<<` value merges: one mapping, or a list of them.
func mergeSources(v *yaml.Node) []*yaml.Node {
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	if v == nil {
		return nil
	}
	if v.Kind == yaml.MappingNode {
		return []*yaml.Node{v}
	}
	var out []*yaml.Node
	if v.Kind == yaml.SequenceNode {
		for _, e := range v.Content {
			if e.Kind == yaml.AliasNode {
				e = e.Alias
			}
			if e != nil && e.Kind == yaml.MappingNode {
				out = append(out, e)
			}
		}
	}
	return out
}

// jsonKind names the JSON kind a node becomes, as encoding/json's errors do.
func jsonKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "object"
	case yaml.SequenceNode:
		return "array"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int", "!!float":
			return "number"
		case "!!bool":
			return "bool"
		case "!!null":
			return "null"
		}
		return "string"
	}
	return ""
}

// invalidUTF8 returns the offset of the first byte of text that is not UTF-8, or -1
// when text is all UTF-8.
func invalidUTF8(text []byte) int {
	if utf8.Valid(text) {
		return -1
	}
	off := 0
	for off < len(text) {
		r, size := utf8.DecodeRune(text[off:])
		if r == utf8.RuneError && size <= 1 {
			return off
		}
		off += size
	}
	return -1
}

// lineColumn returns the 1-based line and column (in characters) of offset off in text.
func lineColumn(text []byte, off int) (int, int) {
	off = min(max(off, 0), len(text))
	lineStart := bytes.LastIndexByte(text[:off], '\n') + 1
	return bytes.Count(text[:off], []byte("\n")) + 1, utf8.RuneCount(text[lineStart:off]) + 1
}

// notUTF8 is the reason of a document with a byte that is not UTF-8.
func notUTF8(b byte) string {
	return "byte 0x" + strings.ToUpper(strconv.FormatUint(uint64(b), 16)) +
		" is not UTF-8; the file must be UTF-8 (a file saved as Latin-1 converts with iconv -f latin1 -t utf-8)"
}
