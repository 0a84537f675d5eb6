package dag

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	"github.com/portico-dev/portico/internal/store"
)

// TestValidateObjectAgreesWithBuild: what ValidateObject says about an object alone is
// what a build says in its status: the same message for problems of its own, nothing for
// problems that come from the rest of the cluster, and the same notes.
func TestValidateObjectAgreesWithBuild(t *testing.T) {
	const backend = `
            backend:
              service: {name: web, port: {number: 80}}`
	customClass := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "custom"}, Spec: networkingv1.IngressClassSpec{Controller: ControllerName}}
	otherDefault := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx", Annotations: map[string]string{AnnotationDefaultClass: "true"}},
		Spec:       networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"},
	}
	tests := []struct {
		name    string
		obj     runtime.Object
		context []runtime.Object // other objects of the cluster (IngressClasses, ...)
		opts    Options
		// ours and invalid are what ValidateObject must say; status is the build's.
		ours    bool
		invalid bool
		status  StatusValue
		notes   int
	}{
		{
			name: "valid Ingress",
			obj: ing(t, `
metadata: {name: web}
spec:
  ingressClassName: portico
  rules:
    - host: web.example
      http:
        paths:
          - path: /
            pathType: Prefix`+backend),
			ours: true, status: StatusValid,
		},
		{
			name: "bad pathType",
			obj: ing(t, `
metadata: {name: web}
spec:
  rules:
    - http:
        paths:
          - path: /
            pathType: Regex`+backend),
			ours: true, invalid: true, status: StatusInvalid,
		},
		{
			name: "bad host and path",
			obj: ing(t, `
metadata: {name: web}
spec:
  rules:
    - host: 192.0.2.1
      http:
        paths:
          - path: /a//b
            pathType: ImplementationSpecific`+backend),
			ours: true, invalid: true, status: StatusInvalid,
		},
		{
			name: "resource backend",
			obj: ing(t, `
metadata: {name: web}
spec:
  defaultBackend:
    resource: {apiGroup: k8s.example.com, kind: StorageBucket, name: static}`),
			ours: true, invalid: true, status: StatusInvalid,
		},
		{
			name: "another class's invalid Ingress",
			obj: ing(t, `
metadata: {name: web}
spec:
  ingressClassName: nginx
  rules:
    - http:
        paths:
          - path: /
            pathType: Regex`+backend),
			status: StatusIgnored,
		},
		{
			name: "class through an IngressClass of Portico's controller",
			obj: ing(t, `
metadata: {name: web}
spec:
  ingressClassName: custom
  rules:
    - http:
        paths:
          - path: relative
            pathType: Prefix`+backend),
			context: []runtime.Object{customClass},
			ours:    true, invalid: true, status: StatusInvalid,
		},
		{
			name: "no class, another controller's default class",
			obj: ing(t, `
metadata: {name: web}
spec:
  rules:
    - http:
        paths:
          - path: relative
            pathType: Prefix`+backend),
			context: []runtime.Object{otherDefault},
			status:  StatusIgnored,
		},
		{
			name: "Ingress processing disabled",
			obj: ing(t, `
metadata: {name: web}
spec:
  rules:
    - http:
        paths:
          - path: relative
            pathType: Prefix`+backend),
			opts: Options{DisableIngress: true},
		},
		{
			name: "annotations that fall back to defaults",
			obj: ing(t, `
metadata:
  name: web
  annotations:
    portico.dev/request-timeout: soon
    portico.dev/num-retries: many
spec:
  rules:
    - http:
        paths:
          - path: /
            pathType: Prefix`+backend),
			ours: true, status: StatusValid, notes: 2,
		},
		{
			name: "valid root IngressRoute",
			obj: ir(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: root.example}
  routes:
    - match: /
      services: [{name: web, port: 80}]`),
			ours: true, status: StatusValid,
		},
		{
			name: "IngressRoute with a bad match and strategy",
			obj: ir(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: root.example}
  strategy: Fastest
  routes:
    - match: api
      services: [{name: web, port: 80}]`),
			ours: true, invalid: true, status: StatusInvalid,
		},
		{
			name: "undecodable IngressRoute",
			obj: &ingressroutev1.IngressRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "typo", Annotations: map[string]string{
				ingressroutev1.DecodeErrorAnnotation: `spec.routes[0].service: unknown field "prot"`,
			}}},
			ours: true, invalid: true, status: StatusInvalid,
		},
		{
			name: "orphan IngressRoute",
			obj: ir(t, `
metadata: {name: orphan}
spec:
  routes:
    - match: /
      services: [{name: web, port: 80}]`),
			ours: true, status: StatusOrphaned,
		},
		{
			name: "root whose Secret is missing",
			obj: ir(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: root.example, tls: {secretName: missing}}
  routes:
    - match: /
      services: [{name: web, port: 80}]`),
			ours: true, status: StatusInvalid,
		},
		{
			name: "root outside the root namespaces",
			obj: ir(t, `
metadata: {name: root, namespace: team}
spec:
  virtualhost: {fqdn: root.example}
  routes:
    - match: /
      services: [{name: web, port: 80}]`),
			opts: Options{RootNamespaces: []string{"platform"}},
			ours: true, invalid: true, status: StatusInvalid,
		},
		{
			name: "another class's invalid IngressRoute",
			obj: ir(t, `
metadata:
  name: root
  annotations: {kubernetes.io/ingress.class: contour}
spec:
  routes:
    - match: api
      services: [{name: web, port: 80}]`),
			status: StatusIgnored,
		},
		{
			name: "policies that fall back to defaults",
			obj: ir(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: root.example}
  routes:
    - match: /
      services: [{name: web, port: 80}]
      timeoutPolicy: {request: "10"}
      retryPolicy: {count: "-1", perTryTimeout: infinity}`),
			ours: true, status: StatusValid, notes: 3,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := ValidateObject(tc.obj, store.FromObjects(tc.context), tc.opts)
			if v.Ours != tc.ours || (len(v.Problems) > 0) != tc.invalid || len(v.Notes) != tc.notes {
				t.Fatalf("ValidateObject = %+v; want ours %v, invalid %v, %d notes", v, tc.ours, tc.invalid, tc.notes)
			}
			g := Build(store.FromObjects(append([]runtime.Object{tc.obj}, tc.context...)), tc.opts)
			var st Status
			if len(g.Statuses) > 0 {
				st = *g.Statuses[0]
			}
			if st.Status != tc.status {
				t.Fatalf("build status %q (%s), want %q", st.Status, st.Description, tc.status)
			}
			if tc.invalid {
				if diff := cmp.Diff(st.Description, v.Message()); diff != "" {
					t.Errorf("message differs from the status description (-status +message):\n%s", diff)
				}
			} else if v.Message() != "" {
				t.Errorf("Message() = %q without problems", v.Message())
			}
			for _, n := range v.Notes {
				if !strings.Contains(st.Description, n) {
					t.Errorf("note %q is not in the status %q", n, st.Description)
				}
			}
		})
	}
}

