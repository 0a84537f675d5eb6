package listener

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/proxy/http1"
	"github.com/portico-dev/portico/internal/testutil"
)

// writeAside writes p to b from a goroutine of its own; the result is the
// write's error.
func writeAside(b *writeBatch, p []byte) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := b.Write(p)
		done <- err
	}()
	return done
}

// gatedSocket records what a writeBatch sends. Gated, each send says it
// began (entered) and waits for a token on gate: the test decides when a send
// ends (step).
type gatedSocket struct {
	gate    chan struct{}
	entered chan struct{}
	fail    error // every send fails with it, when set
	mu      sync.Mutex
	sends   [][]byte
	total   int        // bytes sent
	sent    *sync.Cond // on mu: a send was made
}

func newGatedSocket(gated bool) *gatedSocket {
	s := &gatedSocket{}
	s.sent = sync.NewCond(&s.mu)
	if gated {
		s.gate, s.entered = make(chan struct{}), make(chan struct{})
	}
	return s
}

// step lets the next send begin and end.
func (s *gatedSocket) step() {
	s.began()
	s.end()
}

// began waits until a send has begun; end lets it end. Either fails the test
// (from the goroutine that called it: a panic in another) when the batch
// makes no send for a minute (a hang, not a speed limit).
func (s *gatedSocket) began() { within(func() { <-s.entered }) }
func (s *gatedSocket) end()   { within(func() { s.gate <- struct{}{} }) }

// within runs wait, and panics with every goroutine's stack when it has not
// returned after a minute.
func within(wait func()) {
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		panic("the batch made no send for a minute: stranded bytes, or a send too many?\n" + allGoroutines())
	}
}

func (s *gatedSocket) send(p []byte) (int, error) {
	if s.gate != nil {
		s.entered <- struct{}{}
		<-s.gate
	}
	if s.fail != nil {
		return 0, s.fail
	}
	s.mu.Lock()
	s.sends = append(s.sends, bytes.Clone(p))
	s.total += len(p)
	s.sent.Broadcast()
	s.mu.Unlock()
	return len(p), nil
}

// waitBytes waits until sends of n bytes in all have been made.
func (s *gatedSocket) waitBytes(t *testing.T, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		s.mu.Lock()
		for s.total < n {
			s.sent.Wait()
		}
		s.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang, not a speed limit
		t.Fatalf("%d bytes still not sent after a minute: stranded in the batch?\n%s", n, allGoroutines())
	}
}

func (s *gatedSocket) all() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Join(s.sends, nil)
}

// newGatedBatch is a batch whose sends go to a gated socket, and must not fail.
func newGatedBatch(t *testing.T) (*gatedSocket, *writeBatch) {
	s := newGatedSocket(true)
	return s, newWriteBatch(s.send, func(error) { t.Error("no send fails here") })
}

func mustWrite(t *testing.T, b *writeBatch, p string) {
	t.Helper()
	if n, err := b.Write([]byte(p)); n != len(p) || err != nil {
		t.Fatalf("Write(%q) = %d, %v", p, n, err)
	}
}

// What the server writes while a send is underway (other streams' frames,
// the rest of a response) leaves in one send after it, not one each: this is
// what saves HTTP/2 responses their system calls and the client's wake-ups.
func TestWriteBatchJoinsWhatIsWrittenDuringASend(t *testing.T) {
	s, b := newGatedBatch(t)
	defer b.Close()

	mustWrite(t, b, "HEADERS1 ")
	s.began() // the flusher took the first write; these wait for its send
	for _, p := range []string{"DATA1 ", "HEADERS2 ", "DATA2 ", "RST3"} {
		mustWrite(t, b, p)
	}
	s.end()
	s.step()
	s.waitBytes(t, len("HEADERS1 DATA1 HEADERS2 DATA2 RST3"))

	s.mu.Lock()
	defer s.mu.Unlock()
	want := []string{"HEADERS1 ", "DATA1 HEADERS2 DATA2 RST3"}
	if len(s.sends) != len(want) {
		t.Fatalf("%d sends %q, want %d: %q", len(s.sends), s.sends, len(want), want)
	}
	for i := range want {
		if string(s.sends[i]) != want[i] {
			t.Errorf("send %d = %q, want %q", i, s.sends[i], want[i])
		}
	}
}

