package translate

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"

	"github.com/portico-dev/portico/internal/dag"
)

// With UseProxyProtocol every listener, plain HTTP, HTTPS, TLS passthrough and a
// Gateway's, reads the PROXY protocol header first, with Envoy's defaults, as Contour
// emits it (and before the TLS inspector); without it, none does. Both translators.
func TestProxyProtocolListeners(t *testing.T) {
	g := plainAndSecureHost()
	db := testCluster("default", "db", 5432)
	g.HTTPS = append(g.HTTPS, &dag.SecureVirtualHost{VirtualHost: dag.VirtualHost{Name: "db.example.com"}, Passthrough: true,
		TCPProxy: &dag.TCPProxy{Clusters: []*dag.WeightedCluster{{Cluster: db, Weight: 1}}}})
	g.Gateways = gatewayGraph(t).Gateways
	for _, use := range []bool{false, true} {
		opts := Options{Global: Global{UseProxyProtocol: use}}
		inc, err := NewIncremental(opts)
		if err != nil {
			t.Fatal(err)
		}
		full, err := Translate(g, opts)
		if err != nil {
			t.Fatal(err)
		}
		incremental, err := inc.Translate(g)
		if err != nil {
			t.Fatal(err)
		}
		for name, res := range map[string]*Resources{"full": full, "incremental": incremental} {
			if len(res.Listeners) < 4 {
				t.Fatalf("%s: %d listeners, want HTTP, HTTPS and the Gateway's two", name, len(res.Listeners))
			}
			for _, r := range res.Listeners {
				l := r.(*listenerv3.Listener)
				if err := l.ValidateAll(); err != nil {
					t.Errorf("%s %s: %v", name, l.Name, err)
				}
				checkProxyProtocolFilters(t, name+" "+l.Name, l, use)
			}
		}
	}
}

func checkProxyProtocolFilters(t *testing.T, name string, l *listenerv3.Listener, use bool) {
	t.Helper()
	tls := len(l.FilterChains) > 0 && (l.FilterChains[0].TransportSocket != nil || l.FilterChains[0].FilterChainMatch != nil)
	var want []string
	if use {
		want = append(want, wellknown.ProxyProtocol)
	}
	if tls || l.Name == ListenerHTTPS {
		want = append(want, wellknown.TlsInspector)
	}
	var got []string
	for _, lf := range l.ListenerFilters {
		got = append(got, lf.Name)
		if lf.Name == wellknown.ProxyProtocol {
			var pp proxyprotocolv3.ProxyProtocol
			if err := lf.GetTypedConfig().UnmarshalTo(&pp); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(&pp, &proxyprotocolv3.ProxyProtocol{}) {
				t.Errorf("%s: proxy_protocol %v, want Envoy's defaults", name, &pp)
			}
		}
	}
	if len(got) != len(want) || (len(want) > 0 && got[0] != want[0]) || (len(want) > 1 && got[1] != want[1]) {
		t.Errorf("%s: listener filters %q, want %q", name, got, want)
	}
}
