package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/proxy/internal/xdstest"
	"github.com/portico-dev/portico/internal/proxy/router"
)

// TestConvertHeaderMutationRejects: what Envoy refuses, and operators the
// proxy does not evaluate, are NACKed with the field named.
func TestConvertHeaderMutationRejects(t *testing.T) {
	both := xdstest.Set("x-a", "v")
	both.Append = wrapperspb.Bool(true)
	raw := &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x-raw", RawValue: []byte("v")}}
	tests := []struct {
		name   string
		mutate func(rc *routev3.RouteConfiguration)
		want   string
	}{
		{"route sets host", func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].Routes[0].RequestHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("Host", "x")}
		}, `request_headers_to_add "Host": :-prefixed or host headers may not be modified`},
		{"virtual host sets :authority", func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].RequestHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set(":authority", "x")}
		}, `virtual host "*": request_headers_to_add ":authority": :-prefixed or host headers may not be modified`},
		{"response removes :status", func(rc *routev3.RouteConfiguration) {
			rc.ResponseHeadersToRemove = []string{":status"}
		}, `response_headers_to_remove ":status"`},
		{"unsupported operator", func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].Routes[0].ResponseHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-t", "%START_TIME%")}
		}, `route #0 "to-c": response_headers_to_add "x-t": value "%START_TIME%": command operator %START_TIME% is not supported`},
		{"unescaped percent", func(rc *routev3.RouteConfiguration) {
			rc.RequestHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-p", "50%")}
		}, `request_headers_to_add "x-p": value "50%": no valid command operator`},
		{"append and append_action", func(rc *routev3.RouteConfiguration) {
			rc.RequestHeadersToAdd = []*corev3.HeaderValueOption{both}
		}, "both append and append_action are set"},
		{"raw_value", func(rc *routev3.RouteConfiguration) {
			rc.RequestHeadersToAdd = []*corev3.HeaderValueOption{raw}
		}, `"x-raw": raw_value is not supported`},
		{"weighted cluster sets host", func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].Routes[0] = weighted(prefixMatch("/"), map[string]uint32{"c": 1})
			rc.VirtualHosts[0].Routes[0].GetRoute().GetWeightedClusters().Clusters[0].RequestHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("host", "x")}
		}, `weighted_clusters: cluster "c": request_headers_to_add "host"`},
		{"direct response body over the limit", func(rc *routev3.RouteConfiguration) {
			rc.MaxDirectResponseBodySizeBytes = wrapperspb.UInt32(4)
			rc.VirtualHosts[0].Routes[0] = &routev3.Route{Match: prefixMatch("/"), Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
				Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "hello"}}}}}
		}, "direct_response body is 5 bytes, more than max_direct_response_body_size_bytes (4)"},
		{"host rewrite from no header name", func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].Routes[0].GetRoute().HostRewriteSpecifier = &routev3.RouteAction_HostRewriteHeader{HostRewriteHeader: "x host"}
		}, `host_rewrite_header "x host" is not a header name`},
		{"auto host rewrite", func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].Routes[0].GetRoute().HostRewriteSpecifier = &routev3.RouteAction_AutoHostRewrite{AutoHostRewrite: wrapperspb.Bool(true)}
		}, "auto_host_rewrite is not supported"},
		{"CONNECT upgrade", func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].Routes[0].GetRoute().UpgradeConfigs = []*routev3.RouteAction_UpgradeConfig{{
				UpgradeType: "CONNECT", ConnectConfig: &routev3.RouteAction_UpgradeConfig_ConnectConfig{}}}
		}, `upgrade_configs "CONNECT": connect_config is not supported`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc := routeConfig("rc", vhost("*", toCluster("c", prefixMatch("/"))))
			tc.mutate(rc)
			_, err := router.ConvertRouteConfig(rc, httpFilters)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// headerBackend echoes requests like startBackend, and sets response headers
// that route mutations may replace or remove.
func headerBackend(t *testing.T, name string) *backend {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend-Secret", "s3cr3t")
		w.Header().Set("X-Resp-Level", "backend")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echo{Backend: name, Path: r.URL.RequestURI(), Host: r.Host, Header: r.Header})
	}))
	t.Cleanup(srv.Close)
	return &backend{name: name, srv: srv}
}

