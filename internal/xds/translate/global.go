package translate

import (
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag"
)

// Global holds the settings an operator makes once for the whole installation (what
// Contour keeps in its configuration file): every listener and cluster follows them.
// The zero value is Portico's defaults.
type Global struct {
	// StreamIdleTimeout, when set, is the connection manager's stream_idle_timeout: how
	// long a request may see no activity before it is answered 408 (or reset). Zero
	// disables it; nil keeps Envoy's default, 5 minutes. A route's timeoutPolicy.idle
	// overrides it.
	StreamIdleTimeout *time.Duration
	// Connection holds the connection managers' connection timeouts (Contour's
	// timeouts section); each nil keeps Envoy's default.
	Connection ConnectionTimeouts
	// ServerHeader says what happens to the upstream's Server response header.
	ServerHeader ServerHeaderTransformation
	// DisableMergeSlashes keeps repeated slashes in request paths ("//a///b"), which
	// are otherwise merged into one before routing, as Contour does by default.
	DisableMergeSlashes bool
	// StripTrailingHostDot routes "example.com." as "example.com" (HCM
	// strip_trailing_host_dot).
	StripTrailingHostDot bool
	// MinTLSVersion and MaxTLSVersion ("1.2" or "1.3"; "" for 1.2 and 1.3) bound the TLS
	// versions of every HTTPS host: a host's own minimumProtocolVersion can raise the
	// floor, never lower it, as in Contour.
	MinTLSVersion, MaxTLSVersion string
	// CipherSuites are the TLS 1.2 cipher suites clients may use on every HTTPS host
	// (tls_params.cipher_suites: names, or "[A|B]" groups of equal preference);
	// empty: Envoy's defaults (Go's on the embedded proxy).
	CipherSuites []string
	// ConnectTimeout is how long a connection to an upstream may take (default 2s).
	ConnectTimeout time.Duration
	// UpstreamMinTLSVersion and UpstreamMaxTLSVersion ("1.2" or "1.3"; "" for Envoy's
	// client default, 1.2) bound the TLS versions of connections to backends.
	UpstreamMinTLSVersion, UpstreamMaxTLSVersion string
	// UpstreamClientCertificate, when set, names the kubernetes.io/tls Secret whose
	// certificate is presented to backends over TLS (Contour's
	// tls.envoy-client-certificate). The pipeline resolves it into the graph
	// (dag.Graph.UpstreamClientCertificate), which is what the translation follows.
	UpstreamClientCertificate *k8stypes.NamespacedName
	// UpstreamCipherSuites are the TLS 1.2 cipher suites offered to backends, as
	// CipherSuites; empty: Envoy's client defaults (Go's on the embedded proxy).
	UpstreamCipherSuites []string
	// DefaultHTTPVersions are the HTTP versions clients may speak to every listener
	// (empty: both), as Contour's default-http-versions: the connection managers'
	// codec, and what HTTPS hosts offer by ALPN. A host's own (HTTPProxy
	// spec.httpVersions) replace them.
	DefaultHTTPVersions []dag.HTTPVersion
	// DNSLookupFamily is the address family ExternalName Services resolve to: "auto"
	// (the default, ""), "v4", "v6" or "all".
	DNSLookupFamily string
	// Compression is the encoding responses are compressed with when clients
	// accept it (Contour's compression.algorithm): "gzip" (the default, ""),
	// "brotli", "zstd", or "disabled".
	Compression Compression
	// UseProxyProtocol: every listener expects the PROXY protocol header (versions 1
	// and 2) a TCP load balancer in front sends before the connection's own bytes,
	// and takes the client's address from it (Contour's --use-proxy-protocol); a
	// connection without one is closed.
	UseProxyProtocol bool
	// CircuitBreakers are the limits of every Service's clusters where its annotations
	// set none (Contour's cluster.circuit-breakers); 0 keeps Envoy's default.
	CircuitBreakers dag.CircuitBreakers

	// clientSecret is the SDS secret of the certificate presented to backends over
	// TLS, "" for none: the graph's (clientSecretName), set per translation.
	clientSecret string
}

