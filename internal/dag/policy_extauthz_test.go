package dag

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	contourv1alpha1 "github.com/portico-dev/portico/apis/projectcontour/v1alpha1"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

func extensionService(t testing.TB, doc string) *contourv1alpha1.ExtensionService {
	return fromYAML[contourv1alpha1.ExtensionService](t, doc)
}

// authObjects are a root with authorization, an included child with its own route
// policies, and the ExtensionService with its Service and endpoints.
func authObjects(t testing.TB, vhAuth, esSpec string) []runtime.Object {
	cert := testutil.SelfSigned("a.example.com")
	return []runtime.Object{
		tlsSecret("default", "cert", cert.CertPEM, cert.KeyPEM),
		proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: a.example.com, tls: {secretName: cert}, authorization: `+vhAuth+`}
  includes: [{name: child, conditions: [{prefix: /child}]}]
  routes:
  - services: [{name: web, port: 80}]
  - conditions: [{prefix: /public}]
    authPolicy: {disabled: true}
    services: [{name: web, port: 80}]
  - conditions: [{prefix: /insecure}]
    permitInsecure: true
    services: [{name: web, port: 80}]
`),
		proxy(t, `
metadata: {name: child}
spec:
  routes:
  - conditions: [{prefix: /admin}]
    authPolicy: {context: {role: admin}}
    services: [{name: web, port: 80}]
`),
		extensionService(t, `
metadata: {name: auth, namespace: authns}
spec: `+esSpec),
		svc("default", "web", ":80"),
		svc("authns", "authz", "grpc:9000"),
		endpoints("authns", "authz", "grpc", 9000, "10.0.0.7", "10.0.0.8"),
	}
}

func TestHTTPProxyAuthorization(t *testing.T) {
	g := build(authObjects(t,
		`{extensionRef: {name: auth, namespace: authns}, responseTimeout: 750ms, failOpen: true, authPolicy: {context: {site: a, role: user}}}`,
		`{protocol: h2c, services: [{name: authz, port: 9000}]}`)...)
	wantWarning(t, g, "default", "root", problemAuth, "PlainHTTPNotAuthorized", "spec.routes[2] is served over plain HTTP too")
	wantClean(t, g, "default", "child")
	var svh *SecureVirtualHost
	for _, h := range g.HTTPS {
		if h.Name == "a.example.com" {
			svh = h
		}
	}
	if svh == nil || svh.Authorization == nil {
		t.Fatalf("the secure host has no authorization: %+v", svh)
	}
	a := svh.Authorization
	if a.Cluster.Name != "extension/authns/auth" || a.Cluster.Protocol != "h2c" || !a.FailOpen || a.Timeout == nil || *a.Timeout != 750*time.Millisecond {
		t.Errorf("authorization = %+v, cluster %+v", a, a.Cluster)
	}
	if diff := cmp.Diff([]Endpoint{{Address: "10.0.0.7", Port: 9000}, {Address: "10.0.0.8", Port: 9000}}, a.Cluster.Endpoints); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
	if !clusterListed(g, "extension/authns/auth") {
		t.Errorf("the extension's cluster is not among the graph's clusters")
	}
	want := map[string]RouteAuthorization{
		"/":            {Context: map[string]string{"site": "a", "role": "user"}},
		"/public":      {Disabled: true},
		"/insecure":    {Context: map[string]string{"site": "a", "role": "user"}},
		"/child/admin": {Context: map[string]string{"site": "a", "role": "admin"}},
	}
	for _, r := range svh.Routes {
		w, ok := want[r.Path.Value]
		if !ok {
			continue
		}
		delete(want, r.Path.Value)
		if r.Authorization == nil {
			t.Errorf("route %s: no authorization", r.Path.Value)
			continue
		}
		if diff := cmp.Diff(w, *r.Authorization); diff != "" {
			t.Errorf("route %s (-want +got):\n%s", r.Path.Value, diff)
		}
	}
	if len(want) > 0 {
		t.Errorf("routes not found: %v", want)
	}
	es := objectStatus(t, g, ObjectRef{Kind: KindExtensionService, Namespace: "authns", Name: "auth"})
	if es.Status != StatusValid {
		t.Errorf("ExtensionService status %s: %s", es.Status, es.Description)
	}
}

func clusterListed(g *Graph, name string) bool {
	for _, c := range g.Clusters() {
		if c.Name == name {
			return true
		}
	}
	return false
}

func objectStatus(t testing.TB, g *Graph, ref ObjectRef) *Status {
	t.Helper()
	for _, s := range g.Statuses {
		if s.Object == ref {
			return s
		}
	}
	t.Fatalf("no status for %s", ref)
	return nil
}

// An HTTPProxy whose authorization cannot be had is not served at all: serving it
// without would expose what it protects.
func TestHTTPProxyAuthorizationRefused(t *testing.T) {
	for _, tc := range []struct {
		name, vhAuth, esSpec string
		noTLS, fallback      bool
		typ, reason          string
		parts                []string
	}{
		{name: "missing ExtensionService", vhAuth: `{extensionRef: {name: nope}}`, esSpec: `{services: [{name: authz, port: 9000}]}`,
			typ: problemAuth, reason: "ExtensionServiceNotFound", parts: []string{"ExtensionService default/nope not found"}},
		{name: "invalid ExtensionService", vhAuth: `{extensionRef: {name: auth, namespace: authns}}`, esSpec: `{services: [{name: missing, port: 9000}]}`,
			typ: problemAuth, reason: "ExtensionServiceInvalid", parts: []string{"ExtensionService authns/auth is invalid", "Service authns/missing not found"}},
		{name: "bad timeout", vhAuth: `{extensionRef: {name: auth, namespace: authns}, responseTimeout: soon}`, esSpec: `{services: [{name: authz, port: 9000}]}`,
			typ: problemAuth, reason: "AuthResponseTimeoutInvalid", parts: []string{`responseTimeout "soon" is not a duration`}},
		{name: "no TLS", noTLS: true, vhAuth: `{extensionRef: {name: auth, namespace: authns}}`, esSpec: `{services: [{name: authz, port: 9000}]}`,
			typ: problemAuth, reason: "AuthNotPermitted", parts: []string{"needs spec.virtualhost.tls"}},
		{name: "bad apiVersion", vhAuth: `{extensionRef: {name: auth, namespace: authns, apiVersion: projectcontour.io/v1}}`, esSpec: `{services: [{name: authz, port: 9000}]}`,
			typ: problemAuth, reason: "AuthBadResourceVersion", parts: []string{"projectcontour.io/v1alpha1"}},
		{name: "fallback certificate", vhAuth: `{extensionRef: {name: auth, namespace: authns}}`, esSpec: `{services: [{name: authz, port: 9000}]}`, fallback: true,
			typ: problemAuth, reason: "AuthIncompatibleWithFallback", parts: []string{"enableFallbackCertificate cannot be combined"}},
		{name: "gRPC service on an HTTP ExtensionService", vhAuth: `{extensionRef: {name: auth, namespace: authns}}`, esSpec: `{protocol: http/1.1, services: [{name: authz, port: 9000}]}`,
			typ: problemAuth, reason: "AuthProtocolMismatch", parts: []string{"needs HTTP/2"}},
		{name: "httpSettings without http", vhAuth: `{extensionRef: {name: auth, namespace: authns}, httpSettings: {pathPrefix: /x}}`, esSpec: `{services: [{name: authz, port: 9000}]}`,
			typ: problemAuth, reason: "AuthHTTPSettingsNotHTTP", parts: []string{"set serviceType: http, or remove httpSettings"}},
		{name: "empty allowed header", vhAuth: `{extensionRef: {name: auth, namespace: authns}, serviceType: http, httpSettings: {allowedAuthorizationHeaders: [{ignoreCase: true}]}}`, esSpec: `{protocol: http/1.1, services: [{name: authz, port: 9000}]}`,
			typ: problemAuth, reason: "AuthBadAllowedHeader", parts: []string{"allowedAuthorizationHeaders[0] matches nothing", "set one of exact, prefix, suffix or contains"}},
		{name: "two kinds in one allowed header", vhAuth: `{extensionRef: {name: auth, namespace: authns}, serviceType: http, httpSettings: {allowedUpstreamHeaders: [{exact: a}, {prefix: x-, suffix: -y}]}}`, esSpec: `{protocol: http/1.1, services: [{name: authz, port: 9000}]}`,
			typ: problemAuth, reason: "AuthBadAllowedHeader", parts: []string{"allowedUpstreamHeaders[1] sets more than one of exact, prefix, suffix and contains"}},
		{name: "relative path prefix", vhAuth: `{extensionRef: {name: auth, namespace: authns}, serviceType: http, httpSettings: {pathPrefix: auth}}`, esSpec: `{protocol: http/1.1, services: [{name: authz, port: 9000}]}`,
			typ: problemAuth, reason: "AuthPathPrefixInvalid", parts: []string{`pathPrefix "auth" must start with "/"`}},
		{name: "context for an http server", vhAuth: `{extensionRef: {name: auth, namespace: authns}, serviceType: http, authPolicy: {context: {k: v}}}`, esSpec: `{protocol: http/1.1, services: [{name: authz, port: 9000}]}`,
			typ: problemAuth, reason: "AuthContextForHTTP", parts: []string{"only sent to gRPC authorization servers"}},
		{name: "unknown service type", vhAuth: `{extensionRef: {name: auth, namespace: authns}, serviceType: soap}`, esSpec: `{services: [{name: authz, port: 9000}]}`,
			typ: problemAuth, reason: "AuthServiceTypeInvalid", parts: []string{`serviceType "soap"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := authObjects(t, tc.vhAuth, tc.esSpec)
			if tc.noTLS {
				objs[1].(*contourv1.HTTPProxy).Spec.VirtualHost.TLS = nil
			}
			if tc.fallback {
				objs[1].(*contourv1.HTTPProxy).Spec.VirtualHost.TLS.EnableFallbackCertificate = true
			}
			g := build(objs...)
			wantInvalid(t, g, "default", "root", tc.typ, tc.reason, tc.parts...)
			if http, https := hostNames(g); len(http)+len(https) > 0 {
				t.Errorf("served without the authorization it asks for: %v %v", http, https)
			}
		})
	}
}

