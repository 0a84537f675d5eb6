package filter

import (
	"context"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// denyHeader answers 403 to requests carrying the header its configuration
// names; per route, a different header. It exercises the chain's plumbing.
type denyHeader struct{}

func (denyHeader) Name() string                { return "test.deny_header" }
func (denyHeader) ConfigType() proto.Message   { return &wrapperspb.StringValue{} }
func (denyHeader) PerRouteType() proto.Message { return &wrapperspb.BytesValue{} }
func (denyHeader) New(a *anypb.Any) (Filter, error) {
	var v wrapperspb.StringValue
	if err := a.UnmarshalTo(&v); err != nil {
		return nil, err
	}
	return denyFilter(v.GetValue()), nil
}
func (denyHeader) ParsePerRoute(a *anypb.Any) (any, error) {
	var v wrapperspb.BytesValue
	if err := a.UnmarshalTo(&v); err != nil {
		return nil, err
	}
	return string(v.GetValue()), nil
}

type denyFilter string

func (d denyFilter) DecodeHeaders(s *Stream, perRoute any) *LocalReply {
	name := string(d)
	if h, ok := perRoute.(string); ok {
		name = h
	}
	s.AddResponseHeader("x-seen-by", string(d))
	if s.Request.Headers.Get(name) != "" {
		return &LocalReply{Status: 403, Body: "denied"}
	}
	return nil
}

func anyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func router(t *testing.T) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &routerv3.Router{})}}
}

func deny(t *testing.T, name, header string, disabled bool) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: name, Disabled: disabled, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, wrapperspb.String(header))}}
}

func stream(headers ...string) *Stream {
	h := HeaderMap{}
	for _, n := range headers {
		h.Set(n, "1")
	}
	s := NewStream(context.Background(), &Env{})
	s.Request.Headers = h
	return s
}

func TestBuildChainOnlyRouterIsFree(t *testing.T) {
	reg := NewRegistry(&routerv3.Router{}, denyHeader{})
	c, err := reg.BuildChain([]*hcmv3.HttpFilter{router(t)})
	if err != nil || c != nil {
		t.Fatalf("BuildChain(router) = %v, %v; want a nil chain", c, err)
	}
	if c.Decode(stream("x-a"), nil) != nil || !c.Idle(nil) {
		t.Fatal("a nil chain must let every request through")
	}
}

