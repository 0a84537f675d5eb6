package dag

import (
	"maps"
	"testing"
)

// Contour's circuit breaker annotations on a Service set the limits of every cluster
// of its ports, whichever API routes to it; a value that is not a whole number is
// ignored, as Contour ignores it, with a warning on the routing object.
func TestServiceCircuitBreakerAnnotations(t *testing.T) {
	s := annotated(map[string]string{
		"projectcontour.io/max-connections":          "10",
		"projectcontour.io/max-pending-requests":     "2",
		"projectcontour.io/max-requests":             "30",
		"projectcontour.io/max-retries":              "4",
		"projectcontour.io/per-host-max-connections": "5",
	})
	want := CircuitBreakers{MaxConnections: 10, MaxPendingRequests: 2, MaxRequests: 30, MaxRetries: 4, PerHostMaxConnections: 5}
	g := build(s, policyRoot(t, `{services: [{name: backend, port: 80}]}`), ing(t, `
metadata: {name: web, namespace: team}
spec:
  rules:
  - host: i.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: backend, port: {name: https}}}}]}
`))
	wantClean(t, g, "team", "root")
	for _, host := range []string{"p.example.com", "i.example.com"} {
		if got := routesOfHost(t, g, host)[0].Clusters[0].Cluster.CircuitBreakers; got != want {
			t.Errorf("%s: circuit breakers %+v, want %+v", host, got, want)
		}
	}

	g = build(annotated(map[string]string{"projectcontour.io/max-requests": "many", "projectcontour.io/max-retries": "-1", "projectcontour.io/max-connections": "7"}),
		policyRoot(t, `{services: [{name: backend, port: 80}]}`))
	st := wantWarning(t, g, "team", "root", problemService, "AnnotationInvalid", `projectcontour.io/max-requests "many"`, `projectcontour.io/max-retries "-1"`, "ignored")
	for _, w := range st.Warnings {
		if w.Reason == "ServiceUnresolved" {
			t.Errorf("a resolved Service with a bad annotation is reported as unresolved: %+v", w)
		}
	}
	if got := routesOfHost(t, g, "p.example.com")[0].Clusters[0].Cluster.CircuitBreakers; got != (CircuitBreakers{MaxConnections: 7}) {
		t.Errorf("circuit breakers %+v, want only max-connections 7", got)
	}
}

// The upstream protocol annotation holds for Ingress backends (by port number or name)
// and HTTPProxy tcpproxy services too, as in Contour.
func TestUpstreamProtocolAnnotationIngressAndTCPProxy(t *testing.T) {
	s := annotated(map[string]string{"projectcontour.io/upstream-protocol.h2c": "80", "projectcontour.io/upstream-protocol.tls": "https"})
	g := build(s, ing(t, `
metadata: {name: web, namespace: team}
spec:
  rules:
  - host: i.example.com
    http:
      paths:
      - {path: /h2c, pathType: Prefix, backend: {service: {name: backend, port: {number: 80}}}}
      - {path: /tls, pathType: Prefix, backend: {service: {name: backend, port: {name: https}}}}
      - {path: /plain, pathType: Prefix, backend: {service: {name: backend, port: {number: 8080}}}}
`), proxy(t, `
metadata: {name: tcp, namespace: team}
spec:
  virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true}}
  tcpproxy: {services: [{name: backend, port: 443}]}
`))
	got := map[string]string{}
	for _, r := range routesOfHost(t, g, "i.example.com") {
		got[r.Path.Value] = r.Clusters[0].Cluster.Protocol
	}
	if want := map[string]string{"/h2c": "h2c", "/tls": "tls", "/plain": ""}; !maps.Equal(got, want) {
		t.Errorf("Ingress backends' protocols %v, want %v", got, want)
	}
	wantClean(t, g, "team", "tcp")
	if p := httpsHost(g, "tcp.example.com").TCPProxy.Clusters[0].Cluster.Protocol; p != "tls" {
		t.Errorf("tcpproxy service protocol %q, want tls", p)
	}
}
