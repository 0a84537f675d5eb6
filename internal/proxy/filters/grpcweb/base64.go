package grpcweb

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// readChunk is how much base64 a decoder reads at a time.
const readChunk = 16 << 10

// base64Decoder decodes a grpc-web-text request body as it streams, in
// quanta of four characters whatever the client's chunks are: a quantum split
// across reads waits for the rest of it. As the gRPC-Web protocol allows, a
// quantum may end in padding anywhere (a client may encode each message on its
// own); a body that ends inside a quantum, or holds anything but base64, is
// refused with Envoy's 400.
type base64Decoder struct {
	src  io.Reader
	raw  []byte // raw[:have] is read and not decoded yet
	have int
	out  []byte // decoded, out[off:] not returned yet
	off  int
	err  error // sticky: io.EOF at the end, the source's error, or a refusal
}

func newBase64Decoder(src io.Reader) *base64Decoder {
	return &base64Decoder{src: src}
}

func (d *base64Decoder) Read(p []byte) (int, error) {
	for d.off == len(d.out) {
		if d.err != nil {
			return 0, d.err
		}
		d.fill()
	}
	n := copy(p, d.out[d.off:])
	d.off += n
	return n, nil
}

// fill reads once from the source and decodes every whole quantum it has.
func (d *base64Decoder) fill() {
	if d.raw == nil {
		d.raw = make([]byte, 3+readChunk)
		d.out = make([]byte, 0, base64.StdEncoding.DecodedLen(len(d.raw)))
	}
	n, err := d.src.Read(d.raw[d.have:])
	d.have += n
	whole := d.have / 4 * 4
	out, derr := decodeQuanta(d.out[:0], d.raw[:whole])
	d.out, d.off = out, 0
	d.have = copy(d.raw, d.raw[whole:d.have])
	switch {
	case derr != nil:
		d.out, d.err = d.out[:0], refuseBase64("grpc_base_64_decode_failed")
	case err == io.EOF && d.have > 0:
		d.err = refuseBase64("grpc_base_64_decode_failed_bad_size")
	case err != nil:
		d.err = err
	}
}

// decodeQuanta appends to dst the decoding of src, whole quanta that may each
// end in padding.
func decodeQuanta(dst, src []byte) ([]byte, error) {
	if bytes.ContainsAny(src, "\r\n") {
		return dst, errBase64 // Go's decoder would skip them; Envoy's refuses them
	}
	for len(src) > 0 {
		end := len(src)
		if i := bytes.IndexByte(src, '='); i >= 0 {
			end = (i/4 + 1) * 4 // the padded quantum ends this run
		}
		n, err := base64.StdEncoding.Decode(dst[len(dst):cap(dst)], src[:end])
		if err != nil || (n == 0 && end > 0) {
			return dst, errBase64
		}
		dst, src = dst[:len(dst)+n], src[end:]
	}
	return dst, nil
}

var errBase64 = base64.CorruptInputError(0)

// refuseBase64 is Envoy's answer to a malformed grpc-web-text body; details is
// its response code details.
func refuseBase64(details string) error {
	return &filter.ReplyError{Reply: filter.LocalReply{
		Status:  http.StatusBadRequest,
		Body:    "Bad gRPC-web request, invalid base64 data.",
		Details: details,
	}}
}
