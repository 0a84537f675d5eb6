package router

import (
	"net/http"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/portico-dev/portico/internal/proxy/upstream"
)

func TestRetriableConditionsBeyondStatus(t *testing.T) {
	policy := func(on string) *RetryPolicy {
		p, err := convertRetryPolicy(&routev3.RetryPolicy{RetryOn: on})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := policy("retriable-4xx"); !p.Retriable(upstream.OutcomeResponse, 409) || p.Retriable(upstream.OutcomeResponse, 408) ||
		p.Retriable(upstream.OutcomeResponse, 503) || p.Retriable(upstream.OutcomeReset, 0) || p.Retriable(upstream.OutcomeConnectFailure, 0) {
		t.Error("retriable-4xx: want 409 and nothing else")
	}
	if p := policy("refused-stream"); p.Retriable(upstream.OutcomeResponse, 503) || p.Retriable(upstream.OutcomeReset, 0) || p.Retriable(upstream.OutcomeConnectFailure, 0) {
		t.Error("refused-stream: HTTP/1.1 upstreams never refuse a stream")
	}
	grpc := func(status string) *http.Response {
		return &http.Response{StatusCode: 200, Header: http.Header{"Grpc-Status": {status}}}
	}
	for on, retried := range map[string][]string{
		"cancelled":          {"1"},
		"deadline-exceeded":  {"4"},
		"resource-exhausted": {"8"},
		"internal":           {"13"},
		"unavailable":        {"14", " 14 "},
		"5xx,unavailable":    {"14", " 14 "},
		"5xx":                nil,
	} {
		p := policy(on)
		for _, code := range []string{"0", "1", "2", "4", "8", "13", "14", " 14 ", "x"} {
			want := false
			for _, c := range retried {
				want = want || c == code
			}
			if got := p.RetriableGRPC(grpc(code)); got != want {
				t.Errorf("retry_on %q, grpc-status %q: retriable %v, want %v", on, code, got, want)
			}
		}
		if p.RetriableGRPC(nil) || p.RetriableGRPC(&http.Response{Header: http.Header{}}) {
			t.Errorf("retry_on %q: a failure or a response without grpc-status is no gRPC retry", on)
		}
	}
}