// A batch is bounded: the write that would take it past maxWriteBatch sends
// what waits and itself from the writer's goroutine (which waits for the
// socket, as the server's writes did before batching), and nothing overtakes
// anything.
func TestWriteBatchKeepsOrderPastItsBound(t *testing.T) {
	s, b := newGatedBatch(t)
	defer b.Close()

	mustWrite(t, b, "first;")
	s.began()
	chunk := bytes.Repeat([]byte("b"), maxBatchedWrite)
	var want bytes.Buffer
	want.WriteString("first;")
	for i := range maxWriteBatch / maxBatchedWrite { // exactly the bound, once the first write was taken
		chunk[0] = byte('0' + i)
		mustWrite(t, b, string(chunk))
		want.Write(chunk)
	}
	b.mu.Lock()
	waiting := len(b.buf)
	b.mu.Unlock()
	if waiting != maxWriteBatch {
		t.Fatalf("%d bytes wait, want the bound, %d", waiting, maxWriteBatch)
	}

	done := writeAside(b, []byte("last"))
	want.WriteString("last")
	waitFor(t, "the write past the bound to wait for the send underway", func() bool {
		return stackWith("(*writeBatch).writeThrough", "(*Mutex).Lock")
	})
	s.end()  // the first send
	s.step() // the batch, then "last": whichever goroutine sends them
	s.step()
	if err := <-done; err != nil {
		t.Fatalf("the write past the bound: %v", err)
	}
	s.waitBytes(t, want.Len())
	if got := s.all(); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("sent %d bytes out of order (want %d)", len(got), want.Len())
	}
}

// A large write (a big DATA frame) is not copied into the batch: it is sent
// as it is, after what waits.
func TestWriteBatchSendsALargeWriteAsItIs(t *testing.T) {
	s, b := newGatedBatch(t)
	defer b.Close()

	mustWrite(t, b, "HEADERS ")
	s.began()
	mustWrite(t, b, "WINDOW_UPDATE ")
	large := strings.Repeat("d", maxBatchedWrite+1)
	done := writeAside(b, []byte(large))
	s.end()
	s.step()
	s.step()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	want := []string{"HEADERS ", "WINDOW_UPDATE ", large}
	if len(s.sends) != len(want) {
		t.Fatalf("%d sends, want %d (the large write on its own)", len(s.sends), len(want))
	}
	for i := range want {
		if string(s.sends[i]) != want[i] {
			t.Errorf("send %d: %d bytes %.20q, want %d bytes %.20q", i, len(s.sends[i]), s.sends[i], len(want[i]), want[i])
		}
	}
}

// A write after a large one (sent from the writer's goroutine, which took
// the batch) is sent all the same, without a Close: no flusher round is lost
// to the batch a writer took.
func TestWriteBatchSendsWhatFollowsALargeWrite(t *testing.T) {
	s, b := newGatedBatch(t)
	defer b.Close()

	mustWrite(t, b, "A")
	s.began()
	mustWrite(t, b, "B") // waits for the send underway
	large := strings.Repeat("L", maxBatchedWrite+1)
	done := writeAside(b, []byte(large))
	waitFor(t, "the large write to wait for the send underway", func() bool {
		return stackWith("(*writeBatch).writeThrough", "(*Mutex).Lock")
	})
	s.end()
	s.step() // B, by the flusher or by the large write
	s.step() // the large write
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mustWrite(t, b, "C")
	s.step()
	s.waitBytes(t, len("AB")+len(large)+len("C"))
	if got, want := string(s.all()), "AB"+large+"C"; got != want {
		t.Fatalf("sent %d bytes out of order", len(got))
	}
}

// A failed send fails every later write, calls failed once (the connection
// closes its socket there, so that a server with nothing more to write hears
// of it), and stops sending.
func TestWriteBatchFailsEveryWriteAfterAFailedSend(t *testing.T) {
	s := newGatedSocket(false)
	s.fail = errors.New("write: broken pipe")
	var failures atomic.Int32
	failed := make(chan struct{})
	b := newWriteBatch(s.send, func(err error) {
		if failures.Add(1) == 1 {
			close(failed)
		}
		if err != s.fail {
			t.Errorf("failed(%v), want the send's error", err)
		}
	})
	defer b.Close()

	mustWrite(t, b, "frame")
	<-failed
	for range 3 {
		if n, err := b.Write([]byte("more")); n != 0 || err != s.fail {
			t.Fatalf("Write after a failed send = %d, %v; want 0, %v", n, err, s.fail)
		}
	}
	if err := b.Close(); err != s.fail {
		t.Errorf("Close = %v, want %v", err, s.fail)
	}
	if n := failures.Load(); n != 1 {
		t.Errorf("failed called %d times, want once", n)
	}
}

