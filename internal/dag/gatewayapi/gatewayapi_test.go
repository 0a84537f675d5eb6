package gatewayapi

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/store"
)

// gatewayHead starts Gateway default/gw of class portico: its listeners follow.
const gatewayHead = `
---
kind: Gateway
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: gw}
spec:
  gatewayClassName: portico
  listeners:`

// base is a class of Portico's, a Gateway with one HTTP listener on port 80, and a
// Service with endpoints-less port 80 in two namespaces.
const base = `
kind: GatewayClass
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
kind: Service
apiVersion: v1
metadata: {name: web}
spec: {ports: [{port: 80}]}
---
kind: Service
apiVersion: v1
metadata: {name: web, namespace: other}
spec: {ports: [{port: 80}]}
`

const httpGateway = gatewayHead + `
  - {name: http, protocol: HTTP, port: 80}
`

const acceptedClass = "GatewayClass portico: Accepted=True/Accepted SupportedVersion=True/SupportedVersion"
const acceptedGateway = "Gateway default/gw: Accepted=True/Accepted Programmed=True/Programmed"

func listenerOK(name string, attached int) string {
	return "Gateway default/gw listener " + name + ": attached=" + itoa(attached) +
		" kinds=HTTPRoute,GRPCRoute Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=True/Programmed"
}

func itoa(n int) string { return string(rune('0' + n)) }

// listenerNotProgrammed is listener http of a Gateway that is not accepted.
const listenerNotProgrammed = "Gateway default/gw listener http: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Invalid"

const routeOK = "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"

type graphCase struct {
	name     string
	objects  string
	extra    []runtime.Object
	statuses []string
	routes   []string
}

func runCases(t *testing.T, cases []graphCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := build(t, tc.objects, tc.extra...)
			checkLines(t, "statuses", describeStatuses(g), tc.statuses)
			checkLines(t, "data planes", describeGateways(g), tc.routes)
		})
	}
}

func TestGatewayClass(t *testing.T) {
	runCases(t, []graphCase{{
		name:     "gatewayclass-accepted",
		objects:  base,
		statuses: []string{acceptedClass},
	}, {
		name: "gatewayclass-other-controller",
		objects: `
kind: GatewayClass
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: theirs}
spec: {controllerName: example.com/other}
---
kind: Gateway
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: gw}
spec:
  gatewayClassName: theirs
  listeners: [{name: http, protocol: HTTP, port: 80}]`,
	}, {
		// CRDs of another release: served as well as Portico can (still Accepted).
		name:    "gatewayclass-unsupported-version",
		objects: base,
		extra: []runtime.Object{crd("gateways.gateway.networking.k8s.io", "v1.7.1"), crd("httproutes.gateway.networking.k8s.io", "v1.5.0"),
			crd("grpcroutes.gateway.networking.k8s.io", "")},
		statuses: []string{"GatewayClass portico: Accepted=True/Accepted SupportedVersion=False/UnsupportedVersion"},
	}, {
		name:     "gatewayclass-supported-version",
		objects:  base,
		extra:    []runtime.Object{crd("gateways.gateway.networking.k8s.io", "v1.7.0"), crd("httproutes.gateway.networking.k8s.io", "v1.7.2")},
		statuses: []string{acceptedClass},
	}, {
		name: "gatewayclass-parameters",
		objects: `
kind: GatewayClass
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: portico}
spec:
  controllerName: portico.dev/gateway-controller
  parametersRef: {group: example.com, kind: Config, name: c}` + httpGateway,
		statuses: []string{
			"GatewayClass portico: Accepted=False/InvalidParameters SupportedVersion=True/SupportedVersion",
			"Gateway default/gw: Accepted=False/Pending Programmed=False/Invalid",
			listenerNotProgrammed,
		},
	}})
}

