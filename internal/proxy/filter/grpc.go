package filter

import (
	"net/http"
	"strings"
)

// GRPCStatusOf is the gRPC status of an HTTP status, as gRPC's HTTP mapping
// and Envoy's Grpc::Utility::httpToGrpcStatus give it.
func GRPCStatusOf(status int) int {
	switch status {
	case http.StatusBadRequest:
		return 13 // INTERNAL
	case http.StatusUnauthorized:
		return 16 // UNAUTHENTICATED
	case http.StatusForbidden:
		return 7 // PERMISSION_DENIED
	case http.StatusNotFound:
		return 12 // UNIMPLEMENTED
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return 14 // UNAVAILABLE
	}
	return 2 // UNKNOWN
}

// IsGRPCContentType is Envoy's test of a gRPC content type: exactly
// application/grpc or application/grpc+<format> (application/grpc-web is not).
func IsGRPCContentType(ct string) bool {
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest[0] == '+')
}

// GRPCMessage is s as a grpc-message value, percent-encoded as gRPC says
// (Envoy's PercentEncoding::encode): '%' and bytes outside printable ASCII
// become %XX.
func GRPCMessage(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '%' {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '%' {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}