// Close sends what waits (the server's last frames, its GOAWAY) before the
// socket closes; what is written after it (TLS's close_notify) goes straight
// to the socket.
func TestWriteBatchCloseSendsWhatWaits(t *testing.T) {
	s, b := newGatedBatch(t)

	mustWrite(t, b, "DATA ")
	s.began()
	mustWrite(t, b, "GOAWAY ") // waits: the first send is underway
	type closeResult struct {
		err  error
		sent string // what had been sent when Close returned
	}
	closed := make(chan closeResult, 1)
	go func() {
		err := b.Close()
		closed <- closeResult{err, string(s.all())}
	}()
	for !isClosed(b) {
		runtime.Gosched() // until Close has begun
	}
	s.end()
	s.step() // GOAWAY's send, by the flusher or by Close
	r := <-closed
	if r.err != nil {
		t.Fatalf("Close: %v", r.err)
	}
	if r.sent != "DATA GOAWAY " {
		t.Fatalf("sent %q when Close returned, want %q", r.sent, "DATA GOAWAY ")
	}

	go s.step()
	mustWrite(t, b, "close_notify")
	if got := string(s.all()); got != "DATA GOAWAY close_notify" {
		t.Fatalf("a write after Close returned before its send: sent %q", got)
	}
	if err := b.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// Writers on several goroutines (the server's loop and its asynchronous frame
// writer take turns; a batch allows any), with small writes batched and
// large ones sent from the writer's goroutine in between, each see their
// bytes leave in their order, none lost, and none waits for ever (a wake-up
// left in the channel by a batch a large write took once made a writer wait
// for the flusher while holding what the flusher needed).
func TestWriteBatchConcurrentWritersKeepTheirOrder(t *testing.T) {
	s := newGatedSocket(false)
	b := newWriteBatch(s.send, func(error) { t.Error("no send fails here") })
	const writers, writes = 4, 2000
	record := func(w, i int) string {
		r := fmt.Sprintf("<%d:%d>", w, i)
		if i%7 == 0 {
			r = strings.Repeat(".", maxBatchedWrite) + r // sent from the writer's goroutine
		}
		return r
	}
	var wg sync.WaitGroup
	total := 0
	for w := range writers {
		for i := range writes {
			total += len(record(w, i))
		}
		wg.Go(func() {
			for i := range writes {
				mustWrite(t, b, record(w, i))
			}
		})
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(time.Minute): // a hang, not a speed limit
		t.Fatalf("writers still blocked after a minute:\n%s", allGoroutines())
	}
	s.waitBytes(t, total) // before Close, which would send what a lost wake-up stranded
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	next := make([]int, writers)
	for _, f := range bytes.SplitAfter(s.all(), []byte(">")) {
		if f = bytes.TrimLeft(f, "."); len(f) == 0 {
			continue
		}
		var w, i int
		if _, err := fmt.Sscanf(string(f), "<%d:%d>", &w, &i); err != nil {
			t.Fatalf("a write was cut or mixed with another: %q", f)
		}
		if i != next[w] {
			t.Fatalf("writer %d: write %d sent where %d was due", w, i, next[w])
		}
		next[w]++
	}
	for w, n := range next {
		if n != writes {
			t.Errorf("writer %d: %d writes sent, want %d", w, n, writes)
		}
	}
}

func allGoroutines() string {
	buf := make([]byte, 1<<22)
	return string(buf[:runtime.Stack(buf, true)])
}

func isClosed(b *writeBatch) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// A connection closing while its batch's send is stuck (a client that
// stopped reading, on a connection whose writes a route left unbounded)
// closes all the same, once lastWritesTimeout has passed: the close would
// otherwise wait for the send for ever.
func TestServerConnClosesWithASendStuck(t *testing.T) {
	client, raw := testutil.TCPPair(t)
	_ = client.(*net.TCPConn).SetReadBuffer(4 << 10) // and it does not read
	_ = raw.(*net.TCPConn).SetWriteBuffer(4 << 10)
	sc := &serverConn{Conn: raw, writes: http1.NewConnWriter(raw)} // no timeout: unbounded
	sc.batch = newWriteBatch(sc.writes.Write, func(error) { _ = raw.Close() })

	go func() {
		frame := bytes.Repeat([]byte("x"), 1<<10)
		for {
			if _, err := sc.Write(frame); err != nil {
				return
			}
		}
	}()
	waitFor(t, "a send to block", sendStuck)
	closeWithin(t, "Close", sc)
	waitFor(t, "the stuck send to be cut", func() bool { return !sendStuck() })
	// The socket is closed: the client reads what it holds, then the end.
	_ = client.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.Copy(io.Discard, client); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the connection is still open once its last send was cut")
		}
	}
}

