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
		// take it (listener isolation); db.example.com goes to the older route.
		routes: []string{
			"default/gw :443 https *.example.com (cert none): no routes",
			"default/gw :443 https db.example.com (cert none): passthrough=true from TLSRoute default/db -> " + toWeb,
			"default/gw :443 https web.example.com (cert default/cert): no routes",
		},
	}})
}
