package proxy

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/proxy/router"
)

// routeEditor makes random edits to a route configuration: virtual hosts
// changed, added, removed and moved, configuration-level fields changed, and
// now and then an edit that makes it invalid.
type routeEditor struct {
	rng  *rand.Rand
	rc   *routev3.RouteConfiguration
	next int // for new virtual hosts' names
}

func (e *routeEditor) vhost() *routev3.VirtualHost {
	e.next++
	name := fmt.Sprintf("h%d", e.next)
	domains := []string{name + ".example.com"}
	switch e.rng.IntN(7) {
	case 0:
		domains = append(domains, "*."+name+".example.com")
	case 1:
		domains = append(domains, name+".*")
	case 2:
		domains = append(domains, strings.ToUpper(name)+".example.org:8080")
	case 3:
		// Nested wildcards: the longest suffix must win.
		domains = append(domains, "*"+name[1:]+".example.com", "*.example.com")
	case 4:
		if e.rng.IntN(3) == 0 {
			domains = append(domains, "*")
		}
	}
	vh := &routev3.VirtualHost{Name: name, Domains: domains}
	e.edit(vh)
	return vh
}

// edit replaces vh's routes and header mutations with random ones.
func (e *routeEditor) edit(vh *routev3.VirtualHost) {
	vh.Routes = nil
	for i := range 1 + e.rng.IntN(3) {
		var r *routev3.Route
		prefix := fmt.Sprintf("/p%d", e.rng.IntN(50))
		switch e.rng.IntN(5) {
		case 0:
			r = weighted(prefixMatch(prefix), map[string]uint32{"A": uint32(1 + e.rng.IntN(3)), "B": 1})
			r.GetRoute().GetWeightedClusters().Clusters[0].RequestHeadersToAdd = headersToAdd("x-c", prefix)
		case 1:
			r = &routev3.Route{Match: regexMatch(prefix + "/[0-9]+"), Action: &routev3.Route_DirectResponse{
				DirectResponse: &routev3.DirectResponseAction{Status: 200, Body: &corev3.DataSource{
					Specifier: &corev3.DataSource_InlineString{InlineString: strings.Repeat("b", e.rng.IntN(200))},
				}},
			}}
		default:
			r = toCluster([]string{"A", "B", "C"}[e.rng.IntN(3)], prefixMatch(prefix))
		}
		if i%2 == 1 {
			r.Name = "" // labelled by its index
		}
		if e.rng.IntN(3) == 0 {
			r.RequestHeadersToAdd = headersToAdd("x-r", prefix)
		}
		vh.Routes = append(vh.Routes, r)
	}
	vh.RequestHeadersToAdd = nil
	if e.rng.IntN(2) == 0 {
		vh.RequestHeadersToAdd = headersToAdd("x-v", vh.GetName())
	}
}

func headersToAdd(name, value string) []*corev3.HeaderValueOption {
	return []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: name, Value: value}}}
}

// step makes one random change to the configuration.
func (e *routeEditor) step() string {
	vhs := e.rc.VirtualHosts
	i := e.rng.IntN(len(vhs))
	switch n := e.rng.IntN(100); {
	case n < 40:
		e.edit(vhs[i])
		return "edit " + vhs[i].GetName()
	case n < 55:
		e.rc.VirtualHosts = slices.Insert(vhs, i, e.vhost())
		return "insert"
	case n < 65 && len(vhs) > 1:
		e.rc.VirtualHosts = slices.Delete(vhs, i, i+1)
		return "remove"
	case n < 70 && len(vhs) > 2:
		// Several removed in a row: the alignment loses its place.
		e.rc.VirtualHosts = slices.Delete(vhs, i, min(i+3, len(vhs)-1))
		return "remove a run"
	case n < 75:
		j := e.rng.IntN(len(vhs))
		vhs[i], vhs[j] = vhs[j], vhs[i]
		return "swap"
	case n < 80:
		e.rc.RequestHeadersToAdd = headersToAdd("x-g", fmt.Sprint(e.rng.IntN(3)))
		return "global headers"
	case n < 84:
		e.rc.MostSpecificHeaderMutationsWins = !e.rc.MostSpecificHeaderMutationsWins
		return "most specific wins"
	case n < 88:
		// Some direct responses may now be too long, or be once edited.
		longest := 0
		for _, vh := range vhs {
			for _, r := range vh.GetRoutes() {
				longest = max(longest, len(r.GetDirectResponse().GetBody().GetInlineString()))
			}
		}
		e.rc.MaxDirectResponseBodySizeBytes = wrapperspb.UInt32(uint32(longest - 10 + e.rng.IntN(50)))
		return "max body"
	case n < 92:
		// Invalid (domains is required): ValidateAll rejects it.
		vhs[i].Domains = nil
		return "no domains"
	case n < 95:
		// Valid, but the proxy does not support it.
		vhs[i].Cors = &routev3.CorsPolicy{}
		return "cors"
	default:
		// The domain of another virtual host.
		vhs[i].Domains = append(vhs[i].Domains, vhs[e.rng.IntN(len(vhs))].GetDomains()[0])
		return "duplicate domain"
	}
}

