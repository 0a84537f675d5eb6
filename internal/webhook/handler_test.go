package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
)

// object is a manifest as the API server sends it: JSON with apiVersion and kind.
type object struct {
	json []byte
	kind metav1.GroupVersionKind
}

func manifest(t *testing.T, doc string) object {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		t.Fatal(err)
	}
	gvk := tm.GroupVersionKind()
	return object{json: js, kind: metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}}
}

// typed decodes o as the controller's source would.
func (o object) typed(t *testing.T) runtime.Object {
	t.Helper()
	obj, err := kinds()[schema.GroupVersionKind(o.kind)](o.json)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

const validIngress = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: apps, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  ingressClassName: portico
  rules:
    - host: web.example
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service: {name: web, port: {number: 80}}
`

const badPathType = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: apps}
spec:
  rules:
    - host: web.example
      http:
        paths:
          - path: /
            pathType: Regex
            backend:
              service: {name: web, port: {number: 80}}
`

const badIngressRoute = `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root, namespace: apps}
spec:
  virtualhost: {fqdn: root.example}
  routes:
    - match: api
      services: [{name: web, port: 80}]
`

// request is an AdmissionRequest for obj (and old, for updates).
func request(op admissionv1.Operation, obj object, old *object) *admissionv1.AdmissionRequest {
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	_ = json.Unmarshal(obj.json, &meta)
	req := &admissionv1.AdmissionRequest{
		UID:       types.UID("uid-" + string(op)),
		Kind:      obj.kind,
		Namespace: meta.Metadata.Namespace,
		Name:      meta.Metadata.Name,
		Operation: op,
		Object:    runtime.RawExtension{Raw: obj.json},
	}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: old.json}
	}
	if op == admissionv1.Delete {
		req.OldObject, req.Object = req.Object, runtime.RawExtension{}
	}
	return req
}

func TestReview(t *testing.T) {
	ingressOf := func(t *testing.T, doc string) *networkingv1.Ingress {
		return manifest(t, doc).typed(t).(*networkingv1.Ingress)
	}
	tests := []struct {
		name    string
		req     func(t *testing.T) *admissionv1.AdmissionRequest
		cluster func(t *testing.T) []runtime.Object // what the controller has read
		cfg     Config
		// message is the refusal, "" to admit; warnings are the admission's warnings.
		message  string
		warnings []string
	}{
		{
			name: "valid Ingress",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, validIngress), nil)
			},
		},
		{
			name: "bad pathType",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, badPathType), nil)
			},
			message: `not served: spec.rules[0].http.paths[0].path "/": pathType "Regex" is not one of Exact, Prefix, ImplementationSpecific`,
		},
		{
			name: "another class's invalid Ingress",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, strings.Replace(badPathType, "spec:\n", "spec:\n  ingressClassName: nginx\n", 1)), nil)
			},
		},
		{
			name: "class through an IngressClass the controller has read",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, strings.Replace(badPathType, "spec:\n", "spec:\n  ingressClassName: edge\n", 1)), nil)
			},
			cluster: func(*testing.T) []runtime.Object {
				return []runtime.Object{&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "edge"}, Spec: networkingv1.IngressClassSpec{Controller: dag.ControllerName}}}
			},
			message: `not served: spec.rules[0].http.paths[0].path "/": pathType "Regex" is not one of Exact, Prefix, ImplementationSpecific`,
		},
		{
			name: "namespace the controller does not watch",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, badPathType), nil)
			},
			cfg:     Config{Namespaces: []string{"other"}},
			message: "",
		},
		{
			name: "valid Ingress for a host an older Ingress serves",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, strings.Replace(validIngress, "name: web,", "name: newer,", 1)), nil)
			},
			cluster: func(t *testing.T) []runtime.Object {
				return []runtime.Object{ingressOf(t, strings.Replace(validIngress, "2024", "2020", 1))}
			},
		},
		{
			name: "timeouts and retries that fall back to defaults",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, strings.Replace(validIngress, "namespace: apps,", "namespace: apps, annotations: {portico.dev/request-timeout: soon},", 1)), nil)
			},
			warnings: []string{`annotation portico.dev/request-timeout "soon" is not a duration (e.g. "10s", or "infinity"); the proxy default (15s) applies`},
		},
		{
			name: "bad IngressRoute",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, badIngressRoute), nil)
			},
			message: `not served: spec.routes[0] (match "api"): match "api" must start with "/"`,
		},
		{
			// The checks of headers policies are the build's: a header the data plane
			// writes itself, and services that disagree on Server.
			name: "HTTPProxy with headers policies the data plane cannot honour",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: hdr, namespace: apps}
