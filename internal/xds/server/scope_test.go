package server

import (
	"log/slog"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/structpb"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// listenerClient subscribes to listeners only, with the node metadata md.
func listenerClient(t *testing.T, c discoveryv3.AggregatedDiscoveryServiceClient, md map[string]any) *deltaClient {
	t.Helper()
	meta, err := structpb.NewStruct(md)
	if err != nil {
		t.Fatal(err)
	}
	s := openDeltaStream(t, c)
	req := &discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "test", Metadata: meta},
		TypeUrl: resource.ListenerType, ResourceNamesSubscribe: []string{"*"}}
	if err := s.Send(req); err != nil {
		t.Fatal(err)
	}
	return &deltaClient{t: t, s: s}
}

// withGatewayListeners is config(t, "a") plus an HTTP listener for each Gateway port named.
func withGatewayListeners(t *testing.T, names ...string) *translate.Resources {
	res := config(t, "a")
	for _, n := range names {
		res.Listeners = append(res.Listeners, httpListener(t, n))
		res.Routes = append(res.Routes, routes(n, "a"))
	}
	return res
}

// TestEachGatewayDataPlaneGetsItsOwnListeners checks the scopes of scope.go over real
// streams: the shared data plane never sees a Gateway's listeners, a Gateway's data plane
// sees its own only (across publishes that add and remove them), a `portico run` proxy
// sees all, and a malformed Gateway name sees nothing rather than the shared listeners.
func TestEachGatewayDataPlaneGetsItsOwnListeners(t *testing.T) {
	blue := k8stypes.NamespacedName{Namespace: "infra", Name: "blue"}
	green := k8stypes.NamespacedName{Namespace: "infra", Name: "green"}
	blue80, blue443 := translate.GatewayListenerName(blue, 80), translate.GatewayListenerName(blue, 443)
	green80 := translate.GatewayListenerName(green, 80)

	s := New(slog.New(slog.DiscardHandler), nil)
	ads := serve(t, s)
	shared := listenerClient(t, ads, nil)
	blueDP := listenerClient(t, ads, map[string]any{NodeGatewayKey: "infra/blue"})
	all := listenerClient(t, ads, map[string]any{NodeAllListenersKey: true})
	broken := listenerClient(t, ads, map[string]any{NodeGatewayKey: "blue"})

	v1 := publish(t, s, withGatewayListeners(t, blue80, green80))
	for _, tc := range []struct {
		name string
		c    *deltaClient
		want string
	}{
		{"shared", shared, "Listener v" + v1 + " +ingress_http"},
		{"blue", blueDP, "Listener v" + v1 + " +" + blue80},
		{"all", all, "Listener v" + v1 + " +" + blue80 + " +" + green80 + " +ingress_http"},
		{"malformed gateway name", broken, "Listener v" + v1},
	} {
		if got := summary(tc.c.recv()); got != tc.want {
			t.Errorf("%s data plane: first response %q, want %q", tc.name, got, tc.want)
		}
	}

	// Blue gains a port and green loses its: only blue's and run's data planes hear of it.
	v2 := publish(t, s, withGatewayListeners(t, blue80, blue443))
	if got, want := summary(blueDP.recv()), "Listener v"+v2+" +"+blue443; got != want {
		t.Errorf("blue data plane after adding its port 443: %q, want %q", got, want)
	}
	if got, want := summary(all.recv()), "Listener v"+v2+" +"+blue443+" -"+green80; got != want {
		t.Errorf("run's data plane after the change: %q, want %q", got, want)
	}
	// A change the shared data plane does see proves it was not sent the one before.
	res := withGatewayListeners(t, blue80, blue443)
	res.Listeners = slices.Insert(res.Listeners, 0, types.Resource(httpListener(t, "ingress_http_2")))
	res.Routes = append(res.Routes, routes("ingress_http_2", "a"))
	v3 := publish(t, s, res)
	if got, want := summary(shared.recv()), "Listener v"+v3+" +ingress_http_2"; got != want {
		t.Errorf("shared data plane: %q, want only the shared listener added at v%s", got, v3)
	}
}
