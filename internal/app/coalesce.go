package app

import (
	"context"
	"time"
)

// coalesce calls fn after changes arrive, holding off until changes have been quiet for
// holdoff, but never delaying the first pending change by more than maxDelay. A burst of
// a thousand events thus costs a handful of rebuilds, while a lone change is applied
// after holdoff. fn runs on the calling goroutine; changes arriving meanwhile are pending.
func coalesce(ctx context.Context, changes <-chan struct{}, holdoff, maxDelay time.Duration, fn func()) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var first time.Time
	pending := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
			now := time.Now()
			if !pending {
				pending, first = true, now
			}
			wait := holdoff
			if deadline := first.Add(maxDelay); now.Add(wait).After(deadline) {
				wait = max(deadline.Sub(now), 0)
			}
			timer.Reset(wait)
		case <-timer.C:
			pending = false
			fn()
		}
	}
}
