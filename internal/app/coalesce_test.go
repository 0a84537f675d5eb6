package app

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestCoalesceBurstCausesFewRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := make(chan struct{}, 1)
	var runs atomic.Int64
	go coalesce(ctx, changes, 20*time.Millisecond, 100*time.Millisecond, func() { runs.Add(1) })
	// 1,000 changes closer together than the hold-off: it never expires, so only the
	// maximum delay triggers runs, about one per 100ms of burst.
	start := time.Now()
	for i := 0; i < 1000; i++ {
		select {
		case changes <- struct{}{}:
		default:
		}
		time.Sleep(250 * time.Microsecond)
	}
	burst := time.Since(start)
	time.Sleep(200 * time.Millisecond)
	limit := int64(burst/(100*time.Millisecond)) + 2
	if n := runs.Load(); n < 1 || n > limit {
		t.Errorf("1,000 changes over %s caused %d runs, want 1-%d", burst, n, limit)
	}
	before := runs.Load()
	changes <- struct{}{}
	time.Sleep(100 * time.Millisecond)
	if runs.Load() != before+1 {
		t.Errorf("a lone change caused %d runs, want 1", runs.Load()-before)
	}
}
