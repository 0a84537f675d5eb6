package dag

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	"github.com/portico-dev/portico/internal/store"
)

// TestIngressClassList: with --ingress-class-name contour,team1 every object of either
// class is Portico's, whatever names the class (an Ingress's field or either
// annotation, an HTTPProxy's field or annotation, an IngressRoute's annotation, the
// default IngressClass), and an object of a third class is ignored with a status
// naming the classes served.
func TestIngressClassList(t *testing.T) {
	classes := []string{"contour", "team1"}
	const rules = `
  rules:
  - host: HOST
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}`
	ingressOf := func(name, meta, spec string) runtime.Object {
		return ing(t, `metadata: {name: `+name+meta+`}
spec:`+spec+strings.ReplaceAll(rules, "HOST", name+".test"))
	}
	proxyOf := func(name, meta, spec string) runtime.Object {
		return proxy(t, `{metadata: {name: `+name+meta+`}, spec: {`+spec+`virtualhost: {fqdn: `+name+`.test}, routes: [{services: [{name: s, port: 80}]}]}}`)
	}
	routeOf := func(name, meta string) runtime.Object {
		return fromYAML[ingressroutev1.IngressRoute](t, `{metadata: {name: `+name+meta+`}, spec: {virtualhost: {fqdn: `+name+`.test}, routes: [{match: /, services: [{name: s, port: 80}]}]}}`)
	}
	for _, tc := range []struct {
		name string
		obj  runtime.Object
		kind string
		ours bool
	}{
		{"ing-field-first", ingressOf("ing-field-first", "", "\n  ingressClassName: contour"), KindIngress, true},
		{"ing-field-second", ingressOf("ing-field-second", "", "\n  ingressClassName: team1"), KindIngress, true},
		{"ing-field-other", ingressOf("ing-field-other", "", "\n  ingressClassName: team2"), KindIngress, false},
		{"ing-field-default-name", ingressOf("ing-field-default-name", "", "\n  ingressClassName: portico"), KindIngress, false},
		{"ing-annotation", ingressOf("ing-annotation", ", annotations: {kubernetes.io/ingress.class: team1}", ""), KindIngress, true},
		{"ing-contour-annotation", ingressOf("ing-contour-annotation", ", annotations: {projectcontour.io/ingress.class: team1}", ""), KindIngress, true},
		{"ing-contour-annotation-other", ingressOf("ing-contour-annotation-other", ", annotations: {projectcontour.io/ingress.class: team2}", ""), KindIngress, false},
		// Contour reads its own annotation first.
		{"ing-contour-annotation-wins", ingressOf("ing-contour-annotation-wins", ", annotations: {projectcontour.io/ingress.class: contour, kubernetes.io/ingress.class: team2}", ""), KindIngress, true},
		{"proxy-field", proxyOf("proxy-field", "", "ingressClassName: team1, "), KindHTTPProxy, true},
		{"proxy-field-other", proxyOf("proxy-field-other", "", "ingressClassName: team2, "), KindHTTPProxy, false},
		{"proxy-annotation", proxyOf("proxy-annotation", ", annotations: {projectcontour.io/ingress.class: contour}", ""), KindHTTPProxy, true},
		{"proxy-no-class", proxyOf("proxy-no-class", "", ""), KindHTTPProxy, true},
		{"route-annotation", routeOf("route-annotation", ", annotations: {kubernetes.io/ingress.class: team1}"), KindIngressRoute, true},
		{"route-annotation-other", routeOf("route-annotation-other", ", annotations: {contour.heptio.com/ingress.class: team2}"), KindIngressRoute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Build(store.FromObjects([]runtime.Object{tc.obj, svc("default", "s", ":80")}), Options{IngressClassNames: classes})
			var s *Status
			for _, st := range g.Statuses {
				if st.Object == (ObjectRef{Kind: tc.kind, Namespace: "default", Name: tc.name}) {
					s = st
				}
			}
			if s == nil {
				t.Fatal("no status")
			}
			if tc.ours && s.Status != StatusValid {
				t.Errorf("status %s (%q), want valid", s.Status, s.Description)
			}
			if !tc.ours && (s.Status != StatusIgnored || !strings.Contains(s.Description, `one of "contour", "team1"`)) {
				t.Errorf("status %s (%q), want ignored, naming the classes served", s.Status, s.Description)
			}
			if v := ValidateObject(tc.obj, nil, Options{IngressClassNames: classes}); v.Ours != tc.ours {
				t.Errorf("ValidateObject: ours = %v, want %v", v.Ours, tc.ours)
			}
		})
	}
}

// TestIngressClassListDefaultClass: a class-less Ingress follows the default
// IngressClass, which is Portico's when its name is any of the classes served.
func TestIngressClassListDefaultClass(t *testing.T) {
	classless := ing(t, `metadata: {name: i}
spec:
  rules:
  - host: i.test
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}`)
	for _, tc := range []struct {
		defaultClass string
		want         StatusValue
	}{{"team1", StatusValid}, {"contour", StatusValid}, {"nginx", StatusIgnored}} {
		t.Run(tc.defaultClass, func(t *testing.T) {
			ic := fromYAML[networkingv1.IngressClass](t, `{metadata: {name: `+tc.defaultClass+`, annotations: {ingressclass.kubernetes.io/is-default-class: "true"}}, spec: {controller: example.com/other}}`)
			g := Build(store.FromObjects([]runtime.Object{classless, ic, svc("default", "s", ":80")}), Options{IngressClassNames: []string{"contour", "team1"}})
			if s := statusOf(g, "default", "i"); s.Status != tc.want {
				t.Errorf("status %s (%q), want %s", s.Status, s.Description, tc.want)
			}
		})
	}
}
