package proxy

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/portico-dev/portico/internal/proxy/router"
	"github.com/portico-dev/portico/internal/proxy/xdsclient"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// vhdsConfig is a route configuration whose virtual hosts, but its inline
// ones, come from VHDS: ingress_http as the server sends it to a proxy that
// asks for VHDS.
func vhdsConfig(name string, inline ...*routev3.VirtualHost) *routev3.RouteConfiguration {
	rc := routeConfig(name, inline...)
	rc.Vhds = &routev3.Vhds{ConfigSource: adsSource()}
	return rc
}

// vhdsHosts returns vhs as VirtualHost resources of the route configuration
// ns: named "<ns>/<name>", the message's name included.
func vhdsHosts(ns string, vhs ...*routev3.VirtualHost) []*routev3.VirtualHost {
	out := make([]*routev3.VirtualHost, len(vhs))
	for i, vh := range vhs {
		c := proto.Clone(vh).(*routev3.VirtualHost)
		c.Name = ns + "/" + vh.GetName()
		out[i] = c
	}
	return out
}

// routeTo is a named route of every path to cluster.
func routeTo(cluster, name string) *routev3.Route {
	r := toCluster(cluster, prefixMatch("/"))
	r.Name = name
	return r
}

// httpTable is the route table of ingress_http in force.
func httpTable(p *testProxy) *router.RouteTable {
	return p.current.Load().listeners["ingress_http"].Chains[""].Routes
}

// defsByName are the converted virtual hosts of t by name.
func defsByName(t *router.RouteTable) map[string]*router.VhostDef {
	m := make(map[string]*router.VhostDef, len(t.Vhosts))
	for _, vh := range t.Vhosts {
		m[vh.Name] = vh.VhostDef
	}
	return m
}

// sentIn lists the resources the server sent to the proxy's latest stream
// in responses of version: "<type> <name>", and "-<type> <name>" for those
// removed.
func (cp *controlPlane) sentIn(version string) []string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	var out []string
	for k, resp := range cp.sent {
		if k.stream != cp.lastStream || resp.GetSystemVersionInfo() != version {
			continue
		}
		for _, r := range resp.GetResources() {
			out = append(out, xdsclient.ShortTypeName(resp.GetTypeUrl())+" "+r.GetName())
		}
		for _, name := range resp.GetRemovedResources() {
			out = append(out, "-"+xdsclient.ShortTypeName(resp.GetTypeUrl())+" "+name)
		}
	}
	slices.Sort(out)
	return out
}

// expectBackends checks which backend answers each host (a backend "404":
// none, the host is not routed).
func expectBackends(t *testing.T, p *testProxy, want map[string]string) {
	t.Helper()
	c := noRedirectClient()
	for _, host := range slices.Sorted(maps.Keys(want)) {
		r := get(t, c, p.httpURL(t, "/x"), host, nil)
		got := r.Backend
		if r.Status == 404 {
			got = "404"
		}
		if got != want[host] {
			t.Errorf("%s answered by %q (status %d), want %q", host, got, r.Status, want[host])
		}
	}
}

