package proxy

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// mirrorPolicy is a request_mirror_policies entry: a share of the route's
// requests is copied to cluster, whose answers are dropped.
type mirrorPolicy struct {
	cluster string
	// fraction out of of is the share copied, drawn per request; of 0: all.
	fraction, of uint64
	// keepHost: disable_shadow_host_suffix_append (the Host is sent as it is,
	// not with "-shadow" appended).
	keepHost bool
}

func convertMirrorPolicies(ps []*routev3.RouteAction_RequestMirrorPolicy) ([]mirrorPolicy, error) {
	var out []mirrorPolicy
	for i, p := range ps {
		if err := xdsconv.Unsupported(
			xdsconv.Set("cluster_header", p.GetClusterHeader() != ""),
			xdsconv.Set("trace_sampled", p.GetTraceSampled() != nil),
			xdsconv.Set("request_headers_mutations", len(p.GetRequestHeadersMutations()) > 0),
			xdsconv.Set("host_rewrite_literal", p.GetHostRewriteLiteral() != ""),
		); err != nil {
			return nil, fmt.Errorf("request_mirror_policies #%d: %w", i, err)
		}
		if p.GetCluster() == "" {
			return nil, fmt.Errorf("request_mirror_policies #%d: cluster is required", i)
		}
		m := mirrorPolicy{cluster: p.GetCluster(), keepHost: p.GetDisableShadowHostSuffixAppend()}
		if rf := p.GetRuntimeFraction(); rf != nil {
			m.fraction, m.of = fractionOf(rf.GetDefaultValue())
		}
		out = append(out, m)
	}
	return out, nil
}
