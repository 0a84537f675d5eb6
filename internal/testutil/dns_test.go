package testutil

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// The resolver of a DNSServer gets the answers the test set, sees them change,
// and NXDOMAIN for other names.
func TestDNSServerAnswersWhatTheTestSets(t *testing.T) {
	s := StartDNS(t)
	r := s.Resolver()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lookup := func(network, name string) []netip.Addr {
		t.Helper()
		ips, err := r.LookupNetIP(ctx, network, name)
		if err != nil {
			t.Fatalf("lookup %s %s: %v", network, name, err)
		}
		slices.SortFunc(ips, netip.Addr.Compare)
		return ips
	}
	s.Set("Ext.Test", "192.0.2.7", "2001:db8::7")
	if got := lookup("ip", "ext.test"); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("2001:db8::7")}) {
		t.Errorf("ext.test: %v", got)
	}
	if got := lookup("ip6", "ext.test"); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("2001:db8::7")}) {
		t.Errorf("ext.test AAAA: %v", got)
	}
	s.Set("ext.test", "127.0.0.1")
	if got := lookup("ip4", "ext.test"); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("127.0.0.1")}) {
		t.Errorf("ext.test after the change: %v", got)
	}
	var dnsErr *net.DNSError
	if _, err := r.LookupNetIP(ctx, "ip", "nowhere.test"); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("nowhere.test: %v, want not found", err)
	}
	if s.Asked("ext.test") < 4 {
		t.Errorf("ext.test asked %d times, want every lookup to reach the server", s.Asked("ext.test"))
	}
}
