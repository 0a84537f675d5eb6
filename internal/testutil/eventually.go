package testutil

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, for at most timeout (a generous deadline, never a
// measure of speed), and returns how long it took; past the deadline it fails t, naming
// what it waited for.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
	return time.Since(start)
}
