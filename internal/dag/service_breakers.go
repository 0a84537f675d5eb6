package dag

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// CircuitBreakers are the limits Contour's Service annotations set on the Service's
// clusters (projectcontour.io/max-connections and the others of breakerAnnotations).
// 0 is unset: the installation's default (--config cluster.circuit-breakers) or
// else Envoy's applies, as in Contour, where 0 cannot be asked for either.
type CircuitBreakers struct {
	MaxConnections, MaxPendingRequests, MaxRequests, MaxRetries uint32
	// PerHostMaxConnections bounds the connections to each endpoint.
	PerHostMaxConnections uint32
}

// IsZero reports whether no limit is set.
func (cb CircuitBreakers) IsZero() bool { return cb == CircuitBreakers{} }

// breakerAnnotations are Contour's circuit breaker annotations on a Service, each with
// the limit it sets.
var breakerAnnotations = []struct {
	name  string
	limit func(*CircuitBreakers) *uint32
}{
	{"projectcontour.io/max-connections", func(cb *CircuitBreakers) *uint32 { return &cb.MaxConnections }},
	{"projectcontour.io/max-pending-requests", func(cb *CircuitBreakers) *uint32 { return &cb.MaxPendingRequests }},
	{"projectcontour.io/max-requests", func(cb *CircuitBreakers) *uint32 { return &cb.MaxRequests }},
	{"projectcontour.io/max-retries", func(cb *CircuitBreakers) *uint32 { return &cb.MaxRetries }},
	{"projectcontour.io/per-host-max-connections", func(cb *CircuitBreakers) *uint32 { return &cb.PerHostMaxConnections }},
}

// serviceCircuitBreakers reads the circuit breaker annotations of svc. A value that is
// not a whole number up to 4294967295 is left out, as Contour leaves it out;
// breakerAnnotationsWarning says so.
func serviceCircuitBreakers(svc *corev1.Service) CircuitBreakers {
	var cb CircuitBreakers
	if len(svc.Annotations) == 0 {
		return cb
	}
	for _, a := range breakerAnnotations {
		if v, ok := svc.Annotations[a.name]; ok {
			if n, err := strconv.ParseUint(v, 10, 32); err == nil {
				*a.limit(&cb) = uint32(n)
			}
		}
	}
	return cb
}

// breakerAnnotationsWarning names the circuit breaker annotations of svc whose values
// are ignored, or "".
func breakerAnnotationsWarning(svc *corev1.Service) string {
	if len(svc.Annotations) == 0 {
		return ""
	}
	var bad []string
	for _, a := range breakerAnnotations {
		if v, ok := svc.Annotations[a.name]; ok {
			if _, err := strconv.ParseUint(v, 10, 32); err != nil {
				bad = append(bad, fmt.Sprintf("%s %q", a.name, v))
			}
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return fmt.Sprintf("Service %s/%s: annotation %s is not a whole number from 0 to 4294967295: ignored (the default limit applies)",
		svc.Namespace, svc.Name, strings.Join(bad, ", "))
}
