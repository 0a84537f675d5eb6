package translate

import (
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	localratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// Local rate limits: the filter in every connection manager, without a bucket of its
// own, and a bucket per virtual host and route that has a policy (Translate validates
// every packed config, so this is a ValidateAll check too).
func TestLocalRateLimit(t *testing.T) {
	web := testCluster("team", "web", 80)
	limited := route(dag.PathPrefix, "/limited", web)
	limited.RateLimit = &dag.RateLimitPolicy{Local: &dag.LocalRateLimit{
		MaxTokens: 3, TokensPerFill: 2, FillInterval: time.Hour, Status: 503,
		ResponseHeaders: []dag.HeaderValue{{Name: "X-Limited", Value: "100%%"}},
	}}
	free := route(dag.PathPrefix, "/", web)
	vh := dag.VirtualHost{Name: "rl.example.com", Routes: []*dag.Route{limited, free},
		RateLimit: &dag.RateLimitPolicy{Local: &dag.LocalRateLimit{MaxTokens: 10, TokensPerFill: 10, FillInterval: time.Second, Status: 429}}}
	svh := &dag.SecureVirtualHost{VirtualHost: vh, Secret: &dag.Secret{Name: "team/cert", Cert: []byte("c"), Key: []byte("k")}}
	res, err := Translate(&dag.Graph{HTTP: []*dag.VirtualHost{&vh}, HTTPS: []*dag.SecureVirtualHost{svh}}, Options{})
	if err != nil {
		t.Fatal(err)
	}

	hs := hcms(t, res)
	if len(hs) != 2 {
		t.Fatalf("%d connection managers, want 2 (HTTP, HTTPS)", len(hs))
	}
	for _, h := range hs {
		i := filterIndex(h, "envoy.filters.http.local_ratelimit")
		if i < 0 || i > filterIndex(h, "envoy.filters.http.router") {
			t.Fatalf("http_filters %v: want envoy.filters.http.local_ratelimit before the router", h.HttpFilters)
		}
		var cfg localratelimitv3.LocalRateLimit
		if err := h.HttpFilters[i].GetTypedConfig().UnmarshalTo(&cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.TokenBucket != nil {
			t.Errorf("the connection manager's local rate limit has a bucket (%v): it would limit every route", cfg.TokenBucket)
		}
	}

	all := &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED}}
	wantHost := &localratelimitv3.LocalRateLimit{
		StatPrefix:     "vhost_rl.example.com",
		TokenBucket:    &typev3.TokenBucket{MaxTokens: 10, TokensPerFill: wrapperspb.UInt32(10), FillInterval: durationpb.New(time.Second)},
		Status:         &typev3.HttpStatus{Code: typev3.StatusCode_TooManyRequests},
		FilterEnabled:  all,
		FilterEnforced: all,
	}
	wantRoute := &localratelimitv3.LocalRateLimit{
		StatPrefix:     "vhost_rl.example.com",
		TokenBucket:    &typev3.TokenBucket{MaxTokens: 3, TokensPerFill: wrapperspb.UInt32(2), FillInterval: durationpb.New(time.Hour)},
		Status:         &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable},
		FilterEnabled:  all,
		FilterEnforced: all,
		ResponseHeadersToAdd: []*corev3.HeaderValueOption{{
			Header:       &corev3.HeaderValue{Key: "X-Limited", Value: "100%%"},
			AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD,
		}},
	}
	if len(res.Routes) != 2 {
		t.Fatalf("%d route configurations, want 2", len(res.Routes))
	}
	for _, r := range res.Routes {
		rc := r.(*routev3.RouteConfiguration)
		got := rc.VirtualHosts[0]
		wantPerFilter(t, rc.Name+" virtual host", got.TypedPerFilterConfig, wantHost)
		wantPerFilter(t, rc.Name+" /limited", got.Routes[0].TypedPerFilterConfig, wantRoute)
		if n := len(got.Routes[1].TypedPerFilterConfig); n != 0 {
			t.Errorf("%s /: %d per-filter configurations, want none (the host's applies)", rc.Name, n)
		}
	}
}

func wantPerFilter(t *testing.T, what string, m map[string]*anypb.Any, want proto.Message) {
	t.Helper()
	a := m["envoy.filters.http.local_ratelimit"]
	if a == nil {
		t.Errorf("%s: no envoy.filters.http.local_ratelimit in typed_per_filter_config %v", what, m)
		return
	}
	var got localratelimitv3.LocalRateLimit
	if err := a.UnmarshalTo(&got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, &got, protocmp.Transform()); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// filterIndex is the position of the named filter in h's http_filters; -1: absent.
func filterIndex(h *hcmv3.HttpConnectionManager, name string) int {
	return slices.IndexFunc(h.HttpFilters, func(f *hcmv3.HttpFilter) bool { return f.Name == name })
}
