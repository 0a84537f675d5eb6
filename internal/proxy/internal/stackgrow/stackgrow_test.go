package stackgrow

import (
	"testing"
	"unsafe"
)

// frameSize is about what one level of descend takes on the stack.
const frameSize = 512

// descend calls itself n times, each level with a frame of about frameSize
// bytes, as a deep request path would.
//
//go:noinline
func descend(n int) byte {
	var b [frameSize - 64]byte
	b[n%len(b)] = byte(n)
	if n == 0 {
		return b[0]
	}
	return descend(n-1) + b[(n*7)%len(b)]
}

// stackMoves runs f on a new goroutine and reports whether the goroutine's
// stack was copied (moved) while f ran, and whether it had moved during
// reserve, by the address of a local variable.
func stackMoves(reserve func(), f func()) (duringReserve, duringF bool) {
	done := make(chan [2]bool)
	go func() {
		var local byte
		start := uintptr(unsafe.Pointer(&local))
		reserve()
		reserved := uintptr(unsafe.Pointer(&local))
		f()
		end := uintptr(unsafe.Pointer(&local))
		done <- [2]bool{reserved != start, end != reserved}
	}()
	r := <-done
	return r[0], r[1]
}

// TestReserveLeavesRoomForADeepPath checks that a goroutine that called
// Reserve goes some 10 KiB deeper without its stack being copied again, where
// one that did not has its stack copied on the way down.
func TestReserveLeavesRoomForADeepPath(t *testing.T) {
	deep := func() { descend((reserve - 2<<10) / frameSize) }
	if _, moved := stackMoves(func() {}, deep); !moved {
		t.Skip("new goroutines start with a stack large enough for the path already; nothing to measure")
	}
	grew, moved := stackMoves(Reserve, deep)
	if moved {
		t.Fatal("the stack was copied on the way down after Reserve: it reserved too little")
	}
	if !grew {
		t.Fatal("Reserve did not grow the stack, yet the path fit without a copy: the check cannot tell")
	}
}
