package dag

import (
	"strconv"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// FuzzServiceAnnotations: whatever a Service's circuit breaker and upstream protocol
// annotations say, reading them never panics; a breaker value is its limit when it is a
// whole number up to 4294967295, and otherwise 0 with a warning that names it; a
// protocol is one of h2, h2c, tls or none.
func FuzzServiceAnnotations(f *testing.F) {
	f.Add("10", "443, https", "https")
	f.Add("-1", ",,", "")
	f.Add("4294967296", "http,80", "80")
	f.Add(" 7", "\t443 ", "x")
	f.Fuzz(func(t *testing.T, limit, ports, portName string) {
		s := svc("team", "backend", "http:80", "https:443")
		s.Annotations = map[string]string{}
		for _, a := range breakerAnnotations {
			s.Annotations[a.name] = limit
		}
		for _, p := range proxyProtocols {
			s.Annotations[upstreamProtocolAnnotation+p] = ports
		}
		cb, warning := serviceCircuitBreakers(s), breakerAnnotationsWarning(s)
		n, err := strconv.ParseUint(limit, 10, 32)
		want := CircuitBreakers{}
		if err == nil {
			v := uint32(n)
			want = CircuitBreakers{MaxConnections: v, MaxPendingRequests: v, MaxRequests: v, MaxRetries: v, PerHostMaxConnections: v}
		}
		switch {
		case cb != want:
			t.Fatalf("%q: limits %+v, want %+v", limit, cb, want)
		case (err != nil) != (warning != ""):
			t.Fatalf("%q: warning %q", limit, warning)
		case err != nil && !strings.Contains(warning, strconv.Quote(limit)):
			t.Fatalf("%q: warning %q does not name the value", limit, warning)
		}
		for _, port := range []networkingv1.ServiceBackendPort{{Number: 443}, {Name: portName}, {Number: 8080}} {
			if p := AnnotatedProtocol(s, port); p != "" && !validProxyProtocol(p) {
				t.Fatalf("annotations %q, port %+v: protocol %q", ports, port, p)
			}
		}
	})
}
