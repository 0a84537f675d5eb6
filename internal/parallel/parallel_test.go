package parallel

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// TestDoRunsEveryStepOnce covers sizes on both sides of MinItems and of a chunk.
func TestDoRunsEveryStepOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, n := range []int{0, 1, MinItems - 1, MinItems, MinItems + chunk/2, 10 * MinItems} {
		counts := make([]atomic.Int32, n)
		if err := Do(n, func(i int) error { counts[i].Add(1); return nil }); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		for i := range counts {
			if c := counts[i].Load(); c != 1 {
				t.Fatalf("n=%d: step %d ran %d times", n, i, c)
			}
		}
	}
}

// TestDoReturnsTheFirstError checks that the error is the lowest failing step's, as a
// sequential loop would return, whichever worker reached its step first.
func TestDoReturnsTheFirstError(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const n = 8 * MinItems
	for _, failing := range [][]int{{n - 1}, {3 * chunk, 7}, {MinItems, 2 * MinItems, n - 2}} {
		bad, lowest := map[int]bool{}, n
		for _, i := range failing {
			bad[i], lowest = true, min(lowest, i)
		}
		for range 20 {
			err := Do(n, func(i int) error {
				if bad[i] {
					return fmt.Errorf("step %d", i)
				}
				return nil
			})
			if want := fmt.Sprintf("step %d", lowest); err == nil || err.Error() != want {
				t.Fatalf("failing %v: got %v, want %s", failing, err, want)
			}
		}
	}
}

// TestDoRaisesTheFirstPanicOnTheCaller checks that a step's panic reaches the caller's
// recover (a worker's panic would otherwise end the process), the lowest step's first.
func TestDoRaisesTheFirstPanicOnTheCaller(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	errStep := errors.New("step error")
	got := func() (r any) {
		defer func() { r = recover() }()
		_ = Do(4*MinItems, func(i int) error {
			switch i {
			case 2 * MinItems:
				return errStep
			case MinItems + 1, 3 * MinItems:
				panic(i)
			}
			return nil
		})
		return nil
	}()
	p, ok := got.(*Panic)
	if !ok || p.Value != MinItems+1 {
		t.Fatalf("recovered %v, want the panic of step %d", got, MinItems+1)
	}
	// The stack is the step's, which names this test's closure, not only Do's caller.
	if !strings.Contains(string(p.Stack), "TestDoRaisesTheFirstPanicOnTheCaller.func") {
		t.Fatalf("the panic's stack is not the step's:\n%s", p.Stack)
	}
}
