package extauthz

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

func packed(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func grpcService(cluster string) *extauthzv3.ExtAuthz_GrpcService {
	return &extauthzv3.ExtAuthz_GrpcService{GrpcService: &corev3.GrpcService{
		TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: cluster}},
	}}
}

func httpServiceConfig(cluster, uri string) *extauthzv3.ExtAuthz_HttpService {
	return &extauthzv3.ExtAuthz_HttpService{HttpService: &extauthzv3.HttpService{
		ServerUri: &corev3.HttpUri{Uri: uri, HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: cluster}, Timeout: durationpb.New(time.Second)},
	}}
}

// What the embedded proxy does not implement is a NACK naming the field, never a filter
// that lets through what Envoy would stop.
func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		cfg  *extauthzv3.ExtAuthz
		want string
	}{
		{&extauthzv3.ExtAuthz{Services: &extauthzv3.ExtAuthz_HttpService{HttpService: &extauthzv3.HttpService{}}, TransportApiVersion: corev3.ApiVersion_V3}, "server_uri.cluster"},
		{&extauthzv3.ExtAuthz{Services: httpServiceConfig("c", "dummy"), TransportApiVersion: corev3.ApiVersion_V3}, "server_uri.uri"},
		{&extauthzv3.ExtAuthz{Services: grpcService("a"), TransportApiVersion: corev3.ApiVersion_V3, AllowedHeaders: &matcherv3.ListStringMatcher{}}, "allowed_headers"},
		{&extauthzv3.ExtAuthz{Services: grpcService("a")}, "transport_api_version"},
		{&extauthzv3.ExtAuthz{Services: grpcService("a"), TransportApiVersion: corev3.ApiVersion_V3, ClearRouteCache: true}, "clear_route_cache"},
		{&extauthzv3.ExtAuthz{Services: grpcService(""), TransportApiVersion: corev3.ApiVersion_V3}, "cluster_name"},
	} {
		_, err := Factory{}.New(packed(t, tc.cfg))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v) = %v, want an error naming %q", tc.cfg, err, tc.want)
		}
	}
}

// Envoy's defaults: 200ms, 403 on error, closed.
func TestNewDefaults(t *testing.T) {
	f, err := Factory{}.New(packed(t, &extauthzv3.ExtAuthz{Services: grpcService("c"), TransportApiVersion: corev3.ApiVersion_V3}))
	if err != nil {
		t.Fatal(err)
	}
	got := f.(*Filter)
	if got.timeout != defaultTimeout || got.statusOnError != http.StatusForbidden || got.failOpen || got.cluster != "c" {
		t.Errorf("filter %+v", got)
	}
	cfg := &extauthzv3.ExtAuthz{Services: grpcService("c"), TransportApiVersion: corev3.ApiVersion_V3, FailureModeAllow: true,
		StatusOnError: &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}}
	cfg.GetGrpcService().Timeout = durationpb.New(0)
	f, err = Factory{}.New(packed(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.(*Filter); got.timeout != 0 || got.statusOnError != 503 || !got.failOpen {
		t.Errorf("filter %+v", got)
	}
}

func hv(name, value string, appendValue bool) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: name, Value: value}, Append: wrapperspb.Bool(appendValue)}
}

func TestAllowAppliesHeaders(t *testing.T) {
	s := filter.NewStream(context.Background(), nil)
	h := filter.HeaderMap{"X-Keep": {"a"}, "X-Drop": {"b"}, "X-Set": {"old"}, "X-Add": {"one"}}
	s.Request.Headers = h
	allow(s, &authv3.OkHttpResponse{
		Headers:              []*corev3.HeaderValueOption{hv("x-set", "new", false), hv("x-add", "two", true), {Header: &corev3.HeaderValue{Key: "x-default", Value: "d"}}, hv(":path", "/evil", false)},
		HeadersToRemove:      []string{"x-drop", "host"},
		ResponseHeadersToAdd: []*corev3.HeaderValueOption{hv("x-resp", "r", false)},
	})
	want := filter.HeaderMap{"X-Keep": {"a"}, "X-Set": {"new"}, "X-Add": {"one", "two"}, "X-Default": {"d"}}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("request headers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]filter.HeaderValue{{Name: "x-resp", Value: "r", Overwrite: true}}, s.ResponseHeaders()); diff != "" {
		t.Errorf("response headers (-want +got):\n%s", diff)
	}
}

