package translate

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/portico-dev/portico/internal/dag"
)

// hcms returns the HTTP connection managers of every filter chain of every listener.
func hcms(t *testing.T, res *Resources) []*hcmv3.HttpConnectionManager {
	t.Helper()
	var out []*hcmv3.HttpConnectionManager
	for _, r := range res.Listeners {
		for _, fc := range r.(*listenerv3.Listener).FilterChains {
			for _, f := range fc.Filters {
				var h hcmv3.HttpConnectionManager
				if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
					t.Fatal(err)
				}
				out = append(out, &h)
			}
		}
	}
	return out
}

func secureGraph() *dag.Graph {
	web := testCluster("default", "web", 80)
	vh := dag.VirtualHost{Name: "secure.com", Routes: []*dag.Route{route(dag.PathPrefix, "/", web)}}
	return &dag.Graph{
		HTTP:  []*dag.VirtualHost{&vh},
		HTTPS: []*dag.SecureVirtualHost{{VirtualHost: vh, Secret: &dag.Secret{Name: "default/cert", Cert: []byte("c"), Key: []byte("k")}}},
	}
}

// Every HTTP connection manager states the request header limits explicitly: Envoy's
// defaults (60 KiB, 100 headers) unless configured, so that Envoy and the embedded
// proxy enforce the same limits.
func TestHTTPConnectionManagersCarryRequestHeaderLimits(t *testing.T) {
	for _, tc := range []struct {
		name              string
		opts              Options
		wantKB, wantCount uint32
	}{
		{"defaults", Options{}, 60, 100},
		{"configured", Options{MaxRequestHeadersKB: 8, MaxRequestHeaders: 20}, 8, 20},
		{"largest size Envoy accepts", Options{MaxRequestHeadersKB: 8192}, 8192, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Translate(secureGraph(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			got := hcms(t, res)
			if len(got) != 2 {
				t.Fatalf("got %d connection managers, want 2 (HTTP and one HTTPS chain)", len(got))
			}
			for _, h := range got {
				if kb := h.GetMaxRequestHeadersKb(); kb == nil || kb.GetValue() != tc.wantKB {
					t.Errorf("%s: max_request_headers_kb = %v, want %d", h.StatPrefix, kb, tc.wantKB)
				}
				if n := h.GetCommonHttpProtocolOptions().GetMaxHeadersCount(); n == nil || n.GetValue() != tc.wantCount {
					t.Errorf("%s: common_http_protocol_options.max_headers_count = %v, want %d", h.StatPrefix, n, tc.wantCount)
				}
			}
		})
	}
}

// The Server header is the route configurations', not the connection managers': the
// connection manager would write it after a route's changes and undo them. Every route
// configuration sets "server: portico" for every route, first among the levels of
// changes (most_specific_header_mutations_wins), so that a route's own Server, set or
// removed, comes after it and wins. Every connection manager passes Server through, and
// returns the request's id.
func TestServerHeaderIsTheRouteConfigurations(t *testing.T) {
	g := secureGraph()
	stable := testCluster("default", "stable", 80)
	removed, renamed := route(dag.PathPrefix, "/plain", stable), route(dag.PathPrefix, "/named", stable)
	removed.ResponseHeaders = &dag.HeadersPolicy{Remove: []string{"Server"}}
	renamed.ResponseHeaders = &dag.HeadersPolicy{Set: []dag.HeaderValue{{Name: "Server", Value: "web/1.0"}}}
	g.HTTP[0].Routes = append([]*dag.Route{removed, renamed}, g.HTTP[0].Routes...)
	res, err := Translate(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hcms(t, res) {
		if h.ServerHeaderTransformation != hcmv3.HttpConnectionManager_PASS_THROUGH || h.ServerName != "" || !h.AlwaysSetRequestIdInResponse {
			t.Errorf("%s: server_header_transformation %v, server_name %q, always_set_request_id_in_response %t; want PASS_THROUGH, none, true",
				h.StatPrefix, h.ServerHeaderTransformation, h.ServerName, h.AlwaysSetRequestIdInResponse)
		}
	}
	overwrite := func(k, v string) []*corev3.HeaderValueOption {
		return []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}}
	}
	var names []string
	for _, r := range res.Routes {
		rc := r.(*routev3.RouteConfiguration)
		names = append(names, rc.Name)
		if err := rc.ValidateAll(); err != nil {
			t.Errorf("%s: %v", rc.Name, err)
		}
		if !rc.MostSpecificHeaderMutationsWins {
			t.Errorf("%s: most_specific_header_mutations_wins is false: the route configuration's Server would come after a route's", rc.Name)
		}
		if diff := cmp.Diff(overwrite("server", "portico"), rc.ResponseHeadersToAdd, protocmp.Transform()); diff != "" {
			t.Errorf("%s: response_headers_to_add (-want +got):\n%s", rc.Name, diff)
		}
		if len(rc.ResponseHeadersToRemove)+len(rc.RequestHeadersToAdd)+len(rc.RequestHeadersToRemove) > 0 {
			t.Errorf("%s: changes other headers: %v %v %v", rc.Name, rc.ResponseHeadersToRemove, rc.RequestHeadersToAdd, rc.RequestHeadersToRemove)
		}
	}
	if diff := cmp.Diff([]string{"ingress_http", "https/secure.com"}, names); diff != "" {
		t.Errorf("route configurations (-want +got):\n%s", diff)
	}
	routes := res.Routes[0].(*routev3.RouteConfiguration).VirtualHosts[0].Routes
	if got := routes[0].ResponseHeadersToRemove; !slices.Equal(got, []string{"Server"}) || routes[0].ResponseHeadersToAdd != nil {
		t.Errorf("route %s: response_headers_to_remove %v, _to_add %v; want [Server], none", routes[0].Name, got, routes[0].ResponseHeadersToAdd)
	}
	if diff := cmp.Diff(overwrite("Server", "web/1.0"), routes[1].ResponseHeadersToAdd, protocmp.Transform()); diff != "" {
		t.Errorf("route %s: response_headers_to_add (-want +got):\n%s", routes[1].Name, diff)
	}
}

