//go:build linux

package sockpeek

import (
	"net"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testutil"
)

// lookUntil looks at p until it finds want, giving the loopback a moment to
// deliver; it returns what it found last.
func lookUntil(p *Peeker, want State) State {
	got := p.Look()
	for i := 0; got != want && i < 500; i++ {
		time.Sleep(10 * time.Millisecond)
		got = p.Look()
	}
	return got
}

// TestLookSeesWhatWaitsWithoutTakingIt follows one socket through nothing,
// a byte sent (seen, and still there to read), the byte read, and the peer's
// close.
func TestLookSeesWhatWaitsWithoutTakingIt(t *testing.T) {
	client, server := testutil.TCPPair(t)
	p := New(server)
	if p == nil {
		t.Fatal("no Peeker for a TCP connection")
	}
	if got := p.Look(); got != Empty {
		t.Fatalf("before anything was sent: %v, want Empty", got)
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if got := lookUntil(p, Data); got != Data {
		t.Fatalf("after a byte was sent: %v, want Data", got)
	}
	var b [2]byte
	if n, err := server.Read(b[:]); n != 1 || b[0] != 'x' || err != nil {
		t.Fatalf("reading after the look: %d %q %v, want the byte the look left", n, b[:n], err)
	}
	if got := p.Look(); got != Empty {
		t.Fatalf("after the byte was read: %v, want Empty", got)
	}
	_ = client.Close()
	if got := lookUntil(p, Closed); got != Closed {
		t.Fatalf("after the peer closed: %v, want Closed", got)
	}
}

func TestNewRefusesWhatIsNotASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if p := New(a); p != nil {
		t.Fatal("a Peeker for net.Pipe, which has no socket")
	}
}