spec:
  virtualhost: {fqdn: hdr.example}
  routes:
    - services:
        - {name: web, port: 80, responseHeadersPolicy: {remove: [Server]}}
        - {name: api, port: 80}
      requestHeadersPolicy: {set: [{name: Transfer-Encoding, value: chunked}]}
`), nil)
			},
			message: "not served: spec.routes[0].requestHeadersPolicy.set[0].name: Transfer-Encoding is a hop-by-hop header: each data plane drops it when forwarding and writes its own for each connection, so no headers policy can set or remove it; " +
				"the services of spec.routes[0] change the Server response header differently (services[0] removes it, services[1] leaves it): Portico decides Server per route: change it in spec.routes[0].responseHeadersPolicy, or alike in every service of the route",
		},
		{
			// Values the HTTPProxy CRD's schema refuses are refused here too, for a
			// cluster whose CRDs are older than the controller, and for `portico run`.
			name: "HTTPProxy with values Contour's schema refuses",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: schema, namespace: apps}
spec:
  virtualhost: {fqdn: schema.example}
  routes:
    - services:
        - {name: web, port: 80, protocol: tls, validation: {caSecret: ca, subjectName: web.example, subjectNames: [other.example]}}
      cookieRewritePolicies: [{name: session, domainRewrite: {value: Schema.Example}}]
`), nil)
			},
			message: `not served: spec.routes[0].cookieRewritePolicies[0].domainRewrite.value "Schema.Example" must be a domain name in lower case (letters, digits, '-' and '.', such as example.com); ` +
				`spec.routes[0].services[0].validation.subjectNames[0] "other.example" must equal subjectName "web.example": list subjectName first`,
		},
		{
			name: "HTTPProxy with a bad IP block and an invalid CORS origin",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: ipcors, namespace: apps}
spec:
  virtualhost:
    fqdn: ipcors.example
    corsPolicy: {allowOrigin: ["https://(app"], allowMethods: [GET]}
  routes:
    - services: [{name: web, port: 80}]
      ipDenyPolicy: [{source: Remote, cidr: "10.0.0.1/40"}]
`), nil)
			},
			message: `not served: spec.virtualhost.corsPolicy.allowOrigin[0] "https://(app" is neither "*", an origin (scheme://host[:port]) nor a regular expression (error parsing regexp: missing closing ): ` + "`https://(app`" + `): a wildcard host is written as a regular expression, such as https://.*\.example\.com; ` +
				`spec.routes[0].ipDenyPolicy[0].cidr "10.0.0.1/40" is not an IP address or CIDR block: write one such as 10.0.0.0/8, 192.168.1.7 or 2001:db8::/32`,
		},
		{
			name: "undecodable IngressRoute",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: typo, namespace: apps}
spec:
  routes:
    - match: /
      service: {name: web, prot: 80}
`), nil)
			},
			message: `not served: its spec cannot be read: spec.routes[0].service: unknown field "prot"; fix that field`,
		},
		{
			name: "a forged decode-error annotation is ignored",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, strings.NewReplacer(
					"match: api", "match: /",
					"namespace: apps}", "namespace: apps, annotations: {portico.dev/decode-error: forged}}",
				).Replace(badIngressRoute)), nil)
			},
		},
		{
			name: "orphan IngressRoute",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: orphan, namespace: apps}
spec:
  routes:
    - match: /
      services: [{name: web, port: 80}]
`), nil)
			},
		},
		{
			name: "root delegating to a missing IngressRoute, with a missing Secret",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root, namespace: apps}
spec:
  virtualhost: {fqdn: root.example, tls: {secretName: missing}}
  routes:
    - match: /
      delegate: {name: nowhere}
