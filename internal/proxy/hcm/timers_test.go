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

type countingCanceller struct{ n atomic.Int64 }

func (c *countingCanceller) cancelWith(error) { c.n.Add(1) }

// waitCancelled waits until c was cancelled.
func waitCancelled(t *testing.T, c *countingCanceller, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang, not a speed limit
	for c.n.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s never fired: a stop of another request's timer released it", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A timeout stopped twice (a per-try timeout: when its attempt's response is
// delivered, then when the attempt ends; an internal redirect's route and idle
// timeouts: in run, then in forward's stopTimeouts) releases its pooled timer
// once: the second stop must not reach the next request's timer, which the
// pool may have handed it meanwhile, and stop that request's timeout.
func TestTimeoutStoppedTwiceLeavesTheNextRequestsTimer(t *testing.T) {
	for i := 0; i < 20; i++ { // the race detector's pool drops some timers
		for timers.Get() != nil {
		}
		var first, next countingCanceller
		a := &routeTimer{timeout: time.Hour, cancel: &first, cause: errRouteTimeout}
		a.arm()
		a.stop() // the timer goes back to the pool
		b := &routeTimer{timeout: time.Millisecond, cancel: &next, cause: errRouteTimeout}
		b.arm()  // as often as not, a's timer again
		a.stop() // must leave it alone
		waitCancelled(t, &next, "the next request's route timeout")
		b.stop()

		var idleFired countingCanceller
		it := new(idleTimer).run(time.Hour, idleFunc(func() {}))
		it.stop()
		b = &routeTimer{timeout: time.Millisecond, cancel: &idleFired, cause: errRouteTimeout}
		b.arm()
		it.stop()
		waitCancelled(t, &idleFired, "the route timeout after a stream idle timer stopped twice")
		b.stop()
		if first.n.Load() != 0 {
			t.Fatal("a timeout stopped before it fired cancelled its request")
		}
	}
}

// idleFunc is a func told of an idle timeout.
type idleFunc func()

func (f idleFunc) idleExpired() { f() }

// release tells whether a call can still reach the owner: never, when the
// timer was stopped before it went off; perhaps, once it went off, even if
// the owner armed it again since and it was stopped before going off again.
// The connection manager reuses a request's target only in the first case.
func TestPooledTimerReleaseSaysWhetherItWentOff(t *testing.T) {
	var early countingExpiry
	if !startTimer(time.Hour, &early).release() {
		t.Error("a timer stopped before it went off said a call may still come")
	}

	var fired countingExpiry
	pt := startTimer(time.Millisecond, &fired)
	waitCalled(t, &fired)
	if pt.release() {
		t.Error("a timer that went off said no call could come")
	}

	var again countingExpiry
	pt = startTimer(time.Millisecond, &again)
	waitCalled(t, &again)
	pt.reset(time.Hour) // as an idle timer that found activity does
	if pt.release() {
		t.Error("a timer that went off, armed again and stopped said no call could come")
	}
}
