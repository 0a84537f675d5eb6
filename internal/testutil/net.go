package testutil

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address with a port that was free a moment ago, for
// processes that must be told their address on the command line.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
