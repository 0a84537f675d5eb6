package manifest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	contourv1beta1 "github.com/portico-dev/portico/apis/contour/v1beta1"
)

func ptr[T any](v T) *T { return &v }

func tm(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func om(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}

var (
	exact    = ptr(networkingv1.PathTypeExact)
	prefix   = ptr(networkingv1.PathTypePrefix)
	implSpec = ptr(networkingv1.PathTypeImplementationSpecific)
)

func svcBackend(name string, number int32, portName string) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
		Name: name, Port: networkingv1.ServiceBackendPort{Number: number, Name: portName},
	}}
}

func httpRule(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
	return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{
		HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths},
	}}
}

// service is a defaulted Service with one TCP port whose targetPort is the port.
func service(ns, name string, port int32) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   tm("v1", "Service"),
		ObjectMeta: om(ns, name),
		Spec: corev1.ServiceSpec{
			Type:            corev1.ServiceTypeClusterIP,
			SessionAffinity: corev1.ServiceAffinityNone,
			Ports: []corev1.ServicePort{{
				Port: port, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(port),
			}},
		},
	}
}

const v1beta1Ingress = `apiVersion: %s
kind: Ingress
metadata:
  name: old
  namespace: web
  annotations:
    kubernetes.io/ingress.class: portico
spec:
  ingressClassName: portico
  backend:
    serviceName: fallback
    servicePort: 8080
  tls:
  - hosts: [a.example.com]
    secretName: a-tls
  rules:
  - host: a.example.com
    http:
      paths:
      - path: /api
        backend:
          serviceName: api
          servicePort: http
      - path: /exact
        pathType: Exact
        backend:
          serviceName: exact
          servicePort: 81
      - path: /bucket
        pathType: Prefix
        backend:
          resource:
            apiGroup: storage.example.com
            kind: Bucket
            name: assets
  - host: b.example.com
status:
  loadBalancer:
    ingress:
    - ip: 192.0.2.1
      ports:
      - port: 443
        protocol: TCP
        error: oops
`