// fix undoes the invalid edits, so that the next steps have something to reuse.
func (e *routeEditor) fix() {
	seen := map[string]bool{}
	for _, vh := range e.rc.VirtualHosts {
		vh.Cors = nil
		vh.Domains = slices.DeleteFunc(vh.Domains, func(d string) bool {
			dup := seen[strings.ToLower(d)]
			seen[strings.ToLower(d)] = true
			return dup
		})
		if len(vh.Domains) == 0 {
			vh.Domains = []string{vh.GetName() + ".fixed.example.com"}
		}
	}
	e.rc.MaxDirectResponseBodySizeBytes = nil
}

func rdsResource(t testing.TB, rc *routev3.RouteConfiguration, version string) []*discoveryv3.Resource {
	return []*discoveryv3.Resource{{Name: rc.GetName(), Version: version, Resource: mustAny(t, rc)}}
}

// dumpTable writes out what a route table routes by, following pointers,
// but not the encodings kept for reuse nor how it is laid out (slots,
// overlay, the patch it came from): two tables that route alike have the
// same dump. (go-cmp compares as much but takes minutes on these tables.)
func dumpTable(t *router.RouteTable) string {
	var b strings.Builder
	dumpValue(&b, reflect.ValueOf(tableView(t)))
	for _, vh := range t.Vhosts {
		dumpValue(&b, reflect.ValueOf(*vh.VhostDef))
	}
	return b.String()
}

// routingView is a route table's routing, independent of its layout.
type routingView struct {
	Name     string
	Level    router.RouteConfigLevel
	Vhosts   []string
	Exact    map[string]string // domain -> virtual host
	Suffixes []string          // "affix -> virtual host", in lookup order but for equal lengths
	Prefixes []string
	Any      string
}

func tableView(t *router.RouteTable) routingView {
	v := routingView{Name: t.Name, Level: t.Level, Exact: map[string]string{}}
	for _, vh := range t.Vhosts {
		v.Vhosts = append(v.Vhosts, vh.Name)
	}
	for d, vh := range t.Domains.Exact.Flat() {
		v.Exact[d] = vh.Name
	}
	wildcards := func(ws []router.WildcardDomain) []string {
		var out []string
		for _, w := range ws {
			out = append(out, w.Affix+" -> "+w.Vhost.Name)
		}
		// Of two affixes of one length at most one matches a host: their order is not routing.
		slices.SortStableFunc(out, func(a, b string) int {
			la, lb := len(strings.Split(a, " -> ")[0]), len(strings.Split(b, " -> ")[0])
			if la != lb {
				return lb - la
			}
			return strings.Compare(a, b)
		})
		return out
	}
	v.Suffixes, v.Prefixes = wildcards(t.Domains.Suffixes), wildcards(t.Domains.Prefixes)
	if t.Domains.Any != nil {
		v.Any = t.Domains.Any.Name
	}
	return v
}

