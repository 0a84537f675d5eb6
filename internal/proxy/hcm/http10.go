package hcm

import (
	"fmt"
	"net/http"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// http1Options is what the connection manager's http_protocol_options say about
// HTTP/1.0 requests.
type http1Options struct {
	// acceptHTTP10 (accept_http_10): without it Envoy answers an HTTP/1.0 request
	// 426 Upgrade Required.
	acceptHTTP10 bool
	// defaultHost (default_host_for_http_10) is the Host of an HTTP/1.0 request
	// that has none; without one such a request gets 400, as every request
	// without a Host does in Envoy.
	defaultHost string
}

// convertHTTP1Options converts http_protocol_options. allow_chunked_length is
// accepted either way: Go's HTTP/1.1 parser, under the embedded proxy, always
// drops the Content-Length of a chunked request, which is Envoy's behaviour with
// it set (docs/dev/xds-contract.md).
func convertHTTP1Options(o *corev3.Http1ProtocolOptions) (http1Options, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("allow_absolute_url", o.GetAllowAbsoluteUrl() != nil),
		xdsconv.Set("header_key_format", o.GetHeaderKeyFormat() != nil),
		xdsconv.Set("enable_trailers", o.GetEnableTrailers()),
		xdsconv.Set("override_stream_error_on_invalid_http_message", o.GetOverrideStreamErrorOnInvalidHttpMessage() != nil),
		xdsconv.Set("send_fully_qualified_url", o.GetSendFullyQualifiedUrl()),
		xdsconv.Set("use_balsa_parser", o.GetUseBalsaParser() != nil),
		xdsconv.Set("allow_custom_methods", o.GetAllowCustomMethods()),
		xdsconv.Set("ignore_http_11_upgrade", len(o.GetIgnoreHttp_11Upgrade()) > 0),
	); err != nil {
		return http1Options{}, err
	}
	if o.GetDefaultHostForHttp_10() != "" && !o.GetAcceptHttp_10() {
		return http1Options{}, fmt.Errorf("default_host_for_http_10 needs accept_http_10")
	}
	return http1Options{acceptHTTP10: o.GetAcceptHttp_10(), defaultHost: o.GetDefaultHostForHttp_10()}, nil
}

// http10Host gives an HTTP/1.0 request without a Host the configured default.
func http10Host(o http1Options, r *http.Request) {
	if r.Host == "" && r.ProtoMajor == 1 && r.ProtoMinor == 0 {
		r.Host = o.defaultHost
	}
}

// refuseHTTP10 answers the HTTP/1.0 requests and the requests without a Host
// that Envoy's codec and connection manager refuse, and reports whether it did.
func refuseHTTP10(o http1Options, rw *responseWriter, r *http.Request, ex *exchange) bool {
	switch {
	case r.ProtoMajor == 1 && r.ProtoMinor == 0 && !o.acceptHTTP10:
		ex.info.Details = "http1.codec_error"
		rw.Header().Set("Connection", "close")
		localReply(rw, http.StatusUpgradeRequired, "")
	case r.Host == "":
		ex.info.Details = "missing_host_header"
		if r.ProtoMajor == 1 {
			rw.Header().Set("Connection", "close")
		}
		localReply(rw, http.StatusBadRequest, "")
	default:
		return false
	}
	return true
}
