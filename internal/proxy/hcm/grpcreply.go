package hcm

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// isGRPCRequest is Envoy's Grpc::Common::isGrpcRequestHeaders, asked of the
// request as the client sent it (Envoy decides it when the request's headers
// arrive, before any filter: a gRPC-Web request, which its filter turns into
// gRPC, is not one). The proxy's own answers to a gRPC request take gRPC's
// form, which its client can read, instead of an HTTP status it would report
// as a protocol error.
func isGRPCRequest(r *http.Request) bool {
	ct := r.Header["Content-Type"]
	return len(ct) > 0 && filter.IsGRPCContentType(ct[0])
}

// grpcLocalReply is Envoy's local reply to a gRPC request: a trailers-only
// response, 200 with content-type application/grpc, the grpc-status the reply
// asks for or the one of its HTTP status, and its body as the grpc-message.
// Like Envoy's, the access log and metrics see the 200 that was sent.
func (w *responseWriter) grpcLocalReply(status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "application/grpc")
	h.Del("Content-Length")
	if headerValue(h, "Grpc-Status") == "" {
		code := w.grpcStatus
		if code == 0 {
			code = filter.GRPCStatusOf(status)
		}
		h.Set("Grpc-Status", strconv.Itoa(code))
	}
	if body = strings.TrimSuffix(body, "\n"); body != "" {
		h.Set("Grpc-Message", filter.GRPCMessage(body))
	}
	w.WriteHeader(http.StatusOK)
}
