package stats

import (
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A request still running on an old configuration must not bring back the
// series its route's removal deleted.
func TestRetiredGroupCreatesNoSeries(t *testing.T) {
	vec := CounterVec("test_total", "test", "route")
	var g Group
	var c atomic.Pointer[prometheus.Counter]
	get := func() prometheus.Counter {
		return Get(&g, &c, func() prometheus.Counter { return vec.WithLabelValues("r") }, DiscardedCounter)
	}
	get().Inc()
	if n := testutil.CollectAndCount(vec); n != 1 {
		t.Fatalf("series after the first event: %d, want 1", n)
	}
	g.Retire(func() { vec.DeleteLabelValues("r"); c.Store(nil) })
	get().Inc()
	if n := testutil.CollectAndCount(vec); n != 0 {
		t.Fatalf("series after retiring: %d, want 0 (the late event goes to the discarded counter)", n)
	}
}

func TestCodeClass(t *testing.T) {
	for status, want := range map[int]string{100: "1xx", 204: "2xx", 302: "3xx", 404: "4xx", 503: "5xx", 99: "5xx", 600: "5xx"} {
		if got := CodeClasses[CodeClass(status)]; got != want {
			t.Errorf("CodeClass(%d) = %s, want %s", status, got, want)
		}
	}
}
