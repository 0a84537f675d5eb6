//go:build !(race || msan || asan)

package rawsock

const instrumented = false
