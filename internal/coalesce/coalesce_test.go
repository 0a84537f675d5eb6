package coalesce

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The tests run in a synctest bubble: time is the bubble's fake clock, which moves only
// when every goroutine of the bubble waits for it, and synctest.Wait returns once the
// loop under test is blocked. So "at once" means "before any time passed", and no
// result depends on the machine's speed.

const (
	holdoff  = 100 * time.Millisecond // serve's defaults
	maxDelay = time.Second
)

// loop runs Rebuilds in the bubble with a recording fn; block, when set, is waited on
// at the start of each call.
type loop struct {
	changes chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	calls   []time.Time // when each call started
	block   chan struct{}
	work    time.Duration // how long each call takes, in bubble time
}

func startLoop(t *testing.T, work time.Duration, block chan struct{}) *loop {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	l := &loop{changes: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}), block: block, work: work}
	go func() {
		defer close(l.done)
		Rebuilds(ctx, l.changes, holdoff, maxDelay, l.call)
	}()
	t.Cleanup(func() { cancel(); <-l.done })
	return l
}

func (l *loop) call() {
	l.mu.Lock()
	l.calls = append(l.calls, time.Now())
	l.mu.Unlock()
	if l.block != nil {
		<-l.block
	}
	time.Sleep(l.work)
}

// notify signals a change as the kube source does: a full channel already says so.
func (l *loop) notify() {
	select {
	case l.changes <- struct{}{}:
	default:
	}
}

func (l *loop) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.calls)
}

func (l *loop) started() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.calls...)
}

// A lone change is handled before any time passes, and so is the next lone one.
func TestLoneChangeRebuildsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := startLoop(t, 2*time.Millisecond, nil)
		for i := range 2 {
			start := time.Now()
			l.notify()
			synctest.Wait()
			if n := l.count(); n != i+1 {
				t.Fatalf("lone change %d: %d calls before any time passed, want %d", i+1, n, i+1)
			}
			if at := l.started()[i]; !at.Equal(start) {
				t.Errorf("lone change %d: handled %s after it arrived, want at once", i+1, at.Sub(start))
			}
			time.Sleep(time.Minute) // idle; any timer the loop set has fired
			synctest.Wait()
			if n := l.count(); n != i+1 {
				t.Errorf("lone change %d caused %d calls, want 1", i+1, n-i)
			}
		}
	})
}

// Changes that arrive while a call runs make exactly one more call, as soon as that
// call returns.
func TestChangesDuringRebuildMakeOneMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		l := startLoop(t, 0, release)
		l.notify()
		synctest.Wait()
		if n := l.count(); n != 1 {
			t.Fatalf("%d calls running after a lone change, want 1 at once", n)
		}
		for range 50 {
			l.notify()
		}
		start := time.Now()
		release <- struct{}{} // the first call returns
		synctest.Wait()
		if n := l.count(); n != 2 {
			t.Fatalf("%d calls after 50 changes arrived during the first, want 2", n)
		}
		if at := l.started()[1]; !at.Equal(start) {
			t.Errorf("the second call started %s after the first returned, want at once", at.Sub(start))
		}
		close(release)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := l.count(); n != 2 {
			t.Errorf("%d calls in all, want exactly 2", n)
		}
	})
}

// A burst of 10,000 changes costs a handful of calls, whether the changes come faster
// than calls finish (two per millisecond while each call takes 2 ms) or one after
// another, each once the previous call is done (one per 4 ms): the first change is
// handled at once, the last one is not lost, and no change waits longer than maxDelay
// (plus the call under way when it came).
func TestBurstCostsAFewRebuilds(t *testing.T) {
	const n, work = 10_000, 2 * time.Millisecond
	for _, every := range []time.Duration{500 * time.Microsecond, 2 * work} {
		t.Run("every "+every.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := startLoop(t, work, nil)
				begin := time.Now()
				sent := make([]time.Time, 0, n)
				for range n {
					sent = append(sent, time.Now())
					l.notify()
					time.Sleep(every)
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				calls := l.started()
				burst := time.Duration(n) * every
				if limit := 3 + int(burst/maxDelay) + 1; len(calls) > limit {
					t.Errorf("a burst of %d changes over %s caused %d calls, want at most %d", n, burst, len(calls), limit)
				}
				if len(calls) == 0 || !calls[0].Equal(begin) {
					t.Fatalf("the burst's first change was not handled at once: calls at %v", calls)
				}
				checkWaits(t, begin, sent, calls, maxDelay+work)
				t.Logf("%d changes over %s: %d calls", n, burst, len(calls))
			})
		})
	}
}

