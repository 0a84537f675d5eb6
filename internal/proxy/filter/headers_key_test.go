package filter

import (
	"net/textproto"
	"testing"
)

// key gives what textproto.CanonicalMIMEHeaderKey gives, for canonical,
// non-canonical and invalid names alike.
func TestKeyIsCanonicalMIMEHeaderKey(t *testing.T) {
	names := []string{"", "-", "a", "A", "content-type", "Content-Type", "CONTENT-TYPE", "Content-type",
		"x-B-c", "X-B-C", "Accept-Encoding", "a b", "A B", "A\x00", "a\x00", "Ä", "é-x", "X_Y", "x_y", "--a", "A--B"}
	for c := range 256 {
		b := string([]byte{byte(c)})
		names = append(names, b, "X-"+b, "x"+b+"y", "X"+b+"Y")
	}
	for _, n := range names {
		if got, want := key(n), textproto.CanonicalMIMEHeaderKey(n); got != want {
			t.Errorf("key(%q) = %q, want %q", n, got, want)
		}
	}
}
