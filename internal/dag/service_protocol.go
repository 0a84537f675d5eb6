package dag

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
	return AnnotatedProtocol(svc, port), true
}

// AnnotatedProtocol is the protocol Contour's upstream protocol annotations on svc give
// its port, by number or by name: "h2", "h2c", "tls", or "" for HTTP/1.1.
func AnnotatedProtocol(svc *corev1.Service, port networkingv1.ServiceBackendPort) string {
	if len(svc.Annotations) == 0 {
		return ""
	}
	sp, ok := servicePort(svc, port)
	if !ok && port.Number == 0 {
		return "" // a port name the Service does not have
	}
	number := strconv.Itoa(int(sp.Port))
	if !ok {
		number = strconv.Itoa(int(port.Number))
	}
	// As Contour reads them: the port's name first, then its number; a port listed
	// under several protocols has the last of h2, h2c, tls.
	if p := listedProtocol(svc.Annotations, sp.Name); p != "" {
		return p
	}
	return listedProtocol(svc.Annotations, number)
}

// listedProtocol is the last protocol whose annotation lists port (a name or a
// number), or "".
func listedProtocol(annotations map[string]string, port string) string {
	if port == "" {
		return ""
	}
	found := ""
	for _, protocol := range proxyProtocols {
		for p := range strings.SplitSeq(annotations[upstreamProtocolAnnotation+protocol], ",") {
			if strings.TrimSpace(p) == port {
				found = protocol
			}
		}
	}
	return found
}
