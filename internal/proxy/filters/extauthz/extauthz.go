// Package extauthz is Envoy's external authorization HTTP filter
// (envoy.filters.http.ext_authz) for the embedded proxy: before the router, each
// request is described to an authorization server, over the ext_authz gRPC v3
// protocol (envoy.service.auth.v3.Authorization/Check) or as a plain HTTP request
// (http_service), which allows it (with headers for the upstream and the client)
// or denies it (with the status, headers and body the client gets). With
// with_request_body the check carries the start of the request body. A server that
// cannot be asked, or does not answer within the timeout, or an HTTP server's 5xx,
// gets the request refused with status_on_error (403 by default), or let through
// with failure_mode_allow, as in Envoy.
package extauthz

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"golang.org/x/net/http/httpguts"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// defaultTimeout is Envoy's timeout of a check when the service sets none.
const defaultTimeout = 200 * time.Millisecond

// Response code details, as Envoy's access log names them.
const (
	detailsDenied = "ext_authz_denied"
	detailsError  = "ext_authz_error"
)

// failureModeAllowedHeader marks a request let through because the server
// could not be asked (failure_mode_allow), with failure_mode_allow_header_add,
// as Envoy marks it.
const failureModeAllowedHeader = "X-Envoy-Auth-Failure-Mode-Allowed"

// Factory makes ext_authz filters.
type Factory struct{}

var _ filter.PerRouteFactory = Factory{}

func (Factory) Name() string                { return "envoy.filters.http.ext_authz" }
func (Factory) ConfigType() proto.Message   { return &extauthzv3.ExtAuthz{} }
func (Factory) PerRouteType() proto.Message { return &extauthzv3.ExtAuthzPerRoute{} }

// New converts an ExtAuthz. What it does not implement is refused, naming the field:
// serving without it could let through what the configuration means to stop.
func (Factory) New(config *anypb.Any) (filter.Filter, error) {
	var c extauthzv3.ExtAuthz
	if err := config.UnmarshalTo(&c); err != nil {
		return nil, err
	}
	if err := unsupported(&c); err != nil {
		return nil, err
	}
	if v := c.GetTransportApiVersion(); v != corev3.ApiVersion_V3 {
		return nil, fmt.Errorf("ext_authz.transport_api_version %s: only V3 is supported", v)
	}
	f := &Filter{timeout: defaultTimeout, failOpen: c.GetFailureModeAllow(), markFailOpen: c.GetFailureModeAllowHeaderAdd(), statusOnError: http.StatusForbidden,
		peerCert: c.GetIncludePeerCertificate(), body: newBodySettings(c.GetWithRequestBody())}
	switch svc := c.GetServices().(type) {
	case *extauthzv3.ExtAuthz_GrpcService:
		gs := svc.GrpcService
		if f.cluster = gs.GetEnvoyGrpc().GetClusterName(); f.cluster == "" {
			return nil, errors.New("ext_authz.grpc_service: only envoy_grpc with a cluster_name is supported")
		}
		if c.GetAllowedHeaders() != nil {
			return nil, errors.New("ext_authz.allowed_headers is not supported by the embedded proxy with grpc_service (every header is sent)")
		}
		if gs.GetTimeout() != nil {
			f.timeout = gs.GetTimeout().AsDuration() // 0: none
		}
	case *extauthzv3.ExtAuthz_HttpService:
		hs, err := newHTTPService(svc.HttpService, c.GetAllowedHeaders())
		if err != nil {
			return nil, err
		}
		f.cluster, f.http = hs.cluster, hs
		if t := svc.HttpService.GetServerUri().GetTimeout(); t != nil {
			f.timeout = t.AsDuration() // 0: none
		}
	default:
		return nil, errors.New("ext_authz: grpc_service or http_service is required")
	}
	if s := c.GetStatusOnError(); s != nil && s.GetCode() != 0 {
		f.statusOnError = int(s.GetCode())
	}
	return f, nil
}

// unsupported names a field of c that changes what the filter does and that the
// embedded proxy does not implement.
func unsupported(c *extauthzv3.ExtAuthz) error {
	for _, u := range []struct {
		field string
		set   bool
	}{
		{"filter_enabled", c.GetFilterEnabled() != nil},
		{"filter_enabled_metadata", c.GetFilterEnabledMetadata() != nil},
		{"deny_at_disable", c.GetDenyAtDisable() != nil},
		{"disallowed_headers", c.GetDisallowedHeaders() != nil},
		{"metadata_context_namespaces", len(c.GetMetadataContextNamespaces()) > 0},
		{"typed_metadata_context_namespaces", len(c.GetTypedMetadataContextNamespaces()) > 0},
		{"route_metadata_context_namespaces", len(c.GetRouteMetadataContextNamespaces()) > 0},
		{"decoder_header_mutation_rules", c.GetDecoderHeaderMutationRules() != nil},
		{"shadow_mode", c.GetShadowMode()},
		// Routing again on the headers an answer set (Contour sets it; Portico's
		// translator does not, so both data planes keep the route chosen first).
		{"clear_route_cache", c.GetClearRouteCache()},
	} {
		if u.set {
			return fmt.Errorf("ext_authz.%s is not supported by the embedded proxy", u.field)
		}
	}
	return nil
}

