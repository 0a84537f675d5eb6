package xdsconv

import (
	"testing"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

func exact(v string, fold bool) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}, IgnoreCase: fold}
}

func regex(re string, fold bool) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: re}}, IgnoreCase: fold}
}

func TestStringMatcherAsEnvoy(t *testing.T) {
	cases := []struct {
		name  string
		sm    *matcherv3.StringMatcher
		value string
		want  bool
	}{
		{"exact", exact("https://a.example", false), "https://a.example", true},
		{"exact is case-sensitive", exact("https://a.example", false), "https://A.example", false},
		{"exact folds ASCII", exact("https://a.example", true), "HTTPS://A.EXAMPLE", true},
		{"folding is ASCII only", exact("é", true), "É", false},
		{"the Kelvin sign is not a k", exact("k", true), "\u212a", false},
		{"exact is whole", exact("abc", true), "abcd", false},
		{"prefix", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "x-auth-"}, IgnoreCase: true}, "X-Auth-User", true},
		{"suffix", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: ".example"}}, "a.example", true},
		{"suffix longer than value", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: ".example"}}, "example", false},
		{"contains folded", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "tok"}, IgnoreCase: true}, "x-TOKEN", true},
		{"contains", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "tok"}}, "x-TOKEN", false},
		{"regex matches the whole value", regex(`https://[a-z]+\.example`, false), "https://a.example.evil", false},
		{"regex", regex(`https://[a-z]+\.example`, false), "https://ab.example", true},
		{"ignore_case has no effect on a regex", regex(`abc`, true), "ABC", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := NewStringMatcher(c.sm)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Match(c.value); got != c.want {
				t.Errorf("Match(%q) = %v, want %v", c.value, got, c.want)
			}
		})
	}
}

func TestStringMatcherRefusesWhatItCannotMatch(t *testing.T) {
	if _, err := NewStringMatcher(regex(`(`, false)); err == nil {
		t.Error("a bad regex was accepted")
	}
	if _, err := NewStringMatcher(&matcherv3.StringMatcher{}); err == nil {
		t.Error("a matcher without a pattern was accepted")
	}
	if _, err := NewStringMatchers([]*matcherv3.StringMatcher{exact("a", false), regex(`(`, false)}); err == nil || err.Error()[:11] != "patterns[1]" {
		t.Errorf("error %v, want one naming patterns[1]", err)
	}
}

func TestStringMatchersMatchAny(t *testing.T) {
	ms, err := NewStringMatchers([]*matcherv3.StringMatcher{exact("authorization", true), regex(`x-.*`, false)})
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]bool{"Authorization": true, "x-user": true, "cookie": false} {
		if got := ms.Match(v); got != want {
			t.Errorf("Match(%q) = %v, want %v", v, got, want)
		}
	}
	var none StringMatchers
	if none.Match("a") {
		t.Error("an empty list matched")
	}
}
