package proxy

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/internal/proxy/router"
)

// benchHosts is the size of the route configuration of the editing benchmarks:
// the 10,000 Ingresses of bench/.
const benchHosts = 10000

// ingressVhost is a virtual host shaped like the translator's for one Ingress:
// its host, a named prefix route with a timeout to its Service's cluster.
func ingressVhost(i int, prefix string) *routev3.VirtualHost {
	host := fmt.Sprintf("app-%05d.example.com", i)
	cluster := fmt.Sprintf("default/app-%05d/80", i)
	return &routev3.VirtualHost{Name: host, Domains: []string{host}, Routes: []*routev3.Route{{
		Name:  fmt.Sprintf("ingress/default/app-%05d:prefix:%s", i, prefix),
		Match: prefixMatch(prefix),
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
			Timeout:          durationpb.New(15 * time.Second),
		}},
	}}}
}

// feed decodes and accepts one response as the ADS client does, without the
// gRPC stream: the proxy's own work on a response.
func feed(tb testing.TB, p *Proxy, typeURL, version string, msgs ...proto.Message) {
	tb.Helper()
	rs := make([]*discoveryv3.Resource, len(msgs))
	for i, m := range msgs {
		rs[i] = &discoveryv3.Resource{Name: resourceName(m), Version: version, Resource: mustAny(tb, m)}
	}
	feedResources(tb, p, typeURL, version, rs)
}

func feedResources(tb testing.TB, p *Proxy, typeURL, version string, rs []*discoveryv3.Resource) {
	tb.Helper()
	decoded, err := p.decode(typeURL, rs, nil)
	if err != nil {
		tb.Fatal(err)
	}
	p.accept(context.Background(), typeURL, version, decoded, nil)
}

// benchProxy is a proxy that applied benchHosts Ingresses' clusters,
// endpoints and virtual hosts (rc): inline, or with vhds as the VirtualHost
// resources of a VHDS rc.
func benchProxy(b *testing.B, vhds bool) (*Proxy, *routev3.RouteConfiguration) {
	p := New(Config{ListenerAddrs: map[string]string{"ingress_http": "127.0.0.1:0"}})
	b.Cleanup(p.shutdown)
	clusters := make([]proto.Message, benchHosts)
	assignments := make([]proto.Message, benchHosts)
	rc := &routev3.RouteConfiguration{Name: "ingress_http"}
	for i := range benchHosts {
		name := fmt.Sprintf("default/app-%05d/80", i)
		clusters[i] = edsCluster(name)
		assignments[i] = assignment(name, "127.0.0.1:1")
		rc.VirtualHosts = append(rc.VirtualHosts, ingressVhost(i, "/"))
	}
	feed(b, p, resourcev3.ClusterType, "v0", clusters...)
	feed(b, p, resourcev3.EndpointType, "v0", assignments...)
	feed(b, p, resourcev3.SecretType, "v0")
	feed(b, p, resourcev3.ListenerType, "v0", httpListener(b))
	if vhds {
		feed(b, p, resourcev3.RouteType, "v0", vhdsConfig(rc.GetName()))
		feed(b, p, resourcev3.VirtualHostType, "v0", vhdsMessages(rc.GetName(), rc.VirtualHosts...)...)
	} else {
		feed(b, p, resourcev3.RouteType, "v0", rc)
	}
	if p.current.Load() == nil {
		b.Fatal("the configuration was not applied")
	}
	return p, rc
}

// BenchmarkApplyOneVirtualHostChange measures the proxy's work on an RDS
// response (decode, validate, convert, compile, apply) for a route
// configuration of benchHosts virtual hosts of which one changed: what each
// edit of one Ingress costs the embedded proxy at that scale.
func BenchmarkApplyOneVirtualHostChange(b *testing.B) {
	benchResponses(b, false, func(i int, rc *routev3.RouteConfiguration) []benchResponse {
		editOne(i, rc)
		return []benchResponse{{resourcev3.RouteType, rc}}
	})
}

// BenchmarkApplyOneVirtualHostChangeVHDS is BenchmarkApplyOneVirtualHostChange
// for a proxy that asked for VHDS: the response is the one VirtualHost.
func BenchmarkApplyOneVirtualHostChangeVHDS(b *testing.B) {
	benchResponses(b, true, func(i int, rc *routev3.RouteConfiguration) []benchResponse {
		return []benchResponse{{resourcev3.VirtualHostType, vhdsMessages(rc.GetName(), editOne(i, rc))[0]}}
	})
}

// editOne makes the i-th edit of one virtual host of rc, and returns it.
func editOne(i int, rc *routev3.RouteConfiguration) *routev3.VirtualHost {
	k := i * 7919 % len(rc.VirtualHosts) // spread the edits over the table
	rc.VirtualHosts[k] = ingressVhost(k, fmt.Sprintf("/v%d", i))
	return rc.VirtualHosts[k]
}

// vhdsMessages are vhdsHosts as messages, for feed.
func vhdsMessages(ns string, vhs ...*routev3.VirtualHost) []proto.Message {
	out := make([]proto.Message, len(vhs))
	for i, vh := range vhdsHosts(ns, vhs...) {
		out[i] = vh
	}
	return out
}