func TestExtensionServiceStatus(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       StatusValue
		parts      []string
	}{
		{"valid", `{services: [{name: authz, port: 9000}]}`, StatusValid, []string{"valid ExtensionService"}},
		{"http/1.1", `{protocol: http/1.1, services: [{name: authz, port: 9000}]}`, StatusValid, []string{"valid ExtensionService"}},
		{"unknown protocol", `{protocol: spdy, services: [{name: authz, port: 9000}]}`, StatusInvalid, []string{`spec.protocol "spdy": use h2`}},
		{"validation without TLS", `{protocol: h2c, validation: {caSecret: ca, subjectName: authz}, services: [{name: authz, port: 9000}]}`, StatusInvalid, []string{"spec.validation needs protocol h2"}},
		{"missing CA", `{validation: {caSecret: ca, subjectName: authz}, services: [{name: authz, port: 9000}]}`, StatusInvalid, []string{"Secret authns/ca not found"}},
		{"missing Service", `{services: [{name: nope, port: 9000}]}`, StatusInvalid, []string{"Service authns/nope not found"}},
		{"missing port", `{services: [{name: authz, port: 9001}]}`, StatusInvalid, []string{"has no port 9001"}},
		{"bad timeout", `{timeoutPolicy: {response: soon}, services: [{name: authz, port: 9000}]}`, StatusInvalid, []string{`"soon" is not a duration`}},
		{"idle ignored", `{timeoutPolicy: {idle: 1s}, services: [{name: authz, port: 9000}]}`, StatusValid, []string{"spec.timeoutPolicy.idle is ignored"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(
				extensionService(t, "metadata: {name: auth, namespace: authns}\nspec: "+tc.spec),
				svc("authns", "authz", "grpc:9000"),
			)
			st := objectStatus(t, g, ObjectRef{Kind: KindExtensionService, Namespace: "authns", Name: "auth"})
			if st.Status != tc.want {
				t.Errorf("status %s (%s), want %s", st.Status, st.Description, tc.want)
			}
			for _, p := range tc.parts {
				if !strings.Contains(st.Description, p) {
					t.Errorf("description %q does not contain %q", st.Description, p)
				}
			}
		})
	}
}

