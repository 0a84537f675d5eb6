package proxy

import (
	"crypto/tls"
	"time"

	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/internal/layered"
	"github.com/portico-dev/portico/internal/proxy/router"
	"github.com/portico-dev/portico/internal/proxy/upstream"
)

// hcmSpec is a validated HttpConnectionManager.
type hcmSpec struct {
	statPrefix        string
	rdsName           string             // set when routes come from RDS
	inlineRoutes      *router.RouteTable // set for an inline route_config
	serverName        string
	serverHeader      serverHeaderMode
	skipXFFAppend     bool
	client            router.ClientAddressing
	normalizePath     bool
	mergeSlashes      bool
	stripTrailingDot  bool
	stripAnyHostPort  bool // the Host loses its port for routing and upstream (requestHost)
	accessLog         bool
	generateRequestID bool
	preserveRequestID bool
	// returnRequestID (always_set_request_id_in_response): responses carry the
	// request's X-Request-Id, written after the route's changes.
	returnRequestID bool
	upgrades        []string // lower-cased upgrade types allowed (e.g. "websocket")
	// streamIdleTimeout bounds how long a stream may see no activity; 0
	// disables it. A route's idle_timeout overrides it.
	streamIdleTimeout time.Duration
	// maxRequestHeaderBytes (max_request_headers_kb) and maxRequestHeaders
	// (common_http_protocol_options.max_headers_count) bound a request's
	// headers; beyond either the request gets 431 (see limits.go).
	maxRequestHeaderBytes int
	maxRequestHeaders     int
	// filters are the http_filters before the router; nil: none.
	filters *filter.Chain
	// protoMajor, when not 0, is the one HTTP major version its codec speaks
	// (codec_type HTTP1 or HTTP2).
	protoMajor int
	// xfcc says what of the client certificate goes upstream in
	// x-forwarded-client-cert; nil: nothing (the header is removed).
	xfcc *xfccDetails
}

type serverHeaderMode int

const (
	serverHeaderOverwrite serverHeaderMode = iota
	serverHeaderAppendIfAbsent
	serverHeaderPassThrough
)

// httpChain is what a connection manager serves a filter chain's requests
// with: its spec, its route table, and the metrics of those routes.
type httpChain struct {
	hcm    *hcmSpec
	routes *router.RouteTable
	stats  *routeTableStats // indexed like routes
}

// hcmListener is what a connection manager needs of its listener's
// configuration in force.
type hcmListener struct {
	clusters layered.Map[string, *upstream.Cluster] // the snapshot's
	// servedCertificate is the certificate the listener's TLS chain for an
	// SNI presents (the By of x-forwarded-client-cert); nil for plaintext
	// listeners.
	servedCertificate func(sni string) *tls.Certificate
}
