package testutil

import (
	"context"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestRateLimitService: the service built from its module, on a Redis of its own,
// answers Envoy's protocol by its configuration: the third request of a descriptor
// limited to 2 an hour is over the limit; a descriptor it does not know is not limited.
func TestRateLimitService(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the rate limit service")
	}
	redis := StartRedis(t)
	rls := StartRateLimit(t, redis, `
domain: test
descriptors:
- key: generic_key
  value: two
  rate_limit: {unit: hour, requests_per_unit: 2}
`)
	conn, err := grpc.NewClient(rls.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	ask := func(value string) rlsv3.RateLimitResponse_Code {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
			Domain:      "test",
			Descriptors: []*commonv3.RateLimitDescriptor{{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: value}}}},
			HitsAddend:  1,
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetOverallCode()
	}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if got := ask("two"); got != want {
			t.Errorf("request %d: %s, want %s", i+1, got, want)
		}
	}
	if got := ask("other"); got != rlsv3.RateLimitResponse_OK {
		t.Errorf("unknown descriptor: %s, want OK", got)
	}
}
