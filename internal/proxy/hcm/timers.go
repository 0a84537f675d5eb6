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
	pt.owner = owner
	pt.mu.Unlock()
	pt.t.Reset(d)
	return pt
}

func (pt *pooledTimer) fire() {
	pt.mu.Lock()
	o := pt.owner
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
// own stopped flags do).
func (pt *pooledTimer) release() {
	pt.mu.Lock()
	pt.owner = nil
	pt.mu.Unlock()
	if pt.t.Stop() {
		timers.Put(pt)
	}
}