// TestHeaderMutations sends requests through routes whose route
// configuration, virtual host, route and weighted clusters mutate headers,
// and checks what the backend receives and what the client gets back.
func TestHeaderMutations(t *testing.T) {
	cp := startControlPlane(t)
	a, b := headerBackend(t, "A"), headerBackend(t, "B")
	res := resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		clusters:  []*clusterv3.Cluster{edsCluster("A"), edsCluster("B"), edsCluster("empty")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("A", a.addr()), assignment("B", b.addr()), assignment("empty")},
	}
	mutated := withAction(toCluster("A", prefixMatch("/mut")), func(ra *routev3.RouteAction) {
		ra.PrefixRewrite = "/rewritten"
		ra.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: "backend.internal"}
	})
	keep := xdstest.HVO("x-keep-empty", "%REQ(x-missing)%", xdstest.OverwriteOrAdd)
	keep.KeepEmptyValue = true
	mutated.RequestHeadersToAdd = []*corev3.HeaderValueOption{
		xdstest.Set("x-level", "route"),
		xdstest.Set("x-client-ip", "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"),
		xdstest.Set("x-proto", "%PROTOCOL%"),
		xdstest.Set("x-hostname", "%HOSTNAME%"),
		xdstest.Set("x-from-req", "in=%REQ(x-in)%"),
		xdstest.Set("x-from-missing", "%REQ(x-missing)%"),
		keep,
		xdstest.Set("x-pct", "100%%"),
		xdstest.Set("x-original-path", "%REQ(:path)%"),
		xdstest.Set("x-original-authority", "%REQ(:authority)%"),
		xdstest.HVO("x-append", "two", xdstest.AppendOrAdd),
		xdstest.HVO("x-if-absent", "new", xdstest.IfAbsent),
		xdstest.HVO("x-if-exists", "new", xdstest.OverwriteExists),
		{Header: &corev3.HeaderValue{Key: "x-deprecated-false", Value: "set"}, Append: wrapperspb.Bool(false)},
		xdstest.Set("x-forwarded-proto", "https"), // after the edge headers, as in Envoy
	}
	mutated.RequestHeadersToRemove = []string{"x-forwarded-for", "x-drop"}
	mutated.ResponseHeadersToAdd = []*corev3.HeaderValueOption{
		xdstest.Set("x-resp-level", "route"), xdstest.Set("x-resp-route", "mut"), xdstest.Set("x-echo", "%REQ(x-in)%"),
		xdstest.Set("server", "mine"), // the connection manager's Server header wins, as in Envoy
	}
	mutated.ResponseHeadersToRemove = []string{"x-backend-secret"}

	split := weighted(prefixMatch("/split"), map[string]uint32{"A": 1, "B": 1})
	for _, c := range split.GetRoute().GetWeightedClusters().GetClusters() {
		c.RequestHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-cluster", c.Name), xdstest.Set("x-level", "cluster-"+c.Name)}
		c.ResponseHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-resp-cluster", c.Name)}
		c.HostRewriteSpecifier = &routev3.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: strings.ToLower(c.Name) + ".internal"}
	}
	split.ResponseHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-resp-route", "split")}

	direct := &routev3.Route{Match: prefixMatch("/direct"), Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
		Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "direct"}}}},
		ResponseHeadersToAdd: []*corev3.HeaderValueOption{xdstest.Set("x-resp-route", "direct"), xdstest.Set("x-echo", "%REQ(x-in)%")}}
	redirect := &routev3.Route{Match: prefixMatch("/redirect"), Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{
		HostRedirect: "elsewhere.example.com"}},
		ResponseHeadersToAdd: []*corev3.HeaderValueOption{xdstest.Set("x-resp-route", "redirect")}}
	unavailable := toCluster("empty", prefixMatch("/unavailable"))
	unavailable.ResponseHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-resp-route", "unavailable")}

	vh := vhost("hdr.example.com", mutated, split, direct, redirect, unavailable, toCluster("A", prefixMatch("/plain")))
	vh.RequestHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-level", "vhost"), xdstest.HVO("x-vhost", "yes", xdstest.AppendOrAdd)}
	vh.ResponseHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-resp-level", "vhost")}
	rc := routeConfig("ingress_http", vh, vhost("other.example.com"))
	rc.RequestHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-level", "global"), xdstest.HVO("x-global", "yes", xdstest.AppendOrAdd)}
	rc.ResponseHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-resp-level", "global"), xdstest.Set("x-resp-global", "yes")}
	rc.RequestHeadersToRemove = []string{"x-global-drop"}
	res.routes = []*routev3.RouteConfiguration{rc}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()

	t.Run("every level, in Envoy's order", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, p.httpURL(t, "/mut/x?q=1"), nil)
		req.Host = "hdr.example.com"
		for k, v := range map[string]string{"X-In": "abc", "X-Append": "one", "X-If-Absent": "old", "X-Drop": "d",
			"X-Global-Drop": "d", "X-Deprecated-False": "old", "X-Forwarded-For": "203.0.113.5"} {
			req.Header.Set(k, v)
		}
		r := do(t, c, req)
		if r.Status != http.StatusOK || r.Backend != "A" {
			t.Fatalf("got %d from %q: %s", r.Status, r.Backend, r.Body)
		}
		host, _ := os.Hostname()
		up := r.Echo.Header
		got := map[string][]string{"Host": {r.Echo.Host}, "Path": {r.Echo.Path}}
		want := map[string][]string{
			"Host": {"backend.internal"}, "Path": {"/rewritten/x?q=1"},
			// route, then virtual host, then route configuration: the least specific wins.
			"X-Level": {"global"}, "X-Vhost": {"yes"}, "X-Global": {"yes"},
			"X-Client-Ip": {"127.0.0.1"}, "X-Proto": {"HTTP/1.1"}, "X-Hostname": {host}, "X-From-Req": {"in=abc"},
			"X-From-Missing": nil, "X-Keep-Empty": {""}, "X-Pct": {"100%"},
			"X-Original-Path": {"/mut/x?q=1"}, "X-Original-Authority": {"hdr.example.com"},
			"X-Append": {"one", "two"}, "X-If-Absent": {"old"}, "X-If-Exists": nil, "X-Deprecated-False": {"set"},
			"X-Forwarded-Proto": {"https"}, "X-Forwarded-For": nil, "X-Drop": nil, "X-Global-Drop": nil,
		}
		for k := range want {
			if k != "Host" && k != "Path" {
				got[k] = up[k]
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("upstream request (-want +got):\n%s", diff)
		}
		gotResp := map[string]string{}
		for _, k := range []string{"X-Resp-Level", "X-Resp-Route", "X-Resp-Global", "X-Echo", "X-Backend-Secret", "Server"} {
			gotResp[k] = r.Header.Get(k)
		}
		wantResp := map[string]string{"X-Resp-Level": "global", "X-Resp-Route": "mut", "X-Resp-Global": "yes",
			"X-Echo": "abc", "X-Backend-Secret": "", "Server": "portico"}
		if diff := cmp.Diff(wantResp, gotResp); diff != "" {
			t.Errorf("response (-want +got):\n%s", diff)
		}
	})

	t.Run("HTTP/2", func(t *testing.T) {
		r := get(t, h2cClient(), p.httpURL(t, "/mut"), "hdr.example.com", nil)
		if got := r.Echo.Header.Get("X-Proto"); got != "HTTP/2" {
			t.Errorf("%%PROTOCOL%% over h2c = %q, want HTTP/2", got)
		}
	})

	t.Run("weighted cluster mutations only when picked", func(t *testing.T) {
		seen := map[string]bool{}
		for range 40 {
			r := get(t, c, p.httpURL(t, "/split"), "hdr.example.com", nil)
			seen[r.Backend] = true
			want := map[string]string{"backend": r.Backend, "x-cluster": r.Backend, "x-level": "global",
				"host": strings.ToLower(r.Backend) + ".internal", "x-resp-cluster": r.Backend, "x-resp-route": "split", "x-resp-level": "global"}
			got := map[string]string{"backend": r.Backend, "x-cluster": strings.Join(r.Echo.Header.Values("X-Cluster"), ","),
				"x-level": r.Echo.Header.Get("X-Level"), "host": r.Echo.Host, "x-resp-cluster": strings.Join(r.Header.Values("X-Resp-Cluster"), ","),
				"x-resp-route": r.Header.Get("X-Resp-Route"), "x-resp-level": r.Header.Get("X-Resp-Level")}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		}
		if !seen["A"] || !seen["B"] {
			t.Errorf("40 requests reached %v, want both clusters", seen)
		}
	})

	t.Run("responses the proxy generates", func(t *testing.T) {
		for _, tc := range []struct {
			path       string
			status     int
			route      string
			withGlobal bool
		}{
			{"/direct", 200, "direct", true},
			{"/redirect", 301, "redirect", true},
			{"/unavailable", 503, "unavailable", true},
			{"/nothing-routes-here", 404, "", false},
		} {
			r := get(t, c, p.httpURL(t, tc.path), "hdr.example.com", map[string]string{"X-In": "v"})
			if r.Status != tc.status {
				t.Fatalf("%s: status %d, want %d", tc.path, r.Status, tc.status)
			}
			global := ""
			if tc.withGlobal {
				global = "yes"
			}
			if r.Header.Get("X-Resp-Route") != tc.route || r.Header.Get("X-Resp-Global") != global {
				t.Errorf("%s: x-resp-route %q x-resp-global %q, want %q and %q", tc.path,
					r.Header.Get("X-Resp-Route"), r.Header.Get("X-Resp-Global"), tc.route, global)
			}
		}
		if r := get(t, c, p.httpURL(t, "/direct"), "hdr.example.com", map[string]string{"X-In": "v"}); r.Body != "direct" || r.Header.Get("X-Echo") != "v" {
			t.Errorf("direct response: body %q x-echo %q", r.Body, r.Header.Get("X-Echo"))
		}
	})

	t.Run("most_specific_header_mutations_wins", func(t *testing.T) {
		rc := proto.Clone(rc).(*routev3.RouteConfiguration)
		rc.MostSpecificHeaderMutationsWins = true
		res := res
		res.routes = []*routev3.RouteConfiguration{rc}
		cp.set("v2", res)
		p.waitVersion(t, "v2")
		r := get(t, c, p.httpURL(t, "/mut"), "hdr.example.com", nil)
		if up, down := r.Echo.Header.Get("X-Level"), r.Header.Get("X-Resp-Level"); up != "route" || down != "route" {
			t.Errorf("x-level upstream %q, x-resp-level %q: want the route's to win", up, down)
		}
		// A weighted cluster's own mutations come first whatever the flag says.
		r = get(t, c, p.httpURL(t, "/split"), "hdr.example.com", nil)
		if got := r.Echo.Header.Get("X-Level"); got != "vhost" {
			t.Errorf("x-level %q, want the virtual host's (no route level on /split)", got)
		}
	})

	t.Run("a route without mutations gets none", func(t *testing.T) {
		res := res
		res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("hdr.example.com", toCluster("A", prefixMatch("/"))))}
		cp.set("v3", res)
		p.waitVersion(t, "v3")
		r := get(t, c, p.httpURL(t, "/plain"), "hdr.example.com", nil)
		if r.Header.Get("X-Backend-Secret") != "s3cr3t" || r.Echo.Host != "hdr.example.com" || r.Echo.Header.Get("X-Level") != "" {
			t.Errorf("got secret %q host %q x-level %q", r.Header.Get("X-Backend-Secret"), r.Echo.Host, r.Echo.Header.Get("X-Level"))
		}
	})
}

