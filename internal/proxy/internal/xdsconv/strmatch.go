package xdsconv

import (
	"fmt"
	"regexp"
	"strings"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// StringMatcher is Envoy's StringMatcher, compiled: the one every layer of the
// proxy (route header and query matchers, CORS origins, authorization header
// lists) matches with, so that they agree on ignore_case and regexes. The zero
// value matches nothing.
type StringMatcher struct {
	kind       stringMatchKind
	value      string
	re         *regexp.Regexp
	ignoreCase bool // ASCII case folding, as Envoy's; never for regexes
}

type stringMatchKind uint8

const (
	matchNothing stringMatchKind = iota
	matchExact
	matchPrefix
	matchSuffix
	matchContains
	matchRegex
)

// NewStringMatcher compiles sm. Like Envoy, it ignores ignore_case on a
// safe_regex, whose pattern must match the whole value.
func NewStringMatcher(sm *matcherv3.StringMatcher) (StringMatcher, error) {
	out := StringMatcher{ignoreCase: sm.GetIgnoreCase()}
	switch p := sm.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		out.kind, out.value = matchExact, p.Exact
	case *matcherv3.StringMatcher_Prefix:
		out.kind, out.value = matchPrefix, p.Prefix
	case *matcherv3.StringMatcher_Suffix:
		out.kind, out.value = matchSuffix, p.Suffix
	case *matcherv3.StringMatcher_Contains:
		out.kind, out.value = matchContains, p.Contains
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := FullMatchRegexp(p.SafeRegex.GetRegex())
		if err != nil {
			return out, fmt.Errorf("safe_regex %q: %w", p.SafeRegex.GetRegex(), err)
		}
		out.kind, out.re, out.ignoreCase = matchRegex, re, false
	default:
		return out, fmt.Errorf("string match %T is not supported", sm.GetMatchPattern())
	}
	return out, nil
}

// FullMatchRegexp compiles an RE2 pattern that must match a whole value, as
// Envoy's safe_regex matchers do.
func FullMatchRegexp(pattern string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + pattern + `)$`)
}

// Match compares v as Envoy does: ignore_case folds ASCII letters only.
func (m *StringMatcher) Match(v string) bool {
	switch m.kind {
	case matchRegex:
		return m.re.MatchString(v)
	case matchExact:
		return len(v) == len(m.value) && hasPrefixASCII(v, m.value, m.ignoreCase)
	case matchPrefix:
		return hasPrefixASCII(v, m.value, m.ignoreCase)
	case matchSuffix:
		return len(v) >= len(m.value) && hasPrefixASCII(v[len(v)-len(m.value):], m.value, m.ignoreCase)
	case matchContains:
		if !m.ignoreCase {
			return strings.Contains(v, m.value)
		}
		for i := 0; i+len(m.value) <= len(v); i++ {
			if hasPrefixASCII(v[i:], m.value, true) {
				return true
			}
		}
	}
	return false
}

// hasPrefixASCII reports whether s starts with prefix, folding ASCII letters
// when fold is set.
func hasPrefixASCII(s, prefix string, fold bool) bool {
	if len(s) < len(prefix) {
		return false
	}
	if !fold {
		return s[:len(prefix)] == prefix
	}
	for i := 0; i < len(prefix); i++ {
		if lowerASCII(s[i]) != lowerASCII(prefix[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// StringMatchers is a ListStringMatcher: a value matches when any matcher
// does.
type StringMatchers []StringMatcher

// NewStringMatchers compiles a list of matchers, naming the one at fault.
func NewStringMatchers(sms []*matcherv3.StringMatcher) (StringMatchers, error) {
	out := make(StringMatchers, 0, len(sms))
	for i, sm := range sms {
		m, err := NewStringMatcher(sm)
		if err != nil {
			return nil, fmt.Errorf("patterns[%d]: %w", i, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// Match reports whether any matcher matches v.
func (ms StringMatchers) Match(v string) bool {
	for i := range ms {
		if ms[i].Match(v) {
			return true
		}
	}
	return false
}
