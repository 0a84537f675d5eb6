package ratelimit

import (
	"context"
	"net/http"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// header_value_match decides with the route's header matching (Envoy's): ASCII case
// folding only, an absent header failing an inverted string match, repeated headers
// joined with ",", and an empty prefix matching any value.
func TestHeaderValueMatchAsRoutes(t *testing.T) {
	exactFold := &routev3.HeaderMatcher{Name: "x-tier", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "k"}, IgnoreCase: true}}}
	notBeta := &routev3.HeaderMatcher{Name: "x-tier", InvertMatch: true, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "beta"}}}}
	anyValue := &routev3.HeaderMatcher{Name: "x-tier", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{}}}}
	joined := &routev3.HeaderMatcher{Name: "x-tier", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "a,b"}}}}
	cases := []struct {
		name    string
		matcher *routev3.HeaderMatcher
		values  []string
		want    bool
	}{
		{"ignore_case folds ASCII", exactFold, []string{"K"}, true},
		{"the Kelvin sign is not a k", exactFold, []string{"\u212a"}, false},
		{"inverted on another value", notBeta, []string{"gold"}, true},
		{"inverted on an absent header", notBeta, nil, false},
		{"empty prefix on any value", anyValue, []string{"x"}, true},
		{"empty prefix on an absent header", anyValue, nil, false},
		{"repeated headers joined", joined, []string{"a", "b"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			act, err := headerValueMatch(&routev3.RateLimit_Action_HeaderValueMatch{DescriptorValue: "v", Headers: []*routev3.HeaderMatcher{c.matcher}})
			if err != nil {
				t.Fatal(err)
			}
			s := filter.NewStream(context.Background(), nil)
			h := http.Header{}
			for _, v := range c.values {
				h.Add("X-Tier", v)
			}
			s.Request.Headers = filter.HeaderMap(h)
			if _, got := act(s); got != c.want {
				t.Errorf("matched %v, want %v", got, c.want)
			}
		})
	}
}
