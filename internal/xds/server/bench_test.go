package server

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// BenchmarkPublishOneClusterChange publishes 10,000 clusters with their endpoints and
// routes, then, per iteration, the same set with one cluster changed: unchanged
// resources are the same pointers, as the incremental translator passes them. With
// delta clients, each holds a wildcard watch on every type, through the cache as
// go-control-plane's delta server does, and takes the response (marshalled) before
// the next change.
func BenchmarkPublishOneClusterChange(b *testing.B) {
	for _, clients := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("delta-clients=%d", clients), func(b *testing.B) {
			benchmarkPublishOneClusterChange(b, clients)
		})
	}
}

func benchmarkPublishOneClusterChange(b *testing.B, clients int) {
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
	var watchers []*benchWatcher
	for range clients {
		for _, typeURL := range allTypes {
			w := &benchWatcher{b: b, cache: s.cache, out: make(chan cachev3.DeltaResponse, 1),
				sub: stream.NewDeltaSubscription([]string{"*"}, nil, nil, false)}
			w.watch(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "bench"}, TypeUrl: typeURL, ResourceNamesSubscribe: []string{"*"}})
			watchers = append(watchers, w)
		}
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
		for _, w := range watchers {
			w.take()
		}
	}
}

// benchWatcher is one delta subscription, handled as go-control-plane's delta server
// does: a response is marshalled, its versions kept, and a new watch made (the ACK).
type benchWatcher struct {
	b     *testing.B
	cache cachev3.ConfigWatcher
	sub   stream.Subscription
	out   chan cachev3.DeltaResponse
}

func (w *benchWatcher) watch(req *discoveryv3.DeltaDiscoveryRequest) {
	if _, err := w.cache.CreateDeltaWatch(req, w.sub, w.out); err != nil {
		w.b.Fatal(err)
	}
	w.take()
}

// take handles the response sent, if any.
func (w *benchWatcher) take() {
	select {
	case resp := <-w.out:
		msg, err := resp.GetDeltaDiscoveryResponse()
		if err != nil {
			w.b.Fatal(err)
		}
		w.sub.SetReturnedResources(resp.GetNextVersionMap())
		req := resp.GetDeltaRequest()
		w.watch(&discoveryv3.DeltaDiscoveryRequest{Node: req.GetNode(), TypeUrl: req.GetTypeUrl(), ResponseNonce: msg.GetSystemVersionInfo()})
	default:
	}
}