// wantConverted is v1beta1Ingress as networking.k8s.io/v1.
func wantConverted() *networkingv1.Ingress {
	return &networkingv1.Ingress{
		TypeMeta: tm("networking.k8s.io/v1", "Ingress"),
		ObjectMeta: metav1.ObjectMeta{
			Name: "old", Namespace: "web",
			Annotations: map[string]string{"kubernetes.io/ingress.class": "portico"},
		},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr("portico"),
			DefaultBackend:   ptr(svcBackend("fallback", 8080, "")),
			TLS:              []networkingv1.IngressTLS{{Hosts: []string{"a.example.com"}, SecretName: "a-tls"}},
			Rules: []networkingv1.IngressRule{
				httpRule("a.example.com",
					networkingv1.HTTPIngressPath{Path: "/api", PathType: implSpec, Backend: svcBackend("api", 0, "http")},
					networkingv1.HTTPIngressPath{Path: "/exact", PathType: exact, Backend: svcBackend("exact", 81, "")},
					networkingv1.HTTPIngressPath{Path: "/bucket", PathType: prefix, Backend: networkingv1.IngressBackend{
						Resource: &corev1.TypedLocalObjectReference{APIGroup: ptr("storage.example.com"), Kind: "Bucket", Name: "assets"},
					}},
				),
				{Host: "b.example.com"},
			},
		},
		Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{
			Ingress: []networkingv1.IngressLoadBalancerIngress{{
				IP:    "192.0.2.1",
				Ports: []networkingv1.IngressPortStatus{{Port: 443, Protocol: corev1.ProtocolTCP, Error: ptr("oops")}},
			}},
		}},
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		input string
		want  []runtime.Object
		probs []Problem
	}{
		{
			name: "multi-document YAML with empty documents, skipped kinds and default namespace",
			file: "m.yaml",
			input: `---
# leading separator and a comment-only document
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports:
  - port: 80
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  whatever: not checked for kinds Portico skips
--- # a separator with a comment
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: prod
spec:
  rules:
  - host: example.com
    http:
      paths:
      - path: /
        backend:
          service:
            name: web
            port:
              number: 80
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: prod}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
---
`,
			want: []runtime.Object{
				service("default", "web", 80),
				&networkingv1.Ingress{
					TypeMeta:   tm("networking.k8s.io/v1", "Ingress"),
					ObjectMeta: om("prod", "web"),
					Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{
						httpRule("example.com", networkingv1.HTTPIngressPath{Path: "/", PathType: implSpec, Backend: svcBackend("web", 80, "")}),
					}},
				},
			},
		},
		{
			name: "JSON single object",
			file: "svc.json",
			input: `{
  "apiVersion": "v1",
  "kind": "Service",
  "metadata": {"name": "api", "namespace": "team"},
  "spec": {"ports": [{"port": 8080}]}
}`,
			want: []runtime.Object{service("team", "api", 8080)},
		},
		{
			name: "JSON List with a skipped item and a problem item",
			file: "list.JSON",
			input: `{
  "apiVersion": "v1",
  "kind": "List",
  "items": [
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}, "spec": {"ports": [{"port": 1}]}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "b"}, "spec": {"portz": []}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "x"}, "data": {"k": "dg=="}}
  ]
}`,
			want: []runtime.Object{
				service("default", "a", 1),
				&corev1.Secret{TypeMeta: tm("v1", "Secret"), ObjectMeta: om("x", "s"), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte("v")}},
			},
			probs: []Problem{{File: "list.JSON", Line: 7, Document: 1, Reason: `items[2]: unknown field "spec.portz"`}},
		},
		{
			name: "JSON stream of objects",
			file: "s.json",
			input: `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}, "spec": {"ports": [{"port": 1}]}}

{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "b"}, "spec": {"ports": [{"port": 2}]}}
`,
			want: []runtime.Object{service("default", "a", 1), service("default", "b", 2)},
		},
		{
			name: "YAML List and typed IngressList",
			file: "l.yaml",
			input: `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: a}
  spec: {ports: [{port: 1}]}
---
apiVersion: networking.k8s.io/v1
kind: IngressList
items:
- metadata: {name: i}
  spec:
    defaultBackend: {service: {name: a, port: {name: http}}}
`,
			want: []runtime.Object{
				service("default", "a", 1),
				&networkingv1.Ingress{
					TypeMeta:   tm("networking.k8s.io/v1", "Ingress"),
					ObjectMeta: om("default", "i"),
					Spec:       networkingv1.IngressSpec{DefaultBackend: ptr(svcBackend("a", 0, "http"))},
				},
			},
		},
		{
			name:  "networking.k8s.io/v1beta1 Ingress is converted",
			file:  "old.yaml",
			input: strings.ReplaceAll(v1beta1Ingress, "%s", "networking.k8s.io/v1beta1"),
			want:  []runtime.Object{wantConverted()},
		},
		{
			name:  "extensions/v1beta1 Ingress is converted",
			file:  "old.yaml",
			input: strings.ReplaceAll(v1beta1Ingress, "%s", "extensions/v1beta1"),
			want:  []runtime.Object{wantConverted()},
		},
		{
			name: "v1beta1 backend with only a string port, no namespace",
			file: "old.yml",
			input: `apiVersion: networking.k8s.io/v1beta1
kind: Ingress
metadata: {name: x}
spec:
  backend: {serviceName: svc, servicePort: https}
`,
			want: []runtime.Object{&networkingv1.Ingress{
				TypeMeta:   tm("networking.k8s.io/v1", "Ingress"),
				ObjectMeta: om("default", "x"),
				Spec:       networkingv1.IngressSpec{DefaultBackend: ptr(svcBackend("svc", 0, "https"))},
			}},
		},
		{
			name: "IngressClass v1 and v1beta1 are cluster-scoped",
			file: "classes.yaml",
			input: `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: portico
  namespace: ignored
  annotations: {ingressclass.kubernetes.io/is-default-class: "true"}
spec:
  controller: portico.dev/ingress-controller
---
apiVersion: networking.k8s.io/v1beta1
kind: IngressClass
metadata: {name: old}
spec:
  controller: portico.dev/ingress-controller
  parameters: {apiGroup: portico.dev, kind: Params, name: p}
`,
			want: []runtime.Object{
				&networkingv1.IngressClass{
					TypeMeta: tm("networking.k8s.io/v1", "IngressClass"),
					ObjectMeta: metav1.ObjectMeta{Name: "portico",
						Annotations: map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}},
					Spec: networkingv1.IngressClassSpec{Controller: "portico.dev/ingress-controller"},
				},
				&networkingv1.IngressClass{
					TypeMeta:   tm("networking.k8s.io/v1", "IngressClass"),
					ObjectMeta: om("", "old"),
					Spec: networkingv1.IngressClassSpec{
						Controller: "portico.dev/ingress-controller",
						Parameters: &networkingv1.IngressClassParametersReference{
							APIGroup: ptr("portico.dev"), Kind: "Params", Name: "p", Scope: ptr("Cluster"),
						},
					},
				},
			},
		},
		{
			name: "Secret stringData is merged into data",
			file: "secret.yaml",
			input: `apiVersion: v1
kind: Secret
metadata: {name: tls, namespace: web}
type: kubernetes.io/tls
data:
  tls.crt: Y2VydA==
  tls.key: b2xk
stringData:
  tls.key: new
  extra: plain
`,
			want: []runtime.Object{&corev1.Secret{
				TypeMeta: tm("v1", "Secret"), ObjectMeta: om("web", "tls"), Type: corev1.SecretTypeTLS,
				Data: map[string][]byte{"tls.crt": []byte("cert"), "tls.key": []byte("new"), "extra": []byte("plain")},
			}},
		},
		{
			name: "Endpoints and EndpointSlice defaults",
			file: "eps.yaml",
			input: `apiVersion: v1
kind: Endpoints
metadata: {name: web}
subsets:
- addresses: [{ip: 10.0.0.1}]
  ports: [{port: 8080}, {port: 53, protocol: UDP, name: dns}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
endpoints:
- addresses: [10.0.0.1]
  conditions: {ready: true}
ports:
- port: 8080
`,
			want: []runtime.Object{
				&corev1.Endpoints{
					TypeMeta: tm("v1", "Endpoints"), ObjectMeta: om("default", "web"),
					Subsets: []corev1.EndpointSubset{{
						Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}},
						Ports: []corev1.EndpointPort{
							{Port: 8080, Protocol: corev1.ProtocolTCP},
							{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
						},
					}},
				},
				&discoveryv1.EndpointSlice{
					TypeMeta: tm("discovery.k8s.io/v1", "EndpointSlice"),
					ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "default",
						Labels: map[string]string{"kubernetes.io/service-name": "web"}},
					AddressType: discoveryv1.AddressTypeIPv4,
					Endpoints: []discoveryv1.Endpoint{{
						Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
					}},
					Ports: []discoveryv1.EndpointPort{{Name: ptr(""), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}},
				},
			},
		},
		{
			name: "Service defaults keep what is set",
			file: "svc.yaml",
			input: `apiVersion: v1
kind: Service
metadata: {name: s}
spec:
  type: NodePort
  ports:
  - {name: http, port: 80, targetPort: http-web, protocol: TCP}
  - {name: dns, port: 53, targetPort: 5353, protocol: UDP}
`,
			want: []runtime.Object{&corev1.Service{
				TypeMeta: tm("v1", "Service"), ObjectMeta: om("default", "s"),
				Spec: corev1.ServiceSpec{
					Type: corev1.ServiceTypeNodePort, SessionAffinity: corev1.ServiceAffinityNone,
					Ports: []corev1.ServicePort{
						{Name: "http", Port: 80, TargetPort: intstr.FromString("http-web"), Protocol: corev1.ProtocolTCP},
						{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(5353), Protocol: corev1.ProtocolUDP},
					},
				},
			}},
		},
		{
			name: "strict decoding: unknown field is a problem at the field's line, other documents kept",
			file: "typo.yaml",
			input: `apiVersion: v1
kind: Service
metadata: {name: a}
spec: {ports: [{port: 1}]}
---

# the broken one
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: typo
spec:
  rules:
  - http:
      paths:
      - path: /
        pathtype: Prefix
        backend: {service: {name: a, port: {number: 1}}}
---
apiVersion: v1
kind: Service
metadata: {name: b}
spec: {ports: [{port: 2}]}
`,
			want:  []runtime.Object{service("default", "a", 1), service("default", "b", 2)},
			probs: []Problem{{File: "typo.yaml", Line: 17, Document: 2, Reason: `unknown field "spec.rules[0].http.paths[0].pathtype"`}},
		},
		{
			name: "strict decoding: several unknown fields and a JSON duplicate",
			file: "d.json",
			input: `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a", "name": "b"},
 "spec": {"prots": [], "typ": "x"}}`,
			probs: []Problem{{File: "d.json", Line: 1, Document: 1,
				Reason: `duplicate field "metadata.name"; line 2: unknown field "spec.prots"; unknown field "spec.typ"`}},
		},
		{
			name: "YAML duplicate key is reported at its line",
			file: "dup.yaml",
			input: `apiVersion: v1
kind: Service
metadata:
  name: a
  name: b
`,
			probs: []Problem{{File: "dup.yaml", Line: 5, Document: 1, Reason: `invalid YAML: key "name" already set in map`}},
		},
		{
			name: "invalid YAML is reported at the error line and the next document is kept",
			file: "bad.yaml",
			input: `apiVersion: v1
kind: Service
metadata: {name: a}
spec: {ports: [{port: 1}]}
---
apiVersion: v1
kind: Service
metadata:
	name: tab
---
apiVersion: v1
kind: Service
metadata: {name: b}
spec: {ports: [{port: 2}]}
`,
			want:  []runtime.Object{service("default", "a", 1), service("default", "b", 2)},
			probs: []Problem{{File: "bad.yaml", Line: 9, Document: 2, Reason: "invalid YAML: found character that cannot start any token"}},
		},
		{
			name: "missing apiVersion, kind, name; non-object document; bad apiVersion",
			file: "missing.yaml",
			input: `kind: Service
metadata: {name: a}
---
apiVersion: v1
metadata: {name: a}
---
foo: bar
---
apiVersion: v1
kind: Service
metadata: {namespace: x}
---
just a string
---
apiVersion: a/b/c
kind: Service
---
apiVersion: 1
kind: Service
`,
			probs: []Problem{
				{File: "missing.yaml", Line: 1, Document: 1, Reason: `apiVersion is missing (kind "Service")`},
				{File: "missing.yaml", Line: 4, Document: 2, Reason: `kind is missing (apiVersion "v1")`},
				{File: "missing.yaml", Line: 7, Document: 3, Reason: "apiVersion and kind are missing; every document needs both (e.g. apiVersion: networking.k8s.io/v1, kind: Ingress)"},
				{File: "missing.yaml", Line: 9, Document: 4, Reason: "Service has no metadata.name"},
				{File: "missing.yaml", Line: 13, Document: 5, Reason: "document is not an object; expected a mapping with apiVersion, kind and metadata"},
				{File: "missing.yaml", Line: 15, Document: 6, Reason: `invalid apiVersion "a/b/c": expected "version" or "group/version"`},
				{File: "missing.yaml", Line: 18, Document: 7, Reason: "apiVersion must be a string, got 1"},
			},
		},
		{
			name: "wrong field types are named",
			file: "types.yaml",
			input: `apiVersion: v1
kind: Service
metadata: {name: a}
spec:
  ports:
  - port: http
---
apiVersion: v1
kind: Secret
metadata: {name: s}
data:
  key: not base64!
`,
			probs: []Problem{
				{File: "types.yaml", Line: 6, Document: 1, Reason: `field "spec.ports[0].port" must be an integer, not a string`},
				{File: "types.yaml", Line: 12, Document: 2, Reason: `field "data.key" must be base64-encoded (put plain text under stringData instead): illegal base64 data at input byte 3`},
			},
		},
		{
			name: "JSON syntax error line",
			file: "bad.json",
			input: `{
  "apiVersion": "v1",
  "kind": "Service",
  "metadata": {"name": "a"},
}`,
			probs: []Problem{{File: "bad.json", Line: 5, Document: 1, Reason: "invalid JSON: invalid character '}' looking for beginning of object key string"}},
		},
		{
			name:  "JSON top-level array",
			file:  "arr.json",
			input: `[{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}}]`,
			probs: []Problem{{File: "arr.json", Line: 1, Document: 1, Reason: `a JSON array is not a manifest; wrap the objects in {"apiVersion": "v1", "kind": "List", "items": [...]}`}},
		},
		{
			name:  "CRLF line endings and a byte order mark",
			file:  "win.yaml",
			input: "\ufeff---\r\napiVersion: v1\r\nkind: Service\r\nmetadata:\r\n  name: a\r\nspec:\r\n  ports:\r\n  - port: 1\r\n---\r\nkind: Service\r\n",
			want:  []runtime.Object{service("default", "a", 1)},
			probs: []Problem{{File: "win.yaml", Line: 10, Document: 2, Reason: `apiVersion is missing (kind "Service")`}},
		},
		{name: "empty YAML file", file: "e.yaml", input: ""},
		{name: "only comments and separators", file: "e.yaml", input: "# nothing\n---\n  # here\n---\n...\n"},
		{name: "null document", file: "e.yaml", input: "~\n---\nnull\n"},
		{name: "empty JSON file", file: "e.json", input: " \n"},
		{name: "List without items", file: "e.yaml", input: "apiVersion: v1\nkind: List\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, probs := Decode(tc.file, []byte(tc.input))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.probs, probs); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeDoesNotAliasInput(t *testing.T) {
	// Conversion must deep-copy: decoding twice gives equal, independent objects.
	in := []byte(strings.ReplaceAll(v1beta1Ingress, "%s", "extensions/v1beta1"))
	a, _ := Decode("a.yaml", in)
	b, _ := Decode("a.yaml", in)
	a[0].(*networkingv1.Ingress).Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "changed"
	if got := b[0].(*networkingv1.Ingress).Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name; got != "api" {
		t.Fatalf("objects share memory: %q", got)
	}
}