// TestVHDSServesVirtualHosts: the hosts of a VHDS route configuration
// answer, its inline ones too, under their host names in the metrics and
// the access log; the proxy asks for VHDS in its node's metadata.
func TestVHDSServesVirtualHosts(t *testing.T) {
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{vhdsConfig("ingress_http", vhost("inline.test", routeTo("C", "to-C")))}
	res.vhosts = vhdsHosts("ingress_http", vhost("a.test", routeTo("A", "to-A")), vhost("b.test", routeTo("B", "to-B")))
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	expectBackends(t, p, map[string]string{"a.test": "A", "b.test": "B", "inline.test": "C", "unknown.test": "404"})

	for _, vh := range []string{"a.test", "b.test", "inline.test"} {
		route := map[string]string{"a.test": "to-A", "b.test": "to-B", "inline.test": "to-C"}[vh]
		waitMetric(t, p, "portico_proxy_requests_total",
			map[string]string{"listener": "ingress_http", "vhost": vh, "route": route, "code_class": "2xx"}, 1)
	}
	for _, vh := range []string{"ingress_http/a.test", "ingress_http/b.test"} {
		if got := seriesOf(t, p, "portico_proxy_requests_total", "vhost", vh); len(got) != 0 {
			t.Errorf("series labelled with the resource name %q: %v", vh, got)
		}
	}
	waitFor(t, "4 access log lines", func() bool { return len(p.logs.records("access")) == 4 })
	var vhosts []string
	for _, rec := range p.logs.records("access") {
		vhosts = append(vhosts, fmt.Sprint(rec["vhost"]))
		if vh := rec["vhost"]; vh != "(none)" && !strings.HasPrefix(fmt.Sprint(rec["route_name"]), "to-") {
			t.Errorf("access log of %v: route_name %q, want its route's", vh, rec["route_name"])
		}
	}
	slices.Sort(vhosts)
	if want := []string{"(none)", "a.test", "b.test", "inline.test"}; !slices.Equal(vhosts, want) {
		t.Errorf("access log vhosts %q, want %q", vhosts, want)
	}

	var node *corev3.Node
	cp.mu.Lock()
	for _, r := range cp.requests {
		if r.GetNode() != nil {
			node = r.GetNode()
			break
		}
	}
	cp.mu.Unlock()
	if v, ok := node.GetMetadata().GetFields()[xdsclient.VHDSMetadataKey]; !ok || !v.GetBoolValue() {
		t.Errorf("node metadata %v, want %q: true", node.GetMetadata(), xdsclient.VHDSMetadataKey)
	}
}

// TestVHDSNotReadyBeforeItsVirtualHosts: a VHDS route configuration arrives
// before its hosts (ADS order); the proxy must not apply it, empty, and call
// itself ready, answering 404 for every host until the hosts arrive.
func TestVHDSNotReadyBeforeItsVirtualHosts(t *testing.T) {
	cp := startControlPlane(t)
	release := cp.hold(resourcev3.VirtualHostType)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{vhdsConfig("ingress_http")}
	res.vhosts = vhdsHosts("ingress_http", vhost("a.test", routeTo("A", "to-A")))
	cp.set("v1", res)
	p := startProxy(t, cp)
	// The proxy applies a response before it ACKs it, so the route
	// configuration is either applied, empty (the proxy then calls itself
	// ready), or kept waiting for its hosts.
	waiting := func() bool {
		for _, rec := range p.logs.records("keeping the previous configuration") {
			if strings.Contains(fmt.Sprint(rec["reason"]), "VHDS") {
				return true
			}
		}
		return false
	}
	waitFor(t, "the route configuration handled", func() bool { return waiting() || p.Ready() })
	if p.Ready() {
		t.Fatal("ready with the route configuration's virtual hosts not received")
	}
	release()
	p.waitVersion(t, "v1")
	expectBackends(t, p, map[string]string{"a.test": "A", "unknown.test": "404"})
}

// TestVHDSOneHostChangePatchesTheTable: a changed, added or removed host is
// sent alone, and the table in force is patched with it: the other hosts
// keep their converted form, and answer as before.
func TestVHDSOneHostChangePatchesTheTable(t *testing.T) {
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{vhdsConfig("ingress_http")}
	hosts := []*routev3.VirtualHost{vhost("a.test", routeTo("A", "to-A")), vhost("b.test", routeTo("B", "to-B")),
		vhost("c.test", routeTo("C", "to-C"))}
	res.vhosts = vhdsHosts("ingress_http", hosts...)
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	expectBackends(t, p, map[string]string{"a.test": "A", "b.test": "B", "c.test": "C"})

	// step sets hosts as version, whose only change is the VirtualHost
	// changed (added, removed); the others keep their defs.
	step := func(version string, changed string, backends map[string]string, hosts ...*routev3.VirtualHost) {
		t.Helper()
		before := httpTable(p)
		res.vhosts = vhdsHosts("ingress_http", hosts...)
		cp.set(version, res)
		p.waitVersion(t, version)
		want := []string{"VirtualHost ingress_http/" + changed}
		if backends[changed] == "404" {
			want[0] = "-" + want[0]
		}
		if got := cp.sentIn(version); !slices.Equal(got, want) {
			t.Errorf("%s: sent %q, want %q", version, got, want)
		}
		after := httpTable(p)
		if !after.PatchedFrom(before) {
			t.Errorf("%s: the table was not patched from the one in force", version)
		}
		was, is := defsByName(before), defsByName(after)
		for name, def := range was {
			if name != changed && is[name] != def {
				t.Errorf("%s: virtual host %s was converted again, though unchanged", version, name)
			}
		}
		if was[changed] != nil && is[changed] == was[changed] {
			t.Errorf("%s: virtual host %s kept its previous def", version, changed)
		}
		expectBackends(t, p, backends)
	}
	a, c := hosts[0], hosts[2]
	step("v2", "b.test", map[string]string{"a.test": "A", "b.test": "C", "c.test": "C"}, a, vhost("b.test", routeTo("C", "to-C")), c)
	step("v3", "ab.test", map[string]string{"a.test": "A", "ab.test": "B", "b.test": "C", "c.test": "C"},
		a, vhost("ab.test", routeTo("B", "to-B")), vhost("b.test", routeTo("C", "to-C")), c)
	step("v4", "c.test", map[string]string{"a.test": "A", "ab.test": "B", "b.test": "C", "c.test": "404"},
		a, vhost("ab.test", routeTo("B", "to-B")), vhost("b.test", routeTo("C", "to-C")))
	waitMetric(t, p, "portico_proxy_requests_total",
		map[string]string{"listener": "ingress_http", "vhost": "a.test", "route": "to-A", "code_class": "2xx"}, 4)
}

