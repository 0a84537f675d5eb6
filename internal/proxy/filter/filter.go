// Package filter is the embedded proxy's HTTP filter chain, shaped after
// Envoy's: a connection manager's http_filters become an ordered Chain of
// Filters that see each request before the router (the terminal filter,
// which stays in package proxy) forwards it or answers it.
//
// A filter is one package under internal/proxy/filters, registered once in
// the proxy's filter registry (internal/proxy/filters.go): its Factory turns
// the filter's Envoy configuration into a Filter when a listener is
// converted (an error is a NACK naming the field), and its per-route
// configuration (typed_per_filter_config) into a value the Filter receives
// for each request of that route.
//
// Filters see a codec-neutral view of the request (Request, Headers), never
// net/http's types, so that the HTTP codec can change without touching them.
// Unlike Envoy's, a Go filter may block: it runs in the request's goroutine
// with the request's context, so a call to an authorization or rate limit
// service is a plain call, and a filter either lets the request continue or
// answers it (a LocalReply).
package filter

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Headers is a request's header map as filters see it. Names are
// case-insensitive; values keep their order.
type Headers interface {
	Get(name string) string
	Values(name string) []string
	Set(name, value string)
	Add(name, value string)
	Del(name string)
	// Range calls fn for every value of every header until it returns false.
	// Names are given in their canonical form (as net/http writes them).
	Range(fn func(name, value string) bool)
}

// Request is what a filter knows of a downstream request.
type Request struct {
	Method string
	// Scheme is the downstream scheme, "http" or "https".
	Scheme string
	// Authority is the Host as the connection manager leaves it (routing's).
	Authority string
	// Path is the escaped, normalized path the routes matched, without query.
	Path     string
	RawQuery string
	// Headers are the request's headers; changes reach the upstream request.
	Headers Headers
	// Peer is the address of the connection's other end (Envoy's
	// direct_remote_ip).
	Peer netip.AddrPort
	// Client is the downstream client's address as the connection manager
	// decides it (Envoy's remote_ip): Peer, or an X-Forwarded-For entry
	// when the connection manager trusts hops in front of it.
	Client netip.Addr
	// TLS is the downstream connection's state; nil over plaintext.
	TLS *tls.ConnectionState
	// RequestID is the request's x-request-id.
	RequestID string
	// Body is the request's body, which a filter may read the start of
	// before the router forwards it; nil when the request has none.
	Body *Body
}

// Route names what the router matched; the zero Route means no route.
type Route struct {
	// VirtualHost and Name are the matched virtual host's and route's names.
	VirtualHost, Name string
	// Matched reports whether a route matched at all.
	Matched bool
	// RateLimits are the route's and its virtual host's rate_limits (route
	// fields, not typed_per_filter_config), as the rate limit filter's
	// package converted them; nil without any.
	RateLimits any
}

// Stream is one request passing through a chain. It is the request's only
// while the request is served: the connection manager reuses it for a later
// request once this one is over, so a filter keeps no reference to it (nor to
// what SetState stored in it) past its calls for the request, and starts no
// goroutine that outlives them.
type Stream struct {
	Request Request
	Route   Route
	// Env gives filters the proxy's services.
	Env *Env

	ctx         context.Context
	respHeaders []HeaderValue
	body        Body       // Request.Body's, kept here so that a body costs no allocation
	client      switchable // the client's body, which Request.Body reads
	// state is what filters keep with the request (SetState), in stateBuf
	// while it fits.
	state    []stateEntry
	stateBuf [2]stateEntry
	slotBuf  [maxSlots]bodySlot // EncodeResponse's slots, while they fit
}

// NewStream starts a request's passage through a chain.
func NewStream(ctx context.Context, env *Env) *Stream {
	s := new(Stream)
	s.Start(ctx, env)
	return s
}

// Start makes s a new request's stream, in place: the connection manager
// reuses the stream of a request that is over, which no filter holds once
// the request's last call to the chain has returned.
func (s *Stream) Start(ctx context.Context, env *Env) {
	*s = Stream{ctx: ctx, Env: env}
}

// Context is the request's: it ends when the client goes away or the
// request is otherwise cancelled.
func (s *Stream) Context() context.Context { return s.ctx }

// AddResponseHeader adds a header to the response the client receives,
// whoever produces it (the upstream, the router or a later filter).
func (s *Stream) AddResponseHeader(name, value string) {
	s.respHeaders = append(s.respHeaders, HeaderValue{Name: name, Value: value})
}

// SetResponseHeader sets a header of the response the client receives,
// replacing what the response had.
func (s *Stream) SetResponseHeader(name, value string) {
	s.respHeaders = append(s.respHeaders, HeaderValue{Name: name, Value: value, Overwrite: true})
}

