package upstream

import (
	"log/slog"
	"testing"
)

func TestHealthRecord(t *testing.T) {
	spec := &HealthCheckSpec{UnhealthyThreshold: 3, HealthyThreshold: 2}
	ok := CheckResult{OK: true, Reason: "status 200"}
	network := CheckResult{Reason: "connection error: refused"}
	status := CheckResult{Immediate: true, Reason: "status 503"}
	retriable := CheckResult{Reason: "status 500"}
	tests := []struct {
		name    string
		results []CheckResult
		want    []bool // health after each result
	}{
		{"new endpoint: one success admits", []CheckResult{ok}, []bool{true}},
		{"new endpoint failing first: healthy_threshold applies", []CheckResult{network, ok, ok}, []bool{false, false, true}},
		{"network failures need unhealthy_threshold", []CheckResult{ok, network, network, network}, []bool{true, true, true, false}},
		{"a success resets the failures", []CheckResult{ok, network, network, ok, network, network, network}, []bool{true, true, true, true, true, true, false}},
		{"an unexpected status ejects at once", []CheckResult{ok, status}, []bool{true, false}},
		{"a retriable status counts", []CheckResult{ok, retriable, retriable, retriable}, []bool{true, true, true, false}},
		{"back needs healthy_threshold successes", []CheckResult{ok, status, ok, network, ok, ok}, []bool{true, false, false, false, false, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hs := &HealthState{cluster: "c", log: slog.New(slog.DiscardHandler),
				endpoints: map[string]*endpointHealth{}}
			eh := &endpointHealth{}
			hs.endpoints["e"] = eh
			counters := checkCounters{fresh: true}
			for i, r := range tc.results {
				hs.Record("e", eh, &counters, r, spec)
				if got := eh.Healthy.Load(); got != tc.want[i] {
					t.Fatalf("after result #%d (%s): healthy %v, want %v", i, r.Reason, got, tc.want[i])
				}
			}
		})
	}
}