func dumpValue(b *strings.Builder, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		if v.Type() == reflect.TypeFor[*router.VirtualHost]() {
			// Written out once, after the table.
			fmt.Fprintf(b, "vhost(%q)", v.Elem().FieldByName("name").String())
			return
		}
		if v.Type() == reflect.TypeFor[*regexp.Regexp]() {
			fmt.Fprintf(b, "re(%q)", v.Elem().FieldByName("expr").String())
			return
		}
		dumpValue(b, v.Elem())
	case reflect.Struct:
		b.WriteString("{")
		for i := range v.NumField() {
			if f := v.Type().Field(i).Name; f != "Raw" && f != "Shell" {
				b.WriteString(f + ":")
				dumpValue(b, v.Field(i))
				b.WriteString(" ")
			}
		}
		b.WriteString("}")
	case reflect.Slice, reflect.Array:
		b.WriteString("[")
		for i := range v.Len() {
			dumpValue(b, v.Index(i))
			b.WriteString(" ")
		}
		b.WriteString("]")
	case reflect.Map:
		entries := make([]string, 0, v.Len())
		for it := v.MapRange(); it.Next(); {
			var e strings.Builder
			dumpValue(&e, it.Key())
			e.WriteString("=")
			dumpValue(&e, it.Value())
			entries = append(entries, e.String())
		}
		slices.Sort(entries)
		fmt.Fprintf(b, "map%v", entries)
	case reflect.Func:
		fmt.Fprintf(b, "func(nil=%t)", v.IsNil())
	case reflect.String:
		fmt.Fprintf(b, "%q", v.String())
	case reflect.Bool:
		fmt.Fprint(b, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		fmt.Fprint(b, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		fmt.Fprint(b, v.Uint())
	case reflect.Float32, reflect.Float64:
		fmt.Fprint(b, v.Float())
	default:
		fmt.Fprintf(b, "<%s>", v.Kind())
	}
}

// TestRouteReuseConvertsAsFromScratch: for random sequences of edits, the
// route table a proxy builds reusing the previous version's virtual hosts is
// the one it builds from scratch, a rejected version is rejected with the
// same reason, and the table in force is left as it was.
func TestRouteReuseConvertsAsFromScratch(t *testing.T) {
	var patched, overlaid int
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			e := &routeEditor{rng: rand.New(rand.NewPCG(seed, 1)), rc: routeConfig("ingress_http")}
			for range 20 {
				e.rc.VirtualHosts = append(e.rc.VirtualHosts, e.vhost())
			}
			// p reuses what it can; scratch, whose store stays empty, never does.
			p, scratch := New(Config{}), New(Config{})
			var inForce *routev3.RouteConfiguration
			for i := range 150 {
				what := "initial"
				if i > 0 {
					what = e.step()
				}
				if e.rng.IntN(10) == 0 {
					e.fix()
				}
				version := fmt.Sprint(i)
				rs := rdsResource(t, e.rc, version)
				got, gotErr := p.decode(resourcev3.RouteType, rs, nil)
				want, wantErr := scratch.decode(resourcev3.RouteType, rs, nil)
				if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Fatalf("step %d (%s): error %v, from scratch %v", i, what, gotErr, wantErr)
				}
				if inForce != nil {
					// The table in force is not touched by building the next one.
					old, _ := lookup[*router.RouteTable](p.store, resourcev3.RouteType, "ingress_http")
					fresh, _ := router.ConvertRouteConfig(inForce, httpFilters)
					if diff := cmp.Diff(dumpTable(fresh), dumpTable(old)); diff != "" {
						t.Fatalf("step %d (%s): the table in force changed (-was +is):\n%s", i, what, diff)
					}
				}
				if gotErr != nil {
					e.fix()
					continue
				}
				gotTable, wantTable := got["ingress_http"].(*router.RouteTable), want["ingress_http"].(*router.RouteTable)
				if diff := cmp.Diff(dumpTable(wantTable), dumpTable(gotTable)); diff != "" {
					t.Fatalf("step %d (%s): reused differs from scratch (-scratch +reused):\n%s", i, what, diff)
				}
				if gotTable.Patch != nil {
					patched++
				}
				if gotTable.Domains.Exact.Overlaid() {
					overlaid++
				}
				for _, host := range requestHosts(e.rng, e.rc) {
					if g, w := vhostName(gotTable.SelectVirtualHost(host)), vhostName(wantTable.SelectVirtualHost(host)); g != w {
						t.Fatalf("step %d (%s): host %q selects %q, from scratch %q", i, what, host, g, w)
					}
				}
				p.store.update(resourcev3.RouteType, version, got, nil)
				inForce = proto.Clone(e.rc).(*routev3.RouteConfiguration)
			}
		})
	}
	// Else the test would not be testing the patching.
	if patched == 0 || overlaid == 0 || overlaid == patched {
		t.Errorf("%d tables patched, %d with an overlay: want some, and some folded", patched, overlaid)
	}
}

// requestHosts returns request hosts that rc's domains match, in various
// cases, and some that they may not.
func requestHosts(rng *rand.Rand, rc *routev3.RouteConfiguration) []string {
	label := func() string { return []string{"a", "B", "x.y", "h1"}[rng.IntN(4)] }
	hosts := []string{"nowhere.example.net", ".example.com", "example.com"}
	for _, vh := range rc.GetVirtualHosts() {
		for _, d := range vh.GetDomains() {
			switch {
			case d == "*":
			case strings.HasPrefix(d, "*"):
				hosts = append(hosts, label()+d[1:], d[1:], strings.ToUpper(label()+d[1:]))
			case strings.HasSuffix(d, "*"):
				hosts = append(hosts, d[:len(d)-1]+label(), d[:len(d)-1])
			default:
				hosts = append(hosts, d, strings.ToUpper(d), "x"+d)
			}
		}
	}
	return hosts
}

func vhostName(vh *router.VirtualHost) string {
	if vh == nil {
		return "<none>"
	}
	return vh.Name
}