func TestSchemeConvertsOldIngress(t *testing.T) {
	objs, probs := Decode("old.yaml", []byte(strings.ReplaceAll(v1beta1Ingress, "%s", "networking.k8s.io/v1beta1")))
	if len(probs) != 0 || len(objs) != 1 {
		t.Fatalf("Decode: %v %v", objs, probs)
	}
	// The same conversion is reachable through the scheme.
	raw, _, err := deserializer().Decode([]byte(`{"apiVersion":"extensions/v1beta1","kind":"Ingress","metadata":{"name":"x"},"spec":{"backend":{"serviceName":"s","servicePort":80}}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out networkingv1.Ingress
	if err := Scheme().Convert(raw, &out, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ptr(svcBackend("s", 80, "")), out.Spec.DefaultBackend); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for gvk := range keptKinds {
		if !Scheme().Recognizes(gvk) {
			t.Errorf("scheme does not recognize %v", gvk)
		}
	}
}

// TestDecodePointsAtTheMistake: a problem is reported at the line of the field to fix,
// not at the document's first line, and names the field with its list positions.
func TestDecodePointsAtTheMistake(t *testing.T) {
	const service = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n"
	tests := []struct {
		name, file, input string
		want              []Problem
	}{
		{
			name: "a misspelt field on its own line, in the second document",
			file: "proxy.yaml",
			input: service + strings.Repeat("# filler\n", 10) + `---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata:
  name: root
spec:
  virtualhost: {fqdn: b.localhost}
  routes:
  - conditions:
    - prefix: /x
    servces:
    - name: web
      port: 80
`,
			want: []Problem{{File: "proxy.yaml", Line: 25, Document: 2, Reason: `unknown field "spec.routes[0].servces"`}},
		},
		{
			name: "a value of the wrong type, with its list positions",
			file: "typed.yaml",
			input: `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: typed}
spec:
  virtualhost: {fqdn: c.localhost}
  routes:
  - services:
    - name: web
      port: 80
    - name: web
      port: "eighty"
`,
			want: []Problem{{File: "typed.yaml", Line: 11, Document: 1, Reason: `field "spec.routes[0].services[1].port" must be an integer, not a string`}},
		},
		{
			name:  "the wrong type in a map's value names the entry",
			file:  "annotated.yaml",
			input: "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n  annotations:\n    team: shop\n    replicas: 3\n",
			want:  []Problem{{File: "annotated.yaml", Line: 7, Document: 1, Reason: `field "metadata.annotations.replicas" must be a string, not a number`}},
		},
		{
			name:  "a field merged in from an anchor is found where it is written",
			file:  "merged.yaml",
			input: "x-defaults: &port\n  port: eighty\napiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  ports:\n  - <<: *port\n",
			want:  []Problem{{File: "merged.yaml", Line: 2, Document: 1, Reason: `field "spec.ports[0].port" must be an integer, not a string`}},
		},
		{
			name: "in a JSON List item, and the second of a duplicated field",
			file: "list.json",
			input: `{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}},
  {"apiVersion": "v1", "kind": "Service",
   "metadata": {"name": "b",
                "name": "c"}}
]}`,
			want: []Problem{{File: "list.json", Line: 5, Document: 1, Reason: `items[1]: duplicate field "metadata.name"`}},
		},
		{
			name:  "a Latin-1 byte in YAML, at its line and column",
			file:  "latin1.yaml",
			input: service + "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: cafe\n  annotations: {owner: \"Ren\xe9\"}\n",
			want: []Problem{{File: "latin1.yaml", Line: 10, Column: 28, Document: 2,
				Reason: "byte 0xE9 is not UTF-8; the file must be UTF-8 (a file saved as Latin-1 converts with iconv -f latin1 -t utf-8)"}},
		},
		{
			name:  "a Latin-1 byte in a JSON string, which encoding/json would take silently",
			file:  "latin1.json",
			input: "{\"apiVersion\": \"v1\", \"kind\": \"Service\",\n \"metadata\": {\"name\": \"a\", \"annotations\": {\"owner\": \"Ren\xe9\"}}}",
			want: []Problem{{File: "latin1.json", Line: 2, Column: 57, Document: 1,
				Reason: "byte 0xE9 is not UTF-8; the file must be UTF-8 (a file saved as Latin-1 converts with iconv -f latin1 -t utf-8)"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, probs := Decode(tc.file, []byte(tc.input))
			if diff := cmp.Diff(tc.want, probs); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProblemString(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{File: "m/a.yaml", Line: 12, Document: 3, Reason: `unknown field "spec.x"`}, `m/a.yaml:12: document 3: unknown field "spec.x"`},
		{Problem{File: "m/b.yaml", Reason: "cannot read: permission denied"}, "m/b.yaml: cannot read: permission denied"},
		{Problem{File: "m/c.yaml", Line: 4, Column: 11, Document: 1, Reason: "byte 0xE9 is not UTF-8"}, "m/c.yaml:4:11: document 1: byte 0xE9 is not UTF-8"},
	}
	for _, tc := range tests {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

func ir(ns, name string, spec contourv1beta1.IngressRouteSpec) *contourv1beta1.IngressRoute {
	return &contourv1beta1.IngressRoute{TypeMeta: tm("contour.heptio.com/v1beta1", "IngressRoute"), ObjectMeta: om(ns, name), Spec: spec}
}

func svc(name string, port int32) contourv1beta1.Service {
	return contourv1beta1.Service{Name: name, Port: port}
}

func intOrString(v intstr.IntOrString) *intstr.IntOrString { return &v }

func TestDecodeContourKinds(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		input string
		want  []runtime.Object
		probs []Problem
	}{
		{
			name: "IngressRoute: services, service as one object and as a list, delegation, default namespace",
			file: "root.yaml",
			input: `apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root}
