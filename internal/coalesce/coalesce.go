// Package coalesce turns streams of change signals into few runs of the work they call
// for. A signal is a value on a channel that holds at most one (a sender that finds it
// full drops its value, as the one waiting already says "something changed"); the work
// then looks at everything that changed since it last ran.
package coalesce

import (
	"context"
	"time"
)

// Rebuilds calls fn on the calling goroutine when changes arrive, until ctx is done. It
// is made for work that takes milliseconds and whose result someone waits for:
//
//   - a change that finds the loop idle is handled at once, without waiting for any
//     timer: a lone edit costs its rebuild and nothing more;
//   - changes that arrive while fn runs, or soon after (within busyFactor times as long
//     as it ran), are coalesced into one more call, made as soon as fn returns or the
//     first of them arrives;
//   - if changes arrive during or soon after that call too, they come about as fast as
//     fn gets through them, or faster: a burst (many objects applied or updated one
//     after another or at once). From then on fn runs once changes pause for holdoff,
//     and never later than maxDelay after the loop took in the first change it has not
//     handled, so a burst of thousands of changes costs a handful of calls. The loop is
//     idle again after a call that nothing followed soon.
func Rebuilds(ctx context.Context, changes <-chan struct{}, holdoff, maxDelay time.Duration, fn func()) {
	for next(ctx, changes) {
		if !callAndWatch(ctx, changes, fn) {
			continue // a lone change
		}
		if !callAndWatch(ctx, changes, fn) {
			continue // what followed it, handled at once too
		}
		// A burst: wait for a pause.
		for Settle(ctx, changes, holdoff, maxDelay) {
			if !callAndWatch(ctx, changes, fn) {
				break
			}
		}
	}
}

// busyFactor is how many times as long as a call took the loop keeps counting a change
// as following it. Changes that come one by one, each after the previous call, are then
// handled at once only while calls take less than about a quarter of the time; faster
// than that, they are a burst.
const busyFactor = 3

// callAndWatch calls fn and reports whether a change arrived while it ran or within
// busyFactor times as long after it returned (false as soon as ctx is done).
func callAndWatch(ctx context.Context, changes <-chan struct{}, fn func()) bool {
	start := time.Now()
	fn()
	if ctx.Err() != nil {
		return false
	}
	select {
	case <-changes:
		return true
	default:
	}
	t := time.NewTimer(busyFactor * time.Since(start))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-changes:
		return ctx.Err() == nil
	case <-t.C:
		return false
	}
}

// next waits for a change; false once ctx is done, even if a change came as well.
func next(ctx context.Context, changes <-chan struct{}) bool {
	select {
	case <-ctx.Done():
		return false
	case <-changes:
		return ctx.Err() == nil
	}
}

// Trailing calls fn on the calling goroutine once changes pause for holdoff, and never
// later than maxDelay after the first change it has not handled, until ctx is done. It
// is made for work that should see where a series of changes ends rather than each
// step, such as writes that would otherwise record passing states.
func Trailing(ctx context.Context, changes <-chan struct{}, holdoff, maxDelay time.Duration, fn func()) {
	for next(ctx, changes) && Settle(ctx, changes, holdoff, maxDelay) {
		fn()
	}
}

// Settle waits until no change has come for holdoff, or maxDelay has passed since it
// was called; false if ctx ended first.
func Settle(ctx context.Context, changes <-chan struct{}, holdoff, maxDelay time.Duration) bool {
	deadline := time.Now().Add(maxDelay)
	t := time.NewTimer(min(holdoff, maxDelay))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-changes:
			t.Reset(max(min(holdoff, time.Until(deadline)), 0))
		case <-t.C:
			return true
		}
	}
}