func TestGatewayListeners(t *testing.T) {
	runCases(t, []graphCase{{
		name:     "gateway-http",
		objects:  base + httpGateway,
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 0)},
		routes:   []string{"default/gw :80 http *: no routes"},
	}, {
		name: "gateway-unsupported-protocol",
		objects: base + gatewayHead + `
  - {name: http, protocol: HTTP, port: 80}
  - {name: udp, protocol: UDP, port: 53}`,
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=True/ListenersNotValid Programmed=True/Programmed",
			listenerOK("http", 0),
			"Gateway default/gw listener udp: attached=0 kinds= Accepted=False/UnsupportedProtocol ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Invalid",
		},
		routes: []string{"default/gw :80 http *: no routes"},
	}, {
		// A listener of an unsupported protocol on a taken port conflicts first: the
		// conflict is what the user must fix (conformance: ListenerSetProtocolConflict).
		name: "gateway-unsupported-protocol-on-a-taken-port",
		objects: base + gatewayHead + `
  - {name: http, protocol: HTTP, port: 80}
  - {name: tcp, protocol: TCP, port: 80}`,
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=True/ListenersNotValid Programmed=True/Programmed",
			listenerOK("http", 0),
			"Gateway default/gw listener tcp: attached=0 kinds= Accepted=False/ProtocolConflict ResolvedRefs=True/ResolvedRefs Conflicted=True/ProtocolConflict Programmed=False/ProtocolConflict",
		},
		routes: []string{"default/gw :80 http *: no routes"},
	}, {
		// An address entry without a value asks for one of that type, which the data
		// plane gets; a static address cannot be promised yet (conformance:
		// GatewayOptionalAddressValue).
		name: "gateway-address-without-value",
		objects: base + gatewayHead + ` [{name: http, protocol: HTTP, port: 80}]
  addresses: [{type: IPAddress}]`,
		statuses: []string{acceptedClass, acceptedGateway, listenerOK("http", 0)},
		routes:   []string{"default/gw :80 http *: no routes"},
	}, {
		name: "gateway-static-address",
		objects: base + gatewayHead + ` [{name: http, protocol: HTTP, port: 80}]
  addresses: [{type: IPAddress, value: 192.0.2.7}]`,
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=True/Accepted Programmed=False/AddressNotUsable", listenerOK("http", 0)},
		routes: []string{"default/gw :80 http *: no routes"},
	}, {
		name: "gateway-listener-filters-refused",
		objects: base + gatewayHead + `
  - {name: http, protocol: HTTP, port: 80}
  - {name: filtered, protocol: HTTP, port: 8080, filters: {requests: [{type: ExtensionRef, extensionRef: {group: example.com, kind: Auth, name: a}}]}}`,
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=True/ListenersNotValid Programmed=True/Programmed",
			listenerOK("http", 0),
			"Gateway default/gw listener filtered: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Invalid",
		},
		routes: []string{"default/gw :80 http *: no routes"},
	}, {
		name:    "gateway-all-listeners-invalid",
		objects: base + gatewayHead + ` [{name: udp, protocol: UDP, port: 53}]`,
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=False/ListenersNotValid Programmed=False/Invalid",
			"Gateway default/gw listener udp: attached=0 kinds= Accepted=False/UnsupportedProtocol ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Invalid",
		},
	}, {
		name: "gateway-hostname-conflict",
		objects: base + gatewayHead + `
  - {name: a, protocol: HTTP, port: 80, hostname: foo.example.com}
  - {name: b, protocol: HTTP, port: 80, hostname: foo.example.com}
  - {name: c, protocol: HTTPS, port: 80, hostname: bar.example.com, tls: {certificateRefs: [{name: cert}]}}`,
		extra: []runtime.Object{tlsSecret("default", "cert", "bar.example.com")},
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=True/ListenersNotValid Programmed=True/Programmed",
			listenerOK("a", 0),
			"Gateway default/gw listener b: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/HostnameConflict ResolvedRefs=True/ResolvedRefs Conflicted=True/HostnameConflict Programmed=False/HostnameConflict",
			"Gateway default/gw listener c: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/ProtocolConflict ResolvedRefs=True/ResolvedRefs Conflicted=True/ProtocolConflict Programmed=False/ProtocolConflict",
		},
		routes: []string{"default/gw :80 http foo.example.com: no routes"},
	}, {
		name: "gateway-invalid-route-kinds",
		objects: base + gatewayHead + `
  - name: http
    protocol: HTTP
    port: 80
    allowedRoutes: {kinds: [{kind: FooRoute}]}`,
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=False/ListenersNotValid Programmed=False/Invalid",
			"Gateway default/gw listener http: attached=0 kinds= Accepted=True/Accepted ResolvedRefs=False/InvalidRouteKinds Conflicted=False/NoConflicts Programmed=False/Invalid",
		},
	}, {
		name: "gateway-unresolved-certificate-attached-routes",
		objects: base + gatewayHead + `
  - {name: tls, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: does-not-exist}]}}` + route("r", "default", `
  parentRefs: [{name: gw, sectionName: tls}]
  rules: [{backendRefs: [{name: missing, port: 80}]}]`),
		// The route attaches and is counted, though the listener is not served.
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=True/ListenersNotValid Programmed=False/Invalid",
			"Gateway default/gw listener tls: attached=1 kinds=HTTPRoute,GRPCRoute Accepted=True/Accepted ResolvedRefs=False/InvalidCertificateRef Conflicted=False/NoConflicts Programmed=False/Invalid",
			"HTTPRoute default/r parent gw/tls: Accepted=True/Accepted ResolvedRefs=False/BackendNotFound",
		},
	}, {
		// spec.tls.frontend: the HTTPS listener on the default's port asks clients for a
		// certificate of the CA; the port with its own entry falls back to any client
		// (and the Gateway says so); an HTTP listener is not concerned.
		name: "gateway-frontend-validation",
		objects: base + gatewayHead + `
  - {name: http, protocol: HTTP, port: 80}
  - {name: https, protocol: HTTPS, port: 443, hostname: foo.example.com, tls: {certificateRefs: [{name: cert}]}}
  - {name: lax, protocol: HTTPS, port: 8443, hostname: foo.example.com, tls: {certificateRefs: [{name: cert}]}}
  tls:
    frontend:
      default: {validation: {caCertificateRefs: [{name: ca, kind: ConfigMap, group: ""}]}}
      perPort: [{port: 8443, tls: {validation: {mode: AllowInsecureFallback, caCertificateRefs: [{name: ca, kind: ConfigMap, group: ""}]}}}]`,
		extra: []runtime.Object{tlsSecret("default", "cert", "foo.example.com"), caConfigMap("ca")},
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=True/Accepted Programmed=True/Programmed InsecureFrontendValidationMode=True/ConfigurationChanged",
			listenerOK("http", 0), listenerOK("https", 0), listenerOK("lax", 0)},
		routes: []string{
			"default/gw :80 http *: no routes",
			"default/gw :443 https foo.example.com (cert default/cert, clients: optional=false skip-verify=false): no routes",
			"default/gw :8443 https foo.example.com (cert default/cert, clients: optional=true skip-verify=true): no routes",
		},
	}, {
		// A CA reference that cannot be used: that port's HTTPS listeners are not served
		// (never served without the validation asked for), the others are.
		name: "gateway-frontend-validation-invalid",
		objects: base + gatewayHead + `
  - {name: http, protocol: HTTP, port: 80}
  - {name: missing, protocol: HTTPS, port: 443, hostname: foo.example.com, tls: {certificateRefs: [{name: cert}]}}
  - {name: kind, protocol: HTTPS, port: 8443, hostname: foo.example.com, tls: {certificateRefs: [{name: cert}]}}
  - {name: grant, protocol: HTTPS, port: 9443, hostname: foo.example.com, tls: {certificateRefs: [{name: cert}]}}
  tls:
    frontend:
      default: {validation: {caCertificateRefs: [{name: nope, kind: ConfigMap, group: ""}]}}
      perPort:
      - {port: 8443, tls: {validation: {caCertificateRefs: [{name: web, kind: Service, group: ""}]}}}
      - {port: 9443, tls: {validation: {caCertificateRefs: [{name: ca, namespace: other, kind: ConfigMap, group: ""}]}}}`,
		extra: []runtime.Object{tlsSecret("default", "cert", "foo.example.com"), caConfigMap("ca")},
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=True/ListenersNotValid Programmed=True/Programmed",
			listenerOK("http", 0),
			"Gateway default/gw listener missing: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/NoValidCACertificate ResolvedRefs=False/InvalidCACertificateRef Conflicted=False/NoConflicts Programmed=False/Invalid",
			"Gateway default/gw listener kind: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/NoValidCACertificate ResolvedRefs=False/InvalidCACertificateKind Conflicted=False/NoConflicts Programmed=False/Invalid",
			"Gateway default/gw listener grant: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/NoValidCACertificate ResolvedRefs=False/RefNotPermitted Conflicted=False/NoConflicts Programmed=False/Invalid",
		},
		routes: []string{"default/gw :80 http *: no routes"},
	}, {
		name: "gateway-https-certificate",
		objects: base + gatewayHead + `
  - {name: https, protocol: HTTPS, port: 443, hostname: foo.example.com, tls: {certificateRefs: [{name: cert}]}}
  - {name: missing, protocol: HTTPS, port: 443, hostname: bar.example.com, tls: {certificateRefs: [{name: nope}]}}
  - {name: other-ns, protocol: HTTPS, port: 443, hostname: baz.example.com, tls: {certificateRefs: [{name: cert, namespace: other}]}}
  - {name: granted, protocol: HTTPS, port: 443, hostname: qux.example.com, tls: {certificateRefs: [{name: granted, namespace: other}]}}
---
kind: ReferenceGrant
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: g, namespace: other}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: default}]
  to: [{group: "", kind: Secret, name: granted}]`,
		extra: []runtime.Object{tlsSecret("default", "cert", "foo.example.com"), tlsSecret("other", "cert", "baz.example.com"), tlsSecret("other", "granted", "qux.example.com")},
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=True/ListenersNotValid Programmed=True/Programmed",
			listenerOK("https", 0),
			"Gateway default/gw listener missing: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=True/Accepted ResolvedRefs=False/InvalidCertificateRef Conflicted=False/NoConflicts Programmed=False/Invalid",
			"Gateway default/gw listener other-ns: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted Conflicted=False/NoConflicts Programmed=False/Invalid",
			listenerOK("granted", 0),
		},
		routes: []string{
			"default/gw :443 https foo.example.com (cert default/cert): no routes",
			"default/gw :443 https qux.example.com (cert other/granted): no routes",
		},
	}, {
		// Every usable certificate is served, the SNI picks among them; the one that
		// cannot be used is reported and left out.
		name: "gateway-https-several-certificates",
		objects: base + gatewayHead + `
  - {name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: a}, {name: nope}, {name: b}]}}`,
		extra: []runtime.Object{tlsSecret("default", "a", "a.example.com"), tlsSecret("default", "b", "b.example.com")},
		statuses: []string{acceptedClass, acceptedGateway,
			"Gateway default/gw listener https: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=True/Accepted ResolvedRefs=False/InvalidCertificateRef Conflicted=False/NoConflicts Programmed=True/Programmed",
		},
		routes: []string{"default/gw :443 https * (cert default/a+default/b): no routes"},
	}})
}

// crd is the metadata of CustomResourceDefinition name with bundle-version version
// ("" for none).
func crd(name, version string) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: name}}
	if version != "" {
		o.Annotations = map[string]string{"gateway.networking.k8s.io/bundle-version": version}
	}
	return o
}

// The UnsupportedVersion message names the CRDs of another release, and only those.
func TestSupportedVersionMessage(t *testing.T) {
	s := store.FromObjects([]runtime.Object{crd("gateways.gateway.networking.k8s.io", "v1.7.1"), crd("httproutes.gateway.networking.k8s.io", "v1.5.0"),
		crd("grpcroutes.gateway.networking.k8s.io", "")})
	got := supportedVersion(s).Message
	want := "Portico implements Gateway API v1.7.0, and these CRDs are of another release: grpcroutes.gateway.networking.k8s.io (no gateway.networking.k8s.io/bundle-version annotation), " +
		"httproutes.gateway.networking.k8s.io (v1.5.0); install the CRDs of v1.7.0"
	if got != want {
		t.Errorf("message:\n got %s\nwant %s", got, want)
	}
}
