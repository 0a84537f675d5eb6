package gatewayapi

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/testutil"
)

// policy is BackendTLSPolicy name of namespace default, created at created.
func policy(name, created, spec string) string {
	return `
---
kind: BackendTLSPolicy
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: ` + name + `, creationTimestamp: "` + created + `"}
spec:` + spec
}

// caConfigMap is ConfigMap default/name holding a CA certificate in ca.crt.
func caConfigMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Data: map[string]string{"ca.crt": string(testutil.SelfSigned("ca.example.com").CertPEM)}}
}

func TestBackendTLSPolicy(t *testing.T) {
	// The Gateway's HTTP listener and a route to Service web port 80 and to the two
	// named ports of Service multi.
	const routed = `
---
kind: Service
apiVersion: v1
metadata: {name: multi}
spec: {ports: [{name: a, port: 80}, {name: b, port: 81}]}` + httpGateway + `
---
kind: HTTPRoute
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: r}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /web}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /a}}]
    backendRefs: [{name: multi, port: 80}]
  - matches: [{path: {value: /b}}]
    backendRefs: [{name: multi, port: 81}]`
	const head = base + routed
	ok := []string{acceptedClass, acceptedGateway, listenerOK("http", 1), "HTTPRoute default/r parent gw: " + routeOK}
	const policyOK = "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"
	plain := func(path, cluster string) string {
		return "default/gw :80 http *: prefix:" + path + " [] -> " + cluster
	}
	runCases(t, []graphCase{{
		name: "backendtlspolicy-configmap-ca",
		objects: head + policy("web", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: web}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}], hostname: Web.Example.com}`),
		extra:    []runtime.Object{caConfigMap("ca")},
		statuses: append(ok, "BackendTLSPolicy default/web ancestor default/gw: "+policyOK),
		routes: []string{
			plain("/web", "default/web/80[tls sni=web.example.com names=web.example.com ca=ConfigMap default/ca]*1"),
			plain("/a", "default/multi/80*1"), plain("/b", "default/multi/81*1"),
		},
	}, {
		// subjectAltNames authenticate; the hostname is still the SNI. A Secret's
		// ca.crt serves as well as a ConfigMap's; a ref that cannot be used is
		// reported and the others are used.
		name: "backendtlspolicy-sans-secret-ca-partial",
		objects: head + policy("web", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: web}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: missing}, {group: "", kind: Secret, name: ca-secret}]
    hostname: web.example.com
    subjectAltNames: [{type: Hostname, hostname: a.example.com}, {type: Hostname, hostname: b.example.com}]`),
		extra: []runtime.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ca-secret"},
			Data: map[string][]byte{"ca.crt": testutil.SelfSigned("ca.example.com").CertPEM}}},
		statuses: append(ok, "BackendTLSPolicy default/web ancestor default/gw: Accepted=True/Accepted ResolvedRefs=False/InvalidCACertificateRef"),
		routes: []string{
			plain("/web", "default/web/80[tls sni=web.example.com names=a.example.com,b.example.com ca=Secret default/ca-secret]*1"),
			plain("/a", "default/multi/80*1"), plain("/b", "default/multi/81*1"),
		},
	}, {
		// No usable CA: the backend gets no requests (the rule answers 500), rather
		// than unverified ones.
		name: "backendtlspolicy-no-valid-ca",
		objects: head + policy("missing", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: web}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: missing}], hostname: web.example.com}`) + policy("kind", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: multi, sectionName: a}]
  validation: {caCertificateRefs: [{group: example.com, kind: Bundle, name: ca}], hostname: a.example.com}`) + policy("empty", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: multi, sectionName: b}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: empty}], hostname: b.example.com}`),
		extra: []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "empty"}, Data: map[string]string{"ca.crt": "not PEM"}}},
		statuses: append(ok,
			"BackendTLSPolicy default/missing ancestor default/gw: Accepted=False/NoValidCACertificate ResolvedRefs=False/InvalidCACertificateRef",
			"BackendTLSPolicy default/kind ancestor default/gw: Accepted=False/NoValidCACertificate ResolvedRefs=False/InvalidKind",
			"BackendTLSPolicy default/empty ancestor default/gw: Accepted=False/NoValidCACertificate ResolvedRefs=False/InvalidCACertificateRef"),
		routes: []string{plain("/web", "status 500"), plain("/a", "status 500"), plain("/b", "status 500")},
	}, {
		// A GRPCRoute's backend speaks HTTP/2 over TLS.
		name: "backendtlspolicy-grpcroute",
		objects: base + httpGateway + grpcRoute("g", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: web, port: 80}]}]`) + policy("web", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: web}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}], hostname: web.example.com}`),
		extra: []runtime.Object{caConfigMap("ca")},
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 1), "GRPCRoute default/g parent gw: " + routeOK,
			"BackendTLSPolicy default/web ancestor default/gw: " + policyOK},
		routes: []string{"default/gw :80 http *: prefix:/ [:method=POST] -> default/web/80[h2 sni=web.example.com names=web.example.com ca=ConfigMap default/ca]*1"},
	}, {
		// URI SANs (SPIFFE IDs) authenticate alone or with hostnames: the
		// certificate must carry any one of them. URIs keep their case.
		name: "backendtlspolicy-san-uri-and-mixed",
		objects: head + policy("uri", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: web}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}]
    hostname: web.example.com
    subjectAltNames: [{type: URI, uri: "spiffe://Example.com/ns/default/sa/web"}]`) + policy("mixed", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: multi, sectionName: a}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}]
    hostname: a.example.com
    subjectAltNames:
    - {type: URI, uri: "spiffe://example.com/a"}
    - {type: Hostname, hostname: A.example.com}
    - {type: URI, uri: "https://a.example.com:8443/id?x=1"}`),
		extra: []runtime.Object{caConfigMap("ca")},
		statuses: append(ok,
			"BackendTLSPolicy default/uri ancestor default/gw: "+policyOK,
			"BackendTLSPolicy default/mixed ancestor default/gw: "+policyOK),
		routes: []string{
			plain("/web", "default/web/80[tls sni=web.example.com names= uris=spiffe://Example.com/ns/default/sa/web ca=ConfigMap default/ca]*1"),
			plain("/a", "default/multi/80[tls sni=a.example.com names=a.example.com uris=spiffe://example.com/a,https://a.example.com:8443/id?x=1 ca=ConfigMap default/ca]*1"),
			plain("/b", "default/multi/81*1"),
		},
	}, {
		name: "backendtlspolicy-invalid",
		objects: head + policy("system", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: web}]
  validation: {wellKnownCACertificates: System, hostname: web.example.com}`) + policy("uri", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: multi, sectionName: a}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}]
    hostname: multi.example.com
    subjectAltNames: [{type: Hostname, hostname: multi.example.com}, {type: URI, uri: "spiffe:/no-authority"}]`) + policy("type", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: multi, sectionName: b}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}]
    hostname: multi.example.com
    subjectAltNames: [{type: IPAddress, uri: "spiffe://example.com/b"}]`),
		extra: []runtime.Object{caConfigMap("ca")},
		statuses: append(ok,
			"BackendTLSPolicy default/system ancestor default/gw: Accepted=False/Invalid ResolvedRefs=True/ResolvedRefs",
			"BackendTLSPolicy default/uri ancestor default/gw: Accepted=False/Invalid ResolvedRefs=True/ResolvedRefs",
			"BackendTLSPolicy default/type ancestor default/gw: Accepted=False/Invalid ResolvedRefs=True/ResolvedRefs"),
		routes: []string{plain("/web", "status 500"), plain("/a", "status 500"), plain("/b", "status 500")},
	}, {
		// The oldest policy of a target applies, the younger is Conflicted; a policy for
		// one port (sectionName) takes that port from a policy for the whole Service.
		// A policy no attached route uses has no ancestor: no status.
		name: "backendtlspolicy-conflicts",
		objects: head + policy("older", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: multi}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}], hostname: older.example.com}`) + policy("younger", "2026-01-02T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: multi}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}], hostname: younger.example.com}`) + policy("port-b", "2026-01-03T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: multi, sectionName: b}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}], hostname: b.example.com}`) + policy("unused", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: nobody}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}], hostname: b.example.com}`),
		extra: []runtime.Object{caConfigMap("ca")},
		statuses: append(ok,
			"BackendTLSPolicy default/older ancestor default/gw: "+policyOK,
			"BackendTLSPolicy default/younger ancestor default/gw: Accepted=False/Conflicted ResolvedRefs=True/ResolvedRefs",
			"BackendTLSPolicy default/port-b ancestor default/gw: "+policyOK),
		routes: []string{
			plain("/web", toWeb),
			plain("/a", "default/multi/80[tls sni=older.example.com names=older.example.com ca=ConfigMap default/ca]*1"),
			plain("/b", "default/multi/81[tls sni=b.example.com names=b.example.com ca=ConfigMap default/ca]*1"),
		},
	}})
}

