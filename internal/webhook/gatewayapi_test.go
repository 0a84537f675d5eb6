package webhook

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/gatewayapi"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// gatewayCluster is what the controller has read: Portico's class and another
// controller's, Gateway infra/gw (HTTP on 80 for routes of namespace apps, HTTPS on 443
// with a valid certificate), Gateway infra/theirs of the other class, and Service
// apps/web.
const gatewayCluster = `
kind: GatewayClass
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
kind: GatewayClass
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: other}
spec: {controllerName: example.com/other}
---
kind: Namespace
apiVersion: v1
metadata: {name: apps}
---
kind: Gateway
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: portico
  listeners:
  - name: http
    protocol: HTTP
    port: 80
    allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {kubernetes.io/metadata.name: apps}}}}
  - name: https
    protocol: HTTPS
    port: 443
    hostname: secure.example.com
    tls: {certificateRefs: [{name: cert}]}
    allowedRoutes: {namespaces: {from: All}}
---
kind: Gateway
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: theirs, namespace: infra}
spec:
  gatewayClassName: other
  listeners: [{name: http, protocol: HTTP, port: 80}]
---
kind: Service
apiVersion: v1
metadata: {name: web, namespace: apps}
spec: {ports: [{port: 80}]}
`

// gatewayObjects are gatewayCluster with the Namespace's label (as the API server
// sets it) and the Gateway's certificate.
func gatewayObjects(t *testing.T) []runtime.Object {
	objs := testutil.DecodeObjects(t, gatewayCluster)
	for _, o := range objs {
		if ns, ok := o.(interface{ SetLabels(map[string]string) }); ok && o.GetObjectKind().GroupVersionKind().Kind == "Namespace" {
			ns.SetLabels(map[string]string{"kubernetes.io/metadata.name": "apps"})
		}
	}
	return append(objs, testutil.TLSSecret("infra", "cert", testutil.SelfSigned("secure.example.com")))
}

// httpRoute is HTTPRoute name of namespace ns on Gateway infra/gw, to backend with
// the given match lines.
func httpRoute(name, ns, backend string) string {
	return `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  parentRefs: [{name: gw, namespace: infra, sectionName: http}]
  rules:
  - backendRefs: [{name: ` + backend + `, namespace: apps, port: 80}]
`
}

