package listener

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The PROXY protocol (HAProxy's, versions 1 and 2), read as Envoy's
// envoy.filters.listener.proxy_protocol reads it: a header that names the
// client's address before the connection's first byte of its own. The parser is
// Portico's own: github.com/pires/go-proxyproto, the field's reference library,
// gives other answers than Envoy to the same bytes: it refuses a version 1
// header that arrives in more than one read and a LOCAL header with an
// undefined family byte, and accepts a version 2 PROXY header of the UNIX
// family and non-unicast addresses, where Envoy does the opposite; Envoy's
// answer is the one the embedded proxy must give.

// ProxyProtocolSpec is a validated envoy.filters.listener.proxy_protocol.
type ProxyProtocolSpec struct {
	// AllowWithout serves a connection whose first bytes cannot start a header
	// as it is, from its peer's address (allow_requests_without_proxy_protocol).
	AllowWithout bool
	// DisallowV1 and DisallowV2 refuse a header of that version
	// (disallowed_versions).
	DisallowV1, DisallowV2 bool
}

// proxyHeader is what a header says. A header that keeps the connection's own
// addresses (version 1 UNKNOWN, version 2 LOCAL) has neither address.
type proxyHeader struct {
	version     int
	source, dst netip.AddrPort
}

var (
	proxyV1Signature = []byte("PROXY ")
	proxyV2Signature = []byte("\r\n\r\n\x00\r\nQUIT\n")
)

const (
	proxyV2HeaderLen = 16 // signature, version and command, family, length
	// proxyV1MaxLen is the longest version 1 line Envoy reads, CRLF included.
	proxyV1MaxLen = 108
)

// errProxyNeedMore: the bytes are the start of a header, not all of it.
var errProxyNeedMore = errors.New("incomplete PROXY protocol header")

// errNoProxyHeader: the bytes cannot start a header (allow_requests_without_proxy_protocol
// serves such connections as they are).
var errNoProxyHeader = errors.New("not a PROXY protocol header")

// parseProxyHeader reads the header at the start of b and returns it and its
// length. Incomplete input gives errProxyNeedMore; input that can start no
// header, errNoProxyHeader; anything else wrong, another error. It follows
// Envoy's filter: a version 2 header needs version 2, the LOCAL command (any
// family, its address block and TLVs skipped) or PROXY over TCP or UDP on IPv4
// or IPv6 (UNSPEC and UNIX refused); its TLVs must be well formed and are
// otherwise ignored. A version 1 line is at most 108 bytes with CRLF, tokens
// separated by single spaces, UNKNOWN followed by anything.
func parseProxyHeader(b []byte) (proxyHeader, int, error) {
	switch {
	case startsLike(b, proxyV2Signature):
		if len(b) < proxyV2HeaderLen {
			return proxyHeader{}, 0, errProxyNeedMore
		}
		return parseProxyV2(b)
	case startsLike(b, proxyV1Signature):
		end := bytes.Index(b[:min(len(b), proxyV1MaxLen)], []byte("\r\n"))
		switch {
		case end >= 0:
			h, err := parseProxyV1(string(b[:end]))
			return h, end + 2, err
		case len(b) >= proxyV1MaxLen:
			return proxyHeader{}, 0, errors.New("PROXY protocol version 1 line longer than 108 bytes")
		}
		return proxyHeader{}, 0, errProxyNeedMore
	}
	return proxyHeader{}, 0, errNoProxyHeader
}

// startsLike reports whether b and sig agree as far as the shorter goes (an
// empty b could still become anything).
func startsLike(b, sig []byte) bool {
	n := min(len(b), len(sig))
	return bytes.Equal(b[:n], sig[:n])
}

// parseProxyV1 parses a version 1 line without its CRLF.
func parseProxyV1(line string) (proxyHeader, error) {
	parts := strings.Split(strings.TrimRight(line, " \t\f\v\r\n"), " ")
	if len(parts) < 2 || parts[0] != "PROXY" {
		return proxyHeader{}, errors.New("malformed PROXY protocol version 1 line")
	}
	h := proxyHeader{version: 1}
	if parts[1] == "UNKNOWN" {
		return h, nil
	}
	if len(parts) != 6 {
		return proxyHeader{}, fmt.Errorf("PROXY protocol version 1 line with %d fields, want 6", len(parts))
	}
	var is4 bool
	switch parts[1] {
	case "TCP4":
		is4 = true
	case "TCP6":
	default:
		return proxyHeader{}, fmt.Errorf("PROXY protocol version 1 protocol %q (TCP4, TCP6 or UNKNOWN)", parts[1])
	}
	var err error
	if h.source, err = proxyV1Address(parts[2], parts[4], is4); err != nil {
		return proxyHeader{}, fmt.Errorf("source: %w", err)
	}
	if h.dst, err = proxyV1Address(parts[3], parts[5], is4); err != nil {
		return proxyHeader{}, fmt.Errorf("destination: %w", err)
	}
	return h, nil
}

// proxyV1Address parses a version 1 address and port of the family the line
// names: a unicast address, a port from 0 to 65535 in decimal digits.
func proxyV1Address(addr, port string, is4 bool) (netip.AddrPort, error) {
	ip, err := netip.ParseAddr(addr)
	if err != nil || ip.Zone() != "" || ip.Is4() != is4 {
		return netip.AddrPort{}, fmt.Errorf("invalid address %q", addr)
	}
	if port == "" || len(port) > 5 || strings.TrimLeft(port, "0123456789") != "" {
		return netip.AddrPort{}, fmt.Errorf("invalid port %q", port)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("invalid port %q", port)
	}
	if !unicast(ip) {
		return netip.AddrPort{}, fmt.Errorf("address %s is not unicast", ip)
	}
	return netip.AddrPortFrom(ip, uint16(p)), nil
}

// unicast is Envoy's test of a PROXY header's addresses: not unspecified,
// multicast or the IPv4 broadcast address.
func unicast(ip netip.Addr) bool {
	return !ip.IsUnspecified() && !ip.IsMulticast() && ip != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// The version 2 fields Envoy reads.
const (
	proxyV2Local   = 0x0
	proxyV2Proxy   = 0x1
	proxyV2INET    = 0x1
	proxyV2INET6   = 0x2
	proxyV2Stream  = 0x1
	proxyV2Dgram   = 0x2
	proxyV2AddrLn4 = 12
	proxyV2AddrLn6 = 36
)

// parseProxyV2 parses a version 2 header whose signature b starts with.
func parseProxyV2(b []byte) (proxyHeader, int, error) {
	verCmd, family := b[12], b[13]
	if verCmd>>4 != 2 {
		return proxyHeader{}, 0, fmt.Errorf("PROXY protocol version 2 header of version %d", verCmd>>4)
	}
	length := int(binary.BigEndian.Uint16(b[14:16]))
	total := proxyV2HeaderLen + length
	h := proxyHeader{version: 2}
	if verCmd&0xf == proxyV2Local {
		// A connection the proxy in front opened itself (a health check): its
		// own addresses stand, whatever the block says.
		if len(b) < total {
			return proxyHeader{}, 0, errProxyNeedMore
		}
		return h, total, nil
	}
	if verCmd&0xf != proxyV2Proxy {
		return proxyHeader{}, 0, fmt.Errorf("PROXY protocol version 2 command %d (LOCAL or PROXY)", verCmd&0xf)
	}
	var addrLen int
	switch family >> 4 {
	case proxyV2INET:
		addrLen = proxyV2AddrLn4
	case proxyV2INET6:
		addrLen = proxyV2AddrLn6
	default:
		return proxyHeader{}, 0, fmt.Errorf("PROXY protocol version 2 address family %d (only IPv4 and IPv6)", family>>4)
	}
	if t := family & 0xf; t != proxyV2Stream && t != proxyV2Dgram {
		return proxyHeader{}, 0, fmt.Errorf("PROXY protocol version 2 transport %d (only stream and datagram)", t)
	}
	if length < addrLen {
		return proxyHeader{}, 0, fmt.Errorf("PROXY protocol version 2 address length %d, want at least %d", length, addrLen)
	}
	if len(b) < total {
		return proxyHeader{}, 0, errProxyNeedMore
	}
	block := b[proxyV2HeaderLen:total]
	if addrLen == proxyV2AddrLn4 {
		h.source = netip.AddrPortFrom(netip.AddrFrom4([4]byte(block[0:4])), binary.BigEndian.Uint16(block[8:10]))
		h.dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(block[4:8])), binary.BigEndian.Uint16(block[10:12]))
	} else {
		h.source = netip.AddrPortFrom(netip.AddrFrom16([16]byte(block[0:16])), binary.BigEndian.Uint16(block[32:34]))
		h.dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(block[16:32])), binary.BigEndian.Uint16(block[34:36]))
	}
	if !unicast(h.source.Addr()) || !unicast(h.dst.Addr()) {
		return proxyHeader{}, 0, errors.New("PROXY protocol version 2 address is not unicast")
	}
	if err := checkProxyTLVs(block[addrLen:]); err != nil {
		return proxyHeader{}, 0, err
	}
	return h, total, nil
}