// TestVHDSVirtualHostsBeforeTheirRouteConfiguration: VirtualHosts are kept
// until their route configuration arrives, and while it is gone; a new
// version of the configuration converts them again at its level; a
// configuration whose namespace has no hosts routes nothing.
func TestVHDSVirtualHostsBeforeTheirRouteConfiguration(t *testing.T) {
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.vhosts = vhdsHosts("ingress_http", vhost("a.test", routeTo("A", "to-A")), vhost("b.test", routeTo("B", "to-B")))
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	if p.current.Load() != nil {
		t.Fatal("a configuration was applied without its route configuration")
	}

	res.routes = []*routev3.RouteConfiguration{vhdsConfig("ingress_http")}
	cp.set("v2", res)
	p.waitVersion(t, "v2")
	if got, want := cp.sentIn("v2"), []string{"RouteConfiguration ingress_http"}; !slices.Equal(got, want) {
		t.Errorf("v2: sent %q, want %q", got, want)
	}
	expectBackends(t, p, map[string]string{"a.test": "A", "b.test": "B"})

	level := func(version, value string) {
		t.Helper()
		shell := vhdsConfig("ingress_http")
		shell.RequestHeadersToAdd = headersToAdd("x-level", value)
		res.routes = []*routev3.RouteConfiguration{shell}
		cp.set(version, res)
		p.waitVersion(t, version)
		for _, host := range []string{"a.test", "b.test"} {
			if r := get(t, noRedirectClient(), p.httpURL(t, "/"), host, nil); r.Echo.Header.Get("X-Level") != value {
				t.Errorf("%s: %s got x-level %q, want %q", version, host, r.Echo.Header.Get("X-Level"), value)
			}
		}
	}
	level("v3", "config")

	// Gone, the configuration in force stays (the listener needs it); back,
	// it takes the VirtualHosts kept meanwhile, which are not sent again.
	res.routes = nil
	cp.set("v4", res)
	p.waitVersion(t, "v4")
	expectBackends(t, p, map[string]string{"a.test": "A", "b.test": "B"})
	level("v5", "again")
	if got, want := cp.sentIn("v5"), []string{"RouteConfiguration ingress_http"}; !slices.Equal(got, want) {
		t.Errorf("v5: sent %q, want %q", got, want)
	}

	res.vhosts = nil
	cp.set("v6", res)
	p.waitVersion(t, "v6")
	expectBackends(t, p, map[string]string{"a.test": "404", "b.test": "404"})
}