// TestHostRewriteHeader: host_rewrite_header takes the Host from a request
// header as it is after the header mutations, over a weighted cluster's
// literal; an absent or empty header leaves the Host as it was.
func TestHostRewriteHeader(t *testing.T) {
	cp := startControlPlane(t)
	a := headerBackend(t, "A")
	res := resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		clusters:  []*clusterv3.Cluster{edsCluster("A")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("A", a.addr())},
	}
	fromHeader := func(ra *routev3.RouteAction) {
		ra.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteHeader{HostRewriteHeader: "x-rewrite"}
	}
	direct := withAction(toCluster("A", prefixMatch("/direct")), fromHeader)
	mutated := withAction(toCluster("A", prefixMatch("/mutated")), fromHeader)
	mutated.RequestHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-rewrite", "%REQ(x-other)%")}
	split := withAction(weighted(prefixMatch("/split"), map[string]uint32{"A": 1}), fromHeader)
	split.GetRoute().GetWeightedClusters().Clusters[0].HostRewriteSpecifier =
		&routev3.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: "cluster.internal"}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("hdr.example.com", direct, mutated, split))}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	for _, tc := range []struct {
		path    string
		headers map[string]string
		want    string
	}{
		{"/direct", map[string]string{"X-Rewrite": "to.example.com"}, "to.example.com"},
		{"/direct", nil, "hdr.example.com"},
		{"/direct", map[string]string{"X-Rewrite": ""}, "hdr.example.com"},
		{"/mutated", map[string]string{"X-Rewrite": "ignored", "X-Other": "other.example.com"}, "other.example.com"},
		{"/split", map[string]string{"X-Rewrite": "to.example.com"}, "to.example.com"},
		{"/split", nil, "cluster.internal"},
	} {
		r := get(t, c, p.httpURL(t, tc.path), "hdr.example.com", tc.headers)
		if r.Status != http.StatusOK || r.Echo.Host != tc.want {
			t.Errorf("%s with %v: status %d, Host %q; want 200 and %q", tc.path, tc.headers, r.Status, r.Echo.Host, tc.want)
		}
	}
}