spec:
  virtualhost:
    fqdn: app.example.com
    aliases: [www.example.com]
    tls: {secretName: certs/wildcard, minimumProtocolVersion: "1.2"}
  strategy: WeightedLeastRequest
  healthCheck: {path: /healthz, intervalSeconds: 10}
  routes:
  - match: /
    services:
    - {name: web, port: 80, weight: 90}
    - {name: canary, port: 80, weight: 10, strategy: Random}
  - match: /single
    permitInsecure: true
    service:
      name: single
      port: 8080
  - match: /list
    prefixRewrite: /
    service:
    - {name: one, port: 1}
    - {name: two, port: 2}
  - match: /blog
    delegate: {name: blog, namespace: marketing}
`,
			want: []runtime.Object{ir("default", "root", contourv1beta1.IngressRouteSpec{
				VirtualHost: &contourv1beta1.VirtualHost{
					Fqdn: "app.example.com", Aliases: []string{"www.example.com"},
					TLS: &contourv1beta1.TLS{SecretName: "certs/wildcard", MinimumProtocolVersion: "1.2"},
				},
				Strategy:    "WeightedLeastRequest",
				HealthCheck: &contourv1beta1.HealthCheck{Path: "/healthz", IntervalSeconds: 10},
				Routes: []contourv1beta1.Route{
					{Match: "/", Services: []contourv1beta1.Service{
						{Name: "web", Port: 80, Weight: ptr(int64(90))},
						{Name: "canary", Port: 80, Weight: ptr(int64(10)), Strategy: "Random"},
					}},
					{Match: "/single", PermitInsecure: true, Service: contourv1beta1.ServiceList{svc("single", 8080)}},
					{Match: "/list", PrefixRewrite: "/", Service: contourv1beta1.ServiceList{svc("one", 1), svc("two", 2)}},
					{Match: "/blog", Delegate: &contourv1beta1.Delegate{Name: "blog", Namespace: "marketing"}},
				},
			})},
		},
		{
			name: "IngressRoute policies: count and maxRetries, status codes and durations as strings or numbers",
			file: "policies.yaml",
			input: `apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: policies, namespace: team}
