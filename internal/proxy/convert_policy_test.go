package proxy

import (
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/portico-dev/portico/internal/proxy/router"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
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

// translatorHealthCheck is the health check the translator emits.
func translatorHealthCheck() *corev3.HealthCheck {
	return &corev3.HealthCheck{
		Timeout:            durationpb.New(2 * time.Second),
		Interval:           durationpb.New(10 * time.Second),
		NoTrafficInterval:  durationpb.New(10 * time.Second),
		UnhealthyThreshold: wrapperspb.UInt32(3),
		HealthyThreshold:   wrapperspb.UInt32(2),
		HealthChecker: &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{
			Path: "/healthz", Host: "svc.example.com",
			// Every failing status but 503 counts towards the threshold.
			RetriableStatuses: []*typev3.Int64Range{{Start: 100, End: 503}, {Start: 504, End: 600}},
		}},
	}
}

// statuses is the statusSet of [from, to) ranges given in pairs.
func statuses(bounds ...int) upstream.StatusSet {
	var s upstream.StatusSet
	for i := 0; i < len(bounds); i += 2 {
		for c := bounds[i]; c < bounds[i+1]; c++ {
			s.Add(c)
		}
	}
	return s
}

func TestConvertClusterPolicies(t *testing.T) {
	defaults := upstream.LBSpec{ChoiceCount: 2, MinRingSize: 1024, MaglevSize: 65537, PanicThreshold: 50}
	with := func(f func(s *upstream.LBSpec)) upstream.LBSpec {
		s := defaults
		f(&s)
		return s
	}
	tests := []struct {
		name   string
		mutate func(c *clusterv3.Cluster)
		wantLB upstream.LBSpec
		wantHC *upstream.HealthCheckSpec
	}{
		{"round robin", func(*clusterv3.Cluster) {}, defaults, nil},
		{"least request", func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST },
			with(func(s *upstream.LBSpec) { s.Policy = upstream.LBLeastRequest }), nil},
		{"least request choice_count", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
			c.LbConfig = &clusterv3.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &clusterv3.Cluster_LeastRequestLbConfig{ChoiceCount: wrapperspb.UInt32(5)}}
		}, with(func(s *upstream.LBSpec) { s.Policy, s.ChoiceCount = upstream.LBLeastRequest, 5 }), nil},
		{"random", func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_RANDOM },
			with(func(s *upstream.LBSpec) { s.Policy = upstream.LBRandom }), nil},
		{"ring hash minimum_ring_size", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_RING_HASH
			c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{MinimumRingSize: wrapperspb.UInt64(64)}}
		}, with(func(s *upstream.LBSpec) { s.Policy, s.MinRingSize = upstream.LBRingHash, 64 }), nil},
		{"maglev", func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_MAGLEV },
			with(func(s *upstream.LBSpec) { s.Policy = upstream.LBMaglev }), nil},
		{"maglev table_size", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_MAGLEV
			c.LbConfig = &clusterv3.Cluster_MaglevLbConfig_{MaglevLbConfig: &clusterv3.Cluster_MaglevLbConfig{TableSize: wrapperspb.UInt64(251)}}
		}, with(func(s *upstream.LBSpec) { s.Policy, s.MaglevSize = upstream.LBMaglev, 251 }), nil},
		{"panic threshold", func(c *clusterv3.Cluster) {
			c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}}
		}, with(func(s *upstream.LBSpec) { s.PanicThreshold = 0 }), nil},
		{"translator health check", func(c *clusterv3.Cluster) { c.HealthChecks = []*corev3.HealthCheck{translatorHealthCheck()} }, defaults,
			&upstream.HealthCheckSpec{Timeout: 2 * time.Second, Interval: 10 * time.Second, NoTrafficInterval: 10 * time.Second,
				UnhealthyThreshold: 3, HealthyThreshold: 2, Path: "/healthz", Host: "svc.example.com", ReuseConnection: true,
				Expected: statuses(200, 201), Retriable: statuses(100, 503, 504, 600)}},
		{"health check defaults: Host is the cluster name, no_traffic_interval 60s", func(c *clusterv3.Cluster) {
			hc := translatorHealthCheck()
			hc.NoTrafficInterval = nil
			hc.ReuseConnection = wrapperspb.Bool(false)
			hc.GetHttpHealthCheck().Host = ""
			hc.GetHttpHealthCheck().RetriableStatuses = nil
			hc.Name = "stats-name"
			hc.AlwaysLogHealthCheckFailures = true
			c.HealthChecks = []*corev3.HealthCheck{hc}
		}, defaults, &upstream.HealthCheckSpec{Timeout: 2 * time.Second, Interval: 10 * time.Second, NoTrafficInterval: time.Minute,
			UnhealthyThreshold: 3, HealthyThreshold: 2, Path: "/healthz", Host: "ns/svc/80", Expected: statuses(200, 201)}},
		{"expected_statuses replace 200", func(c *clusterv3.Cluster) {
			hc := translatorHealthCheck()
			hc.GetHttpHealthCheck().ExpectedStatuses = []*typev3.Int64Range{{Start: 200, End: 300}, {Start: 404, End: 405}}
			c.HealthChecks = []*corev3.HealthCheck{hc}
		}, defaults, &upstream.HealthCheckSpec{Timeout: 2 * time.Second, Interval: 10 * time.Second, NoTrafficInterval: 10 * time.Second,
			UnhealthyThreshold: 3, HealthyThreshold: 2, Path: "/healthz", Host: "svc.example.com", ReuseConnection: true,
			Expected: statuses(200, 300, 404, 405), Retriable: statuses(100, 503, 504, 600)}},
		{"connect-only tcp health check", func(c *clusterv3.Cluster) {
			hc := translatorHealthCheck()
			hc.HealthChecker = &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}}
			c.HealthChecks = []*corev3.HealthCheck{hc}
		}, defaults, &upstream.HealthCheckSpec{Kind: upstream.HealthCheckTCP, Timeout: 2 * time.Second, Interval: 10 * time.Second, NoTrafficInterval: 10 * time.Second,
			UnhealthyThreshold: 3, HealthyThreshold: 2, ReuseConnection: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := edsCluster("ns/svc/80")
			tc.mutate(c)
			if err := c.ValidateAll(); err != nil {
				t.Fatal(err)
			}
			spec, err := upstream.ConvertCluster(c)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLB, spec.LB, cmp.AllowUnexported(upstream.LBSpec{})); diff != "" {
				t.Errorf("lb (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantHC, spec.HealthCheck, cmp.AllowUnexported(upstream.HealthCheckSpec{})); diff != "" {
				t.Errorf("health check (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConvertClusterPolicyRejects(t *testing.T) {
	hc := func(f func(hc *corev3.HealthCheck)) func(c *clusterv3.Cluster) {
		return func(c *clusterv3.Cluster) {
			h := translatorHealthCheck()
			f(h)
			c.HealthChecks = []*corev3.HealthCheck{h}
		}
	}
	httpHC := func(f func(h *corev3.HealthCheck_HttpHealthCheck)) func(c *clusterv3.Cluster) {
		return hc(func(h *corev3.HealthCheck) { f(h.GetHttpHealthCheck()) })
	}
	tests := []struct {
		name   string
		mutate func(c *clusterv3.Cluster)
		want   string
	}{
		{"cluster provided", func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_CLUSTER_PROVIDED }, "lb_policy CLUSTER_PROVIDED is not supported"},
		{"active_request_bias", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
			c.LbConfig = &clusterv3.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &clusterv3.Cluster_LeastRequestLbConfig{
				ActiveRequestBias: &corev3.RuntimeDouble{DefaultValue: 1, RuntimeKey: "k"}}}
		}, "least_request_lb_config.active_request_bias"},
		{"slow start without a window", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
			c.LbConfig = &clusterv3.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &clusterv3.Cluster_LeastRequestLbConfig{
				SlowStartConfig: &clusterv3.Cluster_SlowStartConfig{}}}
		}, "slow_start_config"},
		{"murmur hash", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_RING_HASH
			c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{
				HashFunction: clusterv3.Cluster_RingHashLbConfig_MURMUR_HASH_2}}
		}, "hash_function MURMUR_HASH_2"},
		{"maximum ring size", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_RING_HASH
			c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{MaximumRingSize: wrapperspb.UInt64(2048)}}
		}, "maximum_ring_size"},
		{"ring config on round robin", func(c *clusterv3.Cluster) {
			c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{}}
		}, "ring_hash_lb_config needs lb_policy RING_HASH"},
		{"maglev table not prime", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_MAGLEV
			c.LbConfig = &clusterv3.Cluster_MaglevLbConfig_{MaglevLbConfig: &clusterv3.Cluster_MaglevLbConfig{TableSize: wrapperspb.UInt64(1000)}}
		}, "not a prime"},
		{"round robin lb config", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_RANDOM
			c.LbConfig = &clusterv3.Cluster_RoundRobinLbConfig_{RoundRobinLbConfig: &clusterv3.Cluster_RoundRobinLbConfig{}}
		}, "round_robin_lb_config needs lb_policy ROUND_ROBIN"},
		{"zone aware", func(c *clusterv3.Cluster) {
			c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{LocalityConfigSpecifier: &clusterv3.Cluster_CommonLbConfig_ZoneAwareLbConfig_{
				ZoneAwareLbConfig: &clusterv3.Cluster_CommonLbConfig_ZoneAwareLbConfig{}}}
		}, "common_lb_config: locality config"},
		{"update merge window", func(c *clusterv3.Cluster) {
			c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{UpdateMergeWindow: durationpb.New(time.Second)}
		}, "update_merge_window"},
		{"two health checks", func(c *clusterv3.Cluster) {
			c.HealthChecks = []*corev3.HealthCheck{translatorHealthCheck(), translatorHealthCheck()}
		}, "health_checks: only one health check is supported, got 2"},
		{"tcp health check with send", hc(func(h *corev3.HealthCheck) {
			h.HealthChecker = &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{
				Send: &corev3.HealthCheck_Payload{Payload: &corev3.HealthCheck_Payload_Text{Text: "50494E47"}}}}
		}), "tcp_health_check.send is not supported"},
		{"tcp health check with receive", hc(func(h *corev3.HealthCheck) {
			h.HealthChecker = &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{
				Receive: []*corev3.HealthCheck_Payload{{Payload: &corev3.HealthCheck_Payload_Text{Text: "504F4E47"}}}}}
		}), "tcp_health_check.receive is not supported"},
		{"grpc health check", hc(func(h *corev3.HealthCheck) {
			h.HealthChecker = &corev3.HealthCheck_GrpcHealthCheck_{GrpcHealthCheck: &corev3.HealthCheck_GrpcHealthCheck{}}
		}), "GrpcHealthCheck_ is not supported"},
		{"custom health check", hc(func(h *corev3.HealthCheck) {
			h.HealthChecker = &corev3.HealthCheck_CustomHealthCheck_{CustomHealthCheck: &corev3.HealthCheck_CustomHealthCheck{Name: "x"}}
		}), "CustomHealthCheck_ is not supported"},
		{"tls options", hc(func(h *corev3.HealthCheck) { h.TlsOptions = &corev3.HealthCheck_TlsOptions{} }), "tls_options"},
		{"event log path", hc(func(h *corev3.HealthCheck) { h.EventLogPath = "/dev/stdout" }), "event_log_path"},
		{"event logger", hc(func(h *corev3.HealthCheck) {
			h.EventLogger = []*corev3.TypedExtensionConfig{{Name: "x", TypedConfig: mustAny(t, &corev3.Node{})}}
		}), "event_logger"},
		{"interval jitter", hc(func(h *corev3.HealthCheck) { h.IntervalJitter = durationpb.New(time.Second) }), "interval_jitter"},
		{"unhealthy interval", hc(func(h *corev3.HealthCheck) { h.UnhealthyInterval = durationpb.New(time.Second) }), "unhealthy_interval"},
		{"transport socket match", hc(func(h *corev3.HealthCheck) { h.TransportSocketMatchCriteria = &structpb.Struct{} }), "transport_socket_match_criteria"},
		{"expected statuses out of range", httpHC(func(h *corev3.HealthCheck_HttpHealthCheck) {
			h.ExpectedStatuses = []*typev3.Int64Range{{Start: 200, End: 300}, {Start: 0, End: 100}}
		}), "http_health_check: expected_statuses range [0, 100) is not within [100, 600)"},
		{"retriable statuses out of range", httpHC(func(h *corev3.HealthCheck_HttpHealthCheck) {
			h.RetriableStatuses = []*typev3.Int64Range{{Start: 500, End: 700}}
		}), "retriable_statuses range [500, 700) is not within [100, 600)"},
		{"empty retriable range", httpHC(func(h *corev3.HealthCheck_HttpHealthCheck) {
			h.RetriableStatuses = []*typev3.Int64Range{{Start: 503, End: 503}}
		}), "retriable_statuses range [503, 503)"},
		{"request headers", httpHC(func(h *corev3.HealthCheck_HttpHealthCheck) {
			h.RequestHeadersToAdd = []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x", Value: "y"}}}
		}), "request_headers_to_add"},
		{"HTTP/2 checks", httpHC(func(h *corev3.HealthCheck_HttpHealthCheck) { h.CodecClientType = typev3.CodecClientType_HTTP2 }), "codec_client_type HTTP2"},
		{"HEAD checks", httpHC(func(h *corev3.HealthCheck_HttpHealthCheck) { h.Method = corev3.RequestMethod_HEAD }), "method HEAD"},
		{"relative path", httpHC(func(h *corev3.HealthCheck_HttpHealthCheck) { h.Path = "healthz" }), `path "healthz" must start with /`},
		{"zero threshold", hc(func(h *corev3.HealthCheck) { h.UnhealthyThreshold = wrapperspb.UInt32(0) }), "must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := edsCluster("c")
			tc.mutate(c)
			_, err := upstream.ConvertCluster(c)
			if err == nil {
				t.Fatal("accepted, want a rejection")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}