// TestExchangeOperators: response headers name the endpoint that answered,
// and Envoy's response flags and details of the upstream's response and of
// the proxy's own; request headers name the Host.
func TestExchangeOperators(t *testing.T) {
	cp := startControlPlane(t)
	a := headerBackend(t, "A")
	res := resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		clusters:  []*clusterv3.Cluster{edsCluster("A"), edsCluster("empty")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("A", a.addr()), assignment("empty")},
	}
	exchange := []*corev3.HeaderValueOption{xdstest.Set("x-exchange", "%UPSTREAM_REMOTE_ADDRESS%|%RESPONSE_FLAGS%|%RESPONSE_CODE_DETAILS%")}
	up, down := toCluster("A", prefixMatch("/up")), toCluster("empty", prefixMatch("/down"))
	up.ResponseHeadersToAdd, down.ResponseHeadersToAdd = exchange, exchange
	up.RequestHeadersToAdd = []*corev3.HeaderValueOption{
		xdstest.Set("x-host", "%REQ(Host)%"),
		xdstest.Set("x-upstream", "%UPSTREAM_REMOTE_ADDRESS%"),
		xdstest.Set("x-local", "%DOWNSTREAM_LOCAL_ADDRESS%"),
		xdstest.Set("x-tls", "%DOWNSTREAM_TLS_VERSION%"),
	}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("hdr.example.com", up, down))}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()

	r := get(t, c, p.httpURL(t, "/up"), "hdr.example.com", nil)
	if got, want := r.Header.Get("X-Exchange"), a.addr()+"|-|via_upstream"; got != want {
		t.Errorf("upstream response: x-exchange %q, want %q", got, want)
	}
	got := map[string][]string{"X-Host": r.Echo.Header["X-Host"], "X-Upstream": r.Echo.Header["X-Upstream"],
		"X-Local": r.Echo.Header["X-Local"], "X-Tls": r.Echo.Header["X-Tls"]}
	// Empty values (plaintext, no upstream picked yet) drop the header.
	want := map[string][]string{"X-Host": {"hdr.example.com"}, "X-Local": {strings.TrimPrefix(p.httpURL(t, ""), "http://")},
		"X-Upstream": nil, "X-Tls": nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upstream request (-want +got):\n%s", diff)
	}
	r = get(t, c, p.httpURL(t, "/down"), "hdr.example.com", nil)
	if got, want := r.Header.Get("X-Exchange"), "|UH|no_healthy_upstream"; r.Status != http.StatusServiceUnavailable || got != want {
		t.Errorf("no endpoint: status %d, x-exchange %q; want 503 and %q", r.Status, got, want)
	}
}
