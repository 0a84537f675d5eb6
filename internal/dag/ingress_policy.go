package dag

import (
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Ingress annotations carrying the timeout and retry policies of seed 002 to every route
// of an Ingress. Values are read exactly as the IngressRoute fields are.
const (
	AnnotationRequestTimeout       = "portico.dev/request-timeout"
	AnnotationIdleTimeout          = "portico.dev/idle-timeout"
	AnnotationNumRetries           = "portico.dev/num-retries"
	AnnotationRetryOnStatusCodes   = "portico.dev/retry-on-status-codes"
	AnnotationPerTryTimeout        = "portico.dev/per-try-timeout"
	contourAnnotationPrefix        = "contour.heptio.com/"
	projectContourAnnotationPrefix = "projectcontour.io/"
)

// annotation returns the value of a portico.dev annotation, or of its Contour spelling
// (contour.heptio.com/ or projectcontour.io/, as users migrating from Contour have them),
// and the name it was found under.
func annotation(ing *networkingv1.Ingress, name string) (*intstr.IntOrString, string) {
	if len(ing.Annotations) == 0 {
		return nil, name
	}
	suffix := strings.TrimPrefix(name, "portico.dev/")
	for _, n := range []string{name, contourAnnotationPrefix + suffix, projectContourAnnotationPrefix + suffix} {
		if v, ok := ing.Annotations[n]; ok {
			s := intstr.FromString(v)
			return &s, n
		}
	}
	return nil, name
}

// ingressPolicies reads the timeout and retry annotations of an Ingress.
func ingressPolicies(ing *networkingv1.Ingress) (*TimeoutPolicy, *RetryPolicy, []string) {
	if len(ing.Annotations) == 0 {
		return nil, nil, nil // the common case, kept free of allocations
	}
	input := func(name string) policyInput {
		v, found := annotation(ing, name)
		return policyInput{field: "annotation " + found, value: v}
	}
	timeouts, notes := buildTimeouts(input(AnnotationRequestTimeout), input(AnnotationIdleTimeout))
	var codes []intstr.IntOrString
	codesV, codesName := annotation(ing, AnnotationRetryOnStatusCodes)
	if codesV != nil {
		for _, c := range strings.Split(codesV.StrVal, ",") {
			if c = strings.TrimSpace(c); c != "" {
				codes = append(codes, intstr.FromString(c))
			}
		}
	}
	retry, more := buildRetry(rawRetryPolicy{
		count:         input(AnnotationNumRetries),
		statusCodes:   codes,
		codesField:    "annotation " + codesName,
		perTryTimeout: input(AnnotationPerTryTimeout),
	}, timeouts)
	notes = append(notes, more...)
	for _, unsupported := range []string{contourAnnotationPrefix + "retry-on", projectContourAnnotationPrefix + "retry-on"} {
		if _, ok := ing.Annotations[unsupported]; ok {
			notes = append(notes, fmt.Sprintf("annotation %s is not supported; list status codes in %s instead", unsupported, AnnotationRetryOnStatusCodes))
		}
	}
	return timeouts, retry, notes
}
