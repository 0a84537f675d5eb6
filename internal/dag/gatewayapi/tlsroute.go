package gatewayapi

import (
	"fmt"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
)

// processTLSRoute resolves a TLSRoute's backends: those of its rules, by weight. Without
// one it can use, its connections are closed.
func processTLSRoute(p *dag.Processing, grants grantIndex, tr *gatewayv1.TLSRoute) *routeResult {
	res := &routeResult{ref: dag.ObjectRef{Kind: dag.KindTLSRoute, Namespace: tr.Namespace, Name: tr.Name}, created: tr.CreationTimestamp.Time}
	for _, h := range tr.Spec.Hostnames {
		res.hostnames = append(res.hostnames, strings.ToLower(string(h)))
	}
	if err := checkHostnames(tr.Spec.Hostnames); err != nil {
		res.accepted = err
		return res
	}
	for i, rule := range tr.Spec.Rules {
		refs := make([]gatewayv1.HTTPBackendRef, len(rule.BackendRefs))
		for j, ref := range rule.BackendRefs {
			refs[j] = gatewayv1.HTTPBackendRef{BackendRef: ref}
		}
		be := processBackendRefs(p, grants, tlsRouteKind, tr.Namespace, refs)
		if be.err != nil && res.resolved == nil {
			be.err.Message = fmt.Sprintf("spec.rules[%d].%s", i, be.err.Message)
			res.resolved = be.err
		}
		res.tcp = append(res.tcp, be.clusters...)
	}
	return res
}
