package dag

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

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

// Ingress backends get the installation's headers policies only with ApplyToIngress.
func TestDefaultHeadersIngress(t *testing.T) {
	objs := []runtime.Object{
		ing(t, `
metadata: {name: web, namespace: shop, annotations: {kubernetes.io/ingress.class: portico}}
spec:
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
`),
		svc("shop", "web", ":80"),
	}
	policy := &contourv1.HeadersPolicy{Set: []contourv1.HeaderValue{{Name: "X-Ns", Value: "%CONTOUR_NAMESPACE%/%CONTOUR_SERVICE_NAME%:%CONTOUR_SERVICE_PORT%"}}}
	for _, apply := range []bool{false, true} {
		g := buildWith(Options{DefaultHeaders: DefaultHeaders{Request: policy, ApplyToIngress: apply}}, objs...)
		if len(g.HTTP) != 1 || len(g.HTTP[0].Routes) != 1 {
			t.Fatalf("ApplyToIngress %v: hosts %+v", apply, g.HTTP)
		}
		var want *HeadersPolicy
		if apply {
			want = &HeadersPolicy{Set: []HeaderValue{{"X-Ns", "shop/web:80"}}}
		}
		if diff := cmp.Diff(want, g.HTTP[0].Routes[0].Clusters[0].RequestHeaders); diff != "" {
			t.Errorf("ApplyToIngress %v: request headers (-want +got):\n%s", apply, diff)
		}
	}
}
