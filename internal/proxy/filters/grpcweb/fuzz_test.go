package grpcweb

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// chunkSizes turns fuzzer bytes into read or write sizes of 1 to 256 bytes.
func chunkSizes(b []byte) []int {
	sizes := make([]int, len(b))
	for i, c := range b {
		sizes[i] = int(c) + 1
	}
	return sizes
}

// FuzzBase64Decoder: whatever a client sends and however its body is cut into reads,
// the streaming decoder never panics, and it gives what decoding the whole body at once
// gives (each padded quantum ending a run), or refuses it with Envoy's 400.
func FuzzBase64Decoder(f *testing.F) {
	f.Add([]byte(base64.StdEncoding.EncodeToString([]byte("\x00\x00\x00\x00\x02hi"))), []byte{1, 2, 3})
	f.Add([]byte("YWI=Yw==ZGVmZw=="), []byte{2, 5})
	f.Add([]byte("QQ"), []byte{})
	f.Add([]byte("QUJD\r\nRA=="), []byte{0, 0, 0})
	f.Add([]byte("====QUJD"), []byte{3})
	f.Fuzz(func(t *testing.T, body, sizes []byte) {
		got, err := io.ReadAll(newBase64Decoder(&chunked{data: bytes.Clone(body), sizes: chunkSizes(sizes)}))
		want, wantErr := decodeWhole(body)
		var refused *filter.ReplyError
		switch {
		case err != nil && !errors.As(err, &refused):
			t.Fatalf("body %q: error %v, want a refusal or none", body, err)
		case (err == nil) != (wantErr == nil):
			t.Fatalf("body %q in reads of %v: error %v, decoding it whole: %v", body, chunkSizes(sizes), err, wantErr)
		case err == nil && !bytes.Equal(got, want):
			t.Fatalf("body %q in reads of %v: %q, decoding it whole: %q", body, chunkSizes(sizes), got, want)
		}
	})
}

// decodeWhole decodes a whole grpc-web-text body.
func decodeWhole(body []byte) ([]byte, error) {
	if len(body)%4 != 0 {
		return nil, errors.New("not whole quanta")
	}
	return decodeQuanta(make([]byte, 0, base64.StdEncoding.DecodedLen(len(body))), body)
}

// FuzzTextResponse: a gRPC response, whatever its frames and however the upstream's
// writes cut them, reaches a grpc-web-text client as base64 of each whole frame, then of
// the trailers frame; an unfinished last frame is dropped.
func FuzzTextResponse(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x00\x02hi\x00\x00\x00\x00\x00"), []byte{1, 6})
	f.Add([]byte("\x00\xff\xff\xff\xffabc"), []byte{2})
	f.Add([]byte("\x80\x00\x00\x00\x01"), []byte{})
	f.Fuzz(func(t *testing.T, body, sizes []byte) {
		h := filter.HeaderMap{"Content-Type": {"application/grpc"}}
		out := &sink{}
		w := Filter{}.EncodeResponse(grpcWebStream(textResponse), nil, &filter.ResponseHead{Status: 200, Headers: h}, out)
		rest := body
		for _, n := range chunkSizes(sizes) {
			if len(rest) == 0 {
				break
			}
			n = min(n, len(rest))
			if m, err := w.Write(rest[:n]); m != n || err != nil {
				t.Fatalf("Write: %d, %v", m, err)
			}
			rest = rest[n:]
		}
		if len(rest) > 0 {
			_, _ = w.Write(rest)
		}
		_ = w.Close(filter.HeaderMap{"Grpc-Status": {"0"}})
		var want []byte
		for rest := body; len(rest) >= 5; {
			n := 5 + int(binary.BigEndian.Uint32(rest[1:]))
			if len(rest) < n {
				break
			}
			want = base64.StdEncoding.AppendEncode(want, rest[:n])
			rest = rest[n:]
		}
		want = base64.StdEncoding.AppendEncode(want, trailersFrame(filter.HeaderMap{"Grpc-Status": {"0"}}))
		if got := out.body.String(); got != string(want) || !out.closed {
			t.Fatalf("body %q in writes of %v: sent %q (closed %v), want %q", body, chunkSizes(sizes), got, out.closed, want)
		}
	})
}
