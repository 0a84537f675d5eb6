// Package manifest reads Kubernetes manifests (YAML or JSON files) from a
// directory and turns them into the typed objects Portico works with:
// Ingress and IngressClass (networking.k8s.io/v1, with the deprecated
// v1beta1 versions converted), Service, Endpoints, Secret, EndpointSlice,
// IngressRoute and TLSCertificateDelegation (contour.heptio.com/v1beta1), HTTPProxy
// and TLSCertificateDelegation (projectcontour.io/v1), ExtensionService (projectcontour.io/v1alpha1), Namespace (for its labels), and
// the Gateway API kinds (gateway.networking.k8s.io/v1, v1beta1 converted).
//
// Kinds of API groups Portico does not read (apps/v1 Deployments, CRDs of other
// projects, ...) and real kinds of the groups it does read that it has no use for
// (ConfigMap, Pod, NetworkPolicy, ...) are skipped without complaint, so a directory
// of complete application manifests can be pointed at directly. In the groups Portico
// reads (core v1, networking.k8s.io, discovery.k8s.io, extensions, contour.heptio.com,
// projectcontour.io and gateway.networking.k8s.io), a kind or version that does not exist — a typo such as
// `kind: Ingres` or `networking.k8s.io/v2` — is reported, since skipping it would make a
// route silently go missing.
//
// A document that cannot be used — invalid YAML/JSON, missing apiVersion/kind/name,
// unknown or duplicate fields in a kept kind, a mistaken kind or version — is
// reported as a Problem and skipped; the rest of the file and the directory are
// still used.
package manifest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	contourv1beta1 "github.com/portico-dev/portico/apis/contour/v1beta1"
)

// Problem is a document that could not be used.
type Problem struct {
	File string // path as given (relative to the dir's parent as passed in)
	// Line is the 1-based line of the mistake: the misspelt field's name, the value of the
	// wrong type, the YAML syntax error; the document's first line when the problem is
	// about the document as a whole (a missing kind). 0 for a problem about a whole file.
	Line int
	// Column is the 1-based column (in characters) where it is known to matter (a byte
	// that is not UTF-8), else 0.
	Column   int
	Document int    // 1-based index of the document in the file; 0 for a whole file
	Reason   string // human-readable, says what to fix
}

// String formats the problem as "file:line: document N: reason" ("file:line:column:"
// when the column is known). A problem about a whole file (Line and Document 0, e.g.
// an unreadable file) is formatted as "file: reason".
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(p.Line))
		if p.Column > 0 {
			b.WriteString(":")
			b.WriteString(strconv.Itoa(p.Column))
		}
	}
	b.WriteString(": ")
	if p.Document > 0 {
		b.WriteString("document ")
		b.WriteString(strconv.Itoa(p.Document))
		b.WriteString(": ")
	}
	b.WriteString(p.Reason)
	return b.String()
}

// LogAttrs are the problem's attributes for a log line. A position that is not known
// (a problem about a whole file) is left out rather than logged as 0.
func (p Problem) LogAttrs() []any {
	attrs := []any{"file", p.File}
	if p.Line > 0 {
		attrs = append(attrs, "line", p.Line)
	}
	if p.Column > 0 {
		attrs = append(attrs, "column", p.Column)
	}
	if p.Document > 0 {
		attrs = append(attrs, "document", p.Document)
	}
	return append(attrs, "reason", p.Reason)
}

// Result is what a directory of manifests yields.
type Result struct {
	// Objects are typed objects only, in deterministic order (file path, then
	// document order), each with its age as metadata.creationTimestamp (see
	// LoadDir and Watch).
	Objects  []runtime.Object
	Problems []Problem
	// Changes say how Objects differ from the previous Result of the same Watch
	// (removals first, then additions and updates in the order of Objects); in
	// LoadDir's Result and Watch's first, every object is added. An object that did
	// not change is the very same pointer in both Results, and no object handed out
	// is ever modified, so that consumers can tell what changed by pointer.
	Changes []Change
	// LastGood are the last good versions standing in for files that are broken now
	// (Watch only), in reading order: what a restart needs to serve them again (see
	// Memory).
	LastGood []LastGoodFile
}