// ResponseHeaders are the headers filters asked to add, in order.
func (s *Stream) ResponseHeaders() []HeaderValue { return s.respHeaders }

// HeaderValue is a header a filter adds to a reply or response.
type HeaderValue struct {
	Name, Value string
	// Overwrite replaces the header's values instead of adding one.
	Overwrite bool
}

// LocalReply is a filter's answer to a request, sent instead of the
// router's.
type LocalReply struct {
	Status  int
	Body    string
	Headers []HeaderValue
	// Details is Envoy's response code details for it (the access log's
	// %RESPONSE_CODE_DETAILS%), such as "rbac_access_denied_matched_policy[none]".
	Details string
	// GRPCStatus is the grpc-status the reply carries when the request is
	// gRPC's (the proxy answers gRPC requests in gRPC's form, as Envoy); 0:
	// the one of Status (GRPCStatusOf).
	GRPCStatus int
	// Filter is the name of the filter that answered; the chain sets it.
	Filter string
	// Bare leaves the route's response header changes out of the reply, as
	// Envoy sends a filter's own response (encodeHeaders, such as the CORS
	// filter's answer to a preflight). Without it the reply is a
	// sendLocalReply's, which gets a forwarding route's changes.
	Bare bool
}

// Filter is a configured HTTP filter. One Filter serves every request of a
// connection manager concurrently, so it is safe for concurrent use and
// keeps any per-request state in the Stream or on its own stack.
type Filter interface {
	// DecodeHeaders runs once the route is matched, before the router. It
	// returns nil to let the request continue, or the reply to send now.
	// perRoute is the most specific per-route configuration for the
	// filter (route, then virtual host), or nil.
	DecodeHeaders(s *Stream, perRoute any) *LocalReply
}

// Encoder is implemented by filters that change upstream responses' headers
// (Envoy's encodeHeaders). Encoders run in the reverse order of the chain, on
// the response of the cluster the router picked, with the most specific
// per-route configuration: the picked weighted cluster's, the route's, the
// virtual host's.
type Encoder interface {
	EncodeHeaders(s *Stream, perRoute any, h Headers)
}

// RouteScoped is implemented by filters that do nothing on a route without
// per-route configuration (the translator configures every policy per
// virtual host or route): the chain then skips them, and a request whose
// route configures no filter does not pay for the chain at all.
type RouteScoped interface {
	RouteScoped() bool
}

// Selective is implemented by filters that act on a request only when its
// headers single it out (gRPC-Web's content types): the chain runs them for
// those requests alone, and a request that no filter selects skips the chain
// as one whose route configures no filter does. Selects must be cheap: it
// runs for every request.
type Selective interface {
	Selects(h Headers) bool
}

// ClusterUser is implemented by filters that reach clusters through
// Env.Upstreams (a JWKS server, an authorization service): the proxy then
// keeps those clusters configured, as it does the routes' clusters, and a
// configuration naming a cluster that is not there is incomplete.
type ClusterUser interface {
	Clusters() []string
}

// Factory makes a filter from its Envoy configuration.
type Factory interface {
	// Name is the filter's Envoy name, e.g. "envoy.filters.http.cors".
	Name() string
	// ConfigType is the message an HttpFilter's typed_config holds for it.
	ConfigType() proto.Message
	// New converts the listener-level configuration. It must not start
	// anything: a configuration may be converted and never used. Its error
	// is a NACK, so it names the field at fault.
	New(config *anypb.Any) (Filter, error)
}

// PerRouteFactory is a Factory whose filter takes per-route configuration.
type PerRouteFactory interface {
	Factory
	// PerRouteType is the message typed_per_filter_config holds for it.
	PerRouteType() proto.Message
	// ParsePerRoute converts one; the result is handed to DecodeHeaders.
	ParsePerRoute(config *anypb.Any) (any, error)
}

// Upstreams lets filters reach the proxy's clusters (an authorization or
// rate limit service, a JWKS server), with the cluster's endpoints, load
// balancing, TLS and egress rules.
type Upstreams interface {
	// GRPC returns a client connection to the named cluster. It is shared
	// and stays usable while the cluster exists; callers do not close it.
	GRPC(cluster string) (grpc.ClientConnInterface, error)
	// HTTP returns a client whose requests go to the named cluster,
	// whatever host their URL names (it stays their Host header).
	HTTP(cluster string) (*http.Client, error)
	// Dial connects to an endpoint of the named cluster.
	Dial(ctx context.Context, cluster string) (net.Conn, error)
}

// Env is what the proxy gives filters at request time. It outlives
// configuration swaps.
type Env struct {
	Upstreams Upstreams
	Log       *slog.Logger
	// Shared keeps what filters keep across configuration swaps (a rate
	// limit's token buckets), each filter under keys of a type of its own.
	// nil: nothing is kept.
	Shared *sync.Map
}