// ConnectionTimeouts are the timeouts of client connections and requests that every
// connection manager gets. A nil field keeps Envoy's default; zero disables the timeout
// (MaxDuration: zero is no limit, Envoy's default).
type ConnectionTimeouts struct {
	// Idle (common_http_protocol_options.idle_timeout): a connection without a request
	// in progress for this long is closed. Envoy's default is 1h.
	Idle *time.Duration
	// MaxDuration (common_http_protocol_options.max_connection_duration): a connection
	// this old is closed when idle, drained (HTTP/1.1: "Connection: close" on the next
	// response; HTTP/2: GOAWAY after Drain) when not. Envoy's default: no limit.
	MaxDuration *time.Duration
	// Drain (drain_timeout): how long an HTTP/2 connection being drained still takes
	// new streams before its final GOAWAY. Envoy's default is 5s.
	Drain *time.Duration
	// DelayedClose (delayed_close_timeout): how long a connection the proxy closes
	// waits for the client to close its side first. Envoy's default is 1s.
	DelayedClose *time.Duration
	// Request (request_timeout): how long a whole request, headers and body, may take
	// to arrive; 408 after it. Envoy's default: none.
	Request *time.Duration
}

// check says which timeout is negative.
func (c ConnectionTimeouts) check() error {
	for _, t := range []struct {
		name string
		d    *time.Duration
	}{{"connection idle timeout", c.Idle}, {"max connection duration", c.MaxDuration},
		{"connection shutdown grace period", c.Drain}, {"delayed close timeout", c.DelayedClose},
		{"request timeout", c.Request}} {
		if t.d != nil && *t.d < 0 {
			return fmt.Errorf("%s %v is negative", t.name, *t.d)
		}
	}
	return nil
}

// apply sets the connection manager's fields of c.
func (c ConnectionTimeouts) apply(h *hcmv3.HttpConnectionManager) {
	h.CommonHttpProtocolOptions.IdleTimeout = optionalDuration(c.Idle)
	if c.MaxDuration != nil && *c.MaxDuration > 0 {
		// Envoy's "no limit" is the field left out: zero would not disable it.
		h.CommonHttpProtocolOptions.MaxConnectionDuration = durationpb.New(*c.MaxDuration)
	}
	h.DrainTimeout = optionalDuration(c.Drain)
	h.DelayedCloseTimeout = optionalDuration(c.DelayedClose)
	h.RequestTimeout = optionalDuration(c.Request)
}

// optionalDuration is d as a protobuf duration, nil when d is.
func optionalDuration(d *time.Duration) *durationpb.Duration {
	if d == nil {
		return nil
	}
	return durationpb.New(*d)
}

// Compression is Contour's compression algorithm.
type Compression string

const (
	CompressionGzip     Compression = "gzip"
	CompressionBrotli   Compression = "brotli"
	CompressionZstd     Compression = "zstd"
	CompressionDisabled Compression = "disabled"
)

// ServerHeaderTransformation is Contour's serverHeaderTransformation: what Portico does
// with the Server header of responses.
type ServerHeaderTransformation string

const (
	// ServerHeaderOverwrite replaces the upstream's Server header with ServerName (the
	// default, "").
	ServerHeaderOverwrite ServerHeaderTransformation = "overwrite"
	// ServerHeaderAppendIfAbsent keeps the upstream's Server header, and sets ServerName
	// where it has none.
	ServerHeaderAppendIfAbsent ServerHeaderTransformation = "append_if_absent"
	// ServerHeaderPassThrough keeps the upstream's Server header, and adds none.
	ServerHeaderPassThrough ServerHeaderTransformation = "pass_through"
)

// CheckGlobal says what is wrong with g, naming the setting, so that a command line can
// refuse it before anything runs.
func CheckGlobal(g Global) error {
	switch g.ServerHeader {
	case "", ServerHeaderOverwrite, ServerHeaderAppendIfAbsent, ServerHeaderPassThrough:
	default:
		return fmt.Errorf("server header transformation %q: use overwrite, append_if_absent or pass_through", g.ServerHeader)
	}
	if err := checkTLSRange("", g.MinTLSVersion, g.MaxTLSVersion); err != nil {
		return err
	}
	if err := checkTLSRange("backend", g.UpstreamMinTLSVersion, g.UpstreamMaxTLSVersion); err != nil {
		return err
	}
	if err := CheckCipherSuites(g.CipherSuites); err != nil {
		return err
	}
	if err := CheckCipherSuites(g.UpstreamCipherSuites); err != nil {
		return fmt.Errorf("backend %w", err)
	}
	switch g.DNSLookupFamily {
	case "", "auto", "v4", "v6", "all":
	default:
		return fmt.Errorf("DNS lookup family %q: use auto, v4, v6 or all", g.DNSLookupFamily)
	}
	switch g.Compression {
	case "", CompressionGzip, CompressionBrotli, CompressionZstd, CompressionDisabled:
	default:
		return fmt.Errorf("compression %q: use gzip, brotli, zstd or disabled", g.Compression)
	}
	if g.StreamIdleTimeout != nil && *g.StreamIdleTimeout < 0 {
		return fmt.Errorf("stream idle timeout %v is negative (0 disables it)", *g.StreamIdleTimeout)
	}
	if err := g.Connection.check(); err != nil {
		return err
	}
	if g.ConnectTimeout < 0 {
		return fmt.Errorf("connect timeout %v is negative", g.ConnectTimeout)
	}
	return nil
}

