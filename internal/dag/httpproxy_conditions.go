package dag

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// MaxRegexProgramSize bounds every regular expression a user writes, measured as the
// instructions of its compiled RE2 program. Envoy refuses a route configuration holding a
// regex over its default limit (100), and that refusal would stop every update to the
// data plane, so a regex over it makes its object invalid instead.
const MaxRegexProgramSize = 100

// RegexProblem says why re cannot be used as a condition (not RE2, or over
// MaxRegexProgramSize), or "": the check every API's processor makes of a user's regex.
func RegexProblem(re string) string { return checkRegex(re) }

// checkRegex says why re cannot be used as a condition, or "".
func checkRegex(re string) string {
	parsed, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return fmt.Sprintf("%q is not a valid RE2 regular expression: %v", re, unwrapSyntax(err))
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return fmt.Sprintf("%q cannot be compiled: %v", re, err)
	}
	if n := len(prog.Inst); n > MaxRegexProgramSize {
		return fmt.Sprintf("%q is too complex (program size %d, at most %d): simplify it", re, n, MaxRegexProgramSize)
	}
	return ""
}

// checkPathRegex says why re cannot be a path condition, or "". Under an include, re
// is appended to the include's prefix as a group, "/blog(?:re)": for that to stay inside
// the include, re must be a whole group on its own (no unterminated \Q) and every path it
// matches must start with "/" ("/a|b" or "/?a" would match "/blogb" or "/bloga").
func checkPathRegex(re string) string {
	if p := checkRegex(re); p != "" {
		return p
	}
	if _, err := syntax.Parse("(?:"+re+")", syntax.Perl); err != nil {
		return fmt.Sprintf("%q cannot be used inside a group (an unterminated \\Q?): %v", re, unwrapSyntax(err))
	}
	parsed, _ := syntax.Parse(re, syntax.Perl)
	prog, _ := syntax.Compile(parsed.Simplify())
	if !matchesOnlySlashFirst(prog) {
		return fmt.Sprintf("%q must match only paths that start with \"/\": an alternative or optional part matches others; keep the leading \"/\" outside them, as in \"/(a|b)\"", re)
	}
	return ""
}

// matchesOnlySlashFirst reports whether every string prog matches starts with "/" (the
// empty string does not).
func matchesOnlySlashFirst(prog *syntax.Prog) bool {
	seen := make([]bool, len(prog.Inst))
	var first func(pc uint32) bool
	first = func(pc uint32) bool {
		if seen[pc] {
			return true
		}
		seen[pc] = true
		i := &prog.Inst[pc]
		switch i.Op {
		case syntax.InstFail:
			return true
		case syntax.InstAlt, syntax.InstAltMatch:
			return first(i.Out) && first(i.Arg)
		case syntax.InstCapture, syntax.InstEmptyWidth, syntax.InstNop:
			return first(i.Out)
		case syntax.InstRune1:
			return i.Rune[0] == '/'
		case syntax.InstRune:
			if len(i.Rune) == 1 {
				return i.Rune[0] == '/'
			}
			for _, r := range i.Rune {
				if r != '/' {
					return false
				}
			}
			return true
		}
		return false // InstMatch (the empty string), any character
	}
	return first(uint32(prog.Start))
}

func unwrapSyntax(err error) string {
	if se, ok := err.(*syntax.Error); ok {
		return fmt.Sprintf("%s in %q", se.Code, se.Expr)
	}
	return err.Error()
}

// conditions are the match conditions of a route or an include, merged down the include
// chain: a path condition, and header and query conditions that must all hold.
type conditions struct {
	path    PathMatch
	hasPath bool
	headers []HeaderMatch
	query   []QueryMatch
}

// key identifies conditions that match exactly the same requests as written, for
// duplicate detection: two routes or includes with equal keys compete for the same
// requests.
func (c conditions) key() string {
	var b strings.Builder
	b.Grow(len(c.path.Value) + 8 + 32*(len(c.headers)+len(c.query)))
	b.WriteByte(byte('0' + c.path.Kind))
	writeQuoted(&b, c.path.Value)
	hs := c.headers
	if len(hs) > 1 {
		hs = slices.Clone(hs)
		slices.SortFunc(hs, func(a, b HeaderMatch) int { return strings.Compare(a.key(), b.key()) })
	}
	for _, h := range hs {
		b.WriteString("|h")
		h.writeKey(&b)
	}
	qs := c.query
	if len(qs) > 1 {
		qs = slices.Clone(qs)
		slices.SortFunc(qs, func(a, b QueryMatch) int { return strings.Compare(a.key(), b.key()) })
	}
	for _, q := range qs {
		b.WriteString("|q")
		q.writeKey(&b)
	}
	return b.String()
}

