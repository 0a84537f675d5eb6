package extauthz

import (
	"fmt"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// nameMatchers converts a ListStringMatcher of header names; field names it in
// errors. Names are matched in lower case, as Envoy keeps them.
func nameMatchers(l *matcherv3.ListStringMatcher, field string) ([]xdsconv.StringMatcher, error) {
	var out []xdsconv.StringMatcher
	for i, sm := range l.GetPatterns() {
		m, err := xdsconv.NewStringMatcher(sm)
		if err != nil {
			return nil, fmt.Errorf("%s.patterns[%d]: %w", field, i, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// anyMatches reports whether one of ms matches name (lower case).
func anyMatches(ms []xdsconv.StringMatcher, name string) bool {
	for i := range ms {
		if ms[i].Match(name) {
			return true
		}
	}
	return false
}
