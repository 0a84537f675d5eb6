// Package stackgrow grows a new goroutine's stack to the size a proxied
// request needs, in one step, while the goroutine is still shallow.
//
// A goroutine starts with a small stack (the runtime's average of the stacks
// it has scanned) and the runtime doubles it, copying it whole, each time a
// call would overflow it. A goroutine made for one connection or one HTTP/2
// stream reaches its deepest point inside the request path (routing, filters,
// the upstream client's system calls), where the copy walks and adjusts some
// thirty frames. In profiles of bench/proxy that copy took 5% of the proxy's
// CPU with a new connection per request and 5.6% over HTTP/2, where Go's
// server starts a goroutine per stream. Growing the stack first, from a frame
// a few calls deep, makes it one cheap copy.
package stackgrow

// reserve is the size of Reserve's frame. A stack that has less than that
// free doubles until it has, so a goroutine starting with up to 8 KiB ends
// with 16 KiB: what the request path of bench/proxy's configuration needs (its
// profiles show no copy deeper down). Reserve zeroes its frame, which costs
// about a microsecond on a fresh stack, so it is no larger than that takes.
const reserve = 8 << 10

// Reserve makes sure the calling goroutine's stack has at least 8 KiB free
// below the caller's frame, growing it now if it has less.
//
//go:noinline
func Reserve() {
	var pad [reserve]byte
	keep(pad[:])
}

// keep makes the compiler keep pad: a frame whose bytes nothing reads is
// removed. The slice does not escape, so pad stays on the stack.
//
//go:noinline
func keep([]byte) {}
