package router

import (
	"net/http"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/google/go-cmp/cmp"
)

func TestHeaderMatcher(t *testing.T) {
	str := func(sm *matcherv3.StringMatcher) *routev3.HeaderMatcher_StringMatch {
		return &routev3.HeaderMatcher_StringMatch{StringMatch: sm}
	}
	exact := func(v string, ignoreCase bool) *routev3.HeaderMatcher_StringMatch {
		return str(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}, IgnoreCase: ignoreCase})
	}
	regex := func(re string) *routev3.HeaderMatcher_StringMatch {
		return str(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: re}}})
	}
	ri := &RequestInfo{
		Method: "GET", Scheme: "https", Authority: "a.foo.com", Path: "/p", RawQuery: "q=1",
		Header: http.Header{"X-Env": {"Canary"}, "X-Multi": {"a", "b"}},
	}
	tests := []struct {
		name   string
		hm     *routev3.HeaderMatcher
		expect bool
	}{
		{"exact", &routev3.HeaderMatcher{Name: "x-env", HeaderMatchSpecifier: exact("Canary", false)}, true},
		{"exact is case-sensitive", &routev3.HeaderMatcher{Name: "x-env", HeaderMatchSpecifier: exact("canary", false)}, false},
		{"exact ignore_case", &routev3.HeaderMatcher{Name: "x-env", HeaderMatchSpecifier: exact("canary", true)}, true},
		{"prefix", &routev3.HeaderMatcher{Name: "x-env", HeaderMatchSpecifier: str(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "Can"}})}, true},
		{"suffix", &routev3.HeaderMatcher{Name: "x-env", HeaderMatchSpecifier: str(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "ary"}})}, true},
		{"contains", &routev3.HeaderMatcher{Name: "x-env", HeaderMatchSpecifier: str(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "nar"}})}, true},
		{"regex full match", &routev3.HeaderMatcher{Name: "x-env", HeaderMatchSpecifier: regex("Can.*")}, true},
		{"regex partial is no match", &routev3.HeaderMatcher{Name: "x-env", HeaderMatchSpecifier: regex("Can")}, false},
		{"repeated values joined by comma", &routev3.HeaderMatcher{Name: "x-multi", HeaderMatchSpecifier: exact("a,b", false)}, true},
		{"present", &routev3.HeaderMatcher{Name: "x-env", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}, true},
		{"present on absent", &routev3.HeaderMatcher{Name: "x-none", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}, false},
		{"present_match false on absent", &routev3.HeaderMatcher{Name: "x-none", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: false}}, true},
		{"invert", &routev3.HeaderMatcher{Name: "x-env", HeaderMatchSpecifier: exact("Canary", false), InvertMatch: true}, false},
		{"invert on absent header does not match, as in Envoy", &routev3.HeaderMatcher{Name: "x-none", HeaderMatchSpecifier: exact("v", false), InvertMatch: true}, false},
		{"absent header does not match", &routev3.HeaderMatcher{Name: "x-none", HeaderMatchSpecifier: exact("", false)}, false},
		{"treat missing as empty", &routev3.HeaderMatcher{Name: "x-none", HeaderMatchSpecifier: exact("", false), TreatMissingHeaderAsEmpty: true}, true},
		{":authority one label", &routev3.HeaderMatcher{Name: ":authority", HeaderMatchSpecifier: regex(`^[^.]+\.foo\.com$`)}, true},
		{":path has the query", &routev3.HeaderMatcher{Name: ":path", HeaderMatchSpecifier: exact("/p?q=1", false)}, true},
		{":method", &routev3.HeaderMatcher{Name: ":method", HeaderMatchSpecifier: exact("GET", false)}, true},
		{":scheme", &routev3.HeaderMatcher{Name: ":scheme", HeaderMatchSpecifier: exact("https", false)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hm, err := convertHeaderMatcher(tc.hm)
			if err != nil {
				t.Fatal(err)
			}
			if got := hm.matches(ri); got != tc.expect {
				t.Errorf("matches = %v, want %v", got, tc.expect)
			}
		})
	}
	twoLabels := *ri
	twoLabels.Authority = "a.b.foo.com"
	hm, _ := convertHeaderMatcher(&routev3.HeaderMatcher{Name: ":authority", HeaderMatchSpecifier: regex(`^[^.]+\.foo\.com$`)})
	if hm.matches(&twoLabels) {
		t.Error(":authority single-label regex matched two labels")
	}

	// Inverted and case-insensitive: catches the hosts a "*.foo.com" rule
	// must not serve.
	inverted, err := convertHeaderMatcher(&routev3.HeaderMatcher{Name: ":authority", HeaderMatchSpecifier: regex(`(?i)^[^.]+\.foo\.com$`), InvertMatch: true})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{"a.b.foo.com": true, "A.B.Foo.Com": true, "x.foo.com": false, "X.FOO.COM": false, "foo.com": true} {
		h := *ri
		h.Authority = host
		if got := inverted.matches(&h); got != want {
			t.Errorf("inverted (?i) :authority regex on %q = %v, want %v", host, got, want)
		}
	}
}

func TestPathHelpers(t *testing.T) {
	norm := map[string]string{
		"/":                    "/",
		"/a/b":                 "/a/b",
		"/a/b/../c/":           "/a/c/",
		"/a/./b/.":             "/a/b/",
		"/a/..":                "/",
		"/../../a":             "/a",
		"/public/%2e%2e/admin": "/admin",
		"/public/.%2E/admin":   "/admin",
		"//double//slash":      "//double//slash",
		"/a/..b/c":             "/a/..b/c",
		"/file.txt":            "/file.txt",
	}
	gotNorm := map[string]string{}
	for in := range norm {
		gotNorm[in] = RemoveDotSegments(in)
	}
	if diff := cmp.Diff(norm, gotNorm); diff != "" {
		t.Errorf("removeDotSegments (-want +got):\n%s", diff)
	}
	if got := MergeSlashes("//a///b/"); got != "/a/b/" {
		t.Errorf("mergeSlashes = %q", got)
	}
	hosts := map[string]string{
		"example.com:8080": "example.com", "example.com": "example.com", "[::1]:443": "[::1]", "[::1]": "[::1]", "": "",
	}
	for in, want := range hosts {
		if got := StripPort(in); got != want {
			t.Errorf("stripPort(%q) = %q, want %q", in, got, want)
		}
	}
}
