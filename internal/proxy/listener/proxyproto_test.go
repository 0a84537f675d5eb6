package listener

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testutil"
)

// v2 builds a version 2 header: verCmd, family, then the block.
func v2(verCmd, family byte, block ...byte) []byte {
	b := append([]byte{}, proxyV2Signature...)
	b = append(b, verCmd, family, 0, 0)
	binary.BigEndian.PutUint16(b[14:], uint16(len(block)))
	return append(b, block...)
}

// v4block is an IPv4 address block: source, destination, ports.
func v4block(src, dst [4]byte, sport, dport uint16, tlvs ...byte) []byte {
	b := append(src[:], dst[:]...)
	b = binary.BigEndian.AppendUint16(b, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	return append(b, tlvs...)
}

func v6block(src, dst string, sport, dport uint16) []byte {
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	b := append(s[:], d[:]...)
	b = binary.BigEndian.AppendUint16(b, sport)
	return binary.BigEndian.AppendUint16(b, dport)
}

func TestParseProxyHeader(t *testing.T) {
	local4 := v4block([4]byte{192, 0, 2, 1}, [4]byte{10, 0, 0, 1}, 51000, 443)
	for _, tc := range []struct {
		name     string
		in       []byte
		src, dst string // "" when the header keeps the connection's
		n        int    // the header's length; 0: the whole input
		err      error  // errProxyNeedMore, errNoProxyHeader, or errAny
	}{
		{name: "v1 TCP4", in: []byte("PROXY TCP4 192.0.2.1 10.0.0.1 51000 80\r\nGET /"), src: "192.0.2.1:51000", dst: "10.0.0.1:80", n: 40},
		{name: "v1 TCP6", in: []byte("PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n"), src: "[2001:db8::1]:1", dst: "[2001:db8::2]:65535"},
		{name: "v1 UNKNOWN keeps the peer", in: []byte("PROXY UNKNOWN\r\n")},
		{name: "v1 UNKNOWN with anything after", in: []byte("PROXY UNKNOWN ffff::1 what ever\r\n")},
		{name: "v1 trailing spaces trimmed", in: []byte("PROXY TCP4 192.0.2.1 10.0.0.1 1 2 \r\n"), src: "192.0.2.1:1", dst: "10.0.0.1:2"},
		{name: "v1 longest line", in: []byte("PROXY UNKNOWN " + strings.Repeat("x", 92) + "\r\n")},
		{name: "v1 line too long", in: []byte("PROXY UNKNOWN " + strings.Repeat("x", 93) + "\r\n"), err: errAny},
		{name: "v1 no CRLF within 108 bytes", in: []byte("PROXY UNKNOWN " + strings.Repeat("x", 200)), err: errAny},
		{name: "v1 bare LF is not the end", in: []byte("PROXY UNKNOWN\n"), err: errProxyNeedMore},
		{name: "v1 cut short", in: []byte("PROXY TCP4 192.0.2.1"), err: errProxyNeedMore},
		{name: "v1 signature cut short", in: []byte("PRO"), err: errProxyNeedMore},
		{name: "v1 double space", in: []byte("PROXY TCP4  192.0.2.1 10.0.0.1 1 2\r\n"), err: errAny},
		{name: "v1 no protocol", in: []byte("PROXY \r\n"), err: errAny},
		{name: "v1 unknown protocol", in: []byte("PROXY UDP4 192.0.2.1 10.0.0.1 1 2\r\n"), err: errAny},
		{name: "v1 too few fields", in: []byte("PROXY TCP4 192.0.2.1 10.0.0.1 1\r\n"), err: errAny},
		{name: "v1 too many fields", in: []byte("PROXY TCP4 192.0.2.1 10.0.0.1 1 2 3\r\n"), err: errAny},
		{name: "v1 TCP4 with an IPv6 address", in: []byte("PROXY TCP4 2001:db8::1 10.0.0.1 1 2\r\n"), err: errAny},
		{name: "v1 TCP6 with an IPv4 address", in: []byte("PROXY TCP6 192.0.2.1 2001:db8::2 1 2\r\n"), err: errAny},
		{name: "v1 port too large", in: []byte("PROXY TCP4 192.0.2.1 10.0.0.1 65536 2\r\n"), err: errAny},
		{name: "v1 signed port", in: []byte("PROXY TCP4 192.0.2.1 10.0.0.1 +1 2\r\n"), err: errAny},
		{name: "v1 zone", in: []byte("PROXY TCP6 fe80::1%eth0 2001:db8::2 1 2\r\n"), err: errAny},
		{name: "v1 unspecified source", in: []byte("PROXY TCP4 0.0.0.0 10.0.0.1 1 2\r\n"), err: errAny},
		{name: "v1 multicast destination", in: []byte("PROXY TCP4 192.0.2.1 224.0.0.1 1 2\r\n"), err: errAny},
		{name: "v1 broadcast source", in: []byte("PROXY TCP4 255.255.255.255 10.0.0.1 1 2\r\n"), err: errAny},
		{name: "v1 lower case", in: []byte("proxy TCP4 192.0.2.1 10.0.0.1 1 2\r\n"), err: errNoProxyHeader},
		{name: "HTTP request", in: []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), err: errNoProxyHeader},
		{name: "TLS ClientHello", in: []byte{0x16, 0x03, 0x01, 0x00, 0xa5}, err: errNoProxyHeader},

		{name: "v2 TCP over IPv4", in: append(v2(0x21, 0x11, local4...), "GET"...), src: "192.0.2.1:51000", dst: "10.0.0.1:443", n: 28},
		{name: "v2 UDP over IPv4", in: v2(0x21, 0x12, local4...), src: "192.0.2.1:51000", dst: "10.0.0.1:443"},
		{name: "v2 TCP over IPv6", in: v2(0x21, 0x21, v6block("2001:db8::1", "2001:db8::2", 7, 8)...), src: "[2001:db8::1]:7", dst: "[2001:db8::2]:8"},
		{name: "v2 TLVs skipped", in: v2(0x21, 0x11, v4block([4]byte{192, 0, 2, 1}, [4]byte{10, 0, 0, 1}, 1, 2, 0x04, 0, 0, 0x01, 0, 2, 'h', '2')...), src: "192.0.2.1:1", dst: "10.0.0.1:2"},
		{name: "v2 TLV cut short", in: v2(0x21, 0x11, v4block([4]byte{192, 0, 2, 1}, [4]byte{10, 0, 0, 1}, 1, 2, 0x01, 0)...), err: errAny},
		{name: "v2 TLV longer than the block", in: v2(0x21, 0x11, v4block([4]byte{192, 0, 2, 1}, [4]byte{10, 0, 0, 1}, 1, 2, 0x01, 0, 3, 'a')...), err: errAny},
		{name: "v2 LOCAL keeps the peer", in: v2(0x20, 0x00)},
		{name: "v2 LOCAL with a block skipped, whatever it holds", in: v2(0x20, 0x11, 1, 2, 3)},
		{name: "v2 LOCAL with the UNIX family", in: v2(0x20, 0x31, make([]byte, 216)...)},
		{name: "v2 PROXY with UNSPEC refused", in: v2(0x21, 0x00), err: errAny},
		{name: "v2 PROXY with UNIX refused", in: v2(0x21, 0x31, make([]byte, 216)...), err: errAny},
		{name: "v2 unknown transport", in: v2(0x21, 0x13, local4...), err: errAny},
		{name: "v2 version 1 in a v2 signature", in: v2(0x11, 0x11, local4...), err: errAny},
		{name: "v2 unknown command", in: v2(0x22, 0x11, local4...), err: errAny},
		{name: "v2 block shorter than the addresses", in: v2(0x21, 0x11, local4[:11]...), err: errAny},
		{name: "v2 unspecified source", in: v2(0x21, 0x11, v4block([4]byte{}, [4]byte{10, 0, 0, 1}, 1, 2)...), err: errAny},
		{name: "v2 block not all here", in: v2(0x21, 0x11, local4...)[:20], err: errProxyNeedMore},
		{name: "v2 fixed part not all here", in: v2(0x21, 0x11, local4...)[:15], err: errProxyNeedMore},
		{name: "v2 LOCAL block not all here", in: v2(0x20, 0x00, 1, 2, 3)[:17], err: errProxyNeedMore},
		{name: "v2 signature cut short", in: proxyV2Signature[:5], err: errProxyNeedMore},
		{name: "v2 signature wrong", in: append([]byte("\r\n\r\nX"), make([]byte, 20)...), err: errNoProxyHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, n, err := parseProxyHeader(tc.in)
			switch {
			case tc.err == errAny:
				if err == nil || errors.Is(err, errProxyNeedMore) || errors.Is(err, errNoProxyHeader) {
					t.Fatalf("error %v, want a refusal", err)
				}
				return
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			case err != nil:
				t.Fatalf("unexpected error %v", err)
			}
			want := tc.n
			if want == 0 {
				want = len(tc.in)
			}
			if n != want {
				t.Errorf("length %d, want %d", n, want)
			}
			if got := addrString(h.source); got != tc.src {
				t.Errorf("source %q, want %q", got, tc.src)
			}
			if got := addrString(h.dst); got != tc.dst {
				t.Errorf("destination %q, want %q", got, tc.dst)
			}
		})
	}
}