// Decode decodes one file's bytes: multi-document YAML, or — for a file
// whose name ends in .json — JSON (a single object, a `kind: List`, or a
// stream of objects). file is only used to label problems and to choose
// between JSON and YAML.
//
// Returned objects are typed (*networkingv1.Ingress, *corev1.Service, ...),
// have their TypeMeta set, a namespace when namespaced ("default" if the
// manifest has none) and the API server defaults Portico relies on applied.
// Their creationTimestamp is the manifest's: ages are given by LoadDir and
// Watch, which know when each object appeared.
func Decode(file string, data []byte) ([]runtime.Object, []Problem) {
	d := decoder{file: file, log: slog.Default()}
	d.decodeFile(data)
	return d.objs, d.probs
}

// maxListDepth bounds nesting of List documents inside List documents.
const maxListDepth = 5

type decoder struct {
	file  string
	log   *slog.Logger
	objs  []runtime.Object
	probs []Problem
	// objLines has, for each of objs, the document it came from.
	objLines []doc
	// loc finds fields in the text of document locDoc, the last with a problem.
	loc    *locator
	locDoc int
}

// doc locates one document of a file.
type doc struct {
	index int // 1-based document index
	line  int // line of the document's first content
	// firstLine is the line of the document's first byte; the YAML parser's
	// line numbers are relative to it.
	firstLine int
	// text is the document's text, to point a problem at its line.
	text []byte
}

func (d *decoder) problem(dc doc, line int, reason string) {
	if line <= 0 {
		line = dc.line
	}
	d.probs = append(d.probs, Problem{File: d.file, Line: line, Document: dc.index, Reason: reason})
}

// notUTF8Problem reports the first byte of a document's text (starting on its
// firstLine) that is not UTF-8, at its line and column, if there is one.
func (d *decoder) notUTF8Problem(dc doc, text []byte) bool {
	off := invalidUTF8(text)
	if off < 0 {
		return false
	}
	line, col := lineColumn(text, off)
	d.probs = append(d.probs, Problem{File: d.file, Line: dc.firstLine + line - 1, Column: col, Document: dc.index, Reason: notUTF8(text[off])})
	return true
}

func (d *decoder) decodeFile(data []byte) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // UTF-8 BOM
	if strings.EqualFold(filepath.Ext(d.file), ".json") {
		d.decodeJSONStream(data)
		return
	}
	d.decodeYAMLStream(data)
}

// decodeYAMLStream splits data on "---" separator lines (like kubectl: a
// line starting with "---" followed only by whitespace or a comment) and
// decodes each non-empty document.
func (d *decoder) decodeYAMLStream(data []byte) {
	index := 0
	lineNo := 0      // number of the line being looked at
	chunkStart := 0  // byte offset of the current document
	chunkLine := 1   // line of the current document's first byte
	contentLine := 0 // line of its first content, 0 while none
	flush := func(end int) {
		if contentLine == 0 {
			return // only blank lines and comments: not a document
		}
		index++
		d.decodeYAMLDoc(data[chunkStart:end], doc{index: index, line: contentLine, firstLine: chunkLine, text: data[chunkStart:end]})
	}
	for pos := 0; pos < len(data); {
		lineNo++
		end := bytes.IndexByte(data[pos:], '\n')
		next := len(data)
		if end >= 0 {
			end += pos
			next = end + 1
		} else {
			end = len(data)
		}
		line := data[pos:end]
		if isSeparator(line) {
			flush(pos)
			chunkStart, chunkLine, contentLine = next, lineNo+1, 0
		} else if contentLine == 0 && isContent(line) {
			contentLine = lineNo
		}
		pos = next
	}
	flush(len(data))
}

func isSeparator(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	rest := bytes.TrimSpace(line[3:])
	return len(rest) == 0 || rest[0] == '#'
}

// isContent reports whether a line holds something other than whitespace,
// a comment or a document end marker.
func isContent(line []byte) bool {
	t := bytes.TrimSpace(line)
	if len(t) == 0 || t[0] == '#' {
		return false
	}
	if bytes.HasPrefix(line, []byte("...")) {
		rest := bytes.TrimSpace(line[3:])
		return len(rest) > 0 && rest[0] != '#'
	}
	return true
}

