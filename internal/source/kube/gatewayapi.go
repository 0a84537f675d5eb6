package kube

import (
	"context"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
)

// The gateway.networking.k8s.io/v1 resources Portico watches.
const (
	ResourceGatewayClasses     = "gatewayclasses"
	ResourceGateways           = "gateways"
	ResourceListenerSets       = "listenersets"
	ResourceHTTPRoutes         = "httproutes"
	ResourceGRPCRoutes         = "grpcroutes"
	ResourceTLSRoutes          = "tlsroutes"
	ResourceReferenceGrants    = "referencegrants"
	ResourceBackendTLSPolicies = "backendtlspolicies"
)

// GatewayAPIResources are the Gateway API resources Portico watches, in the order its
// log lines name them.
var GatewayAPIResources = []string{
	ResourceGatewayClasses, ResourceGateways, ResourceListenerSets, ResourceHTTPRoutes,
	ResourceGRPCRoutes, ResourceTLSRoutes, ResourceReferenceGrants, ResourceBackendTLSPolicies,
}

// gatewayServed is the set of Gateway API resources the API server serves at v1.
type gatewayServed map[string]bool

// discoverGatewayAPI finds out which Gateway API resources the API server serves at v1,
// retrying while it cannot be asked, and warns about those it does not serve: Portico
// watches what is installed when it starts, as for Contour's kinds. It returns an error
// only when ctx ends first.
func (s *Source) discoverGatewayAPI(ctx context.Context) (gatewayServed, error) {
	if s.cfg.Gateway == nil {
		return gatewayServed{}, nil
	}
	backoff := 500 * time.Millisecond
	for {
		served, err := servedGatewayResources(s.cfg.Client.Discovery().ServerResourcesForGroupVersion)
		if err == nil {
			s.warnMissingGatewayAPI(served)
			return served, nil
		}
		s.cfg.Logger.Warn("asking the API server whether the Gateway API CRDs are installed; will retry", "err", err, "retry_in", backoff.String())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// servedGatewayResources lists the resources of gateway.networking.k8s.io/v1 through
// list (the discovery client's); a group the API server does not know serves none.
func servedGatewayResources(list func(string) (*metav1.APIResourceList, error)) (gatewayServed, error) {
	served := gatewayServed{}
	res, err := list(gatewayv1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return served, nil
	}
	if err != nil {
		return nil, err
	}
	for _, r := range res.APIResources {
		if slices.Contains(GatewayAPIResources, r.Name) {
			served[r.Name] = true
		}
	}
	return served, nil
}

func (s *Source) warnMissingGatewayAPI(served gatewayServed) {
	var missing []string
	for _, r := range GatewayAPIResources {
		if !served[r] {
			missing = append(missing, r)
		}
	}
	switch {
	case len(missing) == len(GatewayAPIResources):
		s.cfg.Logger.Warn("Gateway API CRDs not installed; Gateways and their routes are ignored — install the Gateway API v1.7.0 standard channel (docs/install.md, \"Gateway API\")",
			"then", "restart portico to watch them")
	case len(missing) > 0:
		s.cfg.Logger.Warn("some Gateway API CRDs are not installed (or not at v1); objects of these kinds are ignored — install the Gateway API v1.7.0 standard channel (docs/install.md, \"Gateway API\")",
			"resources", strings.Join(missing, ","), "then", "restart portico to watch them")
	}
}

// registerGatewayAPI creates the informers of the namespaced Gateway API kinds served,
// in namespace ns, and returns their factory (nil when none is served).
func (s *Source) registerGatewayAPI(served gatewayServed, ns string) gatewayinformers.SharedInformerFactory {
	if !servesNamespaced(served) {
		return nil
	}
	f := gatewayinformers.NewSharedInformerFactoryWithOptions(s.cfg.Gateway, 0,
		gatewayinformers.WithNamespace(ns), gatewayinformers.WithTransform(trimObject))
	v1 := f.Gateway().V1()
	if served[ResourceGateways] {
		s.register(v1.Gateways().Informer())
	}
	if served[ResourceListenerSets] {
		s.register(v1.ListenerSets().Informer())
	}
	if served[ResourceHTTPRoutes] {
		s.register(v1.HTTPRoutes().Informer())
	}
	if served[ResourceGRPCRoutes] {
		s.register(v1.GRPCRoutes().Informer())
	}
	if served[ResourceTLSRoutes] {
		s.register(v1.TLSRoutes().Informer())
	}
	if served[ResourceReferenceGrants] {
		s.register(v1.ReferenceGrants().Informer())
	}
	if served[ResourceBackendTLSPolicies] {
		s.register(v1.BackendTLSPolicies().Informer())
	}
	return f
}

func servesNamespaced(served gatewayServed) bool {
	for r := range served {
		if r != ResourceGatewayClasses {
			return true
		}
	}
	return false
}

// registerGatewayClasses creates the informer of GatewayClasses, cluster-scoped whatever
// the watched namespaces, if they are served.
func (s *Source) registerGatewayClasses(served gatewayServed) gatewayinformers.SharedInformerFactory {
	if !served[ResourceGatewayClasses] {
		return nil
	}
	f := gatewayinformers.NewSharedInformerFactoryWithOptions(s.cfg.Gateway, 0, gatewayinformers.WithTransform(trimObject))
	s.register(f.Gateway().V1().GatewayClasses().Informer())
	return f
}
