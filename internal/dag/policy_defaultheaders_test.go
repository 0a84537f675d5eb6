package dag

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// The installation's headers policies reach every service of every HTTPProxy route,
// translated for the service, and give way to what the service's own policy does.
func TestDefaultHeaders(t *testing.T) {
	g := buildWith(Options{DefaultHeaders: DefaultHeaders{
		Request: &contourv1.HeadersPolicy{
			Set:    []contourv1.HeaderValue{{Name: "X-Env", Value: "prod"}, {Name: "x-ns", Value: "%CONTOUR_NAMESPACE%"}},
			Remove: []string{"X-Debug", "x-keep"},
		},
		Response: &contourv1.HeadersPolicy{Set: []contourv1.HeaderValue{{Name: "X-Served-By", Value: "portico"}}},
	}},
		proxy(t, `{metadata: {name: app, namespace: team}, spec: {virtualhost: {fqdn: app.example.com}, routes: [
			{conditions: [{prefix: /own}], services: [{name: web, port: 80, requestHeadersPolicy: {set: [{name: X-Env, value: staging}, {name: X-Keep, value: "1"}]}}]},
			{services: [{name: web, port: 80}]}]}}`),
		svc("team", "web", ":80"),
	)
	wantClean(t, g, "team", "app")
	routes := g.HTTP[0].Routes
	if len(routes) != 2 {
		t.Fatalf("%d routes, want 2", len(routes))
	}
	for _, c := range []struct {
		route         *Route
		request, resp *HeadersPolicy
	}{
		{routes[0], &HeadersPolicy{Set: []HeaderValue{{"X-Env", "staging"}, {"X-Keep", "1"}, {"X-Ns", "team"}}, Remove: []string{"X-Debug"}},
			&HeadersPolicy{Set: []HeaderValue{{"X-Served-By", "portico"}}}},
		{routes[1], &HeadersPolicy{Set: []HeaderValue{{"X-Env", "prod"}, {"X-Ns", "team"}}, Remove: []string{"X-Debug", "X-Keep"}},
			&HeadersPolicy{Set: []HeaderValue{{"X-Served-By", "portico"}}}},
	} {
		wc := c.route.Clusters[0]
		if diff := cmp.Diff(c.request, wc.RequestHeaders); diff != "" {
			t.Errorf("%s: request headers (-want +got):\n%s", c.route.Path.Value, diff)
		}
		if diff := cmp.Diff(c.resp, wc.ResponseHeaders); diff != "" {
			t.Errorf("%s: response headers (-want +got):\n%s", c.route.Path.Value, diff)
		}
	}
}

func TestCheckDefaultHeaders(t *testing.T) {
	ok := DefaultHeaders{Request: &contourv1.HeadersPolicy{Set: []contourv1.HeaderValue{{Name: "Host", Value: "internal.example.com"}}}}
	if err := CheckDefaultHeaders(ok); err != nil {
		t.Errorf("a literal Host: %v", err)
	}
	bad := DefaultHeaders{Request: &contourv1.HeadersPolicy{Remove: []string{"Transfer-Encoding"}}, Response: &contourv1.HeadersPolicy{Remove: []string{"server"}}}
	if err := CheckDefaultHeaders(bad); err == nil || !strings.Contains(err.Error(), "hop-by-hop") || !strings.Contains(err.Error(), "remove Server") {
		t.Errorf("err = %v, want both problems", err)
	}
}
