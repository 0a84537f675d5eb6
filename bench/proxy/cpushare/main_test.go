package main

import (
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// sampleOf is a CPU sample of d whose stack is frames, innermost first.
func sampleOf(d time.Duration, frames ...string) *profile.Sample {
	s := &profile.Sample{Value: []int64{1, int64(d)}}
	for _, f := range frames {
		s.Location = append(s.Location, &profile.Location{Line: []profile.Line{{Function: &profile.Function{Name: f}}}})
	}
	return s
}

func TestDivideCountsEachSampleOnceByTheFirstRule(t *testing.T) {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			// A write to the client: kernel time, by what called the system call.
			sampleOf(3*time.Millisecond, "internal/runtime/syscall/linux.Syscall6", "syscall.write", "net/http.(*response).finishRequest", "net/http.(*conn).serve"),
			// Allocation under Portico's handler is allocation, not the handler.
			sampleOf(2*time.Millisecond, "runtime.mallocgc", "github.com/portico-dev/portico/internal/proxy.(*listenerHandler).dispatch"),
			sampleOf(time.Millisecond, "github.com/portico-dev/portico/internal/proxy.(*listenerHandler).dispatch", "net/http.(*conn).serve"),
			sampleOf(time.Millisecond, "main.unknown"),
		},
	}
	shares, total := divide(p)
	want := map[string]time.Duration{
		"kernel: write to the client":                            3 * time.Millisecond,
		"allocation and GC assists":                              2 * time.Millisecond,
		"Portico's handler (routing, headers, filters, metrics)": time.Millisecond,
		"other": time.Millisecond,
	}
	if total != 7*time.Millisecond {
		t.Errorf("total %v, want 7ms", total)
	}
	if len(shares) != len(want) {
		t.Errorf("shares %v, want %v", shares, want)
	}
	for name, d := range want {
		if shares[name] != d {
			t.Errorf("%s: %v, want %v (all: %v)", name, shares[name], d, shares)
		}
	}
}