func TestValidateObjectUnknownKind(t *testing.T) {
	if v := ValidateObject(&networkingv1.IngressClass{}, nil, Options{}); v.Ours || len(v.Problems) > 0 {
		t.Errorf("an IngressClass: %+v", v)
	}
}

// The webhook's verdict on an HTTPProxy is its own problems with the build's words;
// missing Services and Secrets are not its problems (they may come later).
func TestValidateObjectHTTPProxy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		doc      string
		ours     bool
		problems []string
		notes    []string
	}{
		{
			name: "valid, its Service missing",
			doc:  `{metadata: {name: a}, spec: {virtualhost: {fqdn: a.example.com}, routes: [{services: [{name: nothere, port: 80}]}]}}`,
			ours: true,
		},
		{
			name:     "bad header condition",
			doc:      `{metadata: {name: a}, spec: {virtualhost: {fqdn: a.example.com}, routes: [{conditions: [{header: {name: x-a, exact: a, contains: b}}], services: [{name: s, port: 80}]}]}}`,
			ours:     true,
			problems: []string{"must set exactly one of present, notpresent, exact, notexact, contains, notcontains, regex"},
		},
		{
			name:     "bad CIDR",
			doc:      `{metadata: {name: a}, spec: {virtualhost: {fqdn: a.example.com, ipAllowPolicy: [{source: Peer, cidr: 10.0.0.0/33}]}, routes: [{services: [{name: s, port: 80}]}]}}`,
			ours:     true,
			problems: []string{`spec.virtualhost.ipAllowPolicy[0].cidr "10.0.0.0/33" is not an IP address or CIDR block`},
		},
		{
			name:     "allow and deny on a route",
			doc:      `{metadata: {name: a}, spec: {virtualhost: {fqdn: a.example.com}, routes: [{ipAllowPolicy: [{source: Peer, cidr: 10.0.0.1}], ipDenyPolicy: [{source: Remote, cidr: "::1"}], services: [{name: s, port: 80}]}]}}`,
			ours:     true,
			problems: []string{"spec.routes[0]: ipAllowPolicy and ipDenyPolicy are exclusive"},
		},
		{
			name:     "bad CORS origin",
			doc:      `{metadata: {name: a}, spec: {virtualhost: {fqdn: a.example.com, corsPolicy: {allowOrigin: ["*.example.com"], allowMethods: [GET]}}, routes: [{services: [{name: s, port: 80}]}]}}`,
			ours:     true,
			problems: []string{`spec.virtualhost.corsPolicy.allowOrigin[0] "*.example.com" is neither "*", an origin (scheme://host[:port]) nor a regular expression`},
		},
		{
			name: "JWT providers, their Secrets missing",
			doc:  `{metadata: {name: a}, spec: {virtualhost: {fqdn: a.example.com, tls: {secretName: cert}, jwtProviders: [{name: p, default: true, remoteJWKS: {uri: "https://idp.example.com/keys", validation: {caSecret: ca, subjectName: idp.example.com}}}]}, routes: [{services: [{name: s, port: 80}], jwtVerificationPolicy: {require: p}}]}}`,
			ours: true,
		},
		{
			name:     "JWT providers without TLS",
			doc:      `{metadata: {name: a}, spec: {virtualhost: {fqdn: a.example.com, jwtProviders: [{name: p, remoteJWKS: {uri: "https://idp.example.com/keys"}}]}, routes: [{services: [{name: s, port: 80}]}]}}`,
			ours:     true,
			problems: []string{"spec.virtualhost.jwtProviders needs spec.virtualhost.tls.secretName"},
		},
		{
			name: "JWT providers and routes wrong on their own",
			doc: `{metadata: {name: a}, spec: {virtualhost: {fqdn: a.example.com, tls: {secretName: cert}, jwtProviders: [
			  {name: p, default: true, remoteJWKS: {uri: "http://[::1]:8090/"}}, {name: q, default: true, remoteJWKS: {uri: "https://idp.example.com/keys"}}]},
			  routes: [{services: [{name: s, port: 80}], jwtVerificationPolicy: {require: r}}]}}`,
			ours: true,
			problems: []string{
				`spec.virtualhost.jwtProviders[0].remoteJWKS.uri "http://[::1]:8090/": ::1 is this machine`,
				`spec.virtualhost.jwtProviders[1] ("q") and provider "p" are both default`,
				`spec.routes[0].jwtVerificationPolicy.require names provider "r", which spec.virtualhost.jwtProviders does not define (it defines "p", "q")`,
			},
		},
		{
			name:  "a field without effect warns",
			doc:   `{metadata: {name: a}, spec: {virtualhost: {fqdn: a.example.com}, routes: [{services: [{name: s, port: 80, healthPort: 8081}]}]}}`,
			ours:  true,
			notes: []string{"spec.routes[0].services[0].healthPort has no effect without a healthCheckPolicy"},
		},
		{
			name:     "a header the data plane writes itself",
			doc:      `{metadata: {name: a}, spec: {virtualhost: {fqdn: a.example.com}, routes: [{services: [{name: s, port: 80}], responseHeadersPolicy: {remove: [Content-Length]}}]}}`,
			ours:     true,
			problems: []string{"spec.routes[0].responseHeadersPolicy.remove[0]: Content-Length is written by the data plane from the body it forwards; no headers policy can set or remove it"},
		},
		{
			name:     "services that change Server differently",
			doc:      `{metadata: {name: a}, spec: {virtualhost: {fqdn: a.example.com}, routes: [{services: [{name: s, port: 80, responseHeadersPolicy: {set: [{name: Server, value: s}]}}, {name: t, port: 80}]}]}}`,
			ours:     true,
			problems: []string{`the services of spec.routes[0] change the Server response header differently (services[0] sets it to "s", services[1] leaves it)`},
		},
		{
			name: "another class",
			doc:  `{metadata: {name: a}, spec: {ingressClassName: other, virtualhost: {fqdn: a.example.com}, routes: [{services: [{name: s, port: 80}]}]}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := ValidateObject(proxy(t, tc.doc), nil, Options{})
			if v.Ours != tc.ours {
				t.Fatalf("ours = %v, want %v", v.Ours, tc.ours)
			}
			if len(v.Problems) != len(tc.problems) {
				t.Fatalf("problems %q, want %d containing %q", v.Problems, len(tc.problems), tc.problems)
			}
			for i, p := range tc.problems {
				if !strings.Contains(v.Problems[i], p) {
					t.Errorf("problem %q does not contain %q", v.Problems[i], p)
				}
			}
			for _, n := range tc.notes {
				if !strings.Contains(strings.Join(v.Notes, "\n"), n) {
					t.Errorf("notes %q do not contain %q", v.Notes, n)
				}
			}
			if tc.problems != nil && !strings.Contains(v.Message(), tc.problems[0]) {
				t.Errorf("message %q does not say %q", v.Message(), tc.problems[0])
			}
		})
	}
}
