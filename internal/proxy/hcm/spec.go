package hcm

import (
	"time"

	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/internal/layered"
	"github.com/portico-dev/portico/internal/proxy/router"
	"github.com/portico-dev/portico/internal/proxy/upstream"
)

// Spec is a validated HttpConnectionManager.
type Spec struct {
	StatPrefix        string
	RdsName           string             // set when routes come from RDS
	InlineRoutes      *router.RouteTable // set for an inline route_config
	ServerName        string
	ServerHeader      serverHeaderMode
	SkipXFFAppend     bool
	Client            router.ClientAddressing
	NormalizePath     bool
	mergeSlashes      bool
	stripTrailingDot  bool
	StripAnyHostPort  bool // the Host loses its port for routing and upstream (requestHost)
	AccessLog         bool
	GenerateRequestID bool
	PreserveRequestID bool
	// ReturnRequestID (always_set_request_id_in_response): responses carry the
	// request's X-Request-Id, written after the route's changes.
	ReturnRequestID bool
	Upgrades        []string // lower-cased upgrade types allowed (e.g. "websocket")
	// StreamIdleTimeout bounds how long a stream may see no activity; 0
	// disables it. A route's idle_timeout overrides it.
	StreamIdleTimeout time.Duration
	// Conn are the limits of the connections the manager serves (the listener
	// enforces them, see ConnLimits).
	Conn ConnLimits
	// RequestTimeout (request_timeout) bounds how long the whole request may take
	// to arrive (408 after it); 0: no limit.
	RequestTimeout time.Duration
	// MaxRequestHeaderBytes (max_request_headers_kb) and maxRequestHeaders
	// (common_http_protocol_options.max_headers_count) bound a request's
	// headers; beyond either the request gets 431 (see limits.go).
	MaxRequestHeaderBytes int
	MaxRequestHeaders     int
	// http1 is what http_protocol_options say of HTTP/1.0 requests.
	http1 http1Options
	// Filters are the http_filters before the router; nil: none.
	Filters *filter.Chain
	// ProtoMajor, when not 0, is the one HTTP major version its codec speaks
	// (codec_type HTTP1 or HTTP2).
	ProtoMajor int
	// Xfcc says what of the client certificate goes upstream in
	// x-forwarded-client-cert; nil: nothing (the header is removed).
	Xfcc *xfccDetails
}

type serverHeaderMode int

const (
	ServerHeaderOverwrite serverHeaderMode = iota
	ServerHeaderAppendIfAbsent
	ServerHeaderPassThrough
)

// Chain is what a connection manager serves a filter chain's requests
// with: its spec, its route table, and the metrics of those routes.
type Chain struct {
	Spec   *Spec
	Routes *router.RouteTable
	Stats  *RouteTableStats // indexed like routes
}

// Listener is what a connection manager needs of its listener's
// configuration in force.
type Listener struct {
	Clusters layered.Map[string, *upstream.Cluster] // the snapshot's
	// Certificates gives the certificate the listener's TLS chain for an
	// SNI presents (the By of x-forwarded-client-cert); nil for plaintext
	// listeners.
	Certificates CertificateSource
}

// CertificateSource is a TLS listener, as the certificates it presents.
type CertificateSource = router.ServedCertificates

// ConnLimits are a connection manager's connection timeouts, which its
// listener enforces on each connection.
type ConnLimits struct {
	// Idle (common_http_protocol_options.idle_timeout): a connection without
	// a request in progress this long is closed; 0: never.
	Idle time.Duration
	// MaxDuration (max_connection_duration): a connection this old is closed
	// when idle and drained when not; 0: no limit.
	MaxDuration time.Duration
	// Drain (drain_timeout): how long a draining HTTP/2 connection still takes
	// new streams before its GOAWAY.
	Drain time.Duration
	// DelayedClose (delayed_close_timeout): how long a connection the proxy
	// closes waits for the peer to close first; 0: close at once.
	DelayedClose time.Duration
	// Headers (request_headers_timeout): how long an HTTP/1.1 request's head
	// may take from its first byte to its last; 0 (unset): the listener's
	// default, never unbounded.
	Headers time.Duration
}

// Envoy's defaults of the connection limits.
const (
	defaultConnIdleTimeout     = time.Hour
	defaultDrainTimeout        = 5 * time.Second
	defaultDelayedCloseTimeout = time.Second
)
