package server

import (
	"bytes"
	"log/slog"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// decodeRoutes decodes what go-control-plane sends for e.
func decodeRoutes(t *testing.T, e *encoded) *routev3.RouteConfiguration {
	t.Helper()
	b, err := cachev3.MarshalResource(e)
	if err != nil {
		t.Fatal(err)
	}
	got := &routev3.RouteConfiguration{}
	if err := proto.Unmarshal(b, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// hostEncodingOf returns the bytes e holds for its virtual host named name.
func hostEncodingOf(t *testing.T, e *encoded, name string) []byte {
	t.Helper()
	if _, err := e.encoding(); err != nil {
		t.Fatal(err)
	}
	for _, h := range e.knownHosts() {
		if h.host.GetName() == name {
			return h.encoding
		}
	}
	t.Fatalf("no host %q", name)
	return nil
}

func TestRouteConfigEncodingDecodesToIt(t *testing.T) {
	rc := routes("ingress_http", "a", "b", "c")
	// Fields on both sides of virtual_hosts, which the encoding puts last.
	rc.ValidateClusters = wrapperspb.Bool(true)
	rc.ResponseHeadersToAdd = []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x", Value: "y"}}}
	e := encode(rc, nil)
	if got := decodeRoutes(t, e); !proto.Equal(got, rc) {
		t.Fatalf("decoded %v, want %v", got, rc)
	}
	if b, _ := e.encoding(); proto.Size(e) != len(b) {
		t.Errorf("proto.Size %d, want %d", proto.Size(e), len(b))
	}
	if cachev3.GetResourceName(e) != "ingress_http" {
		t.Errorf("name %q", cachev3.GetResourceName(e))
	}
}

// A new version of a route configuration reuses the encodings of the hosts it keeps
// (same pointers, same bytes: what the embedded proxy compares), encodes a host under
// a new pointer again, and still decodes to itself when hosts moved.
func TestRouteConfigReusesHostEncodings(t *testing.T) {
	v1 := routes("ingress_http", "a", "b", "c")
	e1 := encode(v1, nil)
	// Sent to a client (encoded) before the next version is published.
	if _, err := e1.encoding(); err != nil {
		t.Fatal(err)
	}

	b := proto.Clone(v1.VirtualHosts[1]).(*routev3.VirtualHost)
	b.Domains = append(b.Domains, "b.example.org")
	d := routes("ingress_http", "d").VirtualHosts[0]
	// c moves from the third position to the first; a is dropped.
	v2 := &routev3.RouteConfiguration{Name: "ingress_http", VirtualHosts: []*routev3.VirtualHost{v1.VirtualHosts[2], b, d}}
	e2 := encode(v2, e1)
	if got := decodeRoutes(t, e2); !proto.Equal(got, v2) {
		t.Fatalf("decoded %v, want %v", got, v2)
	}
	if &hostEncodingOf(t, e2, "c")[0] != &hostEncodingOf(t, e1, "c")[0] {
		t.Error("the unchanged host c was encoded again")
	}
	if bytes.Equal(hostEncodingOf(t, e2, "b"), hostEncodingOf(t, e1, "b")) {
		t.Error("the changed host b kept its previous encoding")
	}

	// The same hosts at the same positions: every encoding is reused.
	v3 := &routev3.RouteConfiguration{Name: "ingress_http", VirtualHosts: v2.VirtualHosts}
	e3 := encode(v3, e2)
	for _, name := range []string{"c", "b", "d"} {
		if &hostEncodingOf(t, e3, name)[0] != &hostEncodingOf(t, e2, name)[0] {
			t.Errorf("host %s was encoded again", name)
		}
	}
}

// What a delta client receives decodes to what was published, version after version,
// and a resource's version is the hash of the bytes sent (as go-control-plane hashes
// them), so that a reconnecting client's initial versions match.
func TestDeltaClientReceivesThePublishedRoutes(t *testing.T) {
	s := New(slog.New(slog.DiscardHandler), nil)
	c := newDeltaClient(t, serve(t, s), nil)
	res := config(t, "a", "b")
	publish(t, s, res)
	check := func(want types.Resource) {
		t.Helper()
		for {
			resp := c.recv()
			if resp.GetTypeUrl() != resource.RouteType {
				continue
			}
			r := resp.GetResources()[0]
			got := &routev3.RouteConfiguration{}
			if err := proto.Unmarshal(r.GetResource().GetValue(), got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("received %v, want %v", got, want)
			}
			if v := s.current[routeIdx].set.flatten().versions["ingress_http"]; r.GetVersion() != v {
				t.Errorf("version %q sent, %q kept", r.GetVersion(), v)
			}
			return
		}
	}
	check(res.Routes[0])

	next := config(t, "a", "b", "c")
	rc := next.Routes[0].(*routev3.RouteConfiguration)
	rc.VirtualHosts[0] = res.Routes[0].(*routev3.RouteConfiguration).VirtualHosts[0] // a, as the same pointer
	publish(t, s, next)
	check(rc)
}

// A version no client asked for is never encoded, and the next version starts from the
// host encodings of the last one that was: unchanged hosts keep their bytes across it.
func TestRouteConfigEncodedOnlyWhenAskedFor(t *testing.T) {
	v1 := routes("ingress_http", "a", "b")
	e1 := encode(v1, nil)
	if _, err := e1.encoding(); err != nil {
		t.Fatal(err)
	}
	v2 := &routev3.RouteConfiguration{Name: "ingress_http", VirtualHosts: []*routev3.VirtualHost{v1.VirtualHosts[0], routes("x", "c").VirtualHosts[0]}}
	e2 := encode(v2, e1)
	if e2.hosts.Load() != nil {
		t.Fatal("a version encoded at publish, before any client asked for it")
	}
	v3 := &routev3.RouteConfiguration{Name: "ingress_http", VirtualHosts: v2.VirtualHosts}
	e3 := encode(v3, e2)
	if got := decodeRoutes(t, e3); !proto.Equal(got, v3) {
		t.Fatalf("decoded %v, want %v", got, v3)
	}
	if &hostEncodingOf(t, e3, "a")[0] != &hostEncodingOf(t, e1, "a")[0] {
		t.Error("host a, unchanged since the last version encoded, was encoded again")
	}
}
