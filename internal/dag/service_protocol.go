package dag

import (
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// upstreamProtocolAnnotation, followed by h2, h2c or tls, is Contour's Service annotation
// listing the ports (numbers or names, comma-separated) whose endpoints speak that
// protocol instead of HTTP/1.1: projectcontour.io/upstream-protocol.tls: "443,https".
// HTTPProxy services without a protocol of their own follow it, as in Contour, so
// that a Service annotated for Contour keeps its protocol.
const upstreamProtocolAnnotation = "projectcontour.io/upstream-protocol."

// annotatedProtocol is the protocol the annotation on Service namespace/name gives its
// port ("" for HTTP/1.1), and whether the Service is known.
func (b *builder) annotatedProtocol(namespace, name string, port int) (string, bool) {
	return b.annotatedProtocolOf(namespace, name, networkingv1.ServiceBackendPort{Number: int32(port)})
}

// annotatedProtocolOf is annotatedProtocol of a port given by number or by name (an
// Ingress backend's).
func (b *builder) annotatedProtocolOf(namespace, name string, port networkingv1.ServiceBackendPort) (string, bool) {
	svc := b.store.Services[types.NamespacedName{Namespace: namespace, Name: name}]
	if svc == nil {
		return "", false
	}
	if len(svc.Annotations) == 0 {
		return "", true
	}
	sp, ok := servicePort(svc, port)
	if !ok && port.Number == 0 {
		return "", true // a port name the Service does not have
	}
	number := strconv.Itoa(int(sp.Port))
	if !ok {
		number = strconv.Itoa(int(port.Number))
	}
	for _, protocol := range proxyProtocols {
		for p := range strings.SplitSeq(svc.Annotations[upstreamProtocolAnnotation+protocol], ",") {
			if p = strings.TrimSpace(p); p != "" && (p == number || p == sp.Name) {
				return protocol, true
			}
		}
	}
	return "", true
}