// perRoute is a route's ExtAuthzPerRoute.
type perRoute struct {
	disabled bool
	context  map[string]string
}

// DisablesFilter makes the chain skip the filter on the route.
func (p *perRoute) DisablesFilter() bool { return p.disabled }

// ParsePerRoute converts an ExtAuthzPerRoute.
func (Factory) ParsePerRoute(config *anypb.Any) (any, error) {
	var c extauthzv3.ExtAuthzPerRoute
	if err := config.UnmarshalTo(&c); err != nil {
		return nil, err
	}
	if c.GetDisabled() {
		return &perRoute{disabled: true}, nil
	}
	cs := c.GetCheckSettings()
	if cs.GetWithRequestBody() != nil || cs.GetDisableRequestBodyBuffering() {
		return nil, errors.New("ext_authz per-route check_settings: request body settings are not supported by the embedded proxy (with_request_body of the filter is)")
	}
	if cs.GetGrpcService() != nil {
		return nil, errors.New("ext_authz per-route grpc_service is not supported by the embedded proxy")
	}
	return &perRoute{context: cs.GetContextExtensions()}, nil
}

// Filter asks the authorization server of one cluster about each request.
type Filter struct {
	cluster  string
	timeout  time.Duration
	failOpen bool
	// markFailOpen (failure_mode_allow_header_add) tells the upstream a request
	// was let through unchecked.
	markFailOpen  bool
	statusOnError int
	peerCert      bool
	// body is with_request_body's settings; nil: checks carry no body.
	body *bodySettings
	// http is the http_service; nil: the server speaks gRPC.
	http *httpService
}

// Clusters is the authorization server's cluster, which the proxy must keep.
func (f *Filter) Clusters() []string { return []string{f.cluster} }

// DecodeHeaders checks the request: nil lets it continue.
func (f *Filter) DecodeHeaders(s *filter.Stream, perRouteConfig any) *filter.LocalReply {
	pr, _ := perRouteConfig.(*perRoute)
	body, lr := f.body.readBody(&s.Request)
	if lr != nil {
		return lr
	}
	lr, err := f.check(s, pr, body)
	if err != nil {
		if s.Env != nil && s.Env.Log != nil {
			s.Env.Log.Warn("external authorization failed", "cluster", f.cluster, "fail_open", f.failOpen, "error", err)
		}
		if f.failOpen {
			if f.markFailOpen {
				s.Request.Headers.Set(failureModeAllowedHeader, "true")
			}
			return nil
		}
		return &filter.LocalReply{Status: f.statusOnError, Details: detailsError}
	}
	return lr
}

// check asks the server within the timeout: the reply of a denial, nil when the
// request is allowed, or an error when no answer came.
func (f *Filter) check(s *filter.Stream, pr *perRoute, body checkBody) (*filter.LocalReply, error) {
	if s.Env == nil || s.Env.Upstreams == nil {
		return nil, errors.New("no upstreams to reach the authorization server")
	}
	ctx := s.Context()
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	if f.http != nil {
		return f.http.check(ctx, s, body)
	}
	conn, err := s.Env.Upstreams.GRPC(f.cluster)
	if err != nil {
		return nil, err
	}
	resp, err := authv3.NewAuthorizationClient(conn).Check(ctx, f.request(s, pr, body))
	if err != nil {
		return nil, err
	}
	if code.Code(resp.GetStatus().GetCode()) != code.Code_OK {
		return denied(resp.GetDeniedResponse()), nil
	}
	allow(s, resp.GetOkResponse())
	return nil, nil
}

