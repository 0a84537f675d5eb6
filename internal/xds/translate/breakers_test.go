package translate

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// TestClusterCircuitBreakers: a Service's annotated limits become its cluster's
// DEFAULT thresholds, each unset one taken from the installation's defaults, as
// Contour's; per-host only max_connections; nothing at all keeps Envoy's defaults.
func TestClusterCircuitBreakers(t *testing.T) {
	u := wrapperspb.UInt32
	cases := []struct {
		name              string
		service, defaults dag.CircuitBreakers
		want              *clusterv3.CircuitBreakers
	}{
		{name: "none"},
		{name: "annotations", service: dag.CircuitBreakers{MaxConnections: 10, MaxPendingRequests: 2, MaxRequests: 30, MaxRetries: 4, PerHostMaxConnections: 5},
			want: &clusterv3.CircuitBreakers{
				Thresholds:        []*clusterv3.CircuitBreakers_Thresholds{{MaxConnections: u(10), MaxPendingRequests: u(2), MaxRequests: u(30), MaxRetries: u(4), TrackRemaining: true}},
				PerHostThresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxConnections: u(5), TrackRemaining: true}},
			}},
		{name: "one annotation", service: dag.CircuitBreakers{MaxRequests: 7},
			want: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxRequests: u(7), TrackRemaining: true}}}},
		{name: "defaults fill the unset", service: dag.CircuitBreakers{MaxRequests: 7}, defaults: dag.CircuitBreakers{MaxRequests: 100, MaxPendingRequests: 50},
			want: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxRequests: u(7), MaxPendingRequests: u(50), TrackRemaining: true}}}},
		{name: "defaults alone", defaults: dag.CircuitBreakers{PerHostMaxConnections: 3},
			want: &clusterv3.CircuitBreakers{
				Thresholds:        []*clusterv3.CircuitBreakers_Thresholds{{TrackRemaining: true}},
				PerHostThresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxConnections: u(3), TrackRemaining: true}},
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := testCluster("team", "web", 80, dag.Endpoint{Address: "10.0.0.1", Port: 8080})
			cl.CircuitBreakers = c.service
			got, err := clusterAndEndpoints(cl, Global{CircuitBreakers: c.defaults, ConnectTimeout: time.Second})
			if err != nil {
				t.Fatal(err) // ValidateAll
			}
			if diff := cmp.Diff(c.want, got.cluster.GetCircuitBreakers(), protocmp.Transform()); diff != "" {
				t.Errorf("circuit_breakers (-want +got):\n%s", diff)
			}
		})
	}
}
