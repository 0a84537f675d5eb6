package filter

import (
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// bracket is a body encoder that encloses the body in "tag[" and "]",
// records the order encoders saw the head in (X-Order) and adds itself to
// the trailers (X-Path); the tag "-" leaves the body alone.
type bracket struct{}

func (bracket) Name() string              { return "test.bracket" }
func (bracket) ConfigType() proto.Message { return &wrapperspb.Int64Value{} }
func (bracket) New(a *anypb.Any) (Filter, error) {
	var v wrapperspb.Int64Value
	if err := a.UnmarshalTo(&v); err != nil {
		return nil, err
	}
	return bracketFilter(v.GetValue()), nil
}

type bracketFilter int64

func (bracketFilter) DecodeHeaders(*Stream, any) *LocalReply { return nil }

func (f bracketFilter) EncodeResponse(s *Stream, _ any, head *ResponseHead, next BodyWriter) BodyWriter {
	tag := string(rune('A' + f))
	head.Headers.Add("X-Order", tag)
	if prev, _ := s.State(bracketFilter(0)).(string); true {
		s.SetState(bracketFilter(0), prev+tag)
	}
	if f < 0 || head.EndStream {
		return nil
	}
	return &bracketWriter{tag: tag, next: next}
}

type bracketWriter struct {
	tag     string
	next    BodyWriter
	started bool
}

func (w *bracketWriter) Write(p []byte) (int, error) {
	if !w.started {
		w.started = true
		if _, err := w.next.Write([]byte(w.tag + "[")); err != nil {
			return 0, err
		}
	}
	return w.next.Write(p)
}

func (w *bracketWriter) Flush() error { return w.next.Flush() }

func (w *bracketWriter) Close(trailers Headers) error {
	if _, err := w.next.Write([]byte("]")); err != nil {
		return err
	}
	if trailers == nil {
		trailers = HeaderMap{}
	}
	trailers.Add("X-Path", w.tag)
	return w.next.Close(trailers)
}

// client is the end of the writers: what the client would get.
type client struct {
	body     strings.Builder
	flushes  int
	trailers Headers
	closed   bool
}

func (c *client) Write(p []byte) (int, error) { return c.body.Write(p) }
func (c *client) Flush() error                { c.flushes++; return nil }
func (c *client) Close(t Headers) error       { c.trailers, c.closed = t, true; return nil }

func bracketChain(t *testing.T, tags ...int64) *Chain {
	t.Helper()
	reg := NewRegistry(&routerv3.Router{}, bracket{}, denyHeader{})
	var hf []*hcmv3.HttpFilter
	for _, tag := range tags {
		name := "b" + string(rune('A'+tag))
		hf = append(hf, &hcmv3.HttpFilter{Name: name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, wrapperspb.Int64(tag))}})
	}
	hf = append(hf, deny(t, "deny", "x-deny", false), router(t))
	c, err := reg.BuildChain(hf)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEncodeResponseOrder(t *testing.T) {
	for _, n := range []int{1, 2, 4, 6} { // 6: more encoders than the stream's slots
		tags := make([]int64, n)
		var wantBody, wantOrder, wantPath strings.Builder
		for i := range tags {
			tags[i] = int64(i)
			wantBody.WriteString(string(rune('A'+i)) + "[")
		}
		wantBody.WriteString("body")
		for i := n - 1; i >= 0; i-- {
			wantOrder.WriteString(string(rune('A' + i)))
		}
		for i := range n {
			wantBody.WriteString("]")
			wantPath.WriteString(string(rune('A' + n - 1 - i)))
		}
		c := bracketChain(t, tags...)
		if !c.BodyEncoding(nil) {
			t.Fatal("BodyEncoding = false with body encoders")
		}
		s := stream()
		head := &ResponseHead{Status: 200, Headers: HeaderMap{}}
		out := &client{}
		w := c.EncodeResponse(s, nil, head, out)
		// The body comes from the router: the filter nearest it sees it first
		// and the first filter last, as the head.
		for _, p := range []string{"bo", "dy"} {
			if _, err := w.Write([]byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil || out.flushes != 1 {
			t.Fatalf("flush: %v, %d flushes", err, out.flushes)
		}
		if err := w.Close(nil); err != nil || !out.closed {
			t.Fatalf("close: %v, closed %v", err, out.closed)
		}
		if got := strings.Join(head.Headers.Values("X-Order"), ""); got != wantOrder.String() {
			t.Errorf("%d encoders saw the head in the order %q, want %q", n, got, wantOrder.String())
		}
		if got := out.body.String(); got != wantBody.String() {
			t.Errorf("%d encoders: body %q, want %q", n, got, wantBody.String())
		}
		if got := strings.Join(out.trailers.Values("X-Path"), ""); got != wantPath.String() {
			t.Errorf("%d encoders: trailers passed %q, want %q", n, got, wantPath.String())
		}
		if got := s.State(bracketFilter(0)); got != wantOrder.String() {
			t.Errorf("state = %v, want %q", got, wantOrder.String())
		}
	}
}

func TestEncodeResponseSkipsAndEndStream(t *testing.T) {
	c := bracketChain(t, 0, -1, 2) // the middle one watches without wrapping
	pf, err := NewRegistry(&routerv3.Router{}, bracket{}).ParsePerFilter(map[string]*anypb.Any{
		"bC": anyOf(t, &routev3.FilterConfig{Disabled: true}),
	})
	if err != nil {
		t.Fatal(err)
	}
	head := &ResponseHead{Status: 200, Headers: HeaderMap{}}
	out := &client{}
	w := c.EncodeResponse(stream(), pf, head, out)
	_, _ = w.Write([]byte("x"))
	_ = w.Close(nil)
	if got, want := out.body.String(), "A[x]"; got != want {
		t.Errorf("body = %q, want %q (C disabled on the route, @ only watching)", got, want)
	}
	if got := head.Headers.Values("X-Order"); strings.Join(got, "") != "@A" {
		t.Errorf("head seen by %q, want @ then A", got)
	}

	head = &ResponseHead{Status: 200, Headers: HeaderMap{}, EndStream: true}
	if w := c.EncodeResponse(stream(), nil, head, out); w != BodyWriter(out) {
		t.Errorf("a response without a body got writer %T, want the proxy's own", w)
	}
	if got := head.Headers.Values("X-Order"); strings.Join(got, "") != "C@A" {
		t.Errorf("a response without a body: head seen by %q, want every encoder", got)
	}

	plain, err := NewRegistry(&routerv3.Router{}, denyHeader{}).BuildChain([]*hcmv3.HttpFilter{deny(t, "d", "x", false), router(t)})
	if err != nil {
		t.Fatal(err)
	}
	if plain.BodyEncoding(nil) || plain.EncodeResponse(stream(), nil, head, out) != BodyWriter(out) {
		t.Error("a chain without body encoders wraps bodies")
	}
}

func TestStreamState(t *testing.T) {
	type keyA struct{}
	type keyB struct{}
	s := stream()
	if s.State(keyA{}) != nil {
		t.Fatal("state of a fresh stream")
	}
	s.SetState(keyA{}, 1)
	s.SetState(keyB{}, "b")
	s.SetState(keyA{}, 2)
	s.SetState(3, 3) // past the stream's own room
	if s.State(keyA{}) != 2 || s.State(keyB{}) != "b" || s.State(3) != 3 {
		t.Fatalf("state = %v %v %v", s.State(keyA{}), s.State(keyB{}), s.State(3))
	}
}