`), nil)
			},
		},
		{
			name: "root for a host another root holds",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, strings.Replace(badIngressRoute, "match: api", "match: /", 1)), nil)
			},
			cluster: func(t *testing.T) []runtime.Object {
				return []runtime.Object{manifest(t, strings.Replace(strings.Replace(badIngressRoute, "match: api", "match: /", 1), "name: root,", "name: first,", 1)).typed(t)}
			},
		},
		{
			name: "root outside the root namespaces",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, strings.Replace(badIngressRoute, "match: api", "match: /", 1)), nil)
			},
			cfg:     Config{DAG: dag.Options{RootNamespaces: []string{"platform"}}},
			message: `not served: root IngressRoutes (with spec.virtualhost) are only allowed in namespaces platform; ask an administrator of those namespaces to delegate a path to this object instead`,
		},
		{
			name: "delete of an invalid object",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Delete, manifest(t, badPathType), nil)
			},
		},
		{
			name: "update of an invalid object that adds no problem",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				old := manifest(t, badPathType)
				return request(admissionv1.Update, manifest(t, strings.Replace(badPathType, "namespace: apps", "namespace: apps, labels: {team: a}", 1)), &old)
			},
			warnings: []string{`not served: spec.rules[0].http.paths[0].path "/": pathType "Regex" is not one of Exact, Prefix, ImplementationSpecific`},
		},
		{
			name: "update that breaks a valid object",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				old := manifest(t, strings.Replace(badIngressRoute, "match: api", "match: /", 1))
				return request(admissionv1.Update, manifest(t, badIngressRoute), &old)
			},
			message: `not served: spec.routes[0] (match "api"): match "api" must start with "/"`,
		},
		{
			name: "update that adds a problem to an invalid object",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				old := manifest(t, badPathType)
				return request(admissionv1.Update, manifest(t, strings.Replace(badPathType, "host: web.example", "host: 192.0.2.1", 1)), &old)
			},
			message: `not served: spec.rules[0].host "192.0.2.1": hosts must be DNS names, not IP addresses; spec.rules[0].http.paths[0].path "/": pathType "Regex" is not one of Exact, Prefix, ImplementationSpecific`,
		},
		{
			name: "a kind the webhook does not validate",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(admissionv1.Create, manifest(t, "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: apps}\n"), nil)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cluster []runtime.Object
			if tc.cluster != nil {
				cluster = tc.cluster(t)
			}
			cfg := tc.cfg
			cfg.Store = func() *store.Store { return store.FromObjects(cluster) }
			req := tc.req(t)
			resp := NewHandler(cfg).Review(req)
			if resp.UID != req.UID {
				t.Errorf("uid %q, want %q", resp.UID, req.UID)
			}
			var got string
			if !resp.Allowed {
				if resp.Result == nil || resp.Result.Message == "" {
					t.Fatalf("refused without a message: %+v", resp)
				}
				got = resp.Result.Message
			}
			if diff := cmp.Diff(tc.message, got); diff != "" {
				t.Errorf("refusal (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.warnings, resp.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if req.Operation == admissionv1.Delete || req.Kind.Kind == "Service" {
				return
			}
			// A refusal is the description of the status a build gives the object, word
			// for word.
			obj := manifest(t, string(req.Object.Raw)).typed(t)
			g := dag.Build(store.FromObjects(append(cluster, obj)), cfg.DAG)
			st := statusOf(g, req.Name)
			if tc.message != "" && st.Description != tc.message {
				t.Errorf("the status says %q", st.Description)
			}
		})
	}
}

func statusOf(g *dag.Graph, name string) *dag.Status {
	for _, s := range g.Statuses {
		if s.Object.Name == name {
			return s
		}
	}
	return &dag.Status{}
}

// TestReviewAdmitsWhatOthersInvalidate: objects whose status is invalid or orphaned only
// because of other objects are admitted (the build reports it; the older object keeps
// its routes).
func TestReviewAdmitsWhatOthersInvalidate(t *testing.T) {
	older := manifest(t, strings.Replace(validIngress, "2024", "2020", 1)).typed(t)
	newer := manifest(t, strings.Replace(validIngress, "name: web,", "name: newer,", 1))
	g := dag.Build(store.FromObjects([]runtime.Object{older, newer.typed(t)}), dag.Options{})
	if st := statusOf(g, "newer"); st.Status != dag.StatusInvalid || !strings.Contains(st.Description, "conflicts with older Ingresses") {
		t.Fatalf("the build does not reject the newer Ingress: %+v", st)
	}
	h := NewHandler(Config{Store: func() *store.Store { return store.FromObjects([]runtime.Object{older}) }})
	if resp := h.Review(request(admissionv1.Create, newer, nil)); !resp.Allowed {
		t.Errorf("refused: %v", resp.Result.Message)
	}
}

func post(t *testing.T, h http.Handler, method, contentType string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, Path, bytes.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func review(req *admissionv1.AdmissionRequest) []byte {
	b, _ := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	return b
}

func TestServeHTTP(t *testing.T) {
	h := NewHandler(Config{})
	t.Run("answers an AdmissionReview with one", func(t *testing.T) {
		w := post(t, h, http.MethodPost, "application/json", review(request(admissionv1.Create, manifest(t, badPathType), nil)))
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%d %s: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Request != nil || out.Response == nil {
			t.Fatalf("answer: %s", w.Body)
		}
		r := out.Response
		if r.UID != "uid-CREATE" || r.Allowed || r.Result.Code != http.StatusUnprocessableEntity || r.Result.Reason != metav1.StatusReasonInvalid ||
			!strings.HasPrefix(r.Result.Message, "not served: spec.rules[0].http.paths[0].path") {
			t.Errorf("response: %+v %+v", r, r.Result)
		}
	})
	for _, tc := range []struct {
		name   string
		method string
		body   []byte
		code   int
		says   string
	}{
		{"not JSON", http.MethodPost, []byte("kind: AdmissionReview"), http.StatusBadRequest, "not a JSON AdmissionReview"},
		{"not an object", http.MethodPost, []byte(`[1, 2]`), http.StatusBadRequest, "not a JSON AdmissionReview"},
		{"admission.k8s.io/v1beta1", http.MethodPost, bytes.Replace(review(request(admissionv1.Create, manifest(t, validIngress), nil)), []byte(`admission.k8s.io/v1"`), []byte(`admission.k8s.io/v1beta1"`), 1), http.StatusBadRequest, "admissionReviewVersions: [v1]"},
		{"another kind", http.MethodPost, []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"Status"}`), http.StatusBadRequest, `kind "Status"`},
		{"no request", http.MethodPost, []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), http.StatusBadRequest, "has no request"},
		{"no uid", http.MethodPost, []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}`), http.StatusBadRequest, "no uid"},
		{"a request field of the wrong type", http.MethodPost, []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":7}}`), http.StatusBadRequest, "not a JSON AdmissionReview"},
		{"GET", http.MethodGet, nil, http.StatusMethodNotAllowed, "POST"},
		{"too large", http.MethodPost, bytes.Repeat([]byte(" "), maxBodyBytes+1), http.StatusRequestEntityTooLarge, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := post(t, h, tc.method, "application/json", tc.body)
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.says) {
				t.Errorf("%d %q; want %d with %q", w.Code, w.Body, tc.code, tc.says)
			}
		})
	}
	t.Run("an object that cannot be read", func(t *testing.T) {
		req := request(admissionv1.Create, manifest(t, validIngress), nil)
		req.Object.Raw = []byte(`{"spec": {"rules": "many"}}`)
		w := post(t, h, http.MethodPost, "application/json", review(req))
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if out.Response.Allowed || !strings.HasPrefix(out.Response.Result.Message, "not served: the object cannot be read: ") {
			t.Errorf("%+v", out.Response.Result)
		}
	})
}

