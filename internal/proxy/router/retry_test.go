package router

import (
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/portico-dev/portico/internal/proxy/upstream"
)

func TestRetryBackOff(t *testing.T) {
	p := &RetryPolicy{BackOffBase: 25 * time.Millisecond, BackOffMax: 250 * time.Millisecond}
	// Envoy: uniform in [0, (2^n - 1) * base), the range growing while it
	// is within the maximum, the result capped at the maximum.
	for n, span := range map[int]time.Duration{1: 25, 2: 75, 3: 175, 4: 375, 5: 375, 10: 375} {
		span *= time.Millisecond
		var longest time.Duration
		for range 2000 {
			d := p.BackOff(n)
			if d < 0 || d >= span || d > p.BackOffMax {
				t.Fatalf("retry %d: back-off %v outside [0, %v) or above the maximum", n, d, span)
			}
			longest = max(longest, d)
		}
		if want := min(span, p.BackOffMax) * 8 / 10; longest < want {
			t.Errorf("retry %d: longest of 2000 back-offs %v, want the range up to %v used", n, longest, min(span, p.BackOffMax))
		}
	}
}

func TestRetriableOutcomes(t *testing.T) {
	policy := func(on string, codes ...uint32) *RetryPolicy {
		p, err := convertRetryPolicy(&routev3.RetryPolicy{RetryOn: on, RetriableStatusCodes: codes})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	type check struct {
		o      upstream.Outcome
		status int
		want   bool
	}
	resp := func(status int, want bool) check { return check{upstream.OutcomeResponse, status, want} }
	tests := []struct {
		on     string
		codes  []uint32
		checks []check
	}{
		{"5xx", nil, []check{resp(500, true), resp(503, true), resp(599, true), resp(404, false), resp(200, false),
			{upstream.OutcomeConnectFailure, 0, true}, {upstream.OutcomeReset, 0, true}, {upstream.OutcomePerTryTimeout, 0, true}, {upstream.OutcomeAborted, 0, false}}},
		{"gateway-error", nil, []check{resp(502, true), resp(503, true), resp(504, true), resp(500, false),
			{upstream.OutcomeConnectFailure, 0, true}, {upstream.OutcomeReset, 0, true}, {upstream.OutcomePerTryTimeout, 0, true}}},
		{"reset", nil, []check{resp(503, false), {upstream.OutcomeConnectFailure, 0, true}, {upstream.OutcomeReset, 0, true}, {upstream.OutcomePerTryTimeout, 0, true}}},
		{"connect-failure", nil, []check{resp(503, false), {upstream.OutcomeConnectFailure, 0, true}, {upstream.OutcomeReset, 0, false}, {upstream.OutcomePerTryTimeout, 0, false}}},
		{"retriable-status-codes", []uint32{409, 503}, []check{resp(409, true), resp(503, true), resp(502, false),
			{upstream.OutcomeConnectFailure, 0, false}, {upstream.OutcomeReset, 0, false}, {upstream.OutcomePerTryTimeout, 0, false}}},
		// The codes only count with retriable-status-codes in retry_on.
		{"connect-failure", []uint32{503}, []check{resp(503, false)}},
		{"", nil, []check{resp(503, false), {upstream.OutcomeReset, 0, false}}},
	}
	for _, tc := range tests {
		p := policy(tc.on, tc.codes...)
		for _, c := range tc.checks {
			if got := p.Retriable(c.o, c.status); got != c.want {
				t.Errorf("retry_on %q codes %v: outcome %d status %d retriable = %v, want %v", tc.on, tc.codes, c.o, c.status, got, c.want)
			}
		}
	}
}
