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
