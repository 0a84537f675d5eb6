package router

import (
	"net/http"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// headerRequests are the requests of the truth table, one column each: the header
// absent, empty, a value, another value, sent twice (matched as "Can,ary"), and the
// first value in capitals.
var headerRequests = []struct {
	name   string
	values []string
}{
	{"absent", nil},
	{"empty", []string{""}},
	{"Canary", []string{"Canary"}},
	{"stable", []string{"stable"}},
	{"repeated", []string{"Can", "ary"}},
	{"CANARY", []string{"CANARY"}},
}

// TestHeaderMatcherEnvoyTruthTable holds the proxy's header matcher to Envoy's
// HeaderUtility::matchHeaders, operator by operator. Each row gives, per column of
// headerRequests, whether Envoy matches (T) or not (F): as written, with invert_match,
// with treat_missing_header_as_empty, and with both. Envoy's rules the columns follow:
// an absent header fails every string match, inverted or not, and holds only for
// present_match: false (or present_match: true inverted); treat_missing_header_as_empty
// makes it the value "" for every matcher, a presence check included (whose result is
// then its own present_match, inverted by invert_match); repeated headers are one value
// joined with ","; ignore_case folds ASCII letters and is ignored on a regex.
func TestHeaderMatcherEnvoyTruthTable(t *testing.T) {
	str := func(sm *matcherv3.StringMatcher) func(*routev3.HeaderMatcher) {
		return func(m *routev3.HeaderMatcher) {
			m.HeaderMatchSpecifier = &routev3.HeaderMatcher_StringMatch{StringMatch: sm}
		}
	}
	present := func(p bool) func(*routev3.HeaderMatcher) {
		return func(m *routev3.HeaderMatcher) {
			m.HeaderMatchSpecifier = &routev3.HeaderMatcher_PresentMatch{PresentMatch: p}
		}
	}
	exactMatch := func(v string) func(*routev3.HeaderMatcher) {
		return func(m *routev3.HeaderMatcher) {
			m.HeaderMatchSpecifier = &routev3.HeaderMatcher_ExactMatch{ExactMatch: v}
		}
	}
	exact := func(v string) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}}
	}
	prefix := func(v string) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: v}}
	}
	suffix := func(v string) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: v}}
	}
	contains := func(v string) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: v}}
	}
	regex := func(v string) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: v}}}
	}
	noCase := func(sm *matcherv3.StringMatcher) *matcherv3.StringMatcher { sm.IgnoreCase = true; return sm }

	rows := []struct {
		op                                     string
		set                                    func(*routev3.HeaderMatcher) // sets the specifier
		plain, inverted, missingEmpty, invBoth string
	}{
		{"exact Canary", str(exact("Canary")), "FFTFFF", "FTFTTT", "FFTFFF", "TTFTTT"},
		{"exact Canary ignore_case", str(noCase(exact("Canary"))), "FFTFFT", "FTFTTF", "FFTFFT", "TTFTTF"},
		{"exact empty", str(exact("")), "FTFFFF", "FFTTTT", "TTFFFF", "FFTTTT"},
		{"prefix Can, (repeated headers joined with a comma)", str(prefix("Can,")), "FFFFTF", "FTTTFT", "FFFFTF", "TTTTFT"},
		{"prefix can ignore_case", str(noCase(prefix("can"))), "FFTFTT", "FTFTFF", "FFTFTT", "TTFTFF"},
		{"suffix ary", str(suffix("ary")), "FFTFTF", "FTFTFT", "FFTFTF", "TTFTFT"},
		{"contains nar", str(contains("nar")), "FFTFFF", "FTFTTT", "FFTFFF", "TTFTTT"},
		{"contains nar ignore_case", str(noCase(contains("nar"))), "FFTFFT", "FTFTTF", "FFTFFT", "TTFTTF"},
		{"regex Can.* (whole value)", str(regex("Can.*")), "FFTFTF", "FTFTFT", "FFTFTF", "TTFTFT"},
		{"regex an (a part is no match)", str(regex("an")), "FFFFFF", "FTTTTT", "FFFFFF", "TTTTTT"},
		{"regex canary ignore_case (ignored)", str(noCase(regex("canary"))), "FFFFFF", "FTTTTT", "FFFFFF", "TTTTTT"},
		{"present_match true", present(true), "FTTTTT", "TFFFFF", "TTTTTT", "FFFFFF"},
		{"present_match false", present(false), "TFFFFF", "FTTTTT", "FFFFFF", "TTTTTT"},
		{"no specifier (present)", func(*routev3.HeaderMatcher) {}, "FTTTTT", "TFFFFF", "TTTTTT", "FFFFFF"},
		{"deprecated exact_match Canary", exactMatch("Canary"), "FFTFFF", "FTFTTT", "FFTFFF", "TTFTTT"},
		{"deprecated exact_match empty (any value)", exactMatch(""), "FTTTTT", "FFFFFF", "TTTTTT", "FFFFFF"},
	}
	variants := []struct {
		name                   string
		invert, missingAsEmpty bool
		want                   func(i int) string
	}{
		{"plain", false, false, func(i int) string { return rows[i].plain }},
		{"invert_match", true, false, func(i int) string { return rows[i].inverted }},
		{"treat_missing_header_as_empty", false, true, func(i int) string { return rows[i].missingEmpty }},
		{"invert_match+treat_missing_header_as_empty", true, true, func(i int) string { return rows[i].invBoth }},
	}
	for i, row := range rows {
		for _, v := range variants {
			// The name is mixed case: Envoy lower-cases matcher names, and header
			// names never differ by case.
			pm := &routev3.HeaderMatcher{Name: "X-Test", InvertMatch: v.invert, TreatMissingHeaderAsEmpty: v.missingAsEmpty}
			row.set(pm)
			hm, err := convertHeaderMatcher(pm)
			if err != nil {
				t.Fatalf("%s, %s: %v", row.op, v.name, err)
			}
			want := v.want(i)
			for col, req := range headerRequests {
				ri := &RequestInfo{Method: "GET", Scheme: "http", Authority: "a.example.com", Path: "/", Header: http.Header{"Other": {"1"}}}
				if req.values != nil {
					ri.Header["X-Test"] = req.values
				}
				if got, exp := hm.matches(ri), want[col] == 'T'; got != exp {
					t.Errorf("%s, %s, header %s: matches = %v, Envoy: %v", row.op, v.name, req.name, got, exp)
				}
			}
		}
	}
}