// checkProxyTLVs checks that the rest of an address block is a sequence of
// whole type-length-value entries, as Envoy does before skipping them.
func checkProxyTLVs(b []byte) error {
	for len(b) > 0 {
		if len(b) < 3 {
			return errors.New("PROXY protocol version 2 TLV cut short")
		}
		n := 3 + int(binary.BigEndian.Uint16(b[1:3]))
		if n > len(b) {
			return fmt.Errorf("PROXY protocol version 2 TLV of type %#x longer than the header", b[0])
		}
		b = b[n:]
	}
	return nil
}

// allowed reports whether the spec accepts a header of h's version.
func (s *ProxyProtocolSpec) allowed(h proxyHeader) error {
	if (h.version == 1 && s.DisallowV1) || (h.version == 2 && s.DisallowV2) {
		return fmt.Errorf("PROXY protocol version %d is disallowed", h.version)
	}
	return nil
}

// proxyConn is an accepted connection of a listener with the PROXY protocol
// filter. Its header is read by whichever comes first of the connection's
// first Read and its first question about addresses, on the goroutine that
// serves it (never the accept loop): http.Server asks for RemoteAddr first
// thing, before any deadline of its own. The header's source is then the
// connection's remote address for everything downstream (the request's
// RemoteAddr: X-Forwarded-For, RBAC's and the rate limits' remote address, the
// access log, %DOWNSTREAM_REMOTE_ADDRESS%), its destination the local one, as
// Envoy restores them.
type proxyConn struct {
	net.Conn
	spec              *ProxyProtocolSpec
	deadline          time.Time // listener_filters_timeout from the accept; zero: none
	continueOnTimeout bool

	once   sync.Once
	header proxyHeader
	rest   []byte // read past the header, served before the socket
	err    error  // the connection was closed for it
}

