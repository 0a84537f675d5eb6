package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// greeter is a real gRPC server (grpc-go over h2c) with a unary method, a server stream
// and errors, its messages wrapperspb.StringValue:
//   - Hello answers "hello, NAME" with the trailer x-greeting: bye;
//   - Fail answers an error status before any message (a trailers-only response);
//   - Count "N" sends "1" .. "N", holding every message after the first until release is
//     closed; "N!" ends with status Aborted after them.
type greeter struct {
	addr    string
	release chan struct{}
}

func startGreeter(t *testing.T) *greeter {
	t.Helper()
	g := &greeter{release: make(chan struct{})}
	desc := grpc.ServiceDesc{
		ServiceName: "portico.test.Greeter",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Hello", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				in := &wrapperspb.StringValue{}
				if err := dec(in); err != nil {
					return nil, err
				}
				_ = grpc.SetTrailer(ctx, metadata.Pairs("x-greeting", "bye"))
				return wrapperspb.String("hello, " + in.GetValue()), nil
			}},
			{MethodName: "Fail", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				in := &wrapperspb.StringValue{}
				if err := dec(in); err != nil {
					return nil, err
				}
				return nil, status.Error(codes.InvalidArgument, "bad name: "+in.GetValue())
			}},
		},
		Streams: []grpc.StreamDesc{{StreamName: "Count", ServerStreams: true, Handler: g.count}},
	}
	s := grpc.NewServer()
	s.RegisterService(&desc, struct{}{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	g.addr = ln.Addr().String()
	return g
}

func (g *greeter) count(_ any, stream grpc.ServerStream) error {
	in := &wrapperspb.StringValue{}
	if err := stream.RecvMsg(in); err != nil {
		return err
	}
	arg, abort := strings.CutSuffix(in.GetValue(), "!")
	n, err := strconv.Atoi(arg)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	for i := 1; i <= n; i++ {
		if i == 2 {
			select {
			case <-g.release:
			case <-stream.Context().Done():
				return stream.Context().Err()
			}
		}
		if err := stream.SendMsg(wrapperspb.String(strconv.Itoa(i))); err != nil {
			return err
		}
	}
	if abort {
		return status.Error(codes.Aborted, "stopped")
	}
	return nil
}

// webFrame is one gRPC-Web frame: a message, or the trailers (flag 0x80).
type webFrame struct {
	trailers bool
	data     []byte
}

// grpcWebBody frames messages as a gRPC-Web client sends them.
func grpcWebBody(t *testing.T, msgs ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, m := range msgs {
		data, err := proto.Marshal(wrapperspb.String(m))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteByte(0)
		_ = binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.Write(data)
	}
	return b.Bytes()
}

// readWebFrame reads the next frame of a binary gRPC-Web body.
func readWebFrame(r io.Reader) (webFrame, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return webFrame{}, err
	}
	data := make([]byte, binary.BigEndian.Uint32(head[1:]))
	if _, err := io.ReadFull(r, data); err != nil {
		return webFrame{}, err
	}
	return webFrame{trailers: head[0]&0x80 != 0, data: data}, nil
}

// decodeWebText decodes a grpc-web-text body as a browser client does: quantum by
// quantum, since each frame may be padded on its own.
func decodeWebText(t *testing.T, text string) []byte {
	t.Helper()
	if len(text)%4 != 0 {
		t.Fatalf("grpc-web-text body of %d characters: not whole base64 quanta", len(text))
	}
	var out []byte
	for i := 0; i < len(text); i += 4 {
		q, err := base64.StdEncoding.DecodeString(text[i : i+4])
		if err != nil {
			t.Fatalf("grpc-web-text body %q: %v", text, err)
		}
		out = append(out, q...)
	}
	return out
}

// webReply is a gRPC-Web response, decoded: the messages' values and the trailers
// frame's fields (nil without one).
type webReply struct {
	status   int
	header   http.Header
	messages []string
	trailers map[string]string
	raw      []byte
}