// TestQueryMatcherEnvoyTruthTable holds the proxy's query parameter matcher to Envoy's
// QueryParameterMatcher: the parameter's first value, as written in the URL (not
// percent-decoded; "q" without "=" is the value ""), matches the string matcher; an
// absent parameter never does; present_match says whether the parameter must be there
// (Envoy's present match behaviour since 1.34); names are case-sensitive.
func TestQueryMatcherEnvoyTruthTable(t *testing.T) {
	queries := []string{"", "other=1", "q", "q=", "q=Canary", "q=CANARY", "q=stable&q=Canary", "Q=Canary", "q=a%20b"}
	str := func(sm *matcherv3.StringMatcher) *routev3.QueryParameterMatcher {
		return &routev3.QueryParameterMatcher{Name: "q", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: sm}}
	}
	rows := []struct {
		op   string
		pm   *routev3.QueryParameterMatcher
		want string // per query above
	}{
		{"exact Canary", str(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "Canary"}}), "FFFFTFFFF"},
		{"exact canary ignore_case", str(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "canary"}, IgnoreCase: true}), "FFFFTTFFF"},
		{"exact empty", str(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{}}), "FFTTFFFFF"},
		{"prefix Can", str(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "Can"}}), "FFFFTFFFF"},
		{"suffix ary", str(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "ary"}}), "FFFFTFFFF"},
		{"contains %20 (not decoded)", str(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "%20"}}), "FFFFFFFFT"},
		{"regex [a-z]+ (whole value)", str(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "[a-z]+"}}}), "FFFFFFTFF"},
		{"present_match true", &routev3.QueryParameterMatcher{Name: "q", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}}, "FFTTTTTFT"},
		{"present_match false", &routev3.QueryParameterMatcher{Name: "q", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: false}}, "TTFFFFFTF"},
		{"no specifier (present)", &routev3.QueryParameterMatcher{Name: "q"}, "FFTTTTTFT"},
	}
	for _, row := range rows {
		qm, err := convertQueryParameterMatcher(row.pm)
		if err != nil {
			t.Fatalf("%s: %v", row.op, err)
		}
		for i, q := range queries {
			if got, exp := qm.matches(q), row.want[i] == 'T'; got != exp {
				t.Errorf("%s on %q: matches = %v, Envoy: %v", row.op, q, got, exp)
			}
		}
	}
}