// An edit of the ExtensionService alone (its Service, so the endpoints of the
// extension's cluster) reaches the HTTPProxy that uses it in an incremental build.
func TestIncrementalFollowsExtensionService(t *testing.T) {
	objs := authObjects(t, `{extensionRef: {name: auth, namespace: authns}}`, `{protocol: h2c, services: [{name: authz, port: 9000}]}`)
	// Unrelated objects, so that a change reaching the authorized host is built in
	// part, not whole.
	for _, name := range []string{"b", "c", "d", "e", "f"} {
		objs = append(objs, proxy(t, "{metadata: {name: "+name+"}, spec: {virtualhost: {fqdn: "+name+".example.com}, routes: [{services: [{name: web, port: 80}]}]}}"))
	}
	s := store.FromObjects(objs)
	inc := NewIncremental(Options{})
	inc.Build(s)
	s.Upsert(svc("authns", "other", "grpc:9000"))
	s.Upsert(endpoints("authns", "other", "grpc", 9000, "10.0.0.9"))
	inc.Build(s)
	s.Upsert(extensionService(t, "metadata: {name: auth, namespace: authns}\nspec: {protocol: h2c, services: [{name: other, port: 9000}]}"))
	g := inc.Build(s)
	if diff := cmp.Diff(Build(s, Options{}), g); diff != "" {
		t.Errorf("incremental differs from full (-full +incremental):\n%s", diff)
	}
	// Its new Service's endpoints are followed too.
	s.Upsert(endpoints("authns", "other", "grpc", 9000, "10.0.0.10"))
	g = inc.Build(s)
	if inc.LastStats.Full {
		t.Fatalf("the endpoints' change was built whole (%s): the test proves nothing", inc.LastStats.Reason)
	}
	var got []Endpoint
	for _, h := range g.HTTPS {
		if h.Authorization != nil {
			got = h.Authorization.Cluster.Endpoints
		}
	}
	if diff := cmp.Diff([]Endpoint{{Address: "10.0.0.10", Port: 9000}}, got); diff != "" {
		t.Errorf("endpoints after the Service's change (-want +got):\n%s", diff)
	}
	s.Delete(extensionService(t, "metadata: {name: auth, namespace: authns}"))
	g = inc.Build(s)
	wantInvalid(t, g, "default", "root", problemAuth, "ExtensionServiceNotFound")
}

