package filter

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// Buffer reads only what is asked, says whether that is the whole body, and keeps
// what it read for the router (Buffered).
func TestBodyBuffer(t *testing.T) {
	s := NewStream(context.Background(), nil)
	if _, read := s.Buffered(); read {
		t.Fatal("a stream without a body has something buffered")
	}
	src := iotest.OneByteReader(strings.NewReader("0123456789"))
	s.SetBody(src, -1)
	if _, read := s.Buffered(); read {
		t.Fatal("buffered before any filter asked")
	}
	data, whole, err := s.Request.Body.Buffer(4)
	if string(data) != "0123" || whole || err != nil {
		t.Fatalf("Buffer(4) = %q, %v, %v", data, whole, err)
	}
	data, whole, err = s.Request.Body.Buffer(2) // less than already buffered: no read
	if string(data) != "0123" || whole || err != nil {
		t.Fatalf("Buffer(2) = %q, %v, %v", data, whole, err)
	}
	data, whole, err = s.Request.Body.Buffer(100)
	if string(data) != "0123456789" || !whole || err != nil {
		t.Fatalf("Buffer(100) = %q, %v, %v", data, whole, err)
	}
	if buf, read := s.Buffered(); !read || string(buf) != "0123456789" {
		t.Errorf("Buffered = %q, %v", buf, read)
	}
	if rest, _ := io.ReadAll(src); len(rest) != 0 {
		t.Errorf("read past the body: %q left", rest)
	}
}

// A read error is returned with what came before it, and Buffered still reports it so
// that the router's reads get the bytes, then the error.
func TestBodyBufferError(t *testing.T) {
	s := NewStream(context.Background(), nil)
	boom := errors.New("client went away")
	s.SetBody(io.MultiReader(strings.NewReader("ab"), iotest.ErrReader(boom)), 10)
	if s.Request.Body.Length() != 10 {
		t.Errorf("Length = %d", s.Request.Body.Length())
	}
	data, whole, err := s.Request.Body.Buffer(5)
	if string(data) != "ab" || whole || !errors.Is(err, boom) {
		t.Fatalf("Buffer = %q, %v, %v", data, whole, err)
	}
	if buf, read := s.Buffered(); !read || string(buf) != "ab" {
		t.Errorf("Buffered = %q, %v", buf, read)
	}
}
