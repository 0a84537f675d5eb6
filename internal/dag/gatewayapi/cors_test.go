package gatewayapi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
)

// A rule's CORS filter becomes its routes' policy: wildcard origins match any
// characters leftwards, maxAge defaults to 5 seconds.
func TestCORSFilter(t *testing.T) {
	yes := true
	f, err := processFilters([]gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterCORS, CORS: &gatewayv1.HTTPCORSFilter{
		AllowOrigins:     []gatewayv1.CORSOrigin{"https://www.foo.com", "https://*.bar.com"},
		AllowMethods:     []gatewayv1.HTTPMethodWithWildcard{"GET", "OPTIONS"},
		AllowHeaders:     []gatewayv1.HTTPHeaderName{"x-header-1"},
		ExposeHeaders:    []gatewayv1.HTTPHeaderName{"x-header-3"},
		AllowCredentials: &yes,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	var r dag.Route
	f.apply(&r)
	want := &dag.CORSPolicy{
		AllowOrigins:  []dag.CORSOrigin{{Exact: "https://www.foo.com"}, {Regex: `https://.*\.bar\.com`}},
		AllowMethods:  []string{"GET", "OPTIONS"},
		AllowHeaders:  []string{"x-header-1"},
		ExposeHeaders: []string{"x-header-3"}, AllowCredentials: true, MaxAge: "5", AnswerRefusedPreflights: true,
	}
	if diff := cmp.Diff(want, r.CORS); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
	f, err = processFilters([]gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterCORS, CORS: &gatewayv1.HTTPCORSFilter{AllowOrigins: []gatewayv1.CORSOrigin{"*"}, MaxAge: 3600}}})
	if err != nil {
		t.Fatal(err)
	}
	r = dag.Route{}
	f.apply(&r)
	if diff := cmp.Diff(&dag.CORSPolicy{AllowOrigins: []dag.CORSOrigin{{Any: true}}, MaxAge: "3600", AnswerRefusedPreflights: true}, r.CORS); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
}