// TestVHDSBadVirtualHostIsNACKed: a VirtualHost response with a host that
// is invalid, or that its table refuses, is NACKed naming that host, and
// the table in force keeps serving.
func TestVHDSBadVirtualHostIsNACKed(t *testing.T) {
	direct := func(name string, bytes int) *routev3.VirtualHost {
		return vhost(name, &routev3.Route{Match: prefixMatch("/"), Action: &routev3.Route_DirectResponse{
			DirectResponse: &routev3.DirectResponseAction{Status: 200, Body: &corev3.DataSource{
				Specifier: &corev3.DataSource_InlineString{InlineString: strings.Repeat("x", bytes)},
			}},
		}})
	}
	// A delta server takes a NACKed resource as sent: the responses after
	// the bad one's change nothing else, so that the fixed one leads to
	// what the proxy holds.
	good := vhdsHosts("ingress_http", vhost("a.test", routeTo("A", "to-A")), vhost("b.test", routeTo("B", "to-B")),
		direct("short.test", 64))
	noDomains := vhdsHosts("ingress_http", vhost("bad.test", routeTo("A", "to-A")))[0]
	noDomains.Domains = nil
	noNamespace := vhost("bad.test", routeTo("A", "to-A"))
	duplicate := vhdsHosts("ingress_http", vhost("dup.test", routeTo("C", "to-C")))[0]
	duplicate.Domains = append(duplicate.Domains, "A.test")
	becomesDuplicate := vhdsHosts("ingress_http", vhost("b.test", routeTo("B", "to-B")))[0]
	becomesDuplicate.Domains = []string{"a.test"}
	for _, tc := range []struct {
		name     string
		vhosts   []*routev3.VirtualHost
		wantText string
	}{
		{"invalid", append(slices.Clone(good), noDomains), `VirtualHost "ingress_http/bad.test": invalid`},
		{"no namespace", append(slices.Clone(good), noNamespace),
			`VirtualHost "bad.test": the name is not <route configuration>/<virtual host>`},
		{"duplicate domain", append(slices.Clone(good), duplicate),
			`VirtualHost "ingress_http/dup.test": domain "a.test" is in virtual hosts "a.test" and "dup.test"`},
		{"changed into a duplicate", []*routev3.VirtualHost{good[0], becomesDuplicate, good[2]},
			`VirtualHost "ingress_http/b.test": domain "a.test" is in virtual hosts "a.test" and "b.test"`},
		{"direct response too long", append(slices.Clone(good), vhdsHosts("ingress_http", direct("long.test", 65))...),
			`VirtualHost "ingress_http/long.test": virtual host "long.test": route #0`},
		{"unsupported", append(slices.Clone(good), vhdsHosts("ingress_http", vhost("cors.test", routeTo("A", "to-A")))[0]),
			`VirtualHost "ingress_http/cors.test": cors is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "unsupported" {
				tc.vhosts[len(tc.vhosts)-1].Cors = &routev3.CorsPolicy{}
			}
			cp := startControlPlane(t)
			res, _ := threeBackends(t)
			res.listeners = []*listenerv3.Listener{httpListener(t)}
			shell := vhdsConfig("ingress_http")
			shell.MaxDirectResponseBodySizeBytes = wrapperspb.UInt32(64)
			res.routes = []*routev3.RouteConfiguration{shell}
			res.vhosts = good
			cp.set("v1", res)
			p := startProxy(t, cp)
			p.waitVersion(t, "v1")
			before := httpTable(p)

			res.vhosts = tc.vhosts
			cp.set("v2", res)
			cp.expectNACK(t, resourcev3.VirtualHostType, "v2", tc.wantText)
			if httpTable(p) != before {
				t.Error("the table in force changed")
			}
			expectBackends(t, p, map[string]string{"a.test": "A", "b.test": "B", "bad.test": "404", "dup.test": "404"})

			res.vhosts = append(slices.Clone(good), vhdsHosts("ingress_http", vhost("c.test", routeTo("C", "to-C")))...)
			cp.set("v3", res)
			p.waitVersion(t, "v3")
			expectBackends(t, p, map[string]string{"a.test": "A", "b.test": "B", "c.test": "C", "bad.test": "404"})
		})
	}
}

// TestVHDSRejectsOtherConfigSources: only ADS can carry the virtual hosts.
func TestVHDSRejectsOtherConfigSources(t *testing.T) {
	rc := vhdsConfig("ingress_http")
	rc.Vhds.ConfigSource = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Self{Self: &corev3.SelfConfigSource{}},
		ResourceApiVersion: corev3.ApiVersion_V3}
	p := New(Config{})
	t.Cleanup(p.shutdown)
	_, err := p.decode(resourcev3.RouteType, rdsResource(t, rc, "v1"), nil)
	if want := "vhds: only an ADS config source is supported"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one containing %q", err, want)
	}
}

// vhdsForm splits rc as the server sends it to a VHDS client: the shell, and
// the VirtualHosts by resource name.
func vhdsForm(rc *routev3.RouteConfiguration) (*routev3.RouteConfiguration, map[string]*routev3.VirtualHost) {
	shell := proto.Clone(rc).(*routev3.RouteConfiguration)
	shell.VirtualHosts = nil
	shell.Vhds = &routev3.Vhds{ConfigSource: adsSource()}
	hosts := make(map[string]*routev3.VirtualHost, len(rc.GetVirtualHosts()))
	for _, vh := range vhdsHosts(rc.GetName(), rc.GetVirtualHosts()...) {
		hosts[vh.GetName()] = vh
	}
	return shell, hosts
}

// inlineForm is the route configuration of shell with hosts inline, in the
// order of their names, as a proxy that does not ask for VHDS receives it.
func inlineForm(shell *routev3.RouteConfiguration, hosts map[string]*routev3.VirtualHost) *routev3.RouteConfiguration {
	rc := proto.Clone(shell).(*routev3.RouteConfiguration)
	rc.Vhds = nil
	for _, name := range slices.Sorted(maps.Keys(hosts)) {
		vh := proto.Clone(hosts[name]).(*routev3.VirtualHost)
		vh.Name = strings.TrimPrefix(name, rc.GetName()+"/")
		rc.VirtualHosts = append(rc.VirtualHosts, vh)
	}
	return rc
}

// scratchTable converts rc as a whole, as the proxy does when it is received
// in one response.
func scratchTable(rc *routev3.RouteConfiguration) (*router.RouteTable, error) {
	if err := rc.ValidateAll(); err != nil {
		return nil, err
	}
	return router.ConvertRouteConfig(rc, httpFilters)
}

// TestVHDSAppliesAsFullConversion: for random sequences of edits sent as
// VHDS (a new shell when it changed, then the VirtualHosts that changed),
// the table in force is the one the same configuration converts to when
// sent inline, a response is rejected when that one would be, and a
// rejected response leaves the table in force as it was.
func TestVHDSAppliesAsFullConversion(t *testing.T) {
	var patched, rejected, responses int
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			e := &routeEditor{rng: rand.New(rand.NewPCG(seed, 2)), rc: routeConfig("ingress_http")}
			for range 20 {
				e.rc.VirtualHosts = append(e.rc.VirtualHosts, e.vhost())
			}
			p := New(Config{})
			t.Cleanup(p.shutdown)
			var shellInForce *routev3.RouteConfiguration
			hostsInForce := map[string]*routev3.VirtualHost{}
			inForce := func() *router.RouteTable {
				tb, _ := lookup[*router.RouteTable](p.store, resourcev3.RouteType, "ingress_http")
				return tb
			}
			// check sends one response and compares the outcome with
			// converting what it leads to in full.
			check := func(i int, what, typeURL string, rs []*discoveryv3.Resource, removed []string,
				shell *routev3.RouteConfiguration, hosts map[string]*routev3.VirtualHost) bool {
				t.Helper()
				want, wantErr := scratchTable(inlineForm(shell, hosts))
				before := inForce()
				responses++
				decoded, err := p.decode(typeURL, rs, removed)
				if (err != nil) != (wantErr != nil) {
					t.Fatalf("step %d (%s) %s: error %v, converted in full %v", i, what, xdsclient.ShortTypeName(typeURL), err, wantErr)
				}
				if err != nil {
					rejected++
					if inForce() != before {
						t.Fatalf("step %d (%s): a rejected response changed the table in force", i, what)
					}
					return false
				}
				version := fmt.Sprint(i)
				p.accept(context.Background(), typeURL, version, decoded, removed)
				got := inForce()
				if diff := cmp.Diff(dumpTable(want), dumpTable(got)); diff != "" {
					t.Fatalf("step %d (%s) %s: differs from a full conversion (-full +vhds):\n%s", i, what, xdsclient.ShortTypeName(typeURL), diff)
				}
				if got.Patch != nil {
					patched++
				}
				return true
			}
			for i := range 150 {
				what := "initial"
				if i > 0 {
					what = e.step()
				}
				if e.rng.IntN(10) == 0 {
					e.fix()
				}
				shell, hosts := vhdsForm(e.rc)
				version := fmt.Sprint(i)
				if shellInForce == nil || !proto.Equal(shell, shellInForce) {
					if check(i, what, resourcev3.RouteType, rdsResource(t, shell, version), nil, shell, hostsInForce) {
						shellInForce = shell
					}
				}
				var rs []*discoveryv3.Resource
				var removed []string
				for _, name := range slices.Sorted(maps.Keys(hosts)) {
					if old := hostsInForce[name]; old == nil || !proto.Equal(old, hosts[name]) {
						rs = append(rs, &discoveryv3.Resource{Name: name, Version: version, Resource: mustAny(t, hosts[name])})
					}
				}
				for name := range hostsInForce {
					if hosts[name] == nil {
						removed = append(removed, name)
					}
				}
				if len(rs)+len(removed) == 0 || shellInForce == nil {
					continue
				}
				if check(i, what, resourcev3.VirtualHostType, rs, removed, shellInForce, hosts) {
					hostsInForce = hosts
				} else {
					e.fix()
				}
			}
		})
	}
	t.Logf("%d responses: %d rejected, %d tables patched", responses, rejected, patched)
	if patched == 0 || rejected == 0 {
		t.Error("no table was patched, or no response rejected")
	}
}

// TestVHDSLargeChangeBuildsInFull: a change too large for a patch to pay
// builds the table in full from the runs of hosts it keeps, as a full
// conversion would.
func TestVHDSLargeChangeBuildsInFull(t *testing.T) {
	p := New(Config{})
	t.Cleanup(p.shutdown)
	rc := routeConfig("ingress_http")
	for i := range 40 {
		rc.VirtualHosts = append(rc.VirtualHosts, ingressVhost(i, "/"))
	}
	shell, _ := vhdsForm(rc)
	feed(t, p, resourcev3.RouteType, "v1", shell)
	feed(t, p, resourcev3.VirtualHostType, "v1", vhdsMessages(rc.GetName(), rc.VirtualHosts...)...)
	before, _ := lookup[*router.RouteTable](p.store, resourcev3.RouteType, "ingress_http")

	// The first and last ten change: the twenty between are one run.
	var changed []proto.Message
	for i := range rc.VirtualHosts {
		if i >= 10 && i < 30 {
			continue
		}
		rc.VirtualHosts[i] = ingressVhost(i, "/changed")
		changed = append(changed, vhdsMessages(rc.GetName(), rc.VirtualHosts[i])...)
	}
	feed(t, p, resourcev3.VirtualHostType, "v2", changed...)
	got, _ := lookup[*router.RouteTable](p.store, resourcev3.RouteType, "ingress_http")
	if got.Patch != nil {
		t.Fatal("the table was patched, though the change is too large for that to pay")
	}
	_, hosts := vhdsForm(rc)
	want, err := scratchTable(inlineForm(shell, hosts))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(dumpTable(want), dumpTable(got)); diff != "" {
		t.Errorf("differs from a full conversion (-full +vhds):\n%s", diff)
	}
	for i := 10; i < 30; i++ {
		if got.Vhosts[i].VhostDef != before.Vhosts[i].VhostDef {
			t.Errorf("virtual host %s was converted again, though unchanged", got.Vhosts[i].Name)
		}
	}
}

// TestVHDSReconnectResendsOnlyWhatChanged: a new stream starts from the
// VirtualHosts the proxy holds, as from its other resources.
func TestVHDSReconnectResendsOnlyWhatChanged(t *testing.T) {
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{vhdsConfig("ingress_http")}
	res.vhosts = vhdsHosts("ingress_http", vhost("a.test", routeTo("A", "to-A")), vhost("b.test", routeTo("B", "to-B")))
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")

	cp.stop()
	res.vhosts = vhdsHosts("ingress_http", vhost("a.test", routeTo("A", "to-A")), vhost("b.test", routeTo("C", "to-C")))
	cp.set("v2", res)
	cp.restart()
	p.waitVersion(t, "v2")
	if got, want := cp.sentIn("v2"), []string{"VirtualHost ingress_http/b.test"}; !slices.Equal(got, want) {
		t.Errorf("sent after reconnecting %q, want %q", got, want)
	}
	expectBackends(t, p, map[string]string{"a.test": "A", "b.test": "C"})
}
