package translate

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// Global rate limits: the filter and the service's cluster when a service is
// configured, descriptors as rate_limits on virtual hosts and routes, and a disabled
// route policy ignoring its host's (every resource ValidateAll'd by Translate).
func TestGlobalRateLimit(t *testing.T) {
	web := testCluster("team", "web", 80)
	own := route(dag.PathPrefix, "/own", web)
	own.RateLimit = &dag.RateLimitPolicy{Global: &dag.GlobalRateLimit{Descriptors: []dag.RateLimitDescriptor{{Entries: []dag.RateLimitEntry{
		{RemoteAddress: true},
		{RequestHeader: &dag.RequestHeaderEntry{Header: "x-user", Key: "user"}},
		{HeaderValueMatch: &dag.HeaderValueMatchEntry{Value: "beta", ExpectMatch: false, Headers: []dag.HeaderMatch{{Name: "x-channel", Kind: dag.MatchPresent}}}},
	}}}}}
	off := route(dag.PathPrefix, "/off", web)
	off.RateLimit = &dag.RateLimitPolicy{Global: &dag.GlobalRateLimit{Disabled: true}}
	inherit := route(dag.PathPrefix, "/", web)
	vh := &dag.VirtualHost{Name: "rl.example.com", Routes: []*dag.Route{own, off, inherit},
		RateLimit: &dag.RateLimitPolicy{Global: &dag.GlobalRateLimit{Descriptors: []dag.RateLimitDescriptor{{Entries: []dag.RateLimitEntry{
			{GenericKey: &dag.GenericKeyEntry{Key: "generic_key", Value: "rl"}},
		}}}}}}
	g := &dag.Graph{HTTP: []*dag.VirtualHost{vh}}
	opts := Options{RateLimit: &RateLimitService{Address: "10.0.0.9:8081", Domain: "contour", Timeout: time.Second, XRateLimitHeaders: true}}

	full, err := Translate(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	inc, err := NewIncremental(opts)
	if err != nil {
		t.Fatal(err)
	}
	incRes, err := inc.Translate(g)
	if err != nil {
		t.Fatal(err)
	}
	for name, res := range map[string]*Resources{"Translate": full, "Incremental": incRes} {
		var rls *clusterv3.Cluster
		for _, c := range res.Clusters {
			if c := c.(*clusterv3.Cluster); c.Name == RateLimitClusterName {
				rls = c
			}
		}
		if rls == nil || rls.GetType() != clusterv3.Cluster_EDS || rls.TypedExtensionProtocolOptions[HTTPProtocolOptionsName] == nil {
			t.Errorf("%s: rate limit service cluster %v, want an EDS cluster speaking HTTP/2", name, rls)
		}
		found := false
		for _, e := range res.Endpoints {
			found = found || e.(interface{ GetClusterName() string }).GetClusterName() == RateLimitClusterName
		}
		if !found {
			t.Errorf("%s: no load assignment for %s", name, RateLimitClusterName)
		}
		h := hcms(t, res)[0]
		i := filterIndex(h, "envoy.filters.http.ratelimit")
		if i < 0 || i < filterIndex(h, "envoy.filters.http.local_ratelimit") || i > filterIndex(h, "envoy.filters.http.router") {
			t.Fatalf("%s: http_filters %v, want ratelimit after local_ratelimit, before the router", name, h.HttpFilters)
		}
		var cfg ratelimitv3.RateLimit
		if err := h.HttpFilters[i].GetTypedConfig().UnmarshalTo(&cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Domain != "contour" || !cfg.FailureModeDeny || cfg.Timeout.AsDuration() != time.Second ||
			cfg.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName() != RateLimitClusterName ||
			cfg.EnableXRatelimitHeaders != ratelimitv3.RateLimit_DRAFT_VERSION_03 {
			t.Errorf("%s: ratelimit filter %v", name, &cfg)
		}
		got := res.Routes[0].(*routev3.RouteConfiguration).VirtualHosts[0]
		wantVH := []*routev3.RateLimit{{Actions: []*routev3.RateLimit_Action{{ActionSpecifier: &routev3.RateLimit_Action_GenericKey_{GenericKey: &routev3.RateLimit_Action_GenericKey{DescriptorKey: "generic_key", DescriptorValue: "rl"}}}}}}
		if diff := cmp.Diff(wantVH, got.RateLimits, protocmp.Transform()); diff != "" {
			t.Errorf("%s: virtual host rate_limits (-want +got):\n%s", name, diff)
		}
		wantOwn := []*routev3.RateLimit{{Actions: []*routev3.RateLimit_Action{
			{ActionSpecifier: &routev3.RateLimit_Action_RemoteAddress_{RemoteAddress: &routev3.RateLimit_Action_RemoteAddress{}}},
			{ActionSpecifier: &routev3.RateLimit_Action_RequestHeaders_{RequestHeaders: &routev3.RateLimit_Action_RequestHeaders{HeaderName: "x-user", DescriptorKey: "user"}}},
			{ActionSpecifier: &routev3.RateLimit_Action_HeaderValueMatch_{HeaderValueMatch: &routev3.RateLimit_Action_HeaderValueMatch{
				DescriptorValue: "beta", ExpectMatch: wrapperspb.Bool(false),
				Headers: []*routev3.HeaderMatcher{{Name: "x-channel", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}},
			}}},
		}}}
		if diff := cmp.Diff(wantOwn, got.Routes[0].GetRoute().RateLimits, protocmp.Transform()); diff != "" {
			t.Errorf("%s: /own rate_limits (-want +got):\n%s", name, diff)
		}
		var per ratelimitv3.RateLimitPerRoute
		if a := got.Routes[1].TypedPerFilterConfig["envoy.filters.http.ratelimit"]; a == nil || a.UnmarshalTo(&per) != nil || per.VhRateLimits != ratelimitv3.RateLimitPerRoute_IGNORE {
			t.Errorf("%s: /off per-route config %v, want vh_rate_limits IGNORE", name, got.Routes[1].TypedPerFilterConfig)
		}
		if len(got.Routes[2].GetRoute().RateLimits) != 0 || len(got.Routes[2].TypedPerFilterConfig) != 0 {
			t.Errorf("%s: / has a policy of its own; it must take the host's", name)
		}
	}

	// Without a service: no filter, no cluster.
	res, err := Translate(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if filterIndex(hcms(t, res)[0], "envoy.filters.http.ratelimit") >= 0 {
		t.Error("without a service: a ratelimit filter")
	}
	for _, c := range res.Clusters {
		if c.(*clusterv3.Cluster).Name == RateLimitClusterName {
			t.Error("without a service: a rate limit service cluster")
		}
	}
	// A DNS name is resolved by the data plane.
	res, err = Translate(g, Options{RateLimit: &RateLimitService{Address: "ratelimit.infra.svc.cluster.local:8081", Domain: "d"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Clusters {
		if c := c.(*clusterv3.Cluster); c.Name == RateLimitClusterName && c.GetType() != clusterv3.Cluster_STRICT_DNS {
			t.Errorf("a DNS name's cluster is %s, want STRICT_DNS", c.GetType())
		}
	}
	for _, bad := range []*RateLimitService{{Address: "10.0.0.9", Domain: "d"}, {Address: "10.0.0.9:0", Domain: "d"}, {Address: ":8081", Domain: "d"}, {Address: "10.0.0.9:8081"}} {
		if _, err := Translate(g, Options{RateLimit: bad}); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
