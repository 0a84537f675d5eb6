package server

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// Each Gateway API Gateway has a data plane of its own (its own Envoy fleet, or an embedded
// proxy), so that two Gateways may both listen on port 80: a data plane says which one it
// is in its node metadata, and is served that Gateway's listeners and no others. Every
// data plane gets the clusters, load assignments, secrets and route configurations it
// asks for; only the wildcard listener subscription is narrowed, which is what decides
// the sockets a data plane opens and, through them, the routes it asks for.
//
// Node metadata fields (strings and bools of Node.metadata):
const (
	// NodeGatewayKey names the Gateway, "namespace/name", whose data plane the node is.
	NodeGatewayKey = "portico.io/gateway"
	// NodeAllListenersKey (a bool) asks for every listener: the embedded proxy of
	// `portico run`, which serves the shared listeners and every Gateway's at once.
	NodeAllListenersKey = "portico.io/all-listeners"
)

// scope is the part of the listeners a data plane is served. The zero scope is the
// shared data plane's: the listeners of Ingress, IngressRoute and HTTPProxy.
type scope struct {
	all     bool
	gateway types.NamespacedName // set for a Gateway's data plane
}

// scopeOf reads the scope a node asks for. A malformed Gateway name gets a scope that
// matches no listener rather than the shared data plane's: a misconfigured Gateway
// fleet must not start serving other teams' hosts.
func scopeOf(node *corev3.Node) scope {
	fields := node.GetMetadata().GetFields()
	if fields[NodeAllListenersKey].GetBoolValue() {
		return scope{all: true}
	}
	v, ok := fields[NodeGatewayKey]
	if !ok {
		return scope{}
	}
	ns, name, _ := strings.Cut(v.GetStringValue(), "/")
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return scope{gateway: types.NamespacedName{Name: "/invalid"}}
	}
	return scope{gateway: types.NamespacedName{Namespace: ns, Name: name}}
}

// serves reports whether a data plane of scope sc is served the resource name of set typ.
func (sc scope) serves(typ int, name string) bool {
	if typ != listenerIdx || sc.all {
		return true
	}
	gw, isGateway := translate.GatewayOf(name)
	if sc.gateway == (types.NamespacedName{}) {
		return !isGateway
	}
	return isGateway && gw == sc.gateway
}
