package extauthz

import (
	"errors"
	"net/http"
	"os"

	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// PartialBodyHeader tells the server, when the request body is sent, whether
// it got all of it ("false") or only its first max_request_bytes ("true").
const PartialBodyHeader = "x-envoy-auth-partial-body"

const detailsTooLarge = "request_payload_too_large"

// bodySettings are with_request_body's.
type bodySettings struct {
	max     int
	partial bool // allow_partial_message
	asBytes bool // pack_as_bytes: raw_body instead of body (gRPC only)
}

func newBodySettings(b *extauthzv3.BufferSettings) *bodySettings {
	if b == nil {
		return nil
	}
	return &bodySettings{max: int(b.GetMaxRequestBytes()), partial: b.GetAllowPartialMessage(), asBytes: b.GetPackAsBytes()}
}

// checkBody is what a check carries of the request body.
type checkBody struct {
	data    []byte
	sent    bool // the check carries the body (and PartialBodyHeader)
	partial bool
}

// readBody buffers the start of the request body for the check, as Envoy's
// filter does with with_request_body: up to max bytes; a longer body is
// refused with 413 unless partial messages are allowed, whatever
// failure_mode_allow says. Requests without a body, and upgrades (whose
// "body" is another protocol), are checked without one.
func (b *bodySettings) readBody(r *filter.Request) (checkBody, *filter.LocalReply) {
	if b == nil || r.Body == nil || r.Headers.Get("Upgrade") != "" {
		return checkBody{}, nil
	}
	if !b.partial && r.Body.Length() > int64(b.max) {
		return checkBody{}, tooLarge()
	}
	data, _, err := r.Body.Buffer(b.max + 1)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The proxy cut a stalled upload short at the stream idle timeout: its
		// answer, as when the router waits on the body.
		return checkBody{}, &filter.LocalReply{Status: http.StatusRequestTimeout, Body: "stream timeout", Details: "stream_idle_timeout"}
	case err != nil:
		// The client went away or sent a malformed body: there is nothing to
		// authorize, and nothing is forwarded.
		return checkBody{}, &filter.LocalReply{Status: http.StatusBadRequest, Body: "Bad Request", Details: "ext_authz_request_body_error"}
	case len(data) <= b.max:
		return checkBody{data: data, sent: true}, nil
	case !b.partial:
		return checkBody{}, tooLarge()
	}
	return checkBody{data: data[:b.max], sent: true, partial: true}, nil
}

// tooLarge is Envoy's answer to a body over the connection manager's buffer
// limit, which with_request_body sets to max_request_bytes.
func tooLarge() *filter.LocalReply {
	return &filter.LocalReply{Status: http.StatusRequestEntityTooLarge, Body: "Payload Too Large", Details: detailsTooLarge}
}

func partialValue(partial bool) string {
	if partial {
		return "true"
	}
	return "false"
}