// checkWaits fails the test if a change sent at one of the times in sent was handled by
// no call starting after it, or waited longer than bound for one.
func checkWaits(t *testing.T, begin time.Time, sent, calls []time.Time, bound time.Duration) {
	t.Helper()
	i := 0
	for _, at := range sent {
		for i < len(calls) && calls[i].Before(at) {
			i++
		}
		if i == len(calls) {
			t.Fatalf("the change at %s was never handled (last call at %s)", at.Sub(begin), calls[len(calls)-1].Sub(begin))
		}
		if wait := calls[i].Sub(at); wait > bound {
			t.Fatalf("the change at %s waited %s, want at most %s", at.Sub(begin), wait, bound)
		}
	}
}

// Changes that come one by one, each well after the previous call (a steady trickle,
// such as endpoints moving in a large cluster), are each handled at once.
func TestTrickleIsHandledAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, every, work = 200, 50 * time.Millisecond, 2 * time.Millisecond
		l := startLoop(t, work, nil)
		for i := range n {
			at := time.Now()
			l.notify()
			synctest.Wait()
			if calls := l.started(); len(calls) != i+1 || !calls[i].Equal(at) {
				t.Fatalf("change %d of a trickle, one per %s: %d calls before any time passed, want %d", i+1, every, len(calls), i+1)
			}
			time.Sleep(every)
		}
	})
}

// Once ctx is done the loop returns, and makes no further call: not for a change that
// came while a call ran (which would otherwise be handled at once), nor for one that
// waits out a burst.
func TestCancelStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		l := startLoop(t, 0, release)
		l.notify()
		synctest.Wait()
		l.notify()
		l.cancel()
		close(release)
		synctest.Wait()
		select {
		case <-l.done:
		default:
			t.Fatal("the loop still runs after its context ended")
		}
		if n := l.count(); n != 1 {
			t.Errorf("%d calls, want the one under way when the context ended", n)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		l := startLoop(t, 2*time.Millisecond, nil)
		for range 20 { // into a burst: a change arrives during every call
			l.notify()
			time.Sleep(time.Millisecond)
		}
		synctest.Wait()
		before := l.count()
		l.cancel()
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case <-l.done:
		default:
			t.Fatal("the loop still runs after its context ended")
		}
		if n := l.count(); n != before {
			t.Errorf("%d calls after the context ended, want none", n-before)
		}
	})
}

// Trailing waits for changes to pause, and for at most maxDelay.
func TestTrailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		changes := make(chan struct{}, 1)
		var calls []time.Duration
		begin := time.Now()
		go Trailing(t.Context(), changes, holdoff, maxDelay, func() { calls = append(calls, time.Since(begin)) })
		changes <- struct{}{}
		time.Sleep(10 * time.Millisecond)
		changes <- struct{}{}
		time.Sleep(time.Second)
		synctest.Wait()
		if len(calls) != 1 || calls[0] != 110*time.Millisecond {
			t.Errorf("two changes 10 ms apart: calls at %v, want one at 110ms (100 ms after the last)", calls)
		}
		calls = nil
		begin = time.Now()
		for range 300 { // 3 s of changes 10 ms apart: never a pause
			select {
			case changes <- struct{}{}:
			default:
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if len(calls) < 3 || len(calls) > 4 || calls[0] > maxDelay {
			t.Errorf("3 s of changes without a pause: calls at %v, want one a second and one at the end", calls)
		}
	})
}