// The admission webhook's verdicts (ValidateObject): what is wrong with the object alone
// is refused with the status's words; what depends on other objects (a missing
// ExtensionService, Service or CA) is not.
func TestValidateObjectAuthorization(t *testing.T) {
	for _, tc := range []struct {
		name  string
		obj   runtime.Object
		wants string // "" means no problem
	}{
		{"authorization without TLS", proxy(t, `{metadata: {name: p}, spec: {virtualhost: {fqdn: a.example.com, authorization: {extensionRef: {name: x}}}, routes: [{services: [{name: web, port: 80}]}]}}`), "needs spec.virtualhost.tls"},
		{"bad responseTimeout", proxy(t, `{metadata: {name: p}, spec: {virtualhost: {fqdn: a.example.com, tls: {secretName: c}, authorization: {extensionRef: {name: x}, responseTimeout: later}}, routes: [{services: [{name: web, port: 80}]}]}}`), `responseTimeout "later"`},
		{"missing ExtensionService is not the object's fault", proxy(t, `{metadata: {name: p}, spec: {virtualhost: {fqdn: a.example.com, tls: {secretName: c}, authorization: {extensionRef: {name: x}}}, routes: [{services: [{name: web, port: 80}], authPolicy: {disabled: true}}]}}`), ""},
		{"ExtensionService http/1.1", extensionService(t, `{metadata: {name: e}, spec: {protocol: http/1.1, services: [{name: s, port: 80}]}}`), ""},
		{"ExtensionService spdy", extensionService(t, `{metadata: {name: e}, spec: {protocol: spdy, services: [{name: s, port: 80}]}}`), `spec.protocol "spdy"`},
		{"httpSettings without serviceType http", proxy(t, `{metadata: {name: p}, spec: {virtualhost: {fqdn: a.example.com, tls: {secretName: c}, authorization: {extensionRef: {name: x}, httpSettings: {pathPrefix: /a}}}, routes: [{services: [{name: web, port: 80}]}]}}`), "can only be set when serviceType is http"},
		{"allowed header with two kinds", proxy(t, `{metadata: {name: p}, spec: {virtualhost: {fqdn: a.example.com, tls: {secretName: c}, authorization: {extensionRef: {name: x}, serviceType: http, httpSettings: {allowedAuthorizationHeaders: [{exact: a, contains: b}]}}}, routes: [{services: [{name: web, port: 80}]}]}}`), "sets more than one of exact, prefix, suffix and contains"},
		{"valid http authorization", proxy(t, `{metadata: {name: p}, spec: {virtualhost: {fqdn: a.example.com, tls: {secretName: c}, authorization: {extensionRef: {name: x}, serviceType: http, withRequestBody: {maxRequestBytes: 10}, httpSettings: {pathPrefix: /a, allowedAuthorizationHeaders: [{exact: x-a}]}}}, routes: [{services: [{name: web, port: 80}]}]}}`), ""},
		{"ExtensionService validation over h2c", extensionService(t, `{metadata: {name: e}, spec: {protocol: h2c, validation: {caSecret: ca, subjectName: s}, services: [{name: s, port: 80}]}}`), "spec.validation needs protocol h2"},
		{"ExtensionService without its Service yet", extensionService(t, `{metadata: {name: e}, spec: {services: [{name: s, port: 80}]}}`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := ValidateObject(tc.obj, nil, Options{})
			if !v.Ours {
				t.Fatalf("not ours")
			}
			msg := v.Message()
			if (tc.wants == "") != (msg == "") || !strings.Contains(msg, tc.wants) {
				t.Errorf("message %q, want one containing %q", msg, tc.wants)
			}
		})
	}
}