// checkTLSRange says what is wrong with TLS versions lo-hi (of what: "" or "backend").
func checkTLSRange(what, lo, hi string) error {
	if what != "" {
		what += " "
	}
	l, err := ParseTLSVersion(lo)
	if err != nil {
		return fmt.Errorf("minimum %sTLS version: %w", what, err)
	}
	h, err := ParseTLSVersion(hi)
	if err != nil {
		return fmt.Errorf("maximum %sTLS version: %w", what, err)
	}
	if lo != "" && hi != "" && l > h {
		return fmt.Errorf("the minimum %sTLS version %s is above the maximum %s", what, lo, hi)
	}
	return nil
}

// upstreamTLSParams are the TLS versions and cipher suites of connections to
// backends: TLS 1.2 to 1.3 unless g says otherwise, as Contour's defaults (Envoy's
// client default maximum is 1.2, so it is always written out); the suites are
// Envoy's own unless g lists them.
func (g Global) upstreamTLSParams() *tlsv3.TlsParameters {
	lo, _ := ParseTLSVersion(g.UpstreamMinTLSVersion)
	hi, _ := ParseTLSVersion(g.UpstreamMaxTLSVersion)
	if lo == tlsv3.TlsParameters_TLS_AUTO {
		lo = tlsv3.TlsParameters_TLSv1_2
	}
	if hi == tlsv3.TlsParameters_TLS_AUTO {
		hi = tlsv3.TlsParameters_TLSv1_3
	}
	return &tlsv3.TlsParameters{TlsMinimumProtocolVersion: lo, TlsMaximumProtocolVersion: hi, CipherSuites: g.UpstreamCipherSuites}
}

// ParseTLSVersion parses a TLS version of the global settings: "1.2", "1.3", or "" (none
// given, which is TLS_AUTO).
func ParseTLSVersion(v string) (tlsv3.TlsParameters_TlsProtocol, error) {
	switch v {
	case "":
		return tlsv3.TlsParameters_TLS_AUTO, nil
	case "1.2":
		return tlsv3.TlsParameters_TLSv1_2, nil
	case "1.3":
		return tlsv3.TlsParameters_TLSv1_3, nil
	}
	return 0, fmt.Errorf("unknown TLS version %q: use 1.2 or 1.3", v)
}

// tlsVersions bounds a host's TLS versions (minTLSVersion, maxTLSVersion of its own
// settings) by the global ones: the higher floor and the lower ceiling win.
func (g Global) tlsVersions(hostMin, hostMax string) (lo, hi tlsv3.TlsParameters_TlsProtocol) {
	lo, hi = minTLSVersion(hostMin), maxTLSVersion(hostMax)
	if v, err := ParseTLSVersion(g.MinTLSVersion); err == nil && v > lo {
		lo = v
	}
	if v, err := ParseTLSVersion(g.MaxTLSVersion); err == nil && v != tlsv3.TlsParameters_TLS_AUTO && v < hi {
		hi = v
	}
	if hi < lo {
		// A host whose floor is above the installation's ceiling keeps its floor: a
		// host never accepts a version it refused.
		hi = lo
	}
	return lo, hi
}

// httpVersions are the HTTP versions of svh's clients (nil: a plain listener's).
func (g Global) httpVersions(svh *dag.SecureVirtualHost) []dag.HTTPVersion {
	if svh != nil && len(svh.HTTPVersions) > 0 {
		return svh.HTTPVersions
	}
	return g.DefaultHTTPVersions
}

// streamIdleTimeout is the connection manager's stream_idle_timeout, nil for Envoy's.
func (g Global) streamIdleTimeout() *durationpb.Duration {
	return optionalDuration(g.StreamIdleTimeout)
}

// serverHeader sets Portico's Server response header as g says (see serverHeader).
func (g Global) serverHeader() []*corev3.HeaderValueOption {
	switch g.ServerHeader {
	case ServerHeaderPassThrough:
		return nil
	case ServerHeaderAppendIfAbsent:
		return []*corev3.HeaderValueOption{{
			Header:       &corev3.HeaderValue{Key: "server", Value: ServerName},
			AppendAction: corev3.HeaderValueOption_ADD_IF_ABSENT,
		}}
	}
	return serverHeader()
}
