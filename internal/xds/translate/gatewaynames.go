package translate

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// gatewayNamePrefix starts the names of the resources of a Gateway's own data plane.
const gatewayNamePrefix = "gateway/"

// GatewayPrefix is the prefix of the name of every Listener and RouteConfiguration that
// belongs to Gateway gw's data plane, "gateway/<namespace>/<name>/". The xDS server
// gives a Gateway's data plane the listeners with its prefix and no others.
func GatewayPrefix(gw types.NamespacedName) string {
	return gatewayNamePrefix + gw.Namespace + "/" + gw.Name + "/"
}

// GatewayListenerName is the name of the Listener (and, for HTTP, the RouteConfiguration)
// of Gateway gw on port.
func GatewayListenerName(gw types.NamespacedName, port uint32) string {
	return GatewayPrefix(gw) + strconv.FormatUint(uint64(port), 10)
}

// GatewayOf returns the Gateway whose data plane a Listener or RouteConfiguration named
// name belongs to; ok is false for the resources of the shared data plane (Ingress,
// IngressRoute, HTTPProxy).
func GatewayOf(name string) (gw types.NamespacedName, ok bool) {
	rest, ok := strings.CutPrefix(name, gatewayNamePrefix)
	if !ok {
		return gw, false
	}
	ns, rest, ok1 := strings.Cut(rest, "/")
	n, _, ok2 := strings.Cut(rest, "/")
	if !ok1 || !ok2 || ns == "" || n == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: n}, true
}

// GatewayHTTPRoutes reports whether the RouteConfiguration named name holds the hosts
// of a Gateway's HTTP port (GatewayListenerName), all of them in one configuration, as
// RouteHTTP does the shared listener's; an HTTPS port's are one per server name,
// "<listener name>/<server name>".
func GatewayHTTPRoutes(name string) bool {
	gw, ok := GatewayOf(name)
	if !ok {
		return false
	}
	port := strings.TrimPrefix(name, GatewayPrefix(gw))
	if port == "" {
		return false
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