func (d *decoder) decodeYAMLDoc(chunk []byte, dc doc) {
	defer d.recoverPanic(dc)
	j, err := yaml.YAMLToJSONStrict(chunk)
	if err != nil {
		// The YAML parser says only "invalid leading UTF-8 octet", at no line.
		if d.notUTF8Problem(dc, chunk) {
			return
		}
		line, reason := yamlError(err, dc, lastLine(dc, chunk))
		d.problem(dc, line, reason)
		return
	}
	d.decodeJSONDoc(j, dc, "", nil, 0)
}

var yamlLineRE = regexp.MustCompile(`line (\d+): ([^\n]*)`)

// lastLine is the line of the last byte of a document's text.
func lastLine(dc doc, chunk []byte) int {
	return dc.firstLine + bytes.Count(bytes.TrimSuffix(chunk, []byte("\n")), []byte("\n"))
}

// yamlError turns a YAML parser error into a line and a reason, with line
// numbers made relative to the file instead of the document. An error at the end
// of the text (a mapping left unfinished) is reported at the document's last line,
// rather than at the line after it that the parser names.
func yamlError(err error, dc doc, last int) (int, string) {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	matches := yamlLineRE.FindAllStringSubmatch(msg, -1)
	if len(matches) == 0 {
		return dc.line, "invalid YAML: " + strings.TrimSpace(msg)
	}
	line := 0
	var b strings.Builder
	b.WriteString("invalid YAML: ")
	for i, m := range matches {
		n, convErr := strconv.Atoi(m[1])
		if convErr != nil || n <= 0 {
			n = 1
		}
		abs := min(dc.firstLine+n-1, last)
		if i == 0 {
			line = abs
			b.WriteString(m[2])
			continue
		}
		fmt.Fprintf(&b, "; line %d: %s", abs, m[2])
	}
	return line, b.String()
}

// decodeJSONStream decodes a stream of JSON values, each a document.
func (d *decoder) decodeJSONStream(data []byte) {
	dec := json.NewDecoder(bytes.NewReader(data))
	index := 0
	for {
		start := int(dec.InputOffset())
		start += len(data[start:]) - len(bytes.TrimLeft(data[start:], " \t\r\n"))
		if start >= len(data) {
			return
		}
		index++
		dc := doc{index: index, line: lineAt(data, start), firstLine: lineAt(data, start)}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			var se *json.SyntaxError
			switch {
			case errors.As(err, &se):
				if !d.notUTF8Problem(dc, data[start:min(max(int(se.Offset), start), len(data))]) {
					d.problem(dc, lineAt(data, int(se.Offset)), "invalid JSON: "+se.Error())
				}
			case errors.Is(err, io.ErrUnexpectedEOF):
				if !d.notUTF8Problem(dc, data[start:]) {
					d.problem(dc, lineAt(data, len(data)), "invalid JSON: unexpected end of file")
				}
			default:
				d.problem(dc, 0, "invalid JSON: "+err.Error())
			}
			return // the rest of the stream cannot be located reliably
		}
		if raw[0] == '[' {
			d.problem(dc, 0, `a JSON array is not a manifest; wrap the objects in {"apiVersion": "v1", "kind": "List", "items": [...]}`)
			continue
		}
		// encoding/json takes a byte that is not UTF-8 in a string as U+FFFD, silently.
		if d.notUTF8Problem(dc, raw) {
			continue
		}
		dc.text = raw
		func() {
			defer d.recoverPanic(dc)
			d.decodeJSONDoc(raw, dc, "", nil, 0)
		}()
	}
}