// TestBackendTLSPolicyReencryptsTerminatedTLSRoutes: the connections a TLS listener
// terminates are encrypted again to a backend a BackendTLSPolicy targets, verified as
// it says, and the Gateway is the policy's ancestor (conformance:
// BackendTLSPolicyTLSRouteTerminate); without a usable CA they are closed.
func TestBackendTLSPolicyReencryptsTerminatedTLSRoutes(t *testing.T) {
	objects := func(ca string) string {
		return base + gatewayHead + `
  - {name: term, protocol: TLS, port: 443, hostname: db.example.com, tls: {mode: Terminate, certificateRefs: [{name: cert}]}}
---
kind: TLSRoute
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: db}
spec:
  parentRefs: [{name: gw}]
  hostnames: [db.example.com]
  rules: [{backendRefs: [{name: web, port: 80}]}]` + policy("web", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: web}]
  validation: {hostname: web.example.com, caCertificateRefs: [{group: "", kind: ConfigMap, name: `+ca+`}]}`)
	}
	g := build(t, objects("ca"), tlsSecret("default", "cert", "db.example.com"), caConfigMap("ca"))
	svh := g.Gateways[0].Ports[0].HTTPS[0]
	if svh.Passthrough || svh.TCPProxy == nil || len(svh.TCPProxy.Clusters) != 1 {
		t.Fatalf("db.example.com: passthrough %v, proxy %+v; want TLS terminated, one backend", svh.Passthrough, svh.TCPProxy)
	}
	if c := svh.TCPProxy.Clusters[0].Cluster; c.Protocol != "tls" || c.UpstreamValidation == nil || c.UpstreamValidation.ServerName != "web.example.com" {
		t.Errorf("backend of the terminated connections: protocol %q, validation %+v; want TLS verified for web.example.com", c.Protocol, c.UpstreamValidation)
	}
	lines := describeStatuses(g)
	const ancestor = "BackendTLSPolicy default/web ancestor default/gw: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"
	if !slices.Contains(lines, ancestor) {
		t.Errorf("statuses %v, want %q", lines, ancestor)
	}

	g = build(t, objects("missing"), tlsSecret("default", "cert", "db.example.com"))
	if c := g.Gateways[0].Ports[0].HTTPS[0].TCPProxy.Clusters[0].Cluster; c.Service.Name != "gw.no-route" {
		t.Errorf("with no usable CA, the connections go to %s, want them closed", c.Name)
	}
}

// TestBackendTLSPolicySubjectAltNames: each subjectAltNames entry is a hostname or an
// absolute URI as its type says; a wrong one makes the policy Invalid with a message
// naming the entry and what to write instead.
func TestBackendTLSPolicySubjectAltNames(t *testing.T) {
	host := func(h string) gatewayv1.SubjectAltName {
		return gatewayv1.SubjectAltName{Type: gatewayv1.HostnameSubjectAltNameType, Hostname: gatewayv1.Hostname(h)}
	}
	uri := func(u string) gatewayv1.SubjectAltName {
		return gatewayv1.SubjectAltName{Type: gatewayv1.URISubjectAltNameType, URI: gatewayv1.AbsoluteURI(u)}
	}
	for _, tc := range []struct {
		name        string
		sans        []gatewayv1.SubjectAltName
		names, uris []string
		problem     string // a part of the message; "" when accepted
	}{
		{name: "hostnames", sans: []gatewayv1.SubjectAltName{host("Web.example.com"), host("*.example.com")}, names: []string{"web.example.com", "*.example.com"}},
		{name: "a SPIFFE ID", sans: []gatewayv1.SubjectAltName{uri("spiffe://abc.example.com/test-identity")}, uris: []string{"spiffe://abc.example.com/test-identity"}},
		{name: "mixed, URIs as written", sans: []gatewayv1.SubjectAltName{uri("SPIFFE://Example.com/A%2Fb"), host("abc.example.com"), uri("https://10.0.0.1:8443/x?y#z")},
			names: []string{"abc.example.com"}, uris: []string{"SPIFFE://Example.com/A%2Fb", "https://10.0.0.1:8443/x?y#z"}},
		{name: "empty URI", sans: []gatewayv1.SubjectAltName{host("a.example.com"), uri("")},
			problem: `spec.validation.subjectAltNames[1].uri "" is not an absolute URI: set the URI the certificate carries`},
		{name: "relative URI", sans: []gatewayv1.SubjectAltName{uri("/ns/default/sa/web")}, problem: "it needs a scheme and an authority: write it as scheme://host/path"},
		{name: "no authority", sans: []gatewayv1.SubjectAltName{uri("spiffe:/ns/default")}, problem: "it needs a scheme and an authority"},
		{name: "opaque URN", sans: []gatewayv1.SubjectAltName{uri("urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66")}, problem: "it needs a scheme and an authority"},
		{name: "no host", sans: []gatewayv1.SubjectAltName{uri("spiffe:///ns/default")}, problem: "its authority names no host"},
		{name: "space", sans: []gatewayv1.SubjectAltName{uri("spiffe://example.com/a b")}, problem: "spaces, control and non-ASCII characters must be percent-encoded"},
		{name: "non-ASCII", sans: []gatewayv1.SubjectAltName{uri("spiffe://exämple.com/a")}, problem: "must be percent-encoded"},
		{name: "bad port", sans: []gatewayv1.SubjectAltName{uri("https://example.com:port/")}, problem: `invalid port ":port" after host`},
		{name: "too long", sans: []gatewayv1.SubjectAltName{uri("spiffe://example.com/" + strings.Repeat("a", 240))}, problem: "261 characters long, at most 253"},
		{name: "URI with a hostname", sans: []gatewayv1.SubjectAltName{{Type: gatewayv1.URISubjectAltNameType, URI: "spiffe://example.com/a", Hostname: "a.example.com"}},
			problem: "subjectAltNames[0]: type URI takes uri, not hostname"},
		{name: "hostname with a URI", sans: []gatewayv1.SubjectAltName{{Type: gatewayv1.HostnameSubjectAltNameType, URI: "spiffe://example.com/a", Hostname: "a.example.com"}},
			problem: "subjectAltNames[0]: type Hostname takes hostname, not uri"},
		{name: "empty hostname", sans: []gatewayv1.SubjectAltName{host("")}, problem: `subjectAltNames[0].hostname "" is not a hostname`},
		{name: "bad hostname", sans: []gatewayv1.SubjectAltName{host("web_1.example.com")}, problem: `subjectAltNames[0].hostname "web_1.example.com" is not a hostname`},
		{name: "unknown type", sans: []gatewayv1.SubjectAltName{{Type: "IPAddress"}}, problem: `subjectAltNames[0]: type "IPAddress" is not a subject alternative name type: use Hostname or URI`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names, uris, problem := subjectAltNames(tc.sans)
			if tc.problem == "" {
				if problem != "" || !slices.Equal(names, tc.names) || !slices.Equal(uris, tc.uris) {
					t.Errorf("got names %q, URIs %q, problem %q; want names %q, URIs %q", names, uris, problem, tc.names, tc.uris)
				}
				return
			}
			if !strings.Contains(problem, tc.problem) {
				t.Errorf("problem %q, want one containing %q", problem, tc.problem)
			}
		})
	}
}