func parseWebReply(t *testing.T, resp *http.Response, body []byte) webReply {
	t.Helper()
	r := webReply{status: resp.StatusCode, header: resp.Header, raw: body}
	br := bytes.NewReader(body)
	for br.Len() > 0 {
		f, err := readWebFrame(br)
		if err != nil {
			t.Fatalf("gRPC-Web body %q: %v", body, err)
		}
		if !f.trailers {
			var m wrapperspb.StringValue
			if err := proto.Unmarshal(f.data, &m); err != nil {
				t.Fatalf("message %q: %v", f.data, err)
			}
			r.messages = append(r.messages, m.GetValue())
			continue
		}
		if r.trailers != nil || br.Len() > 0 {
			t.Fatalf("gRPC-Web body %q: the trailers frame is not last and alone", body)
		}
		r.trailers = map[string]string{}
		for _, line := range strings.SplitAfter(string(f.data), "\r\n") {
			if line == "" {
				continue
			}
			name, value, ok := strings.Cut(strings.TrimSuffix(line, "\r\n"), ":")
			if !ok || !strings.HasSuffix(line, "\r\n") || name != strings.ToLower(name) {
				t.Fatalf("trailers frame %q: line %q is not a lower-case name:value CRLF", f.data, line)
			}
			r.trailers[name] = value
		}
	}
	return r
}

// grpcWebCall posts a gRPC-Web request; text sends and asks for grpc-web-text, in
// chunks that split base64 quanta.
func (e *env) grpcWebCall(host, method string, text bool, msgs ...string) webReply {
	e.t.Helper()
	body := grpcWebBody(e.t, msgs...)
	ct := "application/grpc-web+proto"
	var src io.Reader = bytes.NewReader(body)
	if text {
		ct = "application/grpc-web-text"
		src = oddChunks(base64.StdEncoding.EncodeToString(body))
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+e.httpAddr()+method, src)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = host
	req.Header.Set("Content-Type", ct)
	req.Header.Set("X-Grpc-Web", "1")
	if text {
		req.Header.Set("Accept", "application/grpc-web-text")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", method, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("POST %s: reading the body: %v", method, err)
	}
	if text && resp.Header.Get("Content-Type") == "application/grpc-web-text+proto" {
		got = decodeWebText(e.t, string(got))
	}
	return parseWebReply(e.t, resp, got)
}

// oddChunks sends text through a pipe in writes of 1, 2, 3, 5, 7... bytes, so that the
// client sends it chunked and the proxy reads base64 quanta in pieces.
func oddChunks(text string) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		sizes := []int{1, 2, 3, 5, 7}
		for i := 0; len(text) > 0; i++ {
			n := min(sizes[i%len(sizes)], len(text))
			if _, err := pw.Write([]byte(text[:n])); err != nil {
				return
			}
			text = text[n:]
		}
		_ = pw.Close()
	}()
	return pr
}

const grpcWebManifest = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: grpc, namespace: default}
spec:
  virtualhost: {fqdn: grpc.example.com}
  routes:
  - conditions: [{prefix: /portico.test.Greeter/}]
    services: [{name: greeter, port: 80, protocol: h2c}]
  - conditions: [{prefix: /echo}]
    services: [{name: plain, port: 80}]
  - conditions: [{prefix: /nowhere}]
    services: [{name: empty, port: 80, protocol: h2c}]