func TestReviewGatewayAPI(t *testing.T) {
	tests := []struct {
		name     string
		op       admissionv1.Operation
		obj      string
		cfg      Config
		warnings []string
	}{{
		name: "valid HTTPRoute",
		obj:  httpRoute("web", "apps", "web"),
	}, {
		name:     "HTTPRoute to a missing Service",
		obj:      httpRoute("web", "apps", "missing"),
		warnings: []string{"spec.rules[0].backendRefs[0]: Service apps/missing not found (the requests the rule would send it are answered 500)"},
	}, {
		name:     "update of an HTTPRoute to a missing Service",
		op:       admissionv1.Update,
		obj:      httpRoute("web", "apps", "missing"),
		warnings: []string{"spec.rules[0].backendRefs[0]: Service apps/missing not found (the requests the rule would send it are answered 500)"},
	}, {
		name: "HTTPRoute in a namespace no listener allows",
		obj:  httpRoute("web", "team", "web"),
		warnings: []string{
			`parent gw: no listener named "http" of Gateway infra/gw allows HTTPRoutes from namespace team: its allowedRoutes must name the kind and the namespace`,
			"spec.rules[0].backendRefs[0]: Service apps/web is in another namespace and no ReferenceGrant there allows HTTPRoutes of namespace team to use it; add one (the requests the rule would send it are answered 500)",
		},
	}, {
		name: "HTTPRoute with a regular expression the data planes cannot take",
		obj: httpRoute("web", "apps", "web") + `    matches: [{path: {type: RegularExpression, value: "/(?=x)"}}]
`,
		warnings: []string{`parent gw: spec.rules[0]: path regular expression "/(?=x)" is not a valid RE2 regular expression: invalid or unsupported Perl syntax in "(?="`},
	}, {
		name: "HTTPRoute of another controller's Gateway",
		obj:  strings.Replace(httpRoute("web", "team", "missing"), "name: gw,", "name: theirs,", 1),
	}, {
		name: "Gateway listener with a certificate that does not exist",
		obj: `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: infra}
spec:
  gatewayClassName: portico
  listeners: [{name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: missing}]}}]
`,
		warnings: []string{
			"no listener can be served (see their conditions)",
			"listener https: tls.certificateRefs[0]: Secret infra/missing not found",
		},
	}, {
		name: "Gateway of another controller's class",
		obj: `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: infra}
spec:
  gatewayClassName: other
  listeners: [{name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: missing}]}}]
`,
	}, {
		name: "GatewayClass with parameters, the controller watching some namespaces",
		obj: `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: tuned}
spec: {controllerName: portico.dev/gateway-controller, parametersRef: {group: example.com, kind: Config, name: x}}
`,
		cfg:      Config{Namespaces: []string{"apps", "infra"}},
		warnings: []string{"spec.parametersRef (Config x) is not supported: Portico's GatewayClasses take no parameters; remove it"},
	}, {
		name: "GatewayClass of another controller",
		obj: `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: tuned}
spec: {controllerName: example.com/other, parametersRef: {group: example.com, kind: Config, name: x}}
`,
	}, {
		name: "ListenerSet the Gateway does not allow",
		obj: `
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: more, namespace: apps}
spec:
  parentRef: {name: gw, namespace: infra}
  listeners: [{name: extra, protocol: HTTP, port: 8080}]
`,
		warnings: []string{"Gateway infra/gw does not allow ListenerSets from namespace apps: its spec.allowedListeners.namespaces (from: None) must admit them"},
	}, {
		name: "GRPCRoute to a missing Service",
		obj: `
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: rpc, namespace: apps}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  rules: [{backendRefs: [{name: missing, port: 80}]}]
`,
		warnings: []string{"spec.rules[0].backendRefs[0]: Service apps/missing not found (the requests the rule would send it are answered 500)"},
	}, {
		name: "TLSRoute on HTTP and HTTPS listeners",
		obj: `
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: tls, namespace: apps}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  hostnames: [db.example.com]
  rules: [{backendRefs: [{name: web, port: 80}]}]
`,
		warnings: []string{"parent gw: no listener of Gateway infra/gw allows TLSRoutes from namespace apps: its allowedRoutes must name the kind and the namespace"},
	}, {
		name: "ReferenceGrant",
		obj: `
apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata: {name: grant, namespace: apps}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: nowhere}]
  to: [{group: "", kind: Service}]
`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cluster := gatewayObjects(t)
			cfg := tc.cfg
			cfg.Store = func() *store.Store { return store.FromObjects(cluster) }
			op := tc.op
			if op == "" {
				op = admissionv1.Create
			}
			obj := manifest(t, tc.obj)
			var old *object
			if op == admissionv1.Update {
				old = &obj
			}
			resp := NewHandler(cfg).Review(request(op, obj, old))
			if !resp.Allowed || resp.Result != nil {
				t.Fatalf("not admitted: %+v", resp)
			}
			if diff := cmp.Diff(tc.warnings, resp.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			// The warnings are the problems the status of a build says, word for word
			// (cut to the length the API server passes on).
			typed := testutil.DecodeObjects(t, tc.obj)[0]
			want := statusProblems(dag.Build(store.FromObjects(append(cluster, typed)), dag.Options{Processors: []dag.Processor{gatewayapi.Processor{}}}), typed)
			if diff := cmp.Diff(boundedWarnings(want), resp.Warnings); diff != "" {
				t.Errorf("warnings differ from the build's status (-status +warnings):\n%s", diff)
			}
		})
	}
}

// statusProblems are the messages of the problems of obj's status in g.
func statusProblems(g *dag.Graph, obj runtime.Object) []string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	var out []string
	for _, st := range g.Statuses {
		if st.Object.Kind != kind || st.GatewayAPI == nil {
			continue
		}
		if m, ok := obj.(interface{ GetName() string }); !ok || m.GetName() != st.Object.Name {
			continue
		}
		for _, p := range append(append([]dag.Problem(nil), st.Errors...), st.Warnings...) {
			out = append(out, p.Message)
		}
	}
	return out
}

// TestReviewGatewayAPIBeforeTheClusterIsRead: until the controller has read the cluster
// it cannot know what a route attaches to: no warnings.
func TestReviewGatewayAPIBeforeTheClusterIsRead(t *testing.T) {
	h := NewHandler(Config{Store: func() *store.Store { return nil }})
	resp := h.Review(request(admissionv1.Create, manifest(t, httpRoute("web", "apps", "missing")), nil))
	if !resp.Allowed || len(resp.Warnings) > 0 {
		t.Fatalf("got %+v, want admitted without warnings", resp)
	}
}

func TestBoundedWarnings(t *testing.T) {
	long := strings.Repeat("x", 300)
	got := boundedWarnings([]string{"line one\nline two\ttab", long, "bad \xff byte"})
	want := []string{"line one line two tab", strings.Repeat("x", maxWarningRunes-1) + "…", "bad   byte"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, w := range got {
		if n := utf8.RuneCountInString(w); n > maxWarningRunes {
			t.Errorf("%d runes: %q", n, w)
		}
	}
	many := make([]string, 20)
	for i := range many {
		many[i] = "problem"
	}
	got = boundedWarnings(many)
	if len(got) != maxWarnings || got[maxWarnings-1] != "and 13 more problems: see the object's status" {
		t.Errorf("20 problems gave %d warnings, ending %q", len(got), got[len(got)-1])
	}
	if got := boundedWarnings(many[:maxWarnings]); len(got) != maxWarnings || got[maxWarnings-1] != "problem" {
		t.Errorf("%d problems gave %q", maxWarnings, got)
	}
}
