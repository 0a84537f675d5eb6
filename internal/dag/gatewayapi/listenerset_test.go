package gatewayapi

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// listenerSet is ListenerSet name in namespace ns, created at created, whose parent is
// Gateway default/gw, with the listeners of spec.
func listenerSet(name, ns, created, listeners string) string {
	return `
---
kind: ListenerSet
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: ` + name + `, namespace: ` + ns + `, creationTimestamp: "` + created + `"}
spec:
  parentRef: {name: gw, namespace: default}
  listeners:` + listeners
}

// gatewayAllowing is Gateway default/gw with an HTTP listener for gw.example.com on
// port 80 that admits ListenerSets per allowed (the YAML of allowedListeners, or "").
func gatewayAllowing(allowed string) string {
	out := base + gatewayHead + `
  - {name: http, protocol: HTTP, port: 80, hostname: gw.example.com}`
	if allowed != "" {
		out += "\n  allowedListeners: " + allowed
	}
	return out
}

func lsListenerOK(set, name string, attached int, kinds string) string {
	return "ListenerSet " + set + " listener " + name + ": attached=" + itoa(attached) + " kinds=" + kinds +
		" Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=True/Programmed"
}

func TestListenerSet(t *testing.T) {
	const gatewayListenersOK = "Gateway default/gw listener http: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=True/Programmed"
	runCases(t, []graphCase{{
		// The Gateway's listeners come first, then the ListenerSets' by age: the older
		// ListenerSet keeps a hostname both have, the Gateway's own beats both.
		name: "listenerset-merge-and-conflicts",
		objects: gatewayAllowing("{namespaces: {from: Same}}") +
			listenerSet("older", "default", "2026-01-01T00:00:00Z", `
  - {name: a, protocol: HTTP, port: 80, hostname: a.example.com}
  - {name: taken, protocol: HTTP, port: 80, hostname: gw.example.com}
  - {name: secure, protocol: HTTPS, port: 80, hostname: s.example.com, tls: {certificateRefs: [{name: cert}]}}`) +
			listenerSet("younger", "default", "2026-01-02T00:00:00Z", `
  - {name: a, protocol: HTTP, port: 80, hostname: a.example.com}`) + route("via-set", "default", `
  parentRefs: [{kind: ListenerSet, group: gateway.networking.k8s.io, name: older, sectionName: a}]
  rules: [{backendRefs: [{name: web, port: 80}]}]`) + route("via-gateway", "default", `
  parentRefs: [{name: gw, sectionName: a}]
  rules: [{backendRefs: [{name: web, port: 80}]}]`),
		extra: []runtime.Object{tlsSecret("default", "cert", "s.example.com")},
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=True/Accepted Programmed=True/Programmed listenerSets=1",
			gatewayListenersOK,
			"ListenerSet default/older: Accepted=True/ListenersNotValid Programmed=True/Programmed",
			lsListenerOK("default/older", "a", 1, "HTTPRoute,GRPCRoute"),
			"ListenerSet default/older listener taken: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/HostnameConflict ResolvedRefs=True/ResolvedRefs Conflicted=True/HostnameConflict Programmed=False/HostnameConflict",
			"ListenerSet default/older listener secure: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/ProtocolConflict ResolvedRefs=True/ResolvedRefs Conflicted=True/ProtocolConflict Programmed=False/ProtocolConflict",
			"ListenerSet default/younger: Accepted=False/ListenersNotValid Programmed=False/ListenersNotValid",
			"ListenerSet default/younger listener a: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/HostnameConflict ResolvedRefs=True/ResolvedRefs Conflicted=True/HostnameConflict Programmed=False/HostnameConflict",
			"HTTPRoute default/via-set parent older/a: " + routeOK,
			// A Gateway parentRef reaches the Gateway's own listeners only.
			"HTTPRoute default/via-gateway parent gw/a: Accepted=False/NoMatchingParent ResolvedRefs=True/ResolvedRefs",
		},
		routes: []string{
			"default/gw :80 http a.example.com: prefix:/ [] -> " + toWeb,
			"default/gw :80 http gw.example.com: no routes",
		},
	}, {
		name: "listenerset-default-not-allowed",
		objects: gatewayAllowing("") + listenerSet("extra", "default", "2026-01-01T00:00:00Z", `
  - {name: a, protocol: HTTP, port: 80, hostname: a.example.com}`) + route("via-set", "default", `
  parentRefs: [{kind: ListenerSet, group: gateway.networking.k8s.io, name: extra}]`),
		statuses: []string{acceptedClass, acceptedGateway, gatewayListenersOK,
			"ListenerSet default/extra: Accepted=False/NotAllowed Programmed=False/NotAllowed",
			"ListenerSet default/extra listener a: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/NotAllowed ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Invalid",
			"HTTPRoute default/via-set parent extra: Accepted=False/NoMatchingParent ResolvedRefs=True/ResolvedRefs",
		},
		routes: []string{"default/gw :80 http gw.example.com: no routes"},
	}, {
		// Same admits the Gateway's namespace only; Selector the labelled namespaces.
		name: "listenerset-allowed-namespaces",
		objects: gatewayAllowing("{namespaces: {from: Selector, selector: {matchLabels: {listeners: ok}}}}") + `
---
kind: Namespace
apiVersion: v1
metadata: {name: team, labels: {listeners: ok}}
---
kind: Namespace
apiVersion: v1
metadata: {name: other}` + listenerSet("admitted", "team", "2026-01-01T00:00:00Z", `
  - {name: a, protocol: HTTP, port: 80, hostname: a.example.com}`) + listenerSet("refused", "other", "2026-01-01T00:00:00Z", `
  - {name: b, protocol: HTTP, port: 80, hostname: b.example.com}`),
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=True/Accepted Programmed=True/Programmed listenerSets=1",
			gatewayListenersOK,
			"ListenerSet other/refused: Accepted=False/NotAllowed Programmed=False/NotAllowed",
			"ListenerSet other/refused listener b: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/NotAllowed ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Invalid",
			"ListenerSet team/admitted: Accepted=True/Accepted Programmed=True/Programmed",
			lsListenerOK("team/admitted", "a", 0, "HTTPRoute,GRPCRoute"),
		},
		routes: []string{
			"default/gw :80 http a.example.com: no routes",
			"default/gw :80 http gw.example.com: no routes",
		},
	}, {
		// A ListenerSet's certificate in its own namespace needs no grant; one in
		// another namespace needs a ReferenceGrant from ListenerSets (not Gateways).
		name: "listenerset-certificates",
		objects: gatewayAllowing("{namespaces: {from: All}}") + listenerSet("tls", "team", "2026-01-01T00:00:00Z", `
  - {name: own, protocol: HTTPS, port: 443, hostname: own.example.com, tls: {certificateRefs: [{name: cert}]}}
  - {name: granted, protocol: HTTPS, port: 443, hostname: granted.example.com, tls: {certificateRefs: [{name: cert, namespace: default}]}}
  - {name: refused, protocol: HTTPS, port: 443, hostname: refused.example.com, tls: {certificateRefs: [{name: cert, namespace: other}]}}`) + `
---
kind: ReferenceGrant
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: g, namespace: default}
spec:
  from: [{group: gateway.networking.k8s.io, kind: ListenerSet, namespace: team}]
  to: [{group: "", kind: Secret}]
---
kind: ReferenceGrant
apiVersion: gateway.networking.k8s.io/v1
metadata: {name: g, namespace: other}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: team}]
  to: [{group: "", kind: Secret}]`,
		extra: []runtime.Object{tlsSecret("team", "cert", "own.example.com"), tlsSecret("default", "cert", "granted.example.com"), tlsSecret("other", "cert", "refused.example.com")},
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=True/Accepted Programmed=True/Programmed listenerSets=1",
			gatewayListenersOK,
			"ListenerSet team/tls: Accepted=True/ListenersNotValid Programmed=True/Programmed",
			lsListenerOK("team/tls", "own", 0, "HTTPRoute,GRPCRoute"),
			lsListenerOK("team/tls", "granted", 0, "HTTPRoute,GRPCRoute"),
			"ListenerSet team/tls listener refused: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted Conflicted=False/NoConflicts Programmed=False/Invalid",
		},
		routes: []string{
			"default/gw :80 http gw.example.com: no routes",
			"default/gw :443 https granted.example.com (cert default/cert): no routes",
			"default/gw :443 https own.example.com (cert team/cert): no routes",
		},
	}, {
		// A ListenerSet none of whose listeners can be served is not accepted and does
		// not count among the Gateway's (conformance: ListenerSetReferenceGrant).
		name: "listenerset-no-usable-listener",
		objects: gatewayAllowing("{namespaces: {from: All}}") + listenerSet("tls", "team", "2026-01-01T00:00:00Z", `
  - {name: refused, protocol: HTTPS, port: 443, hostname: refused.example.com, tls: {certificateRefs: [{name: cert, namespace: other}]}}`),
		extra: []runtime.Object{tlsSecret("other", "cert", "refused.example.com")},
		statuses: []string{acceptedClass, acceptedGateway, gatewayListenersOK,
			"ListenerSet team/tls: Accepted=False/ListenersNotValid Programmed=False/ListenersNotValid",
			"ListenerSet team/tls listener refused: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted Conflicted=False/NoConflicts Programmed=False/Invalid",
		},
		routes: []string{"default/gw :80 http gw.example.com: no routes"},
	}, {
		name: "listenerset-parent-not-accepted",
		objects: gatewayAllowing("{namespaces: {from: Same}}\n  tls: {backend: {clientCertificateRef: {name: client}}}") +
			listenerSet("extra", "default", "2026-01-01T00:00:00Z", `
  - {name: a, protocol: HTTP, port: 80, hostname: a.example.com}`),
		statuses: []string{acceptedClass,
			"Gateway default/gw: Accepted=False/UnsupportedValue Programmed=False/Invalid",
			"Gateway default/gw listener http: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Invalid",
			"ListenerSet default/extra: Accepted=False/ParentNotAccepted Programmed=False/ParentNotProgrammed",
			"ListenerSet default/extra listener a: attached=0 kinds=HTTPRoute,GRPCRoute Accepted=False/ParentNotAccepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Invalid",
		},
	}, {
		// A ListenerSet whose parent is not a Gateway of Portico's is not Portico's.
		name: "listenerset-other-parent",
		objects: base + listenerSet("extra", "default", "2026-01-01T00:00:00Z", `
  - {name: a, protocol: HTTP, port: 80}`),
		statuses: []string{acceptedClass},
	}})
}