var errAny = errors.New("any refusal")

func addrString(a netip.AddrPort) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// FuzzParseProxyHeader: whatever the bytes, the parser neither panics nor
// claims more than it was given, a header found is the same found again with
// more bytes after it, and a complete answer never changes as bytes are added.
func FuzzParseProxyHeader(f *testing.F) {
	f.Add([]byte("PROXY TCP4 192.0.2.1 10.0.0.1 51000 80\r\nGET / HTTP/1.1\r\n"))
	f.Add([]byte("PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n"))
	f.Add([]byte("PROXY UNKNOWN\r\n"))
	f.Add(v2(0x21, 0x11, v4block([4]byte{192, 0, 2, 1}, [4]byte{10, 0, 0, 1}, 1, 2, 0x04, 0, 1, 'x')...))
	f.Add(v2(0x21, 0x21, v6block("2001:db8::1", "2001:db8::2", 7, 8)...))
	f.Add(v2(0x20, 0x00, 1, 2))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := parseProxyHeader(b)
		if err != nil {
			if errors.Is(err, errProxyNeedMore) {
				return
			}
			// A refusal stands whatever follows.
			if _, _, err2 := parseProxyHeader(append(append([]byte{}, b...), "trailing"...)); err2 == nil || errors.Is(err2, errProxyNeedMore) {
				t.Fatalf("%q refused (%v), accepted with more bytes (%v)", b, err, err2)
			}
			return
		}
		if n <= 0 || n > len(b) {
			t.Fatalf("header length %d of %d bytes", n, len(b))
		}
		if h.source.IsValid() != h.dst.IsValid() {
			t.Fatalf("one address of two: %+v", h)
		}
		again, n2, err := parseProxyHeader(b[:n])
		if err != nil || n2 != n || again != h {
			t.Fatalf("the header alone parses as %+v, %d, %v; with what follows %+v, %d", again, n2, err, h, n)
		}
	})
}