spec:
  routes:
  - match: /count
    services: [{name: s, port: 80}]
    timeoutPolicy: {request: 1s, idle: infinity}
    retryPolicy: {count: 3, onStatusCodes: ["50x", "501", 502], perTryTimeout: ""}
  - match: /maxretries
    services: [{name: s, port: 80}]
    timeoutPolicy: {request: 0, idle: -1}
    retryPolicy: {maxRetries: "2", perTryTimeout: 5}
`,
			want: []runtime.Object{ir("team", "policies", contourv1beta1.IngressRouteSpec{Routes: []contourv1beta1.Route{
				{
					Match: "/count", Services: []contourv1beta1.Service{svc("s", 80)},
					TimeoutPolicy: &contourv1beta1.TimeoutPolicy{Request: intOrString(intstr.FromString("1s")), Idle: intOrString(intstr.FromString("infinity"))},
					RetryPolicy: &contourv1beta1.RetryPolicy{
						Count:         intOrString(intstr.FromInt32(3)),
						OnStatusCodes: []intstr.IntOrString{intstr.FromString("50x"), intstr.FromString("501"), intstr.FromInt32(502)},
						PerTryTimeout: intOrString(intstr.FromString("")),
					},
				},
				{
					Match: "/maxretries", Services: []contourv1beta1.Service{svc("s", 80)},
					TimeoutPolicy: &contourv1beta1.TimeoutPolicy{Request: intOrString(intstr.FromInt32(0)), Idle: intOrString(intstr.FromInt32(-1))},
					RetryPolicy:   &contourv1beta1.RetryPolicy{MaxRetries: intOrString(intstr.FromString("2")), PerTryTimeout: intOrString(intstr.FromInt32(5))},
				},
			}})},
		},
		{
			name: "TLSCertificateDelegation, and an IngressRouteList",
			file: "delegation.json",
			input: `{"apiVersion": "contour.heptio.com/v1beta1", "kind": "TLSCertificateDelegation",
 "metadata": {"name": "wildcard", "namespace": "certs"},
 "spec": {"delegations": [
   {"secretName": "wildcard", "targetNamespaces": ["*"]},
   {"secretName": "team", "targetNamespaces": ["team-a", "team-b"]}]}}
{"apiVersion": "contour.heptio.com/v1beta1", "kind": "IngressRouteList",
 "items": [{"metadata": {"name": "listed"}, "spec": {"routes": [{"match": "/", "service": {"name": "s", "port": 80}}]}}]}
