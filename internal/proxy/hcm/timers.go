package hcm

import (
	"sync"
	"time"
)

// expiry is what a pooled timer calls when it fires.
type expiry interface{ expire() }

// pooledTimer is a runtime timer reused from request to request. A forwarded
// request arms two (its stream idle and route timeouts), and each
// time.AfterFunc costs a Timer and a closure; a pooled timer is made once,
// with a function that calls whatever owns it at the time.
type pooledTimer struct {
	t     *time.Timer
	mu    sync.Mutex
	owner expiry // nil once released
	// fired says the timer went off for its owner: a call may still be under
	// way, so the owner must not be reused.
	fired bool
}

// timers holds released timers. A timer goes back only when its Stop
// prevented the call: one whose function may still run is dropped, so that a
// late call never reaches the next owner.
var timers sync.Pool

// startTimer calls owner.expire after d, unless the timer is released first.
func startTimer(d time.Duration, owner expiry) *pooledTimer {
	pt, _ := timers.Get().(*pooledTimer)
	if pt == nil {
		pt = &pooledTimer{owner: owner}
		pt.t = time.AfterFunc(d, pt.fire)
		return pt
	}
	pt.mu.Lock()
	pt.owner, pt.fired = owner, false
	pt.mu.Unlock()
	pt.t.Reset(d)
	return pt
}

func (pt *pooledTimer) fire() {
	pt.mu.Lock()
	o := pt.owner
	pt.fired = pt.fired || o != nil
	pt.mu.Unlock()
	if o != nil {
		o.expire()
	}
}

// reset arms the timer again, for its owner only (an idle timer that found
// activity since).
func (pt *pooledTimer) reset(d time.Duration) { pt.t.Reset(d) }

// release stops the timer for good as far as its owner is concerned: a call
// already under way may still reach the owner, which must tell (the owners'
// own stopped flags do). It reports whether the timer never went off for the
// owner, so that no call can reach it any more: the owner may be reused.
// (An owner's timer is armed again only from its own call, after fired is
// set.)
func (pt *pooledTimer) release() (quiet bool) {
	pt.mu.Lock()
	pt.owner = nil
	fired := pt.fired
	pt.mu.Unlock()
	if !pt.t.Stop() {
		return false
	}
	timers.Put(pt)
	return !fired
}