`

// TestGRPCWeb: a gRPC-Web client (requests framed by hand, as a browser library frames
// them) reaches a gRPC service behind an HTTPProxy route with protocol h2c, in binary and
// text mode, unary and server streaming; trailers come back as a trailers frame, a
// trailers-only error in the headers, a non-gRPC answer as a gRPC status. Plain gRPC
// through the same route still works, and a request that is not gRPC-Web is untouched.
func TestGRPCWeb(t *testing.T) {
	t.Parallel()
	g := startGreeter(t)
	e := start(t, map[string]string{
		"backends.yaml": strings.Join([]string{backends(t, "plain"), serviceManifest("default", "greeter", g.addr), serviceManifest("default", "empty")}, "---\n"),
		"grpc.yaml":     grpcWebManifest,
	})
	const host = "grpc.example.com"

	for _, text := range []bool{false, true} {
		r := e.grpcWebCall(host, "/portico.test.Greeter/Hello", text, "web")
		wantCT := map[bool]string{false: "application/grpc-web+proto", true: "application/grpc-web-text+proto"}[text]
		if r.status != 200 || r.header.Get("Content-Type") != wantCT || len(r.messages) != 1 || r.messages[0] != "hello, web" ||
			r.trailers["grpc-status"] != "0" || r.trailers["x-greeting"] != "bye" {
			t.Errorf("Hello (text %v): %d %q, messages %q, trailers %q; want 200 %s, [hello, web], grpc-status 0 and x-greeting bye",
				text, r.status, r.header.Get("Content-Type"), r.messages, r.trailers, wantCT)
		}
		if cl := r.header.Get("Content-Length"); cl != "" {
			t.Errorf("Hello (text %v): Content-Length %s on a bridged response", text, cl)
		}

		r = e.grpcWebCall(host, "/portico.test.Greeter/Fail", text, "100% wrong")
		if r.status != 200 || r.header.Get("Grpc-Status") != "3" || r.header.Get("Grpc-Message") != "bad name: 100%25 wrong" ||
			len(r.raw) != 0 || r.header.Get("Content-Type") != wantCT {
			t.Errorf("Fail (text %v): %d %q, grpc-status %q, grpc-message %q, body %q; want a trailers-only 200 %s with status 3",
				text, r.status, r.header.Get("Content-Type"), r.header.Get("Grpc-Status"), r.header.Get("Grpc-Message"), r.raw, wantCT)
		}

	}

	// Count's second message waits for release: the first must reach the client before.
	testGRPCWebStreaming(t, e, g, host)
	for _, text := range []bool{false, true} {
		r := e.grpcWebCall(host, "/portico.test.Greeter/Count", text, "2!")
		if len(r.messages) != 2 || r.messages[1] != "2" || r.trailers["grpc-status"] != "10" || r.trailers["grpc-message"] != "stopped" {
			t.Errorf("Count 2! (text %v): messages %q, trailers %q; want [1 2] then grpc-status 10 stopped", text, r.messages, r.trailers)
		}
	}

	t.Run("answers that are not gRPC", func(t *testing.T) {
		for _, c := range []struct {
			path, why               string
			status                  int
			grpcStatus, grpcMessage string
		}{
			// The proxy's own answer: its text becomes grpc-message, as from Envoy.
			{"/nowhere/x", "a Service without endpoints: the proxy's 503", 503, "14", "no healthy upstream"},
			{"/echo/x", "an HTTP/1.1 backend's JSON 200", 200, "2", ""},
			// Bodiless: as from Envoy, no grpc-status (the client maps the HTTP status).
			{"/missing/x", "no route: the proxy's 404", 404, "", ""},
		} {
			r := e.grpcWebCall(host, c.path, false, "x")
			if r.status != c.status || r.header.Get("Grpc-Status") != c.grpcStatus || r.header.Get("Grpc-Message") != c.grpcMessage ||
				len(r.raw) != 0 || r.header.Get("Content-Type") != "application/grpc-web+proto" {
				t.Errorf("%s: %d %q, grpc-status %q, grpc-message %q, body %q; want %d application/grpc-web+proto, grpc-status %s, grpc-message %q, no body",
					c.why, r.status, r.header.Get("Content-Type"), r.header.Get("Grpc-Status"), r.header.Get("Grpc-Message"), r.raw, c.status, c.grpcStatus, c.grpcMessage)
			}
		}
		// A grpc-web-text body that is not base64: Envoy's 400, as gRPC's INTERNAL.
		req, _ := http.NewRequest(http.MethodPost, "http://"+e.httpAddr()+"/portico.test.Greeter/Hello", strings.NewReader("AAAA*AAA"))
		req.Host = host
		req.Header.Set("Content-Type", "application/grpc-web-text")
		r := e.do(req, e.client)
		if r.status != 400 || r.header.Get("Grpc-Status") != "13" {
			t.Errorf("malformed base64: %d, grpc-status %q, body %q; want 400 with grpc-status 13", r.status, r.header.Get("Grpc-Status"), r.body)
		}
	})

	t.Run("not gRPC-Web: untouched", func(t *testing.T) {
		for _, ct := range []string{"application/json", "application/grpc-web+json"} {
			req, _ := http.NewRequest(http.MethodPost, "http://"+e.httpAddr()+"/echo", strings.NewReader(`{"a":1}`))
			req.Host = host
			req.Header.Set("Content-Type", ct)
			r := e.do(req, e.client)
			if r.status != 200 || r.echo.Headers["Content-Type"][0] != ct || r.echo.Headers["Te"] != nil || r.echo.Headers["Grpc-Accept-Encoding"] != nil {
				t.Errorf("%s: %d, the backend saw %v", ct, r.status, r.echo.Headers)
			}
			if r.header.Get("Grpc-Status") != "" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
				t.Errorf("%s: the response became %q with grpc-status %q", ct, r.header.Get("Content-Type"), r.header.Get("Grpc-Status"))
			}
		}
	})

	t.Run("plain gRPC through the same route", func(t *testing.T) {
		conn, err := grpc.NewClient(e.httpAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority(host))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out := &wrapperspb.StringValue{}
		var trailer metadata.MD
		if err := conn.Invoke(ctx, "/portico.test.Greeter/Hello", wrapperspb.String("grpc"), out, grpc.Trailer(&trailer)); err != nil || out.GetValue() != "hello, grpc" || trailer.Get("x-greeting")[0] != "bye" {
			t.Errorf("Hello over gRPC: %q, trailer %v, %v", out.GetValue(), trailer, err)
		}
		err = conn.Invoke(ctx, "/portico.test.Greeter/Fail", wrapperspb.String("x"), out)
		if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || st.Message() != "bad name: x" {
			t.Errorf("Fail over gRPC: %v, want InvalidArgument", err)
		}
	})
}

// testGRPCWebStreaming reads a server stream in text mode: the first message arrives
// while the server holds the others back (so the stream is not buffered whole), and
// every message is a base64 frame of its own.
func testGRPCWebStreaming(t *testing.T, e *env, g *greeter, host string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+e.httpAddr()+"/portico.test.Greeter/Count",
		strings.NewReader(base64.StdEncoding.EncodeToString(grpcWebBody(t, "3"))))
	req.Host = host
	req.Header.Set("Content-Type", "application/grpc-web-text")
	req.Header.Set("Accept", "application/grpc-web-text")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// 5 bytes of frame head and 3 of a one-digit message are 12 characters of base64.
	var got []string
	frame := make([]byte, 12)
	for i := 0; i < 3; i++ {
		if _, err := io.ReadFull(resp.Body, frame); err != nil {
			t.Fatalf("Count 3 in text mode: message %d: %v (after %q)", i+1, err, got)
		}
		f, err := readWebFrame(bytes.NewReader(decodeWebText(t, string(frame))))
		var m wrapperspb.StringValue
		if err != nil || f.trailers || proto.Unmarshal(f.data, &m) != nil {
			t.Fatalf("Count 3 in text mode: frame %q is not a message on its own (%v)", frame, err)
		}
		got = append(got, m.GetValue())
		if i == 0 {
			close(g.release)
		}
	}
	rest, _ := io.ReadAll(resp.Body)
	tr := parseWebReply(t, resp, decodeWebText(t, string(rest)))
	if fmt.Sprint(got) != "[1 2 3]" || tr.trailers["grpc-status"] != "0" {
		t.Errorf("Count 3 in text mode: messages %q, trailers %q; want [1 2 3], grpc-status 0", got, tr.trailers)
	}
}