// serviceType http and withRequestBody reach the graph: the host's Authorization says
// how the HTTP server is asked and how much of the body goes with the check; a route's
// context, which an HTTP server cannot get, is warned about and the route still served.
func TestHTTPProxyAuthorizationHTTP(t *testing.T) {
	objs := authObjects(t, `{extensionRef: {name: auth, namespace: authns}, serviceType: http, withRequestBody: {allowPartialMessage: true},
  httpSettings: {pathPrefix: /check, allowedAuthorizationHeaders: [{exact: x-a}, {prefix: X-B-, ignoreCase: true}], allowedUpstreamHeaders: [{suffix: -user}, {contains: Tenant}]}}`,
		`{protocol: http/1.1, services: [{name: authz, port: 9000}]}`)
	g := build(objs...)
	svh := httpsHost(g, "a.example.com")
	if svh == nil || svh.Authorization == nil {
		t.Fatalf("a.example.com not served with authorization: %v", objectStatus(t, g, ObjectRef{Kind: KindHTTPProxy, Namespace: "default", Name: "root"}))
	}
	want := &Authorization{
		Cluster: svh.Authorization.Cluster,
		HTTP: &HTTPAuthorization{
			PathPrefix:                  "/check",
			AllowedAuthorizationHeaders: []HeaderNameMatch{{Kind: MatchExact, Value: "x-a"}, {Kind: MatchPrefix, Value: "X-B-", IgnoreCase: true}},
			AllowedUpstreamHeaders:      []HeaderNameMatch{{Kind: MatchSuffix, Value: "-user"}, {Kind: MatchContains, Value: "Tenant"}},
		},
		Body: &AuthorizationBody{MaxRequestBytes: 1024, AllowPartialMessage: true},
	}
	if diff := cmp.Diff(want, svh.Authorization); diff != "" {
		t.Errorf("authorization (-want +got):\n%s", diff)
	}
	if svh.Authorization.Cluster.Protocol != "" {
		t.Errorf("cluster protocol %q, want HTTP/1.1", svh.Authorization.Cluster.Protocol)
	}
	root := objectStatus(t, g, ObjectRef{Kind: KindHTTPProxy, Namespace: "default", Name: "root"})
	if root.Status != StatusValid || !strings.Contains(root.Description, `allowedUpstreamHeaders[1] "Tenant" has capitals`) {
		t.Errorf("root: %s %q, want valid with the capitals warning", root.Status, root.Description)
	}
	child := objectStatus(t, g, ObjectRef{Kind: KindHTTPProxy, Namespace: "default", Name: "child"})
	if child.Status != StatusValid || !strings.Contains(child.Description, "spec.routes[0].authPolicy.context is ignored") {
		t.Errorf("child: %s %q, want valid with the context warning", child.Status, child.Description)
	}
}

