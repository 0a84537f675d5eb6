package router

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// MirrorPolicy is a request_mirror_policies entry: a share of the route's
// requests is copied to cluster, whose answers are dropped.
type MirrorPolicy struct {
	Cluster string
	// fraction out of of is the share copied, drawn per request; of 0: all.
	Fraction, Of uint64
	// KeepHost: disable_shadow_host_suffix_append (the Host is sent as it is,
	// not with "-shadow" appended).
	KeepHost bool
}

func convertMirrorPolicies(ps []*routev3.RouteAction_RequestMirrorPolicy) ([]MirrorPolicy, error) {
	var out []MirrorPolicy
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
		m := MirrorPolicy{Cluster: p.GetCluster(), KeepHost: p.GetDisableShadowHostSuffixAppend()}
		if rf := p.GetRuntimeFraction(); rf != nil {
			m.Fraction, m.Of = fractionOf(rf.GetDefaultValue())
		}
		out = append(out, m)
	}
	return out, nil
}
