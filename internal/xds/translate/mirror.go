package translate

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/portico-dev/portico/internal/dag"
)

// mirrorPolicies copy a route's requests to its mirrors. A share is in millionths,
// which the data planes draw per request; Envoy sends the copy with "-shadow" added
// to its Host, and drops its answer.
func mirrorPolicies(mirrors []*dag.Mirror) []*routev3.RouteAction_RequestMirrorPolicy {
	if len(mirrors) == 0 {
		return nil
	}
	out := make([]*routev3.RouteAction_RequestMirrorPolicy, 0, len(mirrors))
	for _, m := range mirrors {
		p := &routev3.RouteAction_RequestMirrorPolicy{Cluster: m.Cluster.Name}
		if m.Denominator > 0 {
			p.RuntimeFraction = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{
				Numerator:   uint32((uint64(m.Numerator)*1_000_000 + uint64(m.Denominator)/2) / uint64(m.Denominator)),
				Denominator: typev3.FractionalPercent_MILLION,
			}}
		}
		out = append(out, p)
	}
	return out
}