// An HTTP authorization server may speak HTTP/2 over TLS (h2, the default, as every
// HTTP server behind a Contour ExtensionService does), h2c or HTTP/1.1: its cluster
// says which.
func TestHTTPProxyAuthorizationHTTPProtocols(t *testing.T) {
	for es, want := range map[string]string{
		`{services: [{name: authz, port: 9000}]}`:                     "h2",
		`{protocol: h2c, services: [{name: authz, port: 9000}]}`:      "h2c",
		`{protocol: http/1.1, services: [{name: authz, port: 9000}]}`: "",
	} {
		g := build(authObjects(t, `{extensionRef: {name: auth, namespace: authns}, serviceType: http}`, es)...)
		svh := httpsHost(g, "a.example.com")
		if svh == nil || svh.Authorization == nil || svh.Authorization.HTTP == nil {
			t.Errorf("%s: not served with HTTP authorization: %v", es, objectStatus(t, g, ObjectRef{Kind: KindHTTPProxy, Namespace: "default", Name: "root"}))
			continue
		}
		if got := svh.Authorization.Cluster.Protocol; got != want {
			t.Errorf("%s: cluster protocol %q, want %q", es, got, want)
		}
	}
}

// A root's authorization without extensionRef that only disables authorization is
// how a Contour host opts out of the global external authorization (Contour's guide
// shows it): with no global authorization, the host is served unauthorized, with a
// warning, not refused.
func TestHTTPProxyAuthorizationOptOut(t *testing.T) {
	cert := testutil.SelfSigned("a.example.com")
	root := proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: a.example.com, tls: {secretName: cert}, authorization: {authPolicy: {disabled: true}}}, routes: [{services: [{name: web, port: 80}]}]}}`)
	g := build(root, tlsSecret("default", "cert", cert.CertPEM, cert.KeyPEM), svc("default", "web", ":80"))
	st := wantProxy(t, g, "default", "root", StatusValid)
	wantProblem(t, "warnings", st.Warnings, problemAuth, "GlobalAuthorizationNotConfigured", "no global external authorization")
	for _, svh := range g.HTTPS {
		if svh.Authorization != nil {
			t.Errorf("%s is authorized: %+v", svh.Name, svh.Authorization)
		}
	}
	if v := ValidateObject(root, nil, Options{}); len(v.Problems) > 0 {
		t.Errorf("ValidateObject: %v", v.Problems)
	}
	// An authorization naming no server that does not disable it is refused where the
	// installation has no global authorization to use instead.
	enabled := proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: a.example.com, tls: {secretName: cert}, authorization: {authPolicy: {context: {a: b}}}}, routes: [{services: [{name: web, port: 80}]}]}}`)
	g = build(enabled, tlsSecret("default", "cert", cert.CertPEM, cert.KeyPEM), svc("default", "web", ":80"))
	st = wantProxy(t, g, "default", "root", StatusInvalid)
	wantProblem(t, "errors", st.Errors, problemAuth, "ExtensionServiceRefMissing", "no extensionRef")
}