// TestStoreIsReadPerRequest: the class decision follows the IngressClasses the
// controller has read at the time of the request, and nothing is refused before it has
// read any: an Ingress without a class may be another controller's.
func TestStoreIsReadPerRequest(t *testing.T) {
	var current *store.Store
	h := NewHandler(Config{Store: func() *store.Store { return current }})
	noClass := request(admissionv1.Create, manifest(t, badPathType), nil)
	edge := request(admissionv1.Create, manifest(t, strings.Replace(badPathType, "spec:\n", "spec:\n  ingressClassName: edge\n", 1)), nil)
	for _, req := range []*admissionv1.AdmissionRequest{noClass, edge} {
		if resp := h.Review(req); !resp.Allowed {
			t.Fatalf("refused before the cluster was read: %v", resp.Result.Message)
		}
	}
	current = store.New()
	if resp := h.Review(noClass); resp.Allowed {
		t.Error("an Ingress without a class admitted, with no default IngressClass")
	}
	if resp := h.Review(edge); !resp.Allowed {
		t.Errorf("refused while edge is not known to be Portico's class: %v", resp.Result.Message)
	}
	current = store.FromObjects([]runtime.Object{&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "edge"}, Spec: networkingv1.IngressClassSpec{Controller: dag.ControllerName}}})
	if resp := h.Review(edge); resp.Allowed {
		t.Error("admitted once edge is known to be Portico's class")
	}
}
