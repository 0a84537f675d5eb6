//go:build linux

package sockpeek

import (
	"io"
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

// awaited is what a LookWriteAwait returned.
type awaited struct {
	state State
	wrote int
}

// startWriteAwait writes b on c with LookWriteAwait from a goroutine of its
// own, which sends what it returned.
func startWriteAwait(t *testing.T, c net.Conn, b []byte) <-chan awaited {
	t.Helper()
	p := New(c)
	if p == nil {
		t.Fatal("no Peeker for a TCP connection")
	}
	done := make(chan awaited, 1)
	go func() {
		state, n := p.LookWriteAwait(b)
		done <- awaited{state, n}
	}()
	return done
}

// within fails the test when ch has nothing in 10 s: a hang, not a slow run.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing after 10 s", what)
		panic("unreachable")
	}
}

// stillWaiting fails the test when done has a result already.
func stillWaiting(t *testing.T, done <-chan awaited, before string) {
	t.Helper()
	select {
	case r := <-done:
		t.Fatalf("LookWriteAwait returned %+v before %s", r, before)
	case <-time.After(50 * time.Millisecond):
	}
}

// readPing reads the 4 bytes startWriteAwait's callers write.
func readPing(t *testing.T, c net.Conn) {
	t.Helper()
	var b [4]byte
	if _, err := io.ReadFull(c, b[:]); err != nil || string(b[:]) != "ping" {
		t.Fatalf("the peer read %q, %v; want ping", b[:], err)
	}
}

// TestLookWriteAwaitReturnsOnceAnswered: the bytes reach the peer, and
// LookWriteAwait returns only once the peer's answer is there to read, which
// it leaves unread.
func TestLookWriteAwaitReturnsOnceAnswered(t *testing.T) {
	client, server := testutil.TCPPair(t)
	done := startWriteAwait(t, client, []byte("ping"))
	readPing(t, server)
	stillWaiting(t, done, "the peer answered")
	if _, err := server.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if r := within(t, done, "LookWriteAwait after the answer"); r != (awaited{Empty, 4}) {
		t.Fatalf("LookWriteAwait: %+v, want the socket empty and 4 bytes written", r)
	}
	var b [4]byte
	if _, err := io.ReadFull(client, b[:]); err != nil || string(b[:]) != "pong" {
		t.Fatalf("read after LookWriteAwait: %q, %v; want the answer, left unread", b[:], err)
	}
}

// TestLookWriteAwaitEndsWithTheConnection: a peer that closes, a deadline
// that passes (how the upstream client cancels an exchange), and the
// connection closed by another goroutine each end the wait.
func TestLookWriteAwaitEndsWithTheConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(client, server net.Conn)
	}{
		{"peer closes", func(_, server net.Conn) { _ = server.Close() }},
		{"peer half-closes", func(_, server net.Conn) { _ = server.(*net.TCPConn).CloseWrite() }},
		{"deadline passes", func(client, _ net.Conn) { _ = client.SetReadDeadline(time.Unix(1, 0)) }},
		{"closed here", func(client, _ net.Conn) { _ = client.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := testutil.TCPPair(t)
			done := startWriteAwait(t, client, []byte("ping"))
			readPing(t, server)
			stillWaiting(t, done, "the end")
			tc.end(client, server)
			if r := within(t, done, "LookWriteAwait after the end"); r.wrote != 4 {
				t.Fatalf("LookWriteAwait: %+v, want 4 bytes written", r)
			}
		})
	}
}

// TestLookWriteAwaitWritesNothingOnASocketNotEmpty: what arrived before the
// call (a close, or bytes) is reported by the look, nothing is written and
// nothing waited for; a deadline already past writes nothing either.
func TestLookWriteAwaitWritesNothingOnASocketNotEmpty(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(client, server net.Conn)
		want   State
	}{
		{"peer half-closed", func(_, server net.Conn) { _ = server.(*net.TCPConn).CloseWrite() }, Closed},
		{"bytes unasked", func(_, server net.Conn) { _, _ = server.Write([]byte("HTTP/1.1 200 OK\r\n")) }, Data},
		{"deadline past", func(client, _ net.Conn) { _ = client.SetReadDeadline(time.Unix(1, 0)) }, Closed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := testutil.TCPPair(t)
			tc.before(client, server)
			if tc.name != "deadline past" {
				if got := lookUntil(New(client), tc.want); got != tc.want {
					t.Fatalf("the socket never showed %v (%v)", tc.want, got)
				}
			}
			r := within(t, startWriteAwait(t, client, []byte("ping")), "LookWriteAwait")
			if r != (awaited{tc.want, 0}) {
				t.Fatalf("LookWriteAwait: %+v, want %v and nothing written", r, tc.want)
			}
		})
	}
}

// TestLookWriteAwaitHandsBackWhatTheSocketCannotTake: a write larger than
// the socket takes at once returns at once, nothing waited for, with the
// count of what went, for the caller to write the rest.
func TestLookWriteAwaitHandsBackWhatTheSocketCannotTake(t *testing.T) {
	client, _ := testutil.TCPPair(t)
	if err := client.(*net.TCPConn).SetWriteBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 64<<20) // more than any socket buffer takes, the peer reading nothing
	r := within(t, startWriteAwait(t, client, big), "LookWriteAwait of more than the socket takes")
	if r.state != Empty || r.wrote <= 0 || r.wrote >= len(big) {
		t.Fatalf("LookWriteAwait: %+v of %d bytes, want some but not all written", r, len(big))
	}
}
