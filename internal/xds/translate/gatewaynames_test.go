package translate

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestGatewayNamesRoundTrip(t *testing.T) {
	gw := types.NamespacedName{Namespace: "infra", Name: "public"}
	name := GatewayListenerName(gw, 443)
	if name != "gateway/infra/public/443" {
		t.Fatalf("GatewayListenerName = %q", name)
	}
	if got, ok := GatewayOf(name); !ok || got != gw {
		t.Errorf("GatewayOf(%q) = %v, %v; want %v", name, got, ok, gw)
	}
	for _, shared := range []string{ListenerHTTP, ListenerHTTPS, RouteHTTP, "gateway/", "gateway/ns", "gateway/ns/", "gateway//x/80"} {
		if got, ok := GatewayOf(shared); ok {
			t.Errorf("GatewayOf(%q) = %v, want the shared data plane", shared, got)
		}
	}
}

func TestGatewayHTTPRoutes(t *testing.T) {
	gw := types.NamespacedName{Namespace: "infra", Name: "public"}
	if name := GatewayListenerName(gw, 80); !GatewayHTTPRoutes(name) {
		t.Errorf("GatewayHTTPRoutes(%q) = false, want true", name)
	}
	for _, other := range []string{GatewayListenerName(gw, 443) + "/a.example.com", RouteHTTP, RouteHTTPS("a.example.com"), "gateway/infra/public/", "gateway/infra/public/8o"} {
		if GatewayHTTPRoutes(other) {
			t.Errorf("GatewayHTTPRoutes(%q) = true, want false", other)
		}
	}
}
