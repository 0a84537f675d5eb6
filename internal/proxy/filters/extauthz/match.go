package extauthz

import (
	"fmt"
	"regexp"
	"strings"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// nameMatcher is one StringMatcher of a list of header names. Names are
// compared in lower case, as Envoy keeps them.
type nameMatcher struct {
	match      func(name, value string) bool
	value      string
	ignoreCase bool
	re         *regexp.Regexp
}

// nameMatchers converts a ListStringMatcher; field names it in errors.
func nameMatchers(l *matcherv3.ListStringMatcher, field string) ([]nameMatcher, error) {
	var out []nameMatcher
	for i, sm := range l.GetPatterns() {
		m := nameMatcher{ignoreCase: sm.GetIgnoreCase()}
		switch p := sm.GetMatchPattern().(type) {
		case *matcherv3.StringMatcher_Exact:
			m.match, m.value = func(n, v string) bool { return n == v }, p.Exact
		case *matcherv3.StringMatcher_Prefix:
			m.match, m.value = strings.HasPrefix, p.Prefix
		case *matcherv3.StringMatcher_Suffix:
			m.match, m.value = strings.HasSuffix, p.Suffix
		case *matcherv3.StringMatcher_Contains:
			m.match, m.value = strings.Contains, p.Contains
		case *matcherv3.StringMatcher_SafeRegex:
			re, err := regexp.Compile("^(?:" + p.SafeRegex.GetRegex() + ")$")
			if err != nil {
				return nil, fmt.Errorf("%s.patterns[%d].safe_regex: %w", field, i, err)
			}
			m.re = re
		default:
			return nil, fmt.Errorf("%s.patterns[%d]: match %T is not supported", field, i, sm.GetMatchPattern())
		}
		out = append(out, m)
	}
	return out, nil
}

// matches reports whether name (lower case) matches m.
func (m *nameMatcher) matches(name string) bool {
	if m.re != nil {
		return m.re.MatchString(name) // ignore_case does not apply to regular expressions, as in Envoy
	}
	if m.ignoreCase {
		return m.match(name, strings.ToLower(m.value))
	}
	return m.match(name, m.value)
}

// anyMatches reports whether one of ms matches name (lower case).
func anyMatches(ms []nameMatcher, name string) bool {
	for i := range ms {
		if ms[i].matches(name) {
			return true
		}
	}
	return false
}