`,
			want: []runtime.Object{
				&contourv1beta1.TLSCertificateDelegation{
					TypeMeta: tm("contour.heptio.com/v1beta1", "TLSCertificateDelegation"), ObjectMeta: om("certs", "wildcard"),
					Spec: contourv1beta1.TLSCertificateDelegationSpec{Delegations: []contourv1beta1.CertificateDelegation{
						{SecretName: "wildcard", TargetNamespaces: []string{"*"}},
						{SecretName: "team", TargetNamespaces: []string{"team-a", "team-b"}},
					}},
				},
				ir("default", "listed", contourv1beta1.IngressRouteSpec{Routes: []contourv1beta1.Route{
					{Match: "/", Service: contourv1beta1.ServiceList{svc("s", 80)}},
				}}),
			},
		},
		{
			name: "strict decoding: unknown fields in services, in a service object and in a delegation",
			file: "typos.yaml",
			input: `apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: in-services}
spec:
  routes:
  - match: /
    services: [{name: s, prot: 80}]
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: in-service}
spec:
  routes:
  - match: /
    services: [{name: s, port: 80}]
  - match: /one
    service:
      name: s
      prot: 80
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: in-service-list}
spec:
  routes:
  - match: /
    service: [{name: s, port: "80"}]
---
apiVersion: contour.heptio.com/v1beta1
kind: TLSCertificateDelegation
metadata: {name: d}
spec:
  delegations: [{secretName: s, targetNamespace: ["*"]}]
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: good}
spec:
  routes: [{match: /, service: {name: s, port: 80}}]
`,
			want: []runtime.Object{ir("default", "good", contourv1beta1.IngressRouteSpec{Routes: []contourv1beta1.Route{
				{Match: "/", Service: contourv1beta1.ServiceList{svc("s", 80)}},
			}})},
			probs: []Problem{
				{File: "typos.yaml", Line: 7, Document: 1, Reason: `unknown field "spec.routes[0].services[0].prot"`},
				{File: "typos.yaml", Line: 19, Document: 2, Reason: `unknown field "spec.routes[1].service.prot"`},
				{File: "typos.yaml", Line: 27, Document: 3, Reason: `field "spec.routes[0].service[0].port" must be an integer, not a string`},
				{File: "typos.yaml", Line: 33, Document: 4, Reason: `unknown field "spec.delegations[0].targetNamespace"`},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, probs := Decode(tc.file, []byte(tc.input))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.probs, probs); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
