package upstream

import (
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// edsCluster is a cluster as the translator emits it: endpoints over ADS.
func edsCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{ServiceName: name, EdsConfig: &corev3.ConfigSource{
			ResourceApiVersion:    corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}},
		ConnectTimeout: durationpb.New(2 * time.Second),
		LbPolicy:       clusterv3.Cluster_ROUND_ROBIN,
	}
}

func mustAny(t testing.TB, m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
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
func statuses(bounds ...int) StatusSet {
	var s StatusSet
	for i := 0; i < len(bounds); i += 2 {
		for c := bounds[i]; c < bounds[i+1]; c++ {
			s.Add(c)
		}
	}
	return s
}

func TestConvertClusterPolicies(t *testing.T) {
	defaults := lbSpec{choiceCount: 2, minRingSize: 1024, maglevSize: 65537, panicThreshold: 50}
	with := func(f func(s *lbSpec)) lbSpec {
		s := defaults
		f(&s)
		return s
	}
	tests := []struct {
		name   string
		mutate func(c *clusterv3.Cluster)
		wantLB lbSpec
		wantHC *HealthCheckSpec
	}{
		{"round robin", func(*clusterv3.Cluster) {}, defaults, nil},
		{"least request", func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST },
			with(func(s *lbSpec) { s.policy = lbLeastRequest }), nil},
		{"least request choice_count", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
			c.LbConfig = &clusterv3.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &clusterv3.Cluster_LeastRequestLbConfig{ChoiceCount: wrapperspb.UInt32(5)}}
		}, with(func(s *lbSpec) { s.policy, s.choiceCount = lbLeastRequest, 5 }), nil},
		{"random", func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_RANDOM },
			with(func(s *lbSpec) { s.policy = lbRandom }), nil},
		{"ring hash minimum_ring_size", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_RING_HASH
			c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{MinimumRingSize: wrapperspb.UInt64(64)}}
		}, with(func(s *lbSpec) { s.policy, s.minRingSize = lbRingHash, 64 }), nil},
		{"maglev", func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_MAGLEV },
			with(func(s *lbSpec) { s.policy = lbMaglev }), nil},
		{"maglev table_size", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_MAGLEV
			c.LbConfig = &clusterv3.Cluster_MaglevLbConfig_{MaglevLbConfig: &clusterv3.Cluster_MaglevLbConfig{TableSize: wrapperspb.UInt64(251)}}
		}, with(func(s *lbSpec) { s.policy, s.maglevSize = lbMaglev, 251 }), nil},
		{"panic threshold", func(c *clusterv3.Cluster) {
			c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}}
		}, with(func(s *lbSpec) { s.panicThreshold = 0 }), nil},
		{"translator health check", func(c *clusterv3.Cluster) { c.HealthChecks = []*corev3.HealthCheck{translatorHealthCheck()} }, defaults,
			&HealthCheckSpec{Timeout: 2 * time.Second, Interval: 10 * time.Second, noTrafficInterval: 10 * time.Second,
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
		}, defaults, &HealthCheckSpec{Timeout: 2 * time.Second, Interval: 10 * time.Second, noTrafficInterval: time.Minute,
			UnhealthyThreshold: 3, HealthyThreshold: 2, Path: "/healthz", Host: "ns/svc/80", Expected: statuses(200, 201)}},
		{"expected_statuses replace 200", func(c *clusterv3.Cluster) {
			hc := translatorHealthCheck()
			hc.GetHttpHealthCheck().ExpectedStatuses = []*typev3.Int64Range{{Start: 200, End: 300}, {Start: 404, End: 405}}
			c.HealthChecks = []*corev3.HealthCheck{hc}
		}, defaults, &HealthCheckSpec{Timeout: 2 * time.Second, Interval: 10 * time.Second, noTrafficInterval: 10 * time.Second,
			UnhealthyThreshold: 3, HealthyThreshold: 2, Path: "/healthz", Host: "svc.example.com", ReuseConnection: true,
			Expected: statuses(200, 300, 404, 405), Retriable: statuses(100, 503, 504, 600)}},
		{"connect-only tcp health check", func(c *clusterv3.Cluster) {
			hc := translatorHealthCheck()
			hc.HealthChecker = &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}}
			c.HealthChecks = []*corev3.HealthCheck{hc}
		}, defaults, &HealthCheckSpec{kind: healthCheckTCP, Timeout: 2 * time.Second, Interval: 10 * time.Second, noTrafficInterval: 10 * time.Second,
			UnhealthyThreshold: 3, HealthyThreshold: 2, ReuseConnection: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := edsCluster("ns/svc/80")
			tc.mutate(c)
			if err := c.ValidateAll(); err != nil {
				t.Fatal(err)
			}
			spec, err := ConvertCluster(c)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLB, spec.LB, cmp.AllowUnexported(lbSpec{})); diff != "" {
				t.Errorf("lb (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantHC, spec.HealthCheck, cmp.AllowUnexported(HealthCheckSpec{})); diff != "" {
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
			_, err := ConvertCluster(c)
			if err == nil {
				t.Fatal("accepted, want a rejection")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestConvertOutlierDetection(t *testing.T) {
	spec, err := convertOutlierDetection(&clusterv3.OutlierDetection{})
	if err != nil {
		t.Fatal(err)
	}
	want := outlierSpec{consecutive5xx: 5, enforcing5xx: 100, interval: 10 * time.Second, baseEjection: 30 * time.Second,
		maxEjection: 300 * time.Second, maxEjectionPercent: 10, enforcingSuccessRate: 100, srMinimumHosts: 5,
		srRequestVolume: 100, srStdevFactor: 1900, unejectOnHealthCheck: true}
	if *spec != want {
		t.Errorf("defaults: %+v, want Envoy's %+v", *spec, want)
	}
	spec, err = convertOutlierDetection(&clusterv3.OutlierDetection{BaseEjectionTime: durationpb.New(10 * time.Minute),
		ConsecutiveGatewayFailure: wrapperspb.UInt32(5), AlwaysEjectOneHost: wrapperspb.Bool(true)})
	if err != nil || spec.maxEjection != 10*time.Minute {
		t.Errorf("base_ejection_time above 300s: max_ejection_time %v (%v), want the base", spec.maxEjection, err)
	}
	rejects := []struct {
		name string
		od   *clusterv3.OutlierDetection
		want string
	}{
		{"gateway failures enforced", &clusterv3.OutlierDetection{EnforcingConsecutiveGatewayFailure: wrapperspb.UInt32(100)}, "enforcing_consecutive_gateway_failure"},
		{"local origin split", &clusterv3.OutlierDetection{SplitExternalLocalOriginErrors: true}, "split_external_local_origin_errors"},
		{"failure percentage", &clusterv3.OutlierDetection{EnforcingFailurePercentage: wrapperspb.UInt32(100)}, "enforcing_failure_percentage"},
		{"jitter", &clusterv3.OutlierDetection{MaxEjectionTimeJitter: durationpb.New(time.Second)}, "max_ejection_time_jitter"},
		{"always_eject_one_host false", &clusterv3.OutlierDetection{AlwaysEjectOneHost: wrapperspb.Bool(false)}, "always_eject_one_host false"},
		{"degraded hosts", &clusterv3.OutlierDetection{DetectDegradedHosts: wrapperspb.Bool(true)}, "detect_degraded_hosts"},
		{"max below base", &clusterv3.OutlierDetection{MaxEjectionTime: durationpb.New(time.Second)}, "max_ejection_time cannot be smaller than base_ejection_time"},
		{"zero interval", &clusterv3.OutlierDetection{Interval: durationpb.New(0)}, "interval and base_ejection_time must be positive"},
	}
	for _, tc := range rejects {
		t.Run(tc.name, func(t *testing.T) {
			c := edsCluster("c")
			c.OutlierDetection = tc.od
			_, err := ConvertCluster(c)
			if err == nil || !strings.Contains(err.Error(), "outlier_detection: "+tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
