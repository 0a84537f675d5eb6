package proxy

import (
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/portico-dev/portico/internal/proxy/router"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// convertAction converts a route configuration with one route to cluster c,
// changed by mutate, and returns the route's forward action.
func convertAction(mutate func(r *routev3.Route)) (*router.ForwardAction, error) {
	r := toCluster("c", prefixMatch("/"))
	mutate(r)
	rc := routeConfig("rc", vhost("*", r))
	if err := rc.ValidateAll(); err != nil {
		return nil, err
	}
	t, err := router.ConvertRouteConfig(rc, httpFilters)
	if err != nil {
		return nil, err
	}
	return t.Domains.Any.Routes[0].Forward, nil
}

func TestConvertRouteActionPolicies(t *testing.T) {
	retry := func(rp *routev3.RetryPolicy) func(r *routev3.Route) {
		return func(r *routev3.Route) { r.GetRoute().RetryPolicy = rp }
	}
	tests := []struct {
		name   string
		mutate func(r *routev3.Route)
		want   func(fa *router.ForwardAction) any // what is compared
		expect any
	}{
		{"no retry policy: one attempt", func(*routev3.Route) {},
			func(fa *router.ForwardAction) any { return *fa.Retry }, router.RetryPolicy{}},
		{"translator shape: retriable-status-codes", retry(&routev3.RetryPolicy{
			RetryOn: "retriable-status-codes", RetriableStatusCodes: []uint32{502, 503}, NumRetries: wrapperspb.UInt32(2),
		}), func(fa *router.ForwardAction) any { return *fa.Retry }, router.RetryPolicy{
			On: router.RetryOnRetriableStatusCodes, StatusCodes: []int{502, 503}, NumRetries: 2,
			BackOffBase: 25 * time.Millisecond, BackOffMax: 250 * time.Millisecond,
		}},
		{"translator shape: gateway-error with per-try timeout", retry(&routev3.RetryPolicy{
			RetryOn: "gateway-error,retriable-status-codes", RetriableStatusCodes: []uint32{409}, NumRetries: wrapperspb.UInt32(3),
			PerTryTimeout: durationpb.New(2 * time.Second),
		}), func(fa *router.ForwardAction) any { return *fa.Retry }, router.RetryPolicy{
			On: router.RetryOnGatewayError | router.RetryOnRetriableStatusCodes, StatusCodes: []int{409}, NumRetries: 3,
			PerTryTimeout: 2 * time.Second, BackOffBase: 25 * time.Millisecond, BackOffMax: 250 * time.Millisecond,
		}},
		{"every condition, spaces, num_retries unset = 1", retry(&routev3.RetryPolicy{RetryOn: " 5xx, reset,connect-failure ,gateway-error"}),
			func(fa *router.ForwardAction) any { return []any{fa.Retry.On, fa.Retry.NumRetries} },
			[]any{router.RetryOn5xx | router.RetryOnReset | router.RetryOnConnectFailure | router.RetryOnGatewayError, 1}},
		{"num_retries 0", retry(&routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(0)}),
			func(fa *router.ForwardAction) any { return fa.Retry.NumRetries }, 0},
		{"retry_back_off base only: max is 10x", retry(&routev3.RetryPolicy{RetryOn: "5xx", RetryBackOff: &routev3.RetryPolicy_RetryBackOff{
			BaseInterval: durationpb.New(10 * time.Millisecond),
		}}), func(fa *router.ForwardAction) any { return []time.Duration{fa.Retry.BackOffBase, fa.Retry.BackOffMax} },
			[]time.Duration{10 * time.Millisecond, 100 * time.Millisecond}},
		{"retry_back_off base and max", retry(&routev3.RetryPolicy{RetryOn: "5xx", RetryBackOff: &routev3.RetryPolicy_RetryBackOff{
			BaseInterval: durationpb.New(10 * time.Millisecond), MaxInterval: durationpb.New(30 * time.Millisecond),
		}}), func(fa *router.ForwardAction) any { return []time.Duration{fa.Retry.BackOffBase, fa.Retry.BackOffMax} },
			[]time.Duration{10 * time.Millisecond, 30 * time.Millisecond}},
		{"idle_timeout unset", func(*routev3.Route) {},
			func(fa *router.ForwardAction) any { return []any{fa.HasIdleTimeout, fa.IdleTimeout} }, []any{false, time.Duration(0)}},
		{"idle_timeout 0s disables", func(r *routev3.Route) { r.GetRoute().IdleTimeout = durationpb.New(0) },
			func(fa *router.ForwardAction) any { return []any{fa.HasIdleTimeout, fa.IdleTimeout} }, []any{true, time.Duration(0)}},
		{"idle_timeout 30s", func(r *routev3.Route) { r.GetRoute().IdleTimeout = durationpb.New(30 * time.Second) },
			func(fa *router.ForwardAction) any { return []any{fa.HasIdleTimeout, fa.IdleTimeout} }, []any{true, 30 * time.Second}},
		{"hash policies", func(r *routev3.Route) {
			r.GetRoute().HashPolicy = []*routev3.RouteAction_HashPolicy{
				{PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: "X-User"}}, Terminal: true},
				{PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}},
			}
		}, func(fa *router.ForwardAction) any { return fa.HashPolicies },
			[]router.HashPolicy{{Header: "x-user", Terminal: true}, {SourceIP: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fa, err := convertAction(tc.mutate)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.expect, tc.want(fa), cmp.AllowUnexported(router.RetryPolicy{}, router.HashPolicy{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestConvertRouteActionPolicyRejects(t *testing.T) {
	retry := func(rp *routev3.RetryPolicy) func(r *routev3.Route) {
		if rp.RetryOn == "" {
			rp.RetryOn = "5xx"
		}
		return func(r *routev3.Route) { r.GetRoute().RetryPolicy = rp }
	}
	hash := func(hp *routev3.RouteAction_HashPolicy) func(r *routev3.Route) {
		return func(r *routev3.Route) { r.GetRoute().HashPolicy = []*routev3.RouteAction_HashPolicy{hp} }
	}
	anyCfg, _ := anypb.New(&routev3.RetryPolicy{})
	tests := []struct {
		name   string
		mutate func(r *routev3.Route)
		want   string
	}{
		{"unknown retry_on", retry(&routev3.RetryPolicy{RetryOn: "gateway-error,reset-before-request"}), `retry_policy: retry_on "reset-before-request" is not supported`},
		{"retriable-headers", retry(&routev3.RetryPolicy{RetryOn: "retriable-headers"}), `retry_on "retriable-headers"`},
		{"retry_policy_typed_config", func(r *routev3.Route) { r.GetRoute().RetryPolicyTypedConfig = anyCfg }, "retry_policy_typed_config"},
		{"retry_host_predicate", retry(&routev3.RetryPolicy{RetryHostPredicate: []*routev3.RetryPolicy_RetryHostPredicate{{Name: "envoy.retry_host_predicates.previous_hosts"}}}), "retry_host_predicate"},
		{"retry_priority", retry(&routev3.RetryPolicy{RetryPriority: &routev3.RetryPolicy_RetryPriority{Name: "p"}}), "retry_priority"},
		{"retriable_headers", retry(&routev3.RetryPolicy{RetriableHeaders: []*routev3.HeaderMatcher{{Name: "x"}}}), "retriable_headers"},
		{"retriable_request_headers", retry(&routev3.RetryPolicy{RetriableRequestHeaders: []*routev3.HeaderMatcher{{Name: "x"}}}), "retriable_request_headers"},
		{"rate_limited_retry_back_off", retry(&routev3.RetryPolicy{RateLimitedRetryBackOff: &routev3.RetryPolicy_RateLimitedRetryBackOff{
			ResetHeaders: []*routev3.RetryPolicy_ResetHeader{{Name: "Retry-After"}},
		}}), "rate_limited_retry_back_off"},
		{"retry_options_predicates", retry(&routev3.RetryPolicy{RetryOptionsPredicates: []*corev3.TypedExtensionConfig{{Name: "x", TypedConfig: anyCfg}}}), "retry_options_predicates"},
		{"per_try_idle_timeout", retry(&routev3.RetryPolicy{PerTryIdleTimeout: durationpb.New(time.Second)}), "per_try_idle_timeout"},
		{"host_selection_retry_max_attempts", retry(&routev3.RetryPolicy{HostSelectionRetryMaxAttempts: 3}), "host_selection_retry_max_attempts"},
		{"back-off max below base", retry(&routev3.RetryPolicy{RetryBackOff: &routev3.RetryPolicy_RetryBackOff{
			BaseInterval: durationpb.New(time.Second), MaxInterval: durationpb.New(time.Millisecond),
		}}), "retry_back_off: max_interval is below base_interval"},
		{"hash on cookie with a negative ttl", hash(&routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_Cookie_{
			Cookie: &routev3.RouteAction_HashPolicy_Cookie{Name: "session", Ttl: durationpb.New(-time.Second)}}}), `hash_policy #0: cookie "session": negative ttl`},
		{"hash on filter state", hash(&routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_FilterState_{
			FilterState: &routev3.RouteAction_HashPolicy_FilterState{Key: "k"}}}), "FilterState_ is not supported"},
		{"header hash with regex_rewrite", hash(&routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{
			Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: "x", RegexRewrite: &matcherv3.RegexMatchAndSubstitute{
				Pattern: &matcherv3.RegexMatcher{Regex: "a"}, Substitution: "b"}}}}), "header.regex_rewrite"},
		{"connection properties without source_ip", hash(&routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{
			ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{}}}), "without source_ip"},
		{"route buffer limit", func(r *routev3.Route) { r.PerRequestBufferLimitBytes = wrapperspb.UInt32(10) }, "per_request_buffer_limit_bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := convertAction(tc.mutate)
			if err == nil {
				t.Fatal("accepted, want a rejection")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		mutate func(vh *routev3.VirtualHost)
		want   string
	}{
		{"virtual host retry policy", func(vh *routev3.VirtualHost) { vh.RetryPolicy = &routev3.RetryPolicy{RetryOn: "5xx"} }, "retry_policy is not supported"},
		{"virtual host buffer limit", func(vh *routev3.VirtualHost) { vh.PerRequestBufferLimitBytes = wrapperspb.UInt32(1) }, "per_request_buffer_limit_bytes"},
		{"attempt count header", func(vh *routev3.VirtualHost) { vh.IncludeRequestAttemptCount = true }, "include_request_attempt_count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vh := vhost("*", toCluster("c", prefixMatch("/")))
			tc.mutate(vh)
			if _, err := router.ConvertRouteConfig(routeConfig("rc", vh), httpFilters); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestConvertStreamIdleTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  *durationpb.Duration
		want time.Duration
	}{
		{"unset: Envoy's 5 minutes", nil, 5 * time.Minute},
		{"0s disables", durationpb.New(0), 0},
		{"30s", durationpb.New(30 * time.Second), 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls, err := convertListener(modifyHCM(t, func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = tc.set }))
			if err != nil {
				t.Fatal(err)
			}
			if got := ls.chains[0].hcm.StreamIdleTimeout; got != tc.want {
				t.Errorf("stream idle timeout = %v, want %v", got, tc.want)
			}
		})
	}
}
