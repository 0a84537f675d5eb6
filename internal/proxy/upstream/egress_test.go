package upstream

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"testing"
)

func TestEgressCheck(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	g := NewEgressGuard(nil, NewMetrics(nil, log).DestinationsRefused, log)
	g.local.read = func() ([]net.Addr, error) {
		return []net.Addr{
			&net.IPNet{IP: net.ParseIP("127.0.0.1"), Mask: net.CIDRMask(8, 32)},
			&net.IPNet{IP: net.ParseIP("10.1.2.3"), Mask: net.CIDRMask(24, 32)},
			&net.IPNet{IP: net.ParseIP("fd00::3"), Mask: net.CIDRMask(64, 128)},
		}, nil
	}
	g.Refresh(t.Context(), func() []string {
		return []string{"127.0.0.1:8090", "0.0.0.0:8000", "[::]:8001", ":8443", "[::1]:8091", "127.0.0.1:0", "", "bad"}
	})
	for _, tc := range []struct {
		addr   string
		byName bool
		want   egressReason
	}{
		{"127.0.0.1:3000", false, egressAllowed},  // a local development server
		{"127.0.0.1:3000", true, refusedLoopback}, // ... that a name resolves to
		{"[::ffff:127.0.0.1]:3000", true, refusedLoopback},
		{"[::1]:3000", true, refusedLoopback},
		{"169.254.169.254:80", true, refusedLinkLocal}, // cloud metadata
		{"[fe80::1%eth0]:80", true, refusedLinkLocal},
		{"0.0.0.0:80", true, refusedUnspecified},
		{"[::]:80", true, refusedUnspecified},
		{"[::ffff:0.0.0.0]:80", true, refusedUnspecified},
		{"203.0.113.5:80", true, egressAllowed},
		{"10.1.2.3:8080", true, egressAllowed}, // this host, a port Portico does not bind
		{"127.0.0.1:8090", false, refusedOwnAddress},
		{"[::ffff:127.0.0.1]:8090", false, refusedOwnAddress},
		{"0.0.0.0:8090", false, refusedOwnAddress}, // connects to 127.0.0.1
		{"127.0.0.2:8090", false, egressAllowed},   // 8090 is bound on 127.0.0.1 alone
		{"10.1.2.3:8090", false, egressAllowed},
		{"[::1]:8091", false, refusedOwnAddress},
		{"[::]:8091", false, refusedOwnAddress}, // connects to ::1
		{"127.0.0.1:8091", false, egressAllowed},
		{"10.1.2.3:8000", false, refusedOwnAddress}, // bound on 0.0.0.0
		{"10.1.2.3:8000", true, refusedOwnAddress},
		{"127.5.5.5:8000", false, refusedOwnAddress},
		{"[fd00::3]:8001", false, refusedOwnAddress},
		{"[::ffff:10.1.2.3]:8443", false, refusedOwnAddress},
		{"10.1.2.4:8000", false, egressAllowed}, // another host
		{"127.0.0.1:1", false, egressAllowed},   // port 0 protects nothing
	} {
		if got := g.Check(netip.MustParseAddrPort(tc.addr), tc.byName); got != tc.want {
			t.Errorf("check(%s, byName %v) = %q, want %q", tc.addr, tc.byName, got.Label(), tc.want.Label())
		}
	}

	// When the interfaces cannot be read, Portico's ports on wildcard listeners are
	// refused at any address rather than perhaps reached; other ports still work.
	g.local.read = func() ([]net.Addr, error) { return nil, errors.New("netlink: no buffer space") }
	g.local.cur.Store(nil)
	for _, tc := range []struct {
		addr string
		want egressReason
	}{
		{"10.9.9.9:8000", refusedOwnAddress},
		{"10.9.9.9:8080", egressAllowed},
	} {
		if got := g.Check(netip.MustParseAddrPort(tc.addr), false); got != tc.want {
			t.Errorf("interfaces unreadable: check(%s) = %q, want %q", tc.addr, got.Label(), tc.want.Label())
		}
	}
}

func TestServiceOfCluster(t *testing.T) {
	for name, want := range map[string]string{
		"ns/svc/80": "ns/svc", "ns/svc/http/1a2b3c4d": "ns/svc", "ns/svc": "", "plain": "", "/svc/80": "", "ns//80": "",
	} {
		if got := serviceOfCluster(name); got != want {
			t.Errorf("serviceOfCluster(%q) = %q, want %q", name, got, want)
		}
	}
}

func BenchmarkEgressCheck(b *testing.B) {
	log := slog.New(slog.DiscardHandler)
	g := NewEgressGuard(nil, NewMetrics(nil, log).DestinationsRefused, log)
	g.Refresh(b.Context(), func() []string { return []string{"0.0.0.0:8000", "0.0.0.0:8001", "127.0.0.1:8080", "127.0.0.1:8443"} })
	ap := netip.MustParseAddrPort("10.244.1.17:8080")
	b.ReportAllocs()
	for b.Loop() {
		if g.Check(ap, false) != egressAllowed {
			b.Fatal("refused")
		}
	}
}