func (h HeaderMatch) key() string {
	var b strings.Builder
	h.writeKey(&b)
	return b.String()
}

func (h HeaderMatch) writeKey(b *strings.Builder) {
	writeQuoted(b, h.Name)
	b.Write([]byte{byte('0' + h.Kind), flag(h.Invert), flag(h.IgnoreCase), flag(h.TreatMissingAsEmpty)})
	writeQuoted(b, h.Value)
}

func (q QueryMatch) key() string {
	var b strings.Builder
	q.writeKey(&b)
	return b.String()
}

func (q QueryMatch) writeKey(b *strings.Builder) {
	writeQuoted(b, q.Name)
	b.Write([]byte{byte('0' + q.Kind), flag(q.IgnoreCase)})
	writeQuoted(b, q.Value)
}

// writeQuoted writes s as strconv.Quote does, without allocating when s needs no
// escaping (names and values usually do not).
func writeQuoted(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c >= 0x7f || c == '"' || c == '\\' {
			b.WriteString(strconv.Quote(s))
			return
		}
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}

func flag(b bool) byte {
	if b {
		return 't'
	}
	return 'f'
}

// describe renders conditions for messages: `prefix "/foo", header x-a exact "b"`.
func (c conditions) describe() string {
	var parts []string
	switch c.path.Kind {
	case PathExact:
		parts = append(parts, fmt.Sprintf("exact %q", c.path.Value))
	case PathRegex:
		parts = append(parts, fmt.Sprintf("regex %q", c.path.Value))
	default:
		parts = append(parts, fmt.Sprintf("prefix %q", c.path.Value))
	}
	for _, h := range c.headers {
		parts = append(parts, "header "+h.Name+" "+h.describe())
	}
	for _, q := range c.query {
		parts = append(parts, "query "+q.Name+" "+matchWords(q.Kind, false, q.Value))
	}
	return strings.Join(parts, ", ")
}

func (h HeaderMatch) describe() string { return matchWords(h.Kind, h.Invert, h.Value) }

func matchWords(k StringMatchKind, invert bool, value string) string {
	not := ""
	if invert {
		not = "not "
	}
	switch k {
	case MatchPresent:
		return not + "present"
	case MatchExact:
		return fmt.Sprintf("%sexact %q", not, value)
	case MatchPrefix:
		return fmt.Sprintf("%sprefix %q", not, value)
	case MatchSuffix:
		return fmt.Sprintf("%ssuffix %q", not, value)
	case MatchContains:
		return fmt.Sprintf("%scontains %q", not, value)
	default:
		return fmt.Sprintf("%sregex %q", not, value)
	}
}

// rootConditions hold every request: the prefix "/".
func rootConditions() conditions {
	return conditions{path: PathMatch{Kind: PathPrefix, Value: "/"}}
}

// prefixMatch is the path condition of an HTTPProxy prefix. A prefix matches by path
// segments ("/api" matches "/api" and "/api/x", not "/apix"), as HTTPProxy users expect;
// a prefix ending in "/" matches every path that starts with it. "/" is always the
// segment prefix "/", as for a route without a path condition, so that the two are
// recognised as the same conditions.
func prefixMatch(p string) PathMatch {
	if p == "/" {
		return PathMatch{Kind: PathPrefix, Value: "/"}
	}
	if strings.HasSuffix(p, "/") {
		return PathMatch{Kind: PathStringPrefix, Value: p}
	}
	return PathMatch{Kind: PathPrefix, Value: p}
}

// joinPrefix appends a child's prefix to its parent's: "/blog" and "/posts" give
// "/blog/posts"; a child prefix of "/" (or none) leaves the parent's prefix as it is, so
// that an included object's catch-all route serves "/blog" itself; doubled slashes are
// collapsed.
func joinPrefix(parent, child string) string {
	if child == "" || child == "/" {
		return parent
	}
	if parent == "/" {
		return collapseSlashes(child)
	}
	return collapseSlashes(parent + "/" + child)
}

func collapseSlashes(p string) string {
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	return p
}

// addsNothing reports whether merging c under an include's conditions leaves them as
// they are: no header or query condition, and no path condition or the prefix "/".
func (c conditions) addsNothing() bool {
	return len(c.headers) == 0 && len(c.query) == 0 && (!c.hasPath || c.path == PathMatch{Kind: PathPrefix, Value: "/"})
}