// BenchmarkApplyOneIngressAdd measures the proxy's work on the three delta
// responses that adding one Ingress causes at benchHosts Ingresses: its new
// cluster (CDS), its endpoints (EDS) and the route configuration with its
// new virtual host (RDS), each decoded, compiled and applied.
func BenchmarkApplyOneIngressAdd(b *testing.B) {
	benchResponses(b, false, func(i int, rc *routev3.RouteConfiguration) []benchResponse {
		responses, _ := addOne(i, rc)
		return append(responses, benchResponse{resourcev3.RouteType, rc})
	})
}

// BenchmarkApplyOneIngressAddVHDS is BenchmarkApplyOneIngressAdd for a
// proxy that asked for VHDS: the third response is the new VirtualHost.
func BenchmarkApplyOneIngressAddVHDS(b *testing.B) {
	benchResponses(b, true, func(i int, rc *routev3.RouteConfiguration) []benchResponse {
		responses, vh := addOne(i, rc)
		return append(responses, benchResponse{resourcev3.VirtualHostType, vhdsMessages(rc.GetName(), vh)[0]})
	})
}

// addOne adds the i-th new Ingress's virtual host to rc, and returns it
// and the responses with its cluster and endpoints.
func addOne(i int, rc *routev3.RouteConfiguration) ([]benchResponse, *routev3.VirtualHost) {
	n := benchHosts + i
	name := fmt.Sprintf("default/app-%05d/80", n)
	k := i * 7919 % len(rc.VirtualHosts) // the new host sorts somewhere in the table
	vh := ingressVhost(n, "/")
	rc.VirtualHosts = slices.Insert(rc.VirtualHosts, k, vh)
	return []benchResponse{{resourcev3.ClusterType, edsCluster(name)}, {resourcev3.EndpointType, assignment(name, "127.0.0.1:1")}}, vh
}

// benchResponse is a delta response of one resource.
type benchResponse struct {
	typeURL string
	msg     proto.Message
}

// benchResponses times the proxy's work on the responses that change(i, rc)
// returns for the i-th change of benchProxy's configuration.
func benchResponses(b *testing.B, vhds bool, change func(i int, rc *routev3.RouteConfiguration) []benchResponse) {
	p, rc := benchProxy(b, vhds)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		version := fmt.Sprintf("v%d", i)
		responses := change(i, rc)
		encoded := make([][]*discoveryv3.Resource, len(responses))
		for j, r := range responses {
			encoded[j] = []*discoveryv3.Resource{{Name: resourceName(r.msg), Version: version, Resource: mustAny(b, r.msg)}}
		}
		b.StartTimer()
		for j, r := range responses {
			feedResources(b, p, r.typeURL, version, encoded[j])
		}
		if got := p.AppliedVersion(); got != version {
			b.Fatalf("applied %q, want %q", got, version)
		}
	}
}

// benchLookupHosts are request hosts for a table of benchHosts Ingresses
// and a wildcard: an exact domain, one in other case, a wildcard's, and one
// that only the catch-all matches.
var benchLookupHosts = []string{"app-04242.example.com", "APP-00007.Example.Com", "x.wild.example.com", "unknown.example.net"}

// benchLookupTable is a table of benchHosts Ingresses' virtual hosts, a
// "*.wild.example.com" one and a catch-all, as the RDS resource rc.
func benchLookupTable(b *testing.B) (*router.RouteTable, *routev3.RouteConfiguration) {
	rc := &routev3.RouteConfiguration{Name: "ingress_http"}
	for i := range benchHosts {
		rc.VirtualHosts = append(rc.VirtualHosts, ingressVhost(i, "/"))
	}
	rc.VirtualHosts = append(rc.VirtualHosts, vhost("*.wild.example.com", toCluster("w", prefixMatch("/"))),
		vhost("*", toCluster("any", prefixMatch("/"))))
	t, err := router.ConvertRouteConfig(rc, httpFilters)
	if err != nil {
		b.Fatal(err)
	}
	return t, rc
}

// BenchmarkSelectVirtualHost measures the request path's virtual host
// lookup in a table built in full.
func BenchmarkSelectVirtualHost(b *testing.B) {
	t, _ := benchLookupTable(b)
	benchLookups(b, t)
}

func benchLookups(b *testing.B, t *router.RouteTable) {
	for _, host := range benchLookupHosts {
		b.Run(host, func(b *testing.B) {
			for b.Loop() {
				if t.SelectVirtualHost(host) == nil {
					b.Fatal("no virtual host")
				}
			}
		})
	}
}

// BenchmarkSelectVirtualHostPatched is BenchmarkSelectVirtualHost in a
// table patched from that one for a one-host edit: its exact domains are
// found through the overlay of the change.
func BenchmarkSelectVirtualHostPatched(b *testing.B) {
	prev, rc := benchLookupTable(b)
	router.RecordEncoding(prev, mustAny(b, rc))
	rc.VirtualHosts[1] = ingressVhost(1, "/edited")
	t, ok := router.ReuseRouteConfig(mustAny(b, rc), prev)
	if !ok || !t.PatchedFrom(prev) || !t.Domains.Exact.Overlaid() {
		b.Fatal("the table was not patched")
	}
	benchLookups(b, t)
}
