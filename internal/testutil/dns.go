package testutil

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// DNSServer is a DNS server on a loopback UDP port that answers A and AAAA
// questions with the addresses a test sets, and changes its answers when the
// test says so: what a name's owner can do to a proxy that resolves it. Names it
// was not given answer NXDOMAIN. Answers have a TTL of 0.
type DNSServer struct {
	conn net.PacketConn

	mu      sync.Mutex
	answers map[string][]netip.Addr // by lower-case name with the final dot
	asked   map[string]int
}

// StartDNS starts a DNSServer that serves until the test ends.
func StartDNS(t testing.TB) *DNSServer {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &DNSServer{conn: conn, answers: make(map[string][]netip.Addr), asked: make(map[string]int)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.serve()
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return s
}

// Set makes name answer addrs from now on: the IPv4 ones to A questions, the
// IPv6 ones to AAAA questions. It panics on an address that does not parse.
func (s *DNSServer) Set(name string, addrs ...string) {
	parsed := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		parsed[i] = netip.MustParseAddr(a)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[canonicalName(name)] = parsed
}

// Asked returns how many questions name has been asked (A and AAAA count apart).
func (s *DNSServer) Asked(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[canonicalName(name)]
}

// Addr is the server's address (UDP).
func (s *DNSServer) Addr() string { return s.conn.LocalAddr().String() }

// Resolver returns a resolver that asks this server, and no other, over UDP.
func (s *DNSServer) Resolver() *net.Resolver {
	addr := s.Addr()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", addr)
		},
	}
}

func canonicalName(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, ".")) + "."
}

func (s *DNSServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if reply, ok := s.answer(buf[:n]); ok {
			_, _ = s.conn.WriteTo(reply, from)
		}
	}
}

// answer builds the reply to one query; false for a message that is not one.
func (s *DNSServer) answer(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	name := strings.ToLower(q.Name.String())
	s.mu.Lock()
	addrs, known := s.answers[name]
	s.asked[name]++
	s.mu.Unlock()

	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}
	for _, a := range addrs {
		switch {
		case q.Type == dnsmessage.TypeA && a.Is4():
			if b.AResource(rr, dnsmessage.AResource{A: a.As4()}) != nil {
				return nil, false
			}
		case q.Type == dnsmessage.TypeAAAA && a.Is6():
			if b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: a.As16()}) != nil {
				return nil, false
			}
		}
	}
	reply, err := b.Finish()
	return reply, err == nil
}
