package hcm

import (
	"sync/atomic"
	"testing"
	"time"
)

type countingExpiry struct{ n atomic.Int64 }

func (c *countingExpiry) expire() { c.n.Add(1) }

// waitCalled waits until e was called once.
func waitCalled(t *testing.T, e *countingExpiry) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang, not a speed limit
	for e.n.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the timer never called its owner")
		}
		time.Sleep(time.Millisecond)
	}
}

// A pooled timer calls its owner when it fires, and goes back to the pool
// only when its release prevented that call: a timer whose call may still run
// is never handed to the next owner, whom the late call would reach.
func TestPooledTimerNeverCallsTheNextOwner(t *testing.T) {
	for timers.Get() != nil {
	}
	var fired, next countingExpiry
	pt := startTimer(time.Millisecond, &fired)
	waitCalled(t, &fired)
	pt.release()
	pt2 := startTimer(time.Hour, &next)
	defer pt2.release()
	if pt2 == pt {
		t.Error("a timer whose call had run went back to the pool and to the next owner")
	}
	if n := fired.n.Load(); n != 1 {
		t.Errorf("the owner was called %d times, want 1", n)
	}

	// Released before it fires: its owner is never called.
	var never, later countingExpiry
	pt3 := startTimer(time.Hour, &never)
	pt3.release()
	pt4 := startTimer(time.Millisecond, &later) // pt3 again, as often as not
	waitCalled(t, &later)
	pt4.release()
	if never.n.Load() != 0 {
		t.Error("a timer released before it fired called its owner")
	}
}