// lineAt returns the 1-based line of byte offset off in data.
func lineAt(data []byte, off int) int {
	if off > len(data) {
		off = len(data)
	}
	if off < 0 {
		off = 0
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

func (d *decoder) recoverPanic(dc doc) {
	if r := recover(); r != nil {
		d.problem(dc, 0, fmt.Sprintf("internal error while decoding this document (please report it): %v", r))
	}
}

// decodeJSONDoc decodes one document, already converted to JSON. prefix
// locates it inside a List ("items[3]: ") for problem reasons, and base for finding
// its fields in the document's text.
func (d *decoder) decodeJSONDoc(j []byte, dc doc, prefix string, base []segment, depth int) {
	j = bytes.TrimSpace(j)
	if len(j) == 0 || bytes.Equal(j, []byte("null")) {
		return // empty document
	}
	if j[0] != '{' {
		d.problem(dc, 0, prefix+"document is not an object; expected a mapping with apiVersion, kind and metadata")
		return
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(j, &fields); err != nil {
		d.problem(dc, 0, prefix+"invalid document: "+err.Error())
		return
	}
	apiVersion, err1 := stringField(fields, "apiVersion")
	kind, err2 := stringField(fields, "kind")
	if err := errors.Join(err1, err2); err != nil {
		d.problem(dc, 0, prefix+err.Error())
		return
	}
	switch {
	case apiVersion == "" && kind == "":
		d.problem(dc, 0, prefix+"apiVersion and kind are missing; every document needs both (e.g. apiVersion: networking.k8s.io/v1, kind: Ingress)")
		return
	case apiVersion == "":
		d.problem(dc, 0, prefix+fmt.Sprintf("apiVersion is missing (kind %q)", kind))
		return
	case kind == "":
		d.problem(dc, 0, prefix+fmt.Sprintf("kind is missing (apiVersion %q)", apiVersion))
		return
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		d.problem(dc, 0, prefix+fmt.Sprintf("invalid apiVersion %q: expected \"version\" or \"group/version\"", apiVersion))
		return
	}
	gvk := gv.WithKind(kind)

	if info, ok := keptKinds[gvk]; ok {
		obj, _, err := deserializer().Decode(j, nil, nil)
		if err != nil {
			issues := decodeIssues(err, fields)
			if gvk == gvkIngressRoute {
				if is, ok := serviceFieldIssue(fields); ok {
					issues = []issue{is}
				}
			}
			d.report(dc, base, prefix, issues)
			return
		}
		d.keep(obj, info, dc, prefix)
		return
	}

	if kind == "List" {
		if depth >= maxListDepth {
			d.problem(dc, 0, prefix+"List nested too deeply")
			return
		}
		var items []json.RawMessage
		if raw, ok := fields["items"]; ok {
			if err := json.Unmarshal(raw, &items); err != nil {
				d.problem(dc, 0, prefix+"items must be a list of objects")
				return
			}
		}
		for i, item := range items {
			at := append(slices.Clip(base), segment{key: "items", index: -1}, segment{index: i})
			d.decodeJSONDoc(item, dc, fmt.Sprintf("%sitems[%d]: ", prefix, i), at, depth+1)
		}
		return
	}

	// A typed list of a kept kind, as the API server returns it (e.g.
	// IngressList): its items carry no apiVersion/kind of their own.
	if elem, ok := strings.CutSuffix(kind, "List"); ok {
		if info, ok := keptKinds[gv.WithKind(elem)]; ok {
			list, _, err := deserializer().Decode(j, nil, nil)
			if err != nil {
				d.report(dc, base, prefix, decodeIssues(err, fields))
				return
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				d.problem(dc, 0, prefix+err.Error())
				return
			}
			for i, item := range items {
				d.keep(item, info, dc, fmt.Sprintf("%sitems[%d]: ", prefix, i))
			}
			return
		}
	}

	if reason, field := unreadKind(gvk); reason != "" {
		d.report(dc, base, prefix, []issue{{field: []segment{{key: field, index: -1}}, atKey: true, say: func(string) string { return reason }}})
		return
	}
	d.log.Debug("manifest: skipping document of a kind Portico does not use",
		"file", d.file, "line", dc.line, "document", dc.index, "apiVersion", apiVersion, "kind", kind)
}

func stringField(fields map[string]json.RawMessage, name string) (string, error) {
	raw, ok := fields[name]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s must be a string, got %s", name, truncate(string(raw), 40))
	}
	return s, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// keep converts, defaults and checks a decoded object and adds it to the
// result.
func (d *decoder) keep(obj runtime.Object, info kindInfo, dc doc, prefix string) {
	switch o := obj.(type) {
	case *networkingv1beta1.Ingress:
		obj = ingressFromNetworkingV1beta1(o)
	case *extensionsv1beta1.Ingress:
		conv, err := ingressFromExtensionsV1beta1(o)
		if err != nil {
			d.problem(dc, 0, prefix+"converting extensions/v1beta1 Ingress: "+err.Error())
			return
		}
		obj = conv
	case *networkingv1beta1.IngressClass:
		obj = ingressClassFromNetworkingV1beta1(o)
	default:
		obj = gatewayFromV1beta1(obj)
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		d.problem(dc, 0, prefix+err.Error())
		return
	}
	if acc.GetName() == "" {
		d.problem(dc, 0, prefix+fmt.Sprintf("%s has no metadata.name", info.target.Kind))
		return
	}
	if info.namespaced {
		if acc.GetNamespace() == "" {
			acc.SetNamespace("default")
		}
	} else {
		acc.SetNamespace("")
	}
	Scheme().Default(obj)
	obj.GetObjectKind().SetGroupVersionKind(info.target)
	d.objs = append(d.objs, obj)
	d.objLines = append(d.objLines, dc)
}

var (
	unmarshalTypeRE = regexp.MustCompile(`cannot unmarshal (\w+)(?: \S+)? into Go struct field \w*\.(\S+) of type (\S+)`)
	strictFieldRE   = regexp.MustCompile(`^(unknown|duplicate) field "(.*)"$`)
)

// issue is one thing decoding found wrong with a document.
type issue struct {
	// field is the path of the field it is about, as the decoder named it; nil when
	// it names none.
	field []segment
	q     query
	// atKey points the problem at the field's name (a misspelt or repeated field)
	// rather than at its value.
	atKey bool
	// say is the reason, naming the field by its path as found in the document (with
	// its list positions), or as the decoder named it when it cannot be found.
	say func(path string) string
}

// plainIssue is an issue about no field in particular.
func plainIssue(reason string) issue {
	return issue{say: func(string) string { return reason }}
}

// locate returns the line of the issue in the file (0 when unknown) and its reason,
// finding its field with loc.
func (is issue) locate(loc *locator, dc doc, base []segment) (int, string) {
	if len(is.field) == 0 || dc.text == nil {
		return 0, is.say(formatPath(is.field))
	}
	m, ok := loc.find(base, is.field, is.q)
	if !ok && is.q.kind != "" {
		// Of a value YAML 1.1 and 1.2 type differently ("yes"): the first by its path.
		q := is.q
		q.kind = ""
		m, ok = loc.find(base, is.field, q)
	}
	if !ok {
		return 0, is.say(formatPath(is.field))
	}
	return dc.firstLine + m.line(is.atKey) - 1, is.say(m.path)
}

// locator returns the locator of dc's text, made on the first problem of the document
// and kept for its others (the items of a List): a document without a problem costs
// nothing.
func (d *decoder) locator(dc doc) *locator {
	if d.loc == nil || d.locDoc != dc.index {
		d.loc, d.locDoc = newLocator(dc.text), dc.index
	}
	return d.loc
}

// report adds one problem for the issues of a document, at the line of the first; a
// further one on another line says its line.
func (d *decoder) report(dc doc, base []segment, prefix string, issues []issue) {
	line, last := 0, 0
	var b strings.Builder
	b.WriteString(prefix)
	for i, is := range issues {
		at, reason := is.locate(d.locator(dc), dc, base)
		if i == 0 {
			line = at
		} else {
			b.WriteString("; ")
			if at > 0 && at != last {
				fmt.Fprintf(&b, "line %d: ", at)
			}
		}
		last = at
		b.WriteString(reason)
	}
	d.problem(dc, line, b.String())
}

// decodeIssues makes a decoding error readable: strict errors become the list of
// offending fields, type errors name the field and the expected type rather than Go
// types. fields are the document's top-level fields.
func decodeIssues(err error, fields map[string]json.RawMessage) []issue {
	if se, ok := runtime.AsStrictDecodingError(err); ok {
		var out []issue
		for _, e := range se.Errors() {
			msg := e.Error()
			m := strictFieldRE.FindStringSubmatch(msg)
			if m == nil {
				out = append(out, plainIssue(msg))
				continue
			}
			what := m[1]
			out = append(out, issue{field: parsePath(m[2]), atKey: true, q: query{last: what == "duplicate"},
				say: func(path string) string { return fmt.Sprintf("%s field %q", what, path) }})
		}
		return out
	}
	msg := err.Error()
	if i := strings.Index(msg, " cannot be handled as a"); i >= 0 {
		if j := strings.Index(msg[i:], ": "); j >= 0 {
			msg = msg[i+j+2:]
		}
	}
	msg = strings.TrimPrefix(msg, "json: ")
	if m := unmarshalTypeRE.FindStringSubmatch(msg); m != nil {
		return []issue{typeIssue(nil, m)}
	}
	if strings.Contains(msg, "illegal base64 data") {
		return []issue{base64Issue(fields, msg)}
	}
	return []issue{plainIssue(msg)}
}

// typeIssue is the issue of a type error matched by unmarshalTypeRE, whose field path
// (without list positions) is below base.
func typeIssue(base []segment, m []string) issue {
	got, goType := m[1], m[3]
	return issue{field: append(slices.Clip(base), parsePath(m[2])...), q: query{loose: true, kind: got},
		say: func(path string) string {
			return fmt.Sprintf("field %q must be %s, not %s", path, describeGoType(goType), describeJSONKind(got))
		}}
}

// base64Issue is the issue of a Secret whose data holds a value that is not base64:
// the decoder does not say which, so the first such value is looked for.
func base64Issue(fields map[string]json.RawMessage, msg string) issue {
	is := issue{say: func(path string) string {
		if path == "" {
			return "Secret data values must be base64-encoded (put plain text under stringData instead): " + msg
		}
		return fmt.Sprintf("field %q must be base64-encoded (put plain text under stringData instead): %s", path, msg)
	}}
	if key, ok := firstNotBase64(fields["data"]); ok {
		is.field = []segment{{key: "data", index: -1}, {key: key, index: -1}}
	}
	return is
}

// firstNotBase64 returns the first key, in the order written, of a JSON object of
// strings whose value is not base64.
func firstNotBase64(raw json.RawMessage) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		key, _ := t.(string)
		var value string
		if err := dec.Decode(&value); err != nil {
			return "", false
		}
		if _, err := base64.StdEncoding.DecodeString(value); err != nil {
			return key, true
		}
	}
	return "", false
}

// describeGoType names the JSON shape a Go type of the kept kinds expects.
func describeGoType(t string) string {
	switch {
	case strings.HasPrefix(t, "[]uint8"):
		return "a base64-encoded string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "intstr.IntOrString":
		return "an integer or a string"
	case t == "v1.Time" || t == "v1.MicroTime":
		return "a timestamp"
	case t == "string":
		return "a string"
	}
	// Named string types of the kept kinds (v1.Protocol, v1.ServiceType,
	// v1.PathType, types.UID, ...).
	for _, suffix := range []string{"Type", "Protocol", "Policy", "Family", "Affinity", "UID", "IPMode", "ConditionStatus"} {
		if strings.HasSuffix(t, suffix) {
			return "a string"
		}
	}
	return "an object"
}

func describeJSONKind(k string) string {
	switch k {
	case "array":
		return "a list"
	case "object":
		return "a mapping"
	case "number":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	}
	return k
}

// serviceFieldIssue finds an error of an IngressRoute route's "service" field, which
// decodes itself (it is one service or a list) and so cannot say where it is: the issue
// names the field, as strict decoding does everywhere else.
func serviceFieldIssue(fields map[string]json.RawMessage) (issue, bool) {
	var spec struct {
		Routes []struct {
			Service json.RawMessage `json:"service"`
		} `json:"routes"`
	}
	if err := json.Unmarshal(fields["spec"], &spec); err != nil {
		return issue{}, false
	}
	for i, r := range spec.Routes {
		if len(r.Service) == 0 {
			continue
		}
		var l contourv1beta1.ServiceList
		err := l.UnmarshalJSON(r.Service)
		if err == nil {
			continue
		}
		base := []segment{{key: "spec", index: -1}, {key: "routes", index: -1}, {index: i}, {key: "service", index: -1}}
		msg := strings.TrimPrefix(err.Error(), "service: ")
		msg = strings.TrimPrefix(msg, "json: ")
		if m := unmarshalTypeRE.FindStringSubmatch(msg); m != nil {
			return typeIssue(base, m), true
		}
		if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
			if name, err := strconv.Unquote(name); err == nil {
				return issue{field: append(base, segment{key: name, index: -1}), atKey: true, q: query{loose: true},
					say: func(path string) string { return fmt.Sprintf("unknown field %q", path) }}, true
			}
		}
		return plainIssue(fmt.Sprintf("spec.routes[%d].service: %s", i, msg)), true
	}
	return issue{}, false
}
