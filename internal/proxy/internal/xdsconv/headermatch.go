package xdsconv

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// HeaderMatcher is Envoy's route HeaderMatcher without the header's name: what
// it decides for a header's value, or for its absence. Routes and the rate
// limit filter's header_value_match look the header up themselves (repeated
// headers joined with ",", as Envoy does) and ask Match.
type HeaderMatcher struct {
	str                 StringMatcher
	isPresentMatch      bool
	present             bool // present_match's value
	invert              bool
	treatMissingAsEmpty bool
}

// NewHeaderMatcher compiles hm's specifier, invert_match and
// treat_missing_header_as_empty; the caller keeps its name.
func NewHeaderMatcher(hm *routev3.HeaderMatcher) (HeaderMatcher, error) {
	out := HeaderMatcher{invert: hm.GetInvertMatch(), treatMissingAsEmpty: hm.GetTreatMissingHeaderAsEmpty()}
	var err error
	switch s := hm.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_PresentMatch:
		out.isPresentMatch, out.present = true, s.PresentMatch
	case *routev3.HeaderMatcher_StringMatch:
		out.str, err = NewStringMatcher(s.StringMatch)
	// The deprecated single-purpose fields are cheap to honour.
	case *routev3.HeaderMatcher_ExactMatch:
		// Envoy's deprecated exact_match "" accepts any value (an empty prefix does).
		sm := &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s.ExactMatch}}
		if s.ExactMatch == "" {
			sm.MatchPattern = &matcherv3.StringMatcher_Prefix{}
		}
		out.str, err = NewStringMatcher(sm)
	case *routev3.HeaderMatcher_PrefixMatch:
		out.str, err = NewStringMatcher(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: s.PrefixMatch}})
	case *routev3.HeaderMatcher_SuffixMatch:
		out.str, err = NewStringMatcher(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: s.SuffixMatch}})
	case *routev3.HeaderMatcher_ContainsMatch:
		out.str, err = NewStringMatcher(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: s.ContainsMatch}})
	case *routev3.HeaderMatcher_SafeRegexMatch:
		out.str, err = NewStringMatcher(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: s.SafeRegexMatch}})
	case nil:
		// Envoy treats a matcher without a specifier as "present".
		out.isPresentMatch, out.present = true, true
	default:
		err = fmt.Errorf("match %T is not supported", hm.GetHeaderMatchSpecifier())
	}
	return out, err
}

// Match decides for a header's value, ok false when the request lacks the
// header. As in Envoy, a missing header fails every string match, inverted or
// not, unless treat_missing_header_as_empty makes it the empty value; only a
// present_match can hold on it.
func (m *HeaderMatcher) Match(value string, ok bool) bool {
	if !ok {
		if !m.treatMissingAsEmpty {
			return m.isPresentMatch && m.present == m.invert
		}
		value = ""
	}
	var match bool
	if m.isPresentMatch {
		match = m.present
	} else {
		match = m.str.Match(value)
	}
	return match != m.invert
}
