package server

import (
	"context"
	"log/slog"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// TestClosedStreamsAreForgotten: the state the cache keeps per stream goes with the
// stream, even when no publish follows (a quiet cluster whose data planes reconnect,
// e.g. through a load balancer that closes idle connections): it holds a map of every
// resource version the stream was sent, which would otherwise pile up per reconnect.
func TestClosedStreamsAreForgotten(t *testing.T) {
	s := New(slog.New(slog.DiscardHandler), nil)
	w := newVHDSWorld(t, "a", "b", "c")
	publish(t, s, w.resources())
	conn := serve(t, s)
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := conn.DeltaAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := &deltaClient{t: t, s: st}
		if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: vhdsNode(), TypeUrl: resource.VirtualHostType,
			ResourceNamesSubscribe: []string{"*"}}); err != nil {
			t.Fatal(err)
		}
		c.recv()
		waitFor(t, "the ACK", func() bool { return s.cache.numWatches() == 1 })
		cancel()
		waitFor(t, "the stream closed", func() bool { return s.cache.numWatches() == 0 })
	}
	waitFor(t, "the states of 20 streams opened and closed forgotten", func() bool {
		s.cache.mu.Lock()
		defer s.cache.mu.Unlock()
		return len(s.cache.clients) == 0 && len(s.cache.streamOf) == 0
	})
}
