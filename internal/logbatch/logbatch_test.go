package logbatch

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// writes records each write it is given.
type writes struct {
	mu  sync.Mutex
	got []string
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, string(p))
	return len(p), nil
}

func (w *writes) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got...)
}

func TestUnheldWritesPassThrough(t *testing.T) {
	var sink writes
	b := New(&sink)
	for _, line := range []string{"a\n", "b\n"} {
		if n, err := b.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", line, n, err)
		}
	}
	if got := sink.all(); strings.Join(got, "|") != "a\n|b\n" {
		t.Errorf("writes %q, want one per line", got)
	}
}

// Lines written while held, from any goroutine, go out in one write at
// Release, in the order they were written.
func TestHeldWritesGoOutAtRelease(t *testing.T) {
	var sink writes
	b := New(&sink)
	b.Hold()
	b.Hold() // holds nest
	_, _ = b.Write([]byte("first\n"))
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = b.Write([]byte("other goroutine\n")) })
	wg.Wait()
	_, _ = b.Write([]byte("last\n"))
	b.Release()
	if got := sink.all(); len(got) != 0 {
		t.Fatalf("writes %q before the last Release", got)
	}
	b.Release()
	want := "first\nother goroutine\nlast\n"
	if got := sink.all(); len(got) != 1 || got[0] != want {
		t.Errorf("writes %q, want [%q]", got, want)
	}
	_, _ = b.Write([]byte("after\n"))
	if got := sink.all(); len(got) != 2 || got[1] != "after\n" {
		t.Errorf("writes %q, want a write of its own after Release", got)
	}
}

// A long burst goes out a MaxBatch at a time while it is held.
func TestHeldWritesFlushAtMaxBatch(t *testing.T) {
	var sink writes
	b := New(&sink)
	line := []byte(strings.Repeat("x", 99) + "\n")
	n := 3*(MaxBatch/len(line)+1) + 1 // three full batches and a line
	var want bytes.Buffer
	b.Hold()
	for i := range n {
		l := fmt.Appendf(nil, "%05d%s", i, line[5:])
		want.Write(l)
		_, _ = b.Write(l)
	}
	held := sink.all()
	b.Release()
	if len(held) != 3 {
		t.Errorf("%d writes while %d bytes were held, want 3", len(held), want.Len())
	}
	for i, w := range held {
		if len(w) < MaxBatch || len(w) >= MaxBatch+len(line) {
			t.Errorf("write %d has %d bytes, want MaxBatch (%d) up to the line that reached it", i, len(w), MaxBatch)
		}
	}
	if got := strings.Join(sink.all(), ""); got != want.String() {
		t.Errorf("the sink got %d bytes, want the %d written, in order", len(got), want.Len())
	}
}

func TestReleaseWithoutHoldPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Release without Hold did not panic")
		}
	}()
	New(&writes{}).Release()
}

// TestImmediateWritesDoNotWaitForAHold: the process's own lines go out while the access
// log holds the sink, ahead of the batch it is gathering, which still leaves whole.
func TestImmediateWritesDoNotWaitForAHold(t *testing.T) {
	var sink writes
	b := New(&sink)
	b.Hold()
	b.Write([]byte("access 1\n"))
	if n, err := b.Immediate().Write([]byte("error\n")); n != 6 || err != nil {
		t.Fatalf("Immediate().Write = %d, %v", n, err)
	}
	if got := sink.all(); strings.Join(got, "|") != "error\n" {
		t.Fatalf("while held: writes %q, want the immediate line alone", got)
	}
	b.Write([]byte("access 2\n"))
	b.Release()
	if got := sink.all(); strings.Join(got, "|") != "error\n|access 1\naccess 2\n" {
		t.Errorf("writes %q, want the immediate line, then the batch", got)
	}
}
