package gatewayapi

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

func TestTLSRoute(t *testing.T) {
	tlsGateway := base + gatewayHead + `
  - {name: tls, protocol: TLS, port: 443, hostname: "*.example.com", tls: {mode: Passthrough}}
  - {name: https, protocol: HTTPS, port: 443, hostname: web.example.com, tls: {certificateRefs: [{name: cert}]}}
`
	tlsRoute := func(name, created, spec string) string {
		return `
---
kind: TLSRoute
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: ` + name + `, creationTimestamp: "` + created + `"}
spec:
` + spec
	}
	runCases(t, []graphCase{{
		name: "tlsroute-passthrough",
		objects: tlsGateway + tlsRoute("db", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw, sectionName: tls}]
  hostnames: [db.example.com, web.example.com]
  rules: [{backendRefs: [{name: web, port: 80}]}]`) + tlsRoute("younger", "2026-01-02T00:00:00Z", `
  parentRefs: [{name: gw}]
  hostnames: [db.example.com]
  rules: [{backendRefs: [{name: missing, port: 80}]}]`) + tlsRoute("elsewhere", "2026-01-02T00:00:00Z", `
  parentRefs: [{name: gw, sectionName: tls}]
  hostnames: [other.org]`),
		extra: []runtime.Object{tlsSecret("default", "cert", "web.example.com")},
		statuses: []string{acceptedClass, acceptedGateway,
			"Gateway default/gw listener tls: attached=2 kinds=TLSRoute Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=True/Programmed",
			listenerOK("https", 0),
			"TLSRoute default/db parent gw/tls: " + routeOK,
			"TLSRoute default/younger parent gw: Accepted=True/Accepted ResolvedRefs=False/BackendNotFound",
			"TLSRoute default/elsewhere parent gw/tls: Accepted=False/NoMatchingListenerHostname ResolvedRefs=True/ResolvedRefs",
		},
		// web.example.com is the HTTPS listener's: the TLS listener's route does not
		// take it (listener isolation); db.example.com goes to the older route; the TLS
		// listener's other names are closed (a cluster without endpoints), never left
		// to another listener.
		routes: []string{
			"default/gw :443 https *.example.com (cert none): passthrough=true from Gateway default/gw -> default/gw.no-route/443*1",
			"default/gw :443 https db.example.com (cert none): passthrough=true from TLSRoute default/db -> " + toWeb,
			"default/gw :443 https web.example.com (cert default/cert): no routes",
		},
	}, {
		name: "tlsroute-mode-terminate",
		objects: base + gatewayHead + `
  - {name: term, protocol: TLS, port: 443, hostname: "*.example.com", tls: {mode: Terminate, certificateRefs: [{name: cert}]}}
  - {name: nocert, protocol: TLS, port: 8443, tls: {mode: Terminate}}` + tlsRoute("db", "2026-01-01T00:00:00Z", `
  parentRefs: [{name: gw, sectionName: term}]
  hostnames: [db.example.com]
  rules: [{backendRefs: [{name: web, port: 80}]}]`),
		extra: []runtime.Object{tlsSecret("default", "cert", "*.example.com")},
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=True/ListenersNotValid Programmed=True/Programmed",
			"Gateway default/gw listener nocert: attached=0 kinds=TLSRoute Accepted=True/Accepted ResolvedRefs=False/InvalidCertificateRef Conflicted=False/NoConflicts Programmed=False/Invalid",
			"Gateway default/gw listener term: attached=1 kinds=TLSRoute Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=True/Programmed",
			"TLSRoute default/db parent gw/term: " + routeOK,
		},
		// Terminated with the listener's certificate, for the route's name and for the
		// listener's other names (closed).
		routes: []string{
			"default/gw :443 https *.example.com (cert default/cert): passthrough=false from Gateway default/gw -> default/gw.no-route/443*1",
			"default/gw :443 https db.example.com (cert default/cert): passthrough=false from TLSRoute default/db -> " + toWeb,
		},
	}})
}
