package router

import (
	"net/http"
	"net/http/httptest"
	"testing"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/portico-dev/portico/internal/proxy/upstream"
)

func TestStringMatcherCases(t *testing.T) {
	tests := []struct {
		sm    *matcherv3.StringMatcher
		value string
		want  bool
	}{
		{strExactM("Canary", true), "cANARY", true},
		{strExactM("Canary", true), "Canary2", false},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "AB"}, IgnoreCase: true}, "abc", true},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: ".JSON"}, IgnoreCase: true}, "a.json", true},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: ".JSON"}}, "a.json", false},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "MiD"}, IgnoreCase: true}, "xmidx", true},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "MiD"}}, "xmidx", false},
		// Envoy folds ASCII only: the Kelvin sign is not a "k".
		{strExactM("k", true), "\u212a", false},
		// ignore_case does not apply to regexes, which match the whole value.
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "ab"}}, IgnoreCase: true}, "AB", false},
		{strRegexM("[0-9]+"), "123", true},
		{strRegexM("[0-9]+"), "12a", false},
	}
	for _, tc := range tests {
		sm, err := convertStringMatcher(tc.sm)
		if err != nil {
			t.Fatal(err)
		}
		if got := sm.matches(tc.value); got != tc.want {
			t.Errorf("%v on %q = %v, want %v", tc.sm, tc.value, got, tc.want)
		}
	}
	for q, want := range map[string]string{"v=a&v=b": "a", "x=1&v=": "", "v": "", "w=1": "-", "": "-", "vv=1&v=2": "2", "v=a%20b": "a%20b"} {
		got, ok := firstQueryValue(q, "v")
		if !ok {
			got = "-"
		}
		if got != want {
			t.Errorf("first value of v in %q = %q, want %q", q, got, want)
		}
	}
}

func TestHashPolicyCookieAndQueryEvaluation(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "http://x/p?u=alice&u=bob", nil)
	r.Header["Cookie"] = []string{"a=1", ` route="abc"; b=2`}
	ri := &RequestInfo{RawQuery: r.URL.RawQuery, Header: r.Header}
	pc, cookies := HashRequest([]HashPolicy{{Kind: HashQueryParameter, Name: "u"}}, r, ri)
	if !pc.HasHash || pc.Hash != upstream.XXHash64String("alice") || cookies != nil {
		t.Errorf("query_parameter: %+v %v, want the hash of the first value", pc, cookies)
	}
	pc, cookies = HashRequest([]HashPolicy{{Kind: HashCookie, Name: "route", HasTTL: true, TtlSeconds: 5}}, r, ri)
	if !pc.HasHash || pc.Hash != upstream.XXHash64String("abc") || cookies != nil {
		t.Errorf("cookie: %+v %v, want the hash of the unquoted value and no new cookie", pc, cookies)
	}
	if pc, _ := HashRequest([]HashPolicy{{Kind: HashCookie, Name: "none"}}, r, ri); pc.HasHash {
		t.Errorf("absent cookie without ttl hashed: %+v", pc)
	}
	if pc, _ := HashRequest([]HashPolicy{{Kind: HashQueryParameter, Name: "none"}}, r, ri); pc.HasHash {
		t.Errorf("absent parameter hashed: %+v", pc)
	}
}

func strExactM(v string, ignoreCase bool) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}, IgnoreCase: ignoreCase}
}

func strRegexM(re string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: re}}}
}
