package gatewayapi

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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
		name: "backendtlspolicy-invalid",
		objects: head + policy("system", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: web}]
  validation: {wellKnownCACertificates: System, hostname: web.example.com}`) + policy("uri", "2026-01-01T00:00:00Z", `
  targetRefs: [{group: "", kind: Service, name: multi}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}]
    hostname: multi.example.com
    subjectAltNames: [{type: URI, uri: "spiffe://example.com/multi"}]`),
		extra: []runtime.Object{caConfigMap("ca")},
		statuses: append(ok,
			"BackendTLSPolicy default/system ancestor default/gw: Accepted=False/Invalid ResolvedRefs=True/ResolvedRefs",
			"BackendTLSPolicy default/uri ancestor default/gw: Accepted=False/Invalid ResolvedRefs=True/ResolvedRefs"),
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
