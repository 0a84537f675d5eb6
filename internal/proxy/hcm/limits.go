package hcm

import (
	"net/http"
)

// Envoy's defaults for the HCM's request header limits.
const (
	DefaultMaxRequestHeadersKB = 60  // max_request_headers_kb
	DefaultMaxRequestHeaders   = 100 // common_http_protocol_options.max_headers_count
)

// Pseudo-header names, counted in a request's header size as Envoy counts
// them in its header map.
const (
	pseudoAuthority = ":authority"
	pseudoMethod    = ":method"
	pseudoPath      = ":path"
)

// headerLimitExceeded checks a request against its HCM's header limits and
// returns the reason (headersTooLarge, tooManyHeaders) when it exceeds one,
// or "".
//
// As in Envoy, the size is the sum of the lengths of every header's name and
// value, with the request line counted as the :method, :path and :authority
// pseudo-headers (HTTP/1.1 or HTTP/2 alike); the count is the number of
// header fields, the Host (:authority) included, other pseudo-headers not.
// It allocates nothing.
func headerLimitExceeded(hcm *Spec, r *http.Request) string {
	size := len(pseudoAuthority) + len(r.Host) + len(pseudoMethod) + len(r.Method) + len(pseudoPath) + len(r.RequestURI)
	count := 1 // Host / :authority
	if len(r.TransferEncoding) > 0 {
		// net/http moves Transfer-Encoding out of the header map.
		count++
		size += len("transfer-encoding") + len("chunked")
	}
	return fieldsExceed(hcm, r.Header, size, count)
}

// fieldsExceed adds the fields of h to size and count and returns the limit they
// exceed, or "". Request trailers are held to the same limits, as Envoy's codecs do.
func fieldsExceed(hcm *Spec, h http.Header, size, count int) string {
	for name, values := range h {
		count += len(values)
		for _, v := range values {
			size += len(name) + len(v)
		}
	}
	switch {
	case size > hcm.MaxRequestHeaderBytes:
		return headersTooLarge
	case count > hcm.MaxRequestHeaders:
		return tooManyHeaders
	}
	return ""
}

// refuseHeaders answers 431 Request Header Fields Too Large, as Envoy does for
// a request beyond its limits; an HTTP/1.1 connection is closed afterwards,
// as Envoy closes it after such a codec error.
func refuseHeaders(rw *responseWriter, r *http.Request, ex *exchange, reason string) {
	if reason == headersTooLarge {
		ex.info.Details = "request_headers_too_large"
	} else {
		ex.info.Details = "too_many_request_headers"
	}
	if r.ProtoMajor == 1 {
		rw.Header().Set("Connection", "close")
	}
	localReply(rw, http.StatusRequestHeaderFieldsTooLarge, "")
}
