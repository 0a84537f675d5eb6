package translate

import (
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/durationpb"

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
	// ConnectTimeout is how long a connection to an upstream may take (default 2s).
	ConnectTimeout time.Duration
	// UpstreamMinTLSVersion and UpstreamMaxTLSVersion ("1.2" or "1.3"; "" for Envoy's
	// client default, 1.2) bound the TLS versions of connections to backends.
	UpstreamMinTLSVersion, UpstreamMaxTLSVersion string
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
	// CircuitBreakers are the limits of every Service's clusters where its annotations
	// set none (Contour's cluster.circuit-breakers); 0 keeps Envoy's default.
	CircuitBreakers dag.CircuitBreakers
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

// upstreamTLSParams are the TLS versions of connections to backends: nil (Envoy's
// client defaults, TLS 1.2 only) unless g gives one. Given a minimum of 1.3 alone, the
// maximum follows it, as Envoy refuses a maximum below the minimum.
func (g Global) upstreamTLSParams() *tlsv3.TlsParameters {
	if g.UpstreamMinTLSVersion == "" && g.UpstreamMaxTLSVersion == "" {
		return nil
	}
	lo, _ := ParseTLSVersion(g.UpstreamMinTLSVersion)
	hi, _ := ParseTLSVersion(g.UpstreamMaxTLSVersion)
	if lo == tlsv3.TlsParameters_TLS_AUTO {
		lo = tlsv3.TlsParameters_TLSv1_2
	}
	if hi == tlsv3.TlsParameters_TLS_AUTO || hi < lo {
		hi = max(lo, tlsv3.TlsParameters_TLSv1_2)
	}
	return &tlsv3.TlsParameters{TlsMinimumProtocolVersion: lo, TlsMaximumProtocolVersion: hi}
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
	if g.StreamIdleTimeout == nil {
		return nil
	}
	return durationpb.New(*g.StreamIdleTimeout)
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