// merge adds the conditions of a route or include written in an object reached through
// parent's conditions.
func (parent conditions) merge(child conditions) conditions {
	// The lists are shared when one side is empty: routes are never changed once built.
	out := conditions{path: parent.path, headers: concat(parent.headers, child.headers), query: concat(parent.query, child.query)}
	if child.hasPath {
		switch child.path.Kind {
		case PathExact, PathRegex:
			// Exact and regex paths are written relative to the include's prefix.
			base := strings.TrimSuffix(parent.path.Value, "/")
			value := base + child.path.Value
			if child.path.Kind == PathRegex && base != "" {
				// The group keeps an alternation in the child's regex ("/a|/b") under
				// the prefix: it must never match a path outside the include.
				value = regexp.QuoteMeta(base) + "(?:" + child.path.Value + ")"
			}
			out.path = PathMatch{Kind: child.path.Kind, Value: value}
		default:
			out.path = prefixMatch(joinPrefix(parent.path.Value, child.path.Value))
		}
		out.hasPath = true
	}
	out.hasPath = out.hasPath || parent.hasPath
	return out
}

// concat is a followed by b, sharing a or b when the other is empty.
func concat[T any](a, b []T) []T {
	switch {
	case len(a) == 0:
		return b
	case len(b) == 0:
		return a
	}
	out := make([]T, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}

// parseConditions checks and converts a list of conditions. forInclude refuses the path
// kinds an include may not use. Problems name the field, as `field[i].header`.
func parseConditions(field string, conds []contourv1.MatchCondition, forInclude bool) (conditions, []string) {
	var c conditions
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	paths := 0
	for i := range conds {
		mc := &conds[i]
		at := lazyField{field: field, i: i}
		set := 0
		if mc.Prefix != "" {
			set++
			if !strings.HasPrefix(mc.Prefix, "/") {
				add("%s.prefix %q must start with \"/\"", at, mc.Prefix)
			}
			c.path, c.hasPath = prefixMatch(mc.Prefix), true
		}
		if mc.Exact != "" {
			set++
			if forInclude {
				add("%s.exact: an include's conditions cannot use exact (only prefix, header and queryParameter): an exact path leaves the included object nothing to route; use prefix", at)
			} else if !strings.HasPrefix(mc.Exact, "/") {
				add("%s.exact %q must start with \"/\"", at, mc.Exact)
			}
			c.path, c.hasPath = PathMatch{Kind: PathExact, Value: mc.Exact}, true
		}
		if mc.Regex != "" {
			set++
			switch {
			case forInclude:
				add("%s.regex: an include's conditions cannot use regex (only prefix, header and queryParameter); use prefix", at)
			case !strings.HasPrefix(mc.Regex, "/"):
				add("%s.regex %q must start with \"/\"", at, mc.Regex)
			default:
				if p := checkPathRegex(mc.Regex); p != "" {
					add("%s.regex: %s", at, p)
				}
			}
			c.path, c.hasPath = PathMatch{Kind: PathRegex, Value: mc.Regex}, true
		}
		if set > 0 {
			paths++
		}
		if mc.Header != nil {
			set++
			h, p := parseHeaderCondition(mc.Header)
			if p != "" {
				add("%s.header: %s", at, p)
			}
			c.headers = append(c.headers, h)
		}
		if mc.QueryParameter != nil {
			set++
			q, p := parseQueryCondition(mc.QueryParameter)
			if p != "" {
				add("%s.queryParameter: %s", at, p)
			}
			c.query = append(c.query, q)
		}
		if mc.Cookie != "" {
			set++
			h, p := cookieCondition(mc.Cookie)
			if p != "" {
				add("%s.cookie: %s", at, p)
			}
			c.headers = append(c.headers, h)
		}
		if mc.UserAgent != "" {
			set++
			c.headers = append(c.headers, HeaderMatch{Name: "user-agent", Kind: MatchContains, Value: mc.UserAgent})
		}
		if set != 1 {
			add("%s must set exactly one of prefix, exact, regex, header, queryParameter, cookie, userAgent (it sets %d)", at, set)
		}
	}
	if paths > 1 {
		add("%s: at most one path condition (prefix, exact or regex) per list; it has %d", field, paths)
	}
	if !c.hasPath {
		c.path = PathMatch{Kind: PathPrefix, Value: "/"}
	}
	return c, errs
}

// lazyField prints as "field.list[i]" (list is optional): only messages need the name.
type lazyField struct {
	field, list string
	i           int
}

func (f lazyField) String() string { return fmt.Sprintf("%s%s[%d]", f.field, f.list, f.i) }

// parseHeaderCondition converts a header condition; exactly one operator must be set.
func parseHeaderCondition(hc *contourv1.HeaderMatchCondition) (HeaderMatch, string) {
	h := HeaderMatch{Name: strings.ToLower(hc.Name), IgnoreCase: hc.IgnoreCase, TreatMissingAsEmpty: hc.TreatMissingAsEmpty}
	if !validHeaderName(hc.Name) {
		return h, fmt.Sprintf("name %q is not a valid header name", hc.Name)
	}
	ops := 0
	set := func(k StringMatchKind, invert bool, v string) {
		ops++
		h.Kind, h.Invert, h.Value = k, invert, v
	}
	if hc.Present {
		set(MatchPresent, false, "")
	}
	if hc.NotPresent {
		set(MatchPresent, true, "")
	}
	if hc.Exact != "" {
		set(MatchExact, false, hc.Exact)
	}
	if hc.NotExact != "" {
		set(MatchExact, true, hc.NotExact)
	}
	if hc.Contains != "" {
		set(MatchContains, false, hc.Contains)
	}
	if hc.NotContains != "" {
		set(MatchContains, true, hc.NotContains)
	}
	if hc.Regex != "" {
		set(MatchRegex, false, hc.Regex)
		if p := checkRegex(hc.Regex); p != "" {
			return h, "regex " + p
		}
	}
	if ops != 1 {
		return h, fmt.Sprintf("header %q must set exactly one of present, notpresent, exact, notexact, contains, notcontains, regex (it sets %d)", hc.Name, ops)
	}
	if hc.TreatMissingAsEmpty && h.Kind == MatchPresent {
		return h, "treatMissingAsEmpty has no meaning with present or notpresent; remove it"
	}
	if h.Kind == MatchRegex && h.IgnoreCase {
		// Case is folded by the regex itself: proxies apply ignoreCase to plain strings
		// only (Envoy refuses it on a regex).
		h.Value, h.IgnoreCase = "(?i)"+h.Value, false
	}
	return h, ""
}

// parseQueryCondition converts a query parameter condition; exactly one operator.
func parseQueryCondition(qc *contourv1.QueryParameterMatchCondition) (QueryMatch, string) {
	q := QueryMatch{Name: qc.Name, IgnoreCase: qc.IgnoreCase}
	if qc.Name == "" {
		return q, "name is required"
	}
	ops := 0
	set := func(k StringMatchKind, v string) {
		ops++
		q.Kind, q.Value = k, v
	}
	if qc.Present {
		set(MatchPresent, "")
	}
	if qc.Exact != "" {
		set(MatchExact, qc.Exact)
	}
	if qc.Prefix != "" {
		set(MatchPrefix, qc.Prefix)
	}
	if qc.Suffix != "" {
		set(MatchSuffix, qc.Suffix)
	}
	if qc.Contains != "" {
		set(MatchContains, qc.Contains)
	}
	if qc.Regex != "" {
		set(MatchRegex, qc.Regex)
		if p := checkRegex(qc.Regex); p != "" {
			return q, "regex " + p
		}
	}
	if ops != 1 {
		return q, fmt.Sprintf("query parameter %q must set exactly one of present, exact, prefix, suffix, contains, regex (it sets %d)", qc.Name, ops)
	}
	if qc.IgnoreCase && q.Kind == MatchPresent {
		return q, "ignoreCase has no meaning with present; remove it"
	}
	if q.Kind == MatchRegex && q.IgnoreCase {
		q.Value, q.IgnoreCase = "(?i)"+q.Value, false
	}
	return q, ""
}

// cookieCondition matches a request carrying the cookie NAME with exactly VALUE, whatever
// other cookies it carries: a regex over the Cookie header anchored on the "; " that
// separates cookies (proxies join several Cookie headers with it), so that "user=test"
// matches neither "xuser=test" nor "user=testy".
func cookieCondition(spec string) (HeaderMatch, string) {
	name, value, ok := strings.Cut(spec, "=")
	h := HeaderMatch{Name: "cookie", Kind: MatchRegex}
	if !ok || !validCookieName(name) {
		return h, fmt.Sprintf("%q must be NAME=VALUE with a valid cookie name", spec)
	}
	if strings.ContainsAny(value, ";, \"\\") {
		return h, fmt.Sprintf("value %q may not contain ';', ',', spaces, quotes or backslashes", value)
	}
	h.Value = `(.*;\s*)?` + regexp.QuoteMeta(name) + "=" + regexp.QuoteMeta(value) + `(\s*;.*)?`
	if p := checkRegex(h.Value); p != "" {
		return h, fmt.Sprintf("%q is too long to match (shorten the name or value)", spec)
	}
	return h, ""
}

// validCookieName and validHeaderName accept an RFC 7230 token, which both names are.
func validCookieName(n string) bool { return httpguts.ValidHeaderFieldName(n) }

func validHeaderName(n string) bool { return httpguts.ValidHeaderFieldName(n) }
