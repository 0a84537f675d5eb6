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

// upper is a body replacement that upper-cases what it reads.
type upper struct{ src io.Reader }

func (u upper) Read(p []byte) (int, error) {
	n, err := u.src.Read(p)
	copy(p, strings.ToUpper(string(p[:n])))
	return n, err
}

// A replacement transforms the body as it stands: what an earlier filter buffered, then
// the rest; a later filter's Buffer reads the replacement's output, and the router gets
// the rest of it from its own source of the client's body (ForwardBody), not the filters'.
func TestBodyReplace(t *testing.T) {
	s := NewStream(context.Background(), nil)
	client := strings.NewReader("abcdefghij")
	s.SetBody(iotest.OneByteReader(client), 10)
	if data, _, _ := s.Request.Body.Buffer(2); string(data) != "ab" {
		t.Fatalf("Buffer(2) = %q", data)
	}
	s.Request.Body.Replace(func(r io.Reader) io.Reader { return upper{r} })
	if s.Request.Body.Length() != -1 {
		t.Errorf("Length after Replace = %d, want -1", s.Request.Body.Length())
	}
	if data, whole, err := s.Request.Body.Buffer(4); string(data) != "ABCD" || whole || err != nil {
		t.Fatalf("Buffer(4) after Replace = %q, %v, %v", data, whole, err)
	}
	body, length, changed := s.ForwardBody(client)
	if !changed || length != -1 {
		t.Fatalf("ForwardBody: changed %v, length %d", changed, length)
	}
	if got, err := io.ReadAll(body); string(got) != "ABCDEFGHIJ" || err != nil {
		t.Errorf("forwarded %q, %v", got, err)
	}
}

// ForwardBody leaves a body nobody read alone, and puts what filters read first.
func TestForwardBody(t *testing.T) {
	s := NewStream(context.Background(), nil)
	if _, _, changed := s.ForwardBody(strings.NewReader("x")); changed {
		t.Error("a stream without a body changed it")
	}
	client := strings.NewReader("0123456789")
	s.SetBody(client, 10)
	if _, length, changed := s.ForwardBody(client); changed || length != 10 {
		t.Errorf("unread body: changed %v, length %d", changed, length)
	}
	s = NewStream(context.Background(), nil)
	client = strings.NewReader("0123456789")
	s.SetBody(client, 10)
	_, _, _ = s.Request.Body.Buffer(3)
	body, length, changed := s.ForwardBody(client)
	if got, _ := io.ReadAll(body); !changed || length != 10 || string(got) != "0123456789" {
		t.Errorf("read body: changed %v, length %d, forwarded %q", changed, length, got)
	}
}