func TestDenied(t *testing.T) {
	if got := denied(nil); got.Status != http.StatusForbidden || got.Details != detailsDenied {
		t.Errorf("denied without a response: %+v", got)
	}
	got := denied(&authv3.DeniedHttpResponse{
		Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
		Headers: []*corev3.HeaderValueOption{hv("www-authenticate", `Basic realm="x"`, false)},
		Body:    "no",
	})
	want := &filter.LocalReply{Status: 401, Body: "no", Details: detailsDenied, Headers: []filter.HeaderValue{{Name: "www-authenticate", Value: `Basic realm="x"`, Overwrite: true}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// The check request carries what Envoy's does: pseudo-headers, lower-case names, the
// query in the path, the peer and the route's context.
func TestCheckRequest(t *testing.T) {
	s := filter.NewStream(context.Background(), nil)
	s.Request = filter.Request{Method: "GET", Scheme: "https", Authority: "a.example.com", Path: "/p", RawQuery: "q=1",
		Headers: filter.HeaderMap{"Authorization": {"Basic x"}, "X-Multi": {"1", "2"}}, RequestID: "id"}
	req := (&Filter{}).request(s, &perRoute{context: map[string]string{"k": "v"}}, checkBody{})
	h := req.GetAttributes().GetRequest().GetHttp()
	want := map[string]string{":method": "GET", ":path": "/p?q=1", ":authority": "a.example.com", ":scheme": "https", "authorization": "Basic x", "x-multi": "1,2"}
	if diff := cmp.Diff(want, h.GetHeaders()); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if h.GetPath() != "/p?q=1" || h.GetHost() != "a.example.com" || h.GetId() != "id" || req.GetAttributes().GetContextExtensions()["k"] != "v" {
		t.Errorf("request %v", req)
	}
}

// with_request_body over gRPC: the body as text, or as bytes with pack_as_bytes, and
// x-envoy-auth-partial-body among the headers.
func TestCheckRequestBody(t *testing.T) {
	s := filter.NewStream(context.Background(), nil)
	s.Request = filter.Request{Method: "POST", Path: "/", Headers: filter.HeaderMap{}}
	body := checkBody{data: []byte("ab\xffc"), sent: true, partial: true}
	h := (&Filter{body: &bodySettings{max: 4}}).request(s, nil, body).GetAttributes().GetRequest().GetHttp()
	if h.GetBody() != "ab\uFFFDc" || h.GetRawBody() != nil || h.GetHeaders()[PartialBodyHeader] != "true" {
		t.Errorf("as text: body %q raw %q headers %v", h.GetBody(), h.GetRawBody(), h.GetHeaders())
	}
	body.partial = false
	h = (&Filter{body: &bodySettings{max: 4, asBytes: true}}).request(s, nil, body).GetAttributes().GetRequest().GetHttp()
	if string(h.GetRawBody()) != "ab\xffc" || h.GetBody() != "" || h.GetHeaders()[PartialBodyHeader] != "false" {
		t.Errorf("as bytes: body %q raw %q headers %v", h.GetBody(), h.GetRawBody(), h.GetHeaders())
	}
	h = (&Filter{}).request(s, nil, checkBody{}).GetAttributes().GetRequest().GetHttp()
	if _, ok := h.GetHeaders()[PartialBodyHeader]; ok || h.GetBody() != "" {
		t.Errorf("without a body: %v", h)
	}
}

// framingAndRouting are headers an authorization server's answer must never set on the
// upstream request or the client's reply: the proxy's own (Host, pseudo-headers), and
// those that frame or hop (an injected Upgrade would turn the request into an upgrade
// the route never allowed; Transfer-Encoding or Content-Length would reframe it).
var framingAndRouting = []string{":path", ":authority", "host", "connection", "upgrade", "transfer-encoding", "content-length", "te", "keep-alive", "proxy-connection", "trailer"}

func TestAnswersNeverSetFramingOrRouting(t *testing.T) {
	var set, deny []*corev3.HeaderValueOption
	for _, name := range framingAndRouting {
		set = append(set, hv(name, "evil", false), hv(name, "evil", true))
		deny = append(deny, hv(name, "evil", false))
	}
	s := filter.NewStream(context.Background(), nil)
	h := filter.HeaderMap{"X-Keep": {"a"}}
	s.Request.Headers = h
	allow(s, &authv3.OkHttpResponse{Headers: append(set, hv("x-ok", "1", false)), ResponseHeadersToAdd: set})
	if diff := cmp.Diff(filter.HeaderMap{"X-Keep": {"a"}, "X-Ok": {"1"}}, h); diff != "" {
		t.Errorf("upstream request headers (-want +got):\n%s", diff)
	}
	if got := s.ResponseHeaders(); len(got) != 0 {
		t.Errorf("client response headers %v, want none", got)
	}
	lr := denied(&authv3.DeniedHttpResponse{Headers: deny})
	if len(lr.Headers) != 0 {
		t.Errorf("denial headers %v, want none", lr.Headers)
	}
}

// A gRPC answer's header that is not a valid HTTP field (a name with a space, a value
// with a line break) is dropped: it would otherwise fail the upstream request, or split
// the client's reply.
func TestAnswersDropInvalidHeaders(t *testing.T) {
	bad := []*corev3.HeaderValueOption{hv("x-split", "a\r\nX-Injected: 1", false), hv("bad name", "v", false), hv("x-nul", "a\x00b", true)}
	s := filter.NewStream(context.Background(), nil)
	h := filter.HeaderMap{}
	s.Request.Headers = h
	allow(s, &authv3.OkHttpResponse{Headers: append(bad, hv("x-ok", "1", false)), ResponseHeadersToAdd: bad})
	if diff := cmp.Diff(filter.HeaderMap{"X-Ok": {"1"}}, h); diff != "" {
		t.Errorf("upstream request headers (-want +got):\n%s", diff)
	}
	if got := s.ResponseHeaders(); len(got) != 0 {
		t.Errorf("client response headers %v, want none", got)
	}
	if lr := denied(&authv3.DeniedHttpResponse{Headers: bad}); len(lr.Headers) != 0 {
		t.Errorf("denial headers %v, want none", lr.Headers)
	}
}