// withProxyProtocol is c, accepted now, read through its PROXY protocol
// header when lc asks for one (nothing added otherwise).
func withProxyProtocol(c net.Conn, lc *Config) net.Conn {
	if lc.ProxyProtocol == nil {
		return c
	}
	pc := &proxyConn{Conn: c, spec: lc.ProxyProtocol, continueOnTimeout: lc.ContinueOnTimeout}
	if lc.FiltersTimeout > 0 {
		pc.deadline = time.Now().Add(lc.FiltersTimeout)
	}
	return pc
}

// readHeader reads the header once; on error the connection is closed, as
// Envoy closes it, without a byte sent.
func (c *proxyConn) readHeader() {
	c.once.Do(func() {
		err := c.parse()
		if err == nil {
			return
		}
		_ = c.Conn.Close()
		// A read error http.Server treats as the client's going away: it
		// answers nothing.
		c.err = &net.OpError{Op: "read", Net: "tcp", Source: c.Conn.LocalAddr(), Addr: c.Conn.RemoteAddr(), Err: err}
	})
}

// parse reads until the header is whole (or cannot be one).
func (c *proxyConn) parse() error {
	if !c.deadline.IsZero() {
		_ = c.Conn.SetReadDeadline(c.deadline)
		defer c.Conn.SetReadDeadline(time.Time{})
	}
	buf := make([]byte, 0, 256)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, len(buf))
		}
		n, rerr := c.Conn.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		h, hn, err := parseProxyHeader(buf)
		switch {
		case err == nil:
			if err := c.spec.allowed(h); err != nil {
				return err
			}
			c.header, c.rest = h, buf[hn:]
			return nil
		case errors.Is(err, errNoProxyHeader) && c.spec.AllowWithout:
			c.rest = buf
			return nil
		case !errors.Is(err, errProxyNeedMore):
			return err
		case rerr == nil:
			continue
		}
		var ne net.Error
		if errors.As(rerr, &ne) && ne.Timeout() && c.continueOnTimeout {
			// continue_on_listener_filters_timeout: served as it is.
			c.rest = buf
			return nil
		}
		return fmt.Errorf("PROXY protocol header: %w", rerr)
	}
}

func (c *proxyConn) Read(p []byte) (int, error) {
	c.readHeader()
	if c.err != nil {
		return 0, c.err
	}
	if len(c.rest) > 0 {
		n := copy(p, c.rest)
		c.rest = c.rest[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// RemoteAddr is the header's source, or the peer's address when the header
// keeps it.
func (c *proxyConn) RemoteAddr() net.Addr {
	c.readHeader()
	if c.header.source.IsValid() {
		return net.TCPAddrFromAddrPort(c.header.source)
	}
	return c.Conn.RemoteAddr()
}

// LocalAddr is the header's destination, or the socket's own address.
func (c *proxyConn) LocalAddr() net.Addr {
	c.readHeader()
	if c.header.dst.IsValid() {
		return net.TCPAddrFromAddrPort(c.header.dst)
	}
	return c.Conn.LocalAddr()
}

// CloseWrite half-closes the TCP connection (tcp_proxy, net/http's lingering close).
func (c *proxyConn) CloseWrite() error { return closeWrite(c.Conn) }
