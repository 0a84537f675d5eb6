package server

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
)

// BenchmarkPublishOneClusterChange publishes 10,000 clusters with their endpoints and
// routes, then, per iteration, the same set with one cluster changed: unchanged
// resources are the same pointers, as the incremental translator passes them.
func BenchmarkPublishOneClusterChange(b *testing.B) {
	names := make([]string, 10000)
	for i := range names {
		names[i] = fmt.Sprintf("team-%d/app-%d/80", i/10, i)
	}
	res := config(b, names...)
	s := New(slog.New(slog.DiscardHandler), nil)
	ctx := context.Background()
	if _, err := s.Publish(ctx, res); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := i % len(names)
		c := edsCluster(names[k])
		c.ConnectTimeout = durationpb.New(time.Duration(i%5+2) * time.Second)
		i++
		next := *res
		next.Clusters = append(res.Clusters[:0:0], res.Clusters...)
		next.Clusters[k] = c
		if _, err := s.Publish(ctx, &next); err != nil {
			b.Fatal(err)
		}
	}
}