// TestRouteReuseIsReuse: a one-host edit converts that host only, and the
// next compilation keeps the other hosts' route stats and the clusters.
func TestRouteReuseIsReuse(t *testing.T) {
	p := New(Config{ListenerAddrs: map[string]string{"ingress_http": "127.0.0.1:0"}})
	t.Cleanup(p.shutdown)
	rc := routeConfig("ingress_http")
	var clusters, assignments []proto.Message
	for i := range 50 {
		rc.VirtualHosts = append(rc.VirtualHosts, ingressVhost(i, "/"))
		name := fmt.Sprintf("default/app-%05d/80", i)
		clusters = append(clusters, edsCluster(name))
		assignments = append(assignments, assignment(name, "127.0.0.1:1"))
	}
	feed(t, p, resourcev3.ClusterType, "v0", clusters...)
	feed(t, p, resourcev3.EndpointType, "v0", assignments...)
	feed(t, p, resourcev3.SecretType, "v0")
	feed(t, p, resourcev3.ListenerType, "v0", httpListener(t))
	feed(t, p, resourcev3.RouteType, "v1", rc)
	before := p.current.Load()
	rc.VirtualHosts[7] = ingressVhost(7, "/edited")
	feed(t, p, resourcev3.RouteType, "v2", rc)
	after := p.current.Load()
	if after.version != "v2" {
		t.Fatalf("applied %q, want v2", after.version)
	}
	oldChain, newChain := before.listeners["ingress_http"].Chains[""], after.listeners["ingress_http"].Chains[""]
	for i, vh := range newChain.Routes.Vhosts {
		old := oldChain.Routes.Vhosts[i]
		if reused := vh.VhostDef == old.VhostDef; reused != (i != 7) {
			t.Errorf("virtual host %d reused: %t", i, reused)
		}
		if sameStats := &newChain.Stats.Vhosts[i].Routes[0] == &oldChain.Stats.Vhosts[i].Routes[0]; sameStats != (i != 7) {
			t.Errorf("virtual host %d kept its stats table: %t", i, sameStats)
		}
	}
	if !after.clusters.Shares(&before.clusters) {
		t.Error("the clusters were compiled again though the routes use the same ones")
	}
}

// TestRouteReuseRejectsInvalidChangedHost: a response that changes one
// virtual host validly and another invalidly is rejected whole, with the
// reason a from-scratch decode gives, and the previous routes keep serving;
// the next valid edit applies.
func TestRouteReuseRejectsInvalidChangedHost(t *testing.T) {
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	routes := func(a, b string) *routev3.RouteConfiguration {
		rc := routeConfig("ingress_http",
			vhost("a.example.com", toCluster(a, prefixMatch("/"))),
			vhost("b.example.com", toCluster(b, prefixMatch("/"))),
			vhost("c.example.com", toCluster("C", prefixMatch("/"))))
		for i := range 20 {
			rc.VirtualHosts = append(rc.VirtualHosts, vhost(fmt.Sprintf("other-%d.example.com", i), toCluster("C", prefixMatch("/"))))
		}
		return rc
	}
	res.routes = []*routev3.RouteConfiguration{routes("A", "B")}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	waitFor(t, "the v1 ACK of routes", func() bool { return cp.acked(resourcev3.RouteType, "v1") })
	expect := func(when string, want map[string]string) {
		t.Helper()
		for host, backend := range want {
			if r := get(t, noRedirectClient(), p.httpURL(t, "/"), host, nil); r.Backend != backend {
				t.Errorf("%s: %s got %+v, want backend %s", when, host, r, backend)
			}
		}
	}
	expect("v1", map[string]string{"a.example.com": "A", "b.example.com": "B", "c.example.com": "C"})

	bad := routes("C", "")
	// An empty cluster name: VirtualHost.ValidateAll rejects it.
	res.routes = []*routev3.RouteConfiguration{bad}
	cp.set("v2", res)
	var nack *discoveryv3.DeltaDiscoveryRequest
	waitFor(t, "NACK", func() bool {
		nacks := cp.nacks()
		if len(nacks) > 0 {
			nack = nacks[0]
		}
		return nack != nil
	})
	_, want := New(Config{}).decode(resourcev3.RouteType, rdsResource(t, bad, "v2"), nil)
	if got := nack.GetErrorDetail().GetMessage(); want == nil || got != want.Error() {
		t.Errorf("NACK detail %q, want %v", got, want)
	}
	if v := cp.responseVersion(nack); v != "v2" {
		t.Errorf("NACK of %q, want v2", v)
	}
	expect("after the NACK", map[string]string{"a.example.com": "A", "b.example.com": "B", "c.example.com": "C"})

	res.routes = []*routev3.RouteConfiguration{routes("A", "C")}
	cp.set("v3", res)
	p.waitVersion(t, "v3")
	expect("v3", map[string]string{"a.example.com": "A", "b.example.com": "C", "c.example.com": "C"})
}