func TestBuildChainRejects(t *testing.T) {
	reg := NewRegistry(&routerv3.Router{}, denyHeader{})
	unknown := &hcmv3.HttpFilter{Name: "envoy.filters.http.lua", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &structpb.Struct{})}}
	for name, tc := range map[string]struct {
		filters []*hcmv3.HttpFilter
		want    string
	}{
		"empty":           {nil, "router"},
		"router not last": {[]*hcmv3.HttpFilter{router(t), deny(t, "d", "x", false)}, "must be the last"},
		"no router":       {[]*hcmv3.HttpFilter{deny(t, "d", "x", false)}, "must be the router"},
		"router twice":    {[]*hcmv3.HttpFilter{router(t), router(t)}, "must be the last"},
		"unknown filter":  {[]*hcmv3.HttpFilter{unknown, router(t)}, "is not supported"},
		"no typed_config": {[]*hcmv3.HttpFilter{{Name: "x"}, router(t)}, "only typed_config"},
		"router disabled": {[]*hcmv3.HttpFilter{{Name: "r", Disabled: true, ConfigType: router(t).ConfigType}}, "cannot be disabled"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := reg.BuildChain(tc.filters)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	unknown.IsOptional = true
	c, err := reg.BuildChain([]*hcmv3.HttpFilter{unknown, router(t)})
	if err != nil || c != nil {
		t.Fatalf("an optional unknown filter is skipped: %v, %v", c, err)
	}
}

func TestChainOrderAndPerRoute(t *testing.T) {
	reg := NewRegistry(&routerv3.Router{}, denyHeader{})
	c, err := reg.BuildChain([]*hcmv3.HttpFilter{deny(t, "first", "x-a", false), deny(t, "second", "x-b", true), router(t)})
	if err != nil {
		t.Fatal(err)
	}
	s := stream("x-a")
	lr := c.Decode(s, nil)
	if lr == nil || lr.Status != 403 || lr.Filter != "first" || lr.Details != "first" {
		t.Fatalf("reply = %+v, want 403 from the first filter", lr)
	}
	// The second filter is disabled by default: x-b passes.
	if lr := c.Decode(stream("x-b"), nil); lr != nil {
		t.Fatalf("a disabled filter answered: %+v", lr)
	}

	vhost, err := reg.ParsePerFilter(map[string]*anypb.Any{
		// The route enables the second filter, with its own header.
		"second": anyOf(t, &routev3.FilterConfig{Config: anyOf(t, wrapperspb.Bytes([]byte("x-c")))}),
	})
	if err != nil {
		t.Fatal(err)
	}
	route, err := reg.ParsePerFilter(map[string]*anypb.Any{
		"first": anyOf(t, &routev3.FilterConfig{Disabled: true}),
	})
	if err != nil {
		t.Fatal(err)
	}
	pf := Merge(route, vhost)
	if lr := c.Decode(stream("x-a"), pf); lr != nil {
		t.Fatalf("the route disables the first filter, yet it answered: %+v", lr)
	}
	s = stream("x-c")
	if lr := c.Decode(s, pf); lr == nil || lr.Filter != "second" {
		t.Fatalf("the virtual host enables the second filter with x-c: reply %+v", lr)
	}
	if got := s.ResponseHeaders(); len(got) != 1 || got[0].Value != "x-b" {
		t.Fatalf("response headers = %+v, want the second filter's only (the first is disabled)", got)
	}
}

func TestParsePerFilterRejectsUnknown(t *testing.T) {
	reg := NewRegistry(&routerv3.Router{}, denyHeader{})
	_, err := reg.ParsePerFilter(map[string]*anypb.Any{"x": anyOf(t, &structpb.Struct{})})
	if err == nil || !strings.Contains(err.Error(), `typed_per_filter_config "x"`) {
		t.Fatalf("err = %v", err)
	}
	pf, err := reg.ParsePerFilter(map[string]*anypb.Any{"x": anyOf(t, &routev3.FilterConfig{IsOptional: true, Config: anyOf(t, &structpb.Struct{})})})
	if err != nil || len(pf) != 0 {
		t.Fatalf("an optional unknown per-route config is ignored: %v, %v", pf, err)
	}
}

type scoped struct{ denyFilter }

func (scoped) RouteScoped() bool { return true }

type scopedFactory struct{ denyHeader }

func (scopedFactory) New(a *anypb.Any) (Filter, error) {
	f, err := denyHeader{}.New(a)
	return scoped{f.(denyFilter)}, err
}

func TestRouteScopedFiltersRunOnlyWhereConfigured(t *testing.T) {
	reg := NewRegistry(&routerv3.Router{}, scopedFactory{})
	c, err := reg.BuildChain([]*hcmv3.HttpFilter{deny(t, "scoped", "x-a", false), router(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Idle(nil) || c.Decode(stream("x-a"), nil) != nil {
		t.Fatal("a route-scoped filter ran on a route without its configuration")
	}
	pf, err := reg.ParsePerFilter(map[string]*anypb.Any{"scoped": anyOf(t, wrapperspb.Bytes([]byte("x-b")))})
	if err != nil {
		t.Fatal(err)
	}
	if c.Idle(pf) {
		t.Fatal("the chain is idle on a route that configures its filter")
	}
	if lr := c.Decode(stream("x-b"), pf); lr == nil || lr.Status != 403 {
		t.Fatalf("reply = %+v, want 403", lr)
	}
}

// selectX runs only on requests with an X-Select header.
type selectX struct{ denyFilter }

func (selectX) Selects(h Headers) bool { return h.Get("X-Select") != "" }

type selectFactory struct{ denyHeader }

func (selectFactory) Name() string { return "test.select" }
func (selectFactory) New(a *anypb.Any) (Filter, error) {
	f, err := denyHeader{}.New(a)
	return selectX{f.(denyFilter)}, err
}

// A selective filter makes the chain idle for the requests it does not select, and
// runs for those it does.
func TestSelectiveFilter(t *testing.T) {
	r := NewRegistry(&routerv3.Router{}, selectFactory{})
	c, err := r.BuildChain([]*hcmv3.HttpFilter{deny(t, "sel", "x-deny", false), router(t)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Idle(nil) {
		t.Error("Idle whatever the request, with a selective filter")
	}
	if !c.IdleFor(nil, stream("x-deny").Request.Headers) || c.Decode(stream("x-deny"), nil) != nil {
		t.Error("the filter ran on a request it does not select")
	}
	if c.IdleFor(nil, stream("x-select").Request.Headers) || c.Decode(stream("x-select", "x-deny"), nil) == nil {
		t.Error("the filter did not run on a request it selects")
	}
}