// proxyConnPair is a connection accepted by a listener configured by lc,
// read through withProxyProtocol, and the client's end.
func proxyConnPair(t *testing.T, lc *Config) (net.Conn, net.Conn) {
	t.Helper()
	client, server := testutil.TCPPair(t)
	return client, withProxyProtocol(server, lc)
}

func TestProxyConn(t *testing.T) {
	spec := &ProxyProtocolSpec{}
	t.Run("no filter, no wrapper", func(t *testing.T) {
		_, c := proxyConnPair(t, &Config{})
		if _, ok := c.(*proxyConn); ok {
			t.Fatal("a listener without the filter reads headers")
		}
	})
	t.Run("header in pieces, then the data", func(t *testing.T) {
		client, c := proxyConnPair(t, &Config{ProxyProtocol: spec, FiltersTimeout: time.Minute})
		go func() {
			for _, part := range []string{"PROXY TCP4 192.0.", "2.1 10.0.0.1 51000 80\r", "\nhello"} {
				client.Write([]byte(part))
				time.Sleep(10 * time.Millisecond) // separate reads, not timing the test
			}
			client.(*net.TCPConn).CloseWrite()
		}()
		if got := c.RemoteAddr().String(); got != "192.0.2.1:51000" {
			t.Errorf("RemoteAddr %s, want the header's source", got)
		}
		if got := c.LocalAddr().String(); got != "10.0.0.1:80" {
			t.Errorf("LocalAddr %s, want the header's destination", got)
		}
		data, err := io.ReadAll(c)
		if err != nil || string(data) != "hello" {
			t.Errorf("read %q, %v; want what followed the header", data, err)
		}
	})
	t.Run("v2 LOCAL keeps the peer", func(t *testing.T) {
		client, c := proxyConnPair(t, &Config{ProxyProtocol: spec})
		client.Write(append(v2(0x20, 0x00), "x"...))
		if got, want := c.RemoteAddr().String(), client.LocalAddr().String(); got != want {
			t.Errorf("RemoteAddr %s, want the peer's %s", got, want)
		}
	})
	t.Run("no header: closed without a byte", func(t *testing.T) {
		client, c := proxyConnPair(t, &Config{ProxyProtocol: spec})
		client.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
		if _, err := c.Read(make([]byte, 10)); err == nil {
			t.Fatal("read succeeded without a header")
		}
		if got, want := c.RemoteAddr().String(), client.LocalAddr().String(); got != want {
			t.Errorf("RemoteAddr %s, want the peer's %s", got, want)
		}
		client.SetReadDeadline(time.Now().Add(time.Minute))
		if n, err := client.Read(make([]byte, 10)); n != 0 || err == nil {
			t.Errorf("client read %d bytes, %v; want the connection closed", n, err)
		}
	})
	t.Run("no header allowed", func(t *testing.T) {
		client, c := proxyConnPair(t, &Config{ProxyProtocol: &ProxyProtocolSpec{AllowWithout: true}})
		client.Write([]byte("GET / HTTP/1.1\r\n"))
		client.(*net.TCPConn).CloseWrite()
		data, err := io.ReadAll(c)
		if err != nil || string(data) != "GET / HTTP/1.1\r\n" {
			t.Errorf("read %q, %v; want the bytes as sent", data, err)
		}
		if got, want := c.RemoteAddr().String(), client.LocalAddr().String(); got != want {
			t.Errorf("RemoteAddr %s, want the peer's %s", got, want)
		}
	})
	t.Run("disallowed version", func(t *testing.T) {
		client, c := proxyConnPair(t, &Config{ProxyProtocol: &ProxyProtocolSpec{DisallowV1: true}})
		client.Write([]byte("PROXY TCP4 192.0.2.1 10.0.0.1 51000 80\r\nx"))
		if _, err := c.Read(make([]byte, 10)); err == nil {
			t.Fatal("a disallowed version 1 header was accepted")
		}
	})
	t.Run("header not within the timeout", func(t *testing.T) {
		client, c := proxyConnPair(t, &Config{ProxyProtocol: spec, FiltersTimeout: 50 * time.Millisecond})
		client.Write([]byte("PROXY TCP4 "))
		if _, err := c.Read(make([]byte, 10)); err == nil || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("read error %v, want the filters' timeout", err)
		}
	})
	t.Run("timeout with continue_on_listener_filters_timeout", func(t *testing.T) {
		client, c := proxyConnPair(t, &Config{ProxyProtocol: spec, FiltersTimeout: 50 * time.Millisecond, ContinueOnTimeout: true})
		client.Write([]byte("PROXY TCP4 "))
		buf := make([]byte, 32)
		n, err := c.Read(buf)
		if err != nil || !bytes.Equal(buf[:n], []byte("PROXY TCP4 ")) {
			t.Fatalf("read %q, %v; want the bytes as sent", buf[:n], err)
		}
	})
}