// What the server wrote before it moves its write deadline leaves under the
// deadline in force then: tls.Conn.Close writes its close_notify, then sets
// a deadline of now, which must not fail the close_notify waiting in the
// batch (nor the GOAWAY before it).
func TestServerConnSendsWhatWaitsBeforeADeadlineMoves(t *testing.T) {
	client, raw := testutil.TCPPair(t)
	sc := &serverConn{Conn: raw, writes: http1.NewConnWriter(raw)}
	sc.batch = newWriteBatch(sc.writes.Write, func(error) { _ = raw.Close() })
	for _, p := range []string{"GOAWAY;", "close_notify"} {
		if _, err := sc.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	_ = sc.SetWriteDeadline(time.Now())
	want := "GOAWAY;close_notify"
	_ = client.SetReadDeadline(time.Now().Add(time.Minute)) // a hang, not a speed limit
	got := make([]byte, len(want))
	if _, err := io.ReadFull(client, got); err != nil || string(got) != want {
		t.Fatalf("before the close, the client got %q (%v), want %q", got, err, want)
	}
	_ = sc.Close()
}

// tls.Conn.Close, with no write of its own in flight while the batch's send
// is stuck on a client that stopped reading (on a connection whose writes a
// route left unbounded), closes all the same, once lastWritesTimeout has
// passed: its close_notify's deadline would otherwise wait for that send for
// ever.
func TestTLSCloseWithABatchSendStuck(t *testing.T) {
	client, raw := testutil.TCPPair(t)
	_ = client.(*net.TCPConn).SetReadBuffer(4 << 10) // and, once the handshake is made, it does not read
	_ = raw.(*net.TCPConn).SetWriteBuffer(4 << 10)
	c := testutil.SelfSigned("localhost")
	cert, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	sc := &serverConn{Conn: raw}
	server := tls.Server(sc, &tls.Config{Certificates: []tls.Certificate{cert}})
	handshake := make(chan error, 1)
	go func() { handshake <- tls.Client(client, &tls.Config{InsecureSkipVerify: true}).Handshake() }()
	if err := server.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-handshake; err != nil {
		t.Fatal(err)
	}
	sc.writes = http1.NewConnWriter(raw) // no timeout: unbounded
	sc.batch = newWriteBatch(sc.writes.Write, func(error) { _ = raw.Close() })

	// Less than a batch's bound in all: every write returns, none is in flight.
	record := bytes.Repeat([]byte("x"), 1<<10)
	for range (maxWriteBatch - 8<<10) / len(record) {
		if _, err := server.Write(record); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the batch's send to block", sendStuck)
	closeWithin(t, "tls.Conn.Close", server)
}

// closeWithin closes c, failing the test when Close has not returned after
// a minute (a hang, not a speed limit).
func closeWithin(t *testing.T, what string, c io.Closer) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatalf("%s waits for the stuck send:\n%s", what, allGoroutines())
	}
}

// waitFor waits until cond holds, failing the test when it still does not
// after a minute (a hang, not a speed limit).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s:\n%s", what, allGoroutines())
		}
	}
}

// stackWith reports whether a goroutine's stack holds all of parts.
func stackWith(parts ...string) bool {
	for g := range strings.SplitSeq(allGoroutines(), "\n\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(g, p)
		}
		if all {
			return true
		}
	}
	return false
}

// sendStuck reports whether a batch's send (its flusher's, or a writer's
// past the bound) is blocked in a socket write.
func sendStuck() bool { return stackWith("(*writeBatch)", "waitWrite") }
