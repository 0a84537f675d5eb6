package hcm

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/portico-dev/portico/internal/proxy/router"
	"github.com/portico-dev/portico/internal/proxy/upstream"
)

// The client's address from X-Forwarded-For, as Envoy decides it with and
// without use_remote_address and trusted hops.
func TestForwardedClient(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edge   bool
		hops   uint32
		xff    []string
		client string // "" : the peer
	}{
		{name: "edge trusts no hop", edge: true, xff: []string{"203.0.113.5"}},
		{name: "edge, one hop: the last entry", edge: true, hops: 1, xff: []string{"198.51.100.1, 203.0.113.5"}, client: "203.0.113.5"},
		{name: "edge, two hops", edge: true, hops: 2, xff: []string{"198.51.100.1,203.0.113.5"}, client: "198.51.100.1"},
		{name: "edge, two hops over two lines", edge: true, hops: 2, xff: []string{"198.51.100.1", "203.0.113.5"}, client: "198.51.100.1"},
		{name: "too few entries", edge: true, hops: 3, xff: []string{"198.51.100.1, 203.0.113.5"}},
		{name: "not an address", edge: true, hops: 1, xff: []string{"unknown"}},
		{name: "IPv6 and a mapped address", edge: true, hops: 1, xff: []string{"::ffff:10.0.0.1"}, client: "10.0.0.1"},
		{name: "no header", edge: true, hops: 1},
		{name: "behind a proxy: the last entry", xff: []string{"198.51.100.1, 2001:db8::1"}, client: "2001:db8::1"},
		{name: "behind a proxy, one hop: the one before", hops: 1, xff: []string{"198.51.100.1, 2001:db8::1"}, client: "198.51.100.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hcm := &Spec{Client: router.ClientAddressing{UseRemoteAddress: tc.edge, XFFTrustedHops: tc.hops}}
			r := &http.Request{RemoteAddr: "127.0.0.1:40000", Header: http.Header{"X-Forwarded-For": tc.xff}}
			_, got := downstreamAddrs(hcm, nil, r)
			want := netip.MustParseAddr("127.0.0.1")
			if tc.client != "" {
				want = netip.MustParseAddr(tc.client)
			}
			if got != want {
				t.Errorf("client %s, want %s", got, want)
			}
			if s := router.DownstreamRemoteIP(&hcm.Client, r); s != want.String() {
				t.Errorf("%%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%% %s, want %s", s, want)
			}
		})
	}
}

// At the edge the scheme is the connection's, unless hops in front are
// trusted: then theirs, as Envoy trusts X-Forwarded-Proto with them.
func TestForwardedProtoWithTrustedHops(t *testing.T) {
	r := &http.Request{Header: http.Header{"X-Forwarded-Proto": {"https"}}}
	if got := forwardedProto(&Spec{Client: router.ClientAddressing{UseRemoteAddress: true}}, r, "http"); got != "http" {
		t.Errorf("edge without trusted hops: %q, want http", got)
	}
	if got := forwardedProto(&Spec{Client: router.ClientAddressing{UseRemoteAddress: true, XFFTrustedHops: 1}}, r, "http"); got != "https" {
		t.Errorf("edge with a trusted hop: %q, want https", got)
	}
}

// Hashing on the source IP hashes the client's address: behind a trusted hop,
// the one X-Forwarded-For names, so clients behind one load balancer do not
// all land on one endpoint.
func TestSourceIPHashBehindTrustedHops(t *testing.T) {
	r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	r.RemoteAddr = "10.0.0.9:40000"
	r.Header.Set("X-Forwarded-For", "203.0.113.5")
	ip := []router.HashPolicy{{SourceIP: true}}
	for _, tc := range []struct {
		hops uint32
		want string
	}{{0, "10.0.0.9"}, {1, "203.0.113.5"}} {
		ri := newRequestInfo(&Spec{Client: router.ClientAddressing{UseRemoteAddress: true, XFFTrustedHops: tc.hops}}, r)
		if pc := router.RequestHash(ip, r, ri); !pc.HasHash || pc.Hash != upstream.XXHash64String(tc.want) {
			t.Errorf("%d trusted hops: hash %+v, want %s's", tc.hops, pc, tc.want)
		}
	}
}