func TestRequestHeaderSizeAboveEnvoysMaximumIsAnError(t *testing.T) {
	_, err := Translate(secureGraph(), Options{MaxRequestHeadersKB: 8193})
	if err == nil || !strings.Contains(err.Error(), "8192") {
		t.Errorf("Translate with 8193 KiB: error %v, want one naming the 8192 KiB maximum", err)
	}
	if err := CheckMaxRequestHeadersKB(8193); err == nil {
		t.Error("CheckMaxRequestHeadersKB(8193) = nil, want an error")
	}
	if err := CheckMaxRequestHeadersKB(0); err != nil {
		t.Errorf("CheckMaxRequestHeadersKB(0) (the default) = %v", err)
	}
}

// Route names label the data plane's metrics and access log lines: the declaring
// object and the path condition, unique within a virtual host, bounded in length.
func TestRoutesAreNamedAfterTheirObjectAndMatch(t *testing.T) {
	web, fallback := testCluster("default", "web", 80), testCluster("default", "fallback", 80)
	ing := dag.ObjectRef{Kind: dag.KindIngress, Namespace: "default", Name: "site"}
	ir := dag.ObjectRef{Kind: dag.KindIngressRoute, Namespace: "team", Name: "app"}
	named := func(r *dag.Route, src dag.ObjectRef) *dag.Route { r.Source = src; return r }
	long := "/" + strings.Repeat("x", 300)
	g := &dag.Graph{HTTP: []*dag.VirtualHost{
		{Name: "*", Routes: []*dag.Route{named(route(dag.PathPrefix, "/", fallback), ing)}},
		// The same Ingress serves the wildcard: its fallback route has the same name.
		{Name: "*.foo.com", Routes: []*dag.Route{named(route(dag.PathPrefix, "/", web), ing)}},
		{Name: "foo.com", Routes: []*dag.Route{
			named(route(dag.PathExact, "/health", web), ing),
			named(route(dag.PathStringPrefix, "/app", web), ir),
			named(route(dag.PathStringPrefix, long, web), ir),
		}},
	}}
	res, err := Translate(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, vh := range res.Routes[0].(*routev3.RouteConfiguration).VirtualHosts {
		for _, r := range vh.Routes {
			got[vh.Name] = append(got[vh.Name], r.Name)
		}
	}
	longName := got["foo.com"][2]
	if len(longName) > maxRouteNameLen || !strings.HasPrefix(longName, "ingressroute/team/app:prefix:/xxx") {
		t.Errorf("long route name %q (%d bytes): want at most %d bytes, starting with the object and match", longName, len(longName), maxRouteNameLen)
	}
	want := map[string][]string{
		"*":         {"ingress/default/site:prefix:/"},
		"*.foo.com": {"ingress/default/site:prefix:/", "ingress/default/site:prefix:/#2"},
		"foo.com":   {"ingress/default/site:exact:/health", "ingressroute/team/app:prefix:/app", longName},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("route names by virtual host (-want +got):\n%s", diff)
	}
	// A cut never splits a character: the name stays UTF-8 and the resource marshals.
	multibyte := &dag.Graph{HTTP: []*dag.VirtualHost{{Name: "foo.com", Routes: []*dag.Route{
		named(route(dag.PathPrefix, "/"+strings.Repeat("a", 159)+strings.Repeat("é", 30), web), ing),
	}}}}
	mres, err := Translate(multibyte, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := mres.Routes[0].(*routev3.RouteConfiguration).VirtualHosts[0].Routes[0].Name; !utf8.ValidString(n) {
		t.Errorf("route name %q is not valid UTF-8", n)
	}
	checkMarshal(t, mres)
	// The object's part is never cut, however long: it is the proxy's route label.
	longObject := dag.ObjectRef{Kind: dag.KindHTTPProxy, Namespace: strings.Repeat("n", 63), Name: strings.Repeat("a.", 120) + "app"}
	lres, err := Translate(&dag.Graph{HTTP: []*dag.VirtualHost{{Name: "foo.com", Routes: []*dag.Route{
		named(route(dag.PathPrefix, long, web), longObject),
	}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	object := "httpproxy/" + longObject.Namespace + "/" + longObject.Name + ":"
	if n := lres.Routes[0].(*routev3.RouteConfiguration).VirtualHosts[0].Routes[0].Name; !strings.HasPrefix(n, object) || len(n) > len(object)+9 {
		t.Errorf("route name %q of a %d-byte object: want the whole object and a hash", n, len(object))
	}
	// Stable: the same graph gives the same names.
	again, err := Translate(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(res.Routes[0].(*routev3.RouteConfiguration).VirtualHosts[2].Routes[2].Name,
		again.Routes[0].(*routev3.RouteConfiguration).VirtualHosts[2].Routes[2].Name); diff != "" {
		t.Errorf("long route name changed between translations: %s", diff)
	}
}