// request describes the request as Envoy's CheckRequest does: the peer, the method,
// path (with its query), host, scheme and every header by its lower-case name
// (values of a repeated header joined by ","), pseudo-headers included.
func (f *Filter) request(s *filter.Stream, pr *perRoute, body checkBody) *authv3.CheckRequest {
	r := &s.Request
	headers := map[string]string{
		":method":    r.Method,
		":path":      pathWithQuery(r),
		":authority": r.Authority,
		":scheme":    r.Scheme,
	}
	r.Headers.Range(func(name, value string) bool {
		k := strings.ToLower(name)
		if prev, ok := headers[k]; ok && !strings.HasPrefix(k, ":") {
			headers[k] = prev + "," + value
		} else {
			headers[k] = value
		}
		return true
	})
	source := &authv3.AttributeContext_Peer{}
	if r.Peer.IsValid() {
		source.Address = &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: r.Peer.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(r.Peer.Port())},
		}}}
	}
	if f.peerCert && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		source.Certificate = url.QueryEscape(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.TLS.PeerCertificates[0].Raw})))
	}
	req := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: source,
		Request: &authv3.AttributeContext_Request{
			Time: timestamppb.Now(),
			Http: &authv3.AttributeContext_HttpRequest{
				Id:       r.RequestID,
				Method:   r.Method,
				Headers:  headers,
				Path:     pathWithQuery(r),
				Host:     r.Authority,
				Scheme:   r.Scheme,
				Query:    r.RawQuery,
				Protocol: protocol(r),
			},
		},
	}}
	if pr != nil {
		req.Attributes.ContextExtensions = pr.context
	}
	if body.sent {
		h := req.Attributes.Request.Http
		h.Headers[PartialBodyHeader] = partialValue(body.partial)
		if f.body.asBytes {
			h.RawBody = body.data
		} else {
			// A proto string must be UTF-8: a body that is not is sent with its
			// invalid bytes replaced (pack_as_bytes sends it as it is).
			h.Body = strings.ToValidUTF8(string(body.data), "\uFFFD")
		}
	}
	return req
}

func pathWithQuery(r *filter.Request) string {
	if r.RawQuery == "" {
		return r.Path
	}
	return r.Path + "?" + r.RawQuery
}

// protocol is the request's HTTP version as Envoy reports it.
func protocol(r *filter.Request) string {
	if r.TLS != nil && r.TLS.NegotiatedProtocol == "h2" {
		return "HTTP/2"
	}
	return "HTTP/1.1"
}

// allow applies an OK answer: headers set, added or removed on the request the upstream
// gets, and headers for the client's response.
func allow(s *filter.Stream, ok *authv3.OkHttpResponse) {
	if ok == nil {
		return
	}
	h := s.Request.Headers
	for _, name := range ok.GetHeadersToRemove() {
		if !strings.HasPrefix(name, ":") && !strings.EqualFold(name, "host") {
			h.Del(name)
		}
	}
	eachHeader(ok.GetHeaders(), func(name, value string, add bool) {
		if add {
			h.Add(name, value)
		} else {
			h.Set(name, value)
		}
	})
	eachHeader(ok.GetResponseHeadersToAdd(), func(name, value string, add bool) {
		if add {
			s.AddResponseHeader(name, value)
		} else {
			s.SetResponseHeader(name, value)
		}
	})
}

// eachHeader calls fn for every header of opts a server may set.
func eachHeader(opts []*corev3.HeaderValueOption, fn func(name, value string, add bool)) {
	for _, hv := range opts {
		name, value := hv.GetHeader().GetKey(), headerValue(hv.GetHeader())
		if !settable(strings.ToLower(name)) || !httpguts.ValidHeaderFieldName(name) || !httpguts.ValidHeaderFieldValue(value) {
			continue // not a field HTTP can carry: it would fail the request or split the reply
		}
		fn(name, value, appends(hv))
	}
}

// denied is the client's answer to a denied request: the server's status (403 when it
// gives none), headers and body.
func denied(d *authv3.DeniedHttpResponse) *filter.LocalReply {
	lr := &filter.LocalReply{Status: http.StatusForbidden, Details: detailsDenied}
	if d == nil {
		return lr
	}
	if c := int(d.GetStatus().GetCode()); c >= 200 && c <= 599 {
		lr.Status = c
	}
	lr.Body = d.GetBody()
	eachHeader(d.GetHeaders(), func(name, value string, add bool) {
		lr.Headers = append(lr.Headers, filter.HeaderValue{Name: name, Value: value, Overwrite: !add})
	})
	return lr
}

// appends reports whether a header option adds a value rather than replacing the
// header's: in ext_authz answers append defaults to false (Envoy's documentation of
// OkHttpResponse), whatever the default of append_action says elsewhere.
func appends(hv *corev3.HeaderValueOption) bool {
	return hv.GetAppend().GetValue()
}

// settable reports whether an authorization server's answer may set the header
// (lower-case name) on the upstream request or on the client's reply. The
// proxy's own are not: pseudo-headers and Host (Envoy's rule), and those that
// frame a message or concern one hop (Connection and the headers it names,
// Upgrade, Transfer-Encoding, Content-Length, TE...): an answer setting them
// could turn a request into an upgrade its route never allowed, or reframe
// it. The proxy frames each message itself.
func settable(lower string) bool {
	switch lower {
	case "", "host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer", "content-length":
		return false
	}
	return !strings.HasPrefix(lower, ":")
}

func headerValue(h *corev3.HeaderValue) string {
	if v := h.GetValue(); v != "" {
		return v
	}
	return string(h.GetRawValue())
}
