// Package parallel spreads the independent steps of a cold start (one per manifest file
// read, or per virtual host, cluster or object built) over the machine's cores. Results are written by index into slices
// the caller owns, so the output does not depend on how steps were scheduled.
package parallel

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// MinItems is the number of steps below which Do runs them on the calling goroutine: an
// incremental rebuild has a handful of steps, and starting workers would cost more than
// they save (a step costs about as much as starting a worker).
const MinItems = 256

// chunk is the number of consecutive steps a worker takes at a time: large enough that
// workers rarely contend on the shared counter, small enough that a worker slowed down by
// another process on its core does not leave the others idle at the end.
const chunk = 64

// Do runs step(i) for every i in [0, n), on up to GOMAXPROCS goroutines when n is at
// least MinItems. Steps must be independent of one another. It returns the error of the
// lowest i whose step failed, as a loop stopping at the first error would (later steps
// may have run). A step's panic is re-raised on the caller's goroutine, the lowest i's
// again, as a *Panic that carries the step's stack.
func Do(n int, step func(i int) error) error {
	workers := min(runtime.GOMAXPROCS(0), (n+chunk-1)/chunk)
	if n < MinItems || workers < 2 {
		for i := range n {
			if err := step(i); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		next   atomic.Int64
		failed atomic.Int64 // the lowest failed index so far, n if none
		mu     sync.Mutex
		first  outcome
		wg     sync.WaitGroup
	)
	failed.Store(int64(n))
	record := func(o outcome) {
		mu.Lock()
		defer mu.Unlock()
		if o.index < failed.Load() {
			first = o
			failed.Store(o.index)
		}
	}
	work := func() {
		defer wg.Done()
		for {
			lo := next.Add(chunk) - chunk
			// Steps after a failure are skipped: their results are never used.
			if lo >= int64(n) || lo > failed.Load() {
				return
			}
			if o, bad := runChunk(int(lo), min(int(lo)+chunk, n), step); bad {
				record(o)
				return
			}
		}
	}
	wg.Add(workers)
	for range workers - 1 {
		go work()
	}
	work()
	wg.Wait()
	if first.panicked {
		panic(&Panic{Value: first.panicValue, Stack: first.stack})
	}
	return first.err
}

// outcome is how a step failed.
type outcome struct {
	index      int64
	err        error
	panicked   bool
	panicValue any
	stack      []byte
}

// Panic is what Do re-panics with when a step panicked on its workers: the step's own
// value, and its stack, which the caller's would not show (the step may have run on
// another goroutine). Callers that recover particular values unwrap Value.
type Panic struct {
	Value any
	Stack []byte
}

// Error makes the runtime print the step's value and stack when the panic is not
// recovered.
func (p *Panic) Error() string {
	return fmt.Sprintf("%v\n\ngoroutine of the step that panicked:\n%s", p.Value, p.Stack)
}

// runChunk runs the steps lo..hi-1, stopping at the first that fails or panics.
func runChunk(lo, hi int, step func(int) error) (o outcome, bad bool) {
	i := lo
	defer func() {
		if r := recover(); r != nil {
			o, bad = outcome{index: int64(i), panicked: true, panicValue: r, stack: debug.Stack()}, true
		}
	}()
	for ; i < hi; i++ {
		if err := step(i); err != nil {
			return outcome{index: int64(i), err: err}, true
		}
	}
	return outcome{}, false
}
