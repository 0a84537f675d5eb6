package server

import (
	"context"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"

	"github.com/portico-dev/portico/internal/metrics"
)

// MetricsCallbacks counts connected streams and responses sent by type, state of the
// world and delta alike.
func MetricsCallbacks(m *metrics.XDS) serverv3.Callbacks {
	open := func(context.Context, int64, string) error {
		m.Clients.Inc()
		return nil
	}
	closed := func(int64, *corev3.Node) { m.Clients.Dec() }
	return serverv3.CallbackFuncs{
		StreamOpenFunc:        open,
		StreamClosedFunc:      closed,
		DeltaStreamOpenFunc:   open,
		DeltaStreamClosedFunc: closed,
		StreamResponseFunc: func(_ context.Context, _ int64, _ *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
			m.Pushes.WithLabelValues(shortType(resp.GetTypeUrl())).Inc()
		},
		StreamDeltaResponseFunc: func(_ int64, _ *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
			m.Pushes.WithLabelValues(shortType(resp.GetTypeUrl())).Inc()
		},
	}
}

// shortType turns "type.googleapis.com/envoy.config.listener.v3.Listener" into "Listener".
func shortType(url string) string {
	return url[strings.LastIndex(url, ".")+1:]
}

// streamKey names a delta stream: the Serve call that accepted it, and its id there
// (go-control-plane numbers the streams of each server it makes from 1).
type streamKey struct{ serve, id int64 }

// streamCallbacks are the callbacks Serve gives go-control-plane: the Server's own,
// and those by which the delta cache learns the stream of each request (passed to
// the callbacks, then to CreateDeltaWatch) and the end of each stream, to forget
// what it kept for it.
type streamCallbacks struct {
	serverv3.Callbacks
	cache *deltaCache
	serve int64
}

func (c *deltaCache) callbacks(cb serverv3.Callbacks) serverv3.Callbacks {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.serves++
	return streamCallbacks{Callbacks: cb, cache: c, serve: c.serves}
}

// OnStreamDeltaRequest implements serverv3.Callbacks.
func (cb streamCallbacks) OnStreamDeltaRequest(id int64, req *discoveryv3.DeltaDiscoveryRequest) error {
	if err := cb.Callbacks.OnStreamDeltaRequest(id, req); err != nil {
		return err
	}
	cb.cache.mu.Lock()
	defer cb.cache.mu.Unlock()
	cb.cache.streamOf[req] = streamKey{cb.serve, id}
	return nil
}

// OnDeltaStreamClosed implements serverv3.Callbacks.
func (cb streamCallbacks) OnDeltaStreamClosed(id int64, node *corev3.Node) {
	cb.cache.streamClosed(streamKey{cb.serve, id})
	cb.Callbacks.OnDeltaStreamClosed(id, node)
}

// streamClosed forgets what the cache kept for stream, which has ended.
func (c *deltaCache) streamClosed(stream streamKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, s := range c.clients {
		if s.stream == stream {
			delete(c.clients, key)
		}
	}
	for req, st := range c.streamOf {
		if st == stream {
			delete(c.streamOf, req)
		}
	}
}
