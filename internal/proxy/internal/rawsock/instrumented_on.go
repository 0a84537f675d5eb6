//go:build race || msan || asan

package rawsock

// instrumented: the race detector's (or a sanitizer's) build, where the calls
// go through package syscall for its annotations.
const instrumented = true
