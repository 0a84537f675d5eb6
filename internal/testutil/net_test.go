package testutil

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// A connection to RefusedAddr is refused, and while the test runs no listener can
// take its port.
func TestRefusedAddrRefusesAndKeepsItsPort(t *testing.T) {
	addr := RefusedAddr(t)
	if _, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("a listener took %s while it was held", addr)
	}
}

// FreeAddr never hands out one port twice, however often the kernel offers it.
func TestFreeAddrNeverRepeatsAPort(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		a := FreeAddr(t)
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
}
