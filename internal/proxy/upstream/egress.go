package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Egress: which upstream addresses the proxy connects to. The address checked
// is the one a connection is made to, after resolution (net.Dialer.Control
// sees it just before connect), so a DNS answer that changes between a check
// and the connection cannot slip through.
//
//   - Endpoints of STRICT_DNS and LOGICAL_DNS clusters (a Service of type
//     ExternalName: whoever wrote the Service chose the name, and the name's
//     owner chooses its answers) never reach a loopback, link-local or
//     unspecified address, IPv4-mapped forms included. (The host's other
//     addresses are allowed: what listens there listens for the network, and
//     every backend of the tests is on this host.)
//   - No endpoint, IP literals of EDS and STATIC clusters included, reaches
//     one of the proxy's own protected addresses: its listeners, its xDS
//     server and Config.ProtectedAddrs (the admin endpoint, the admission
//     webhook). A server bound to 0.0.0.0 or :: protects its port on every
//     address of this host.
//
// Other literal IPs, loopback ones included, are an operator's explicit choice
// (an Endpoints object pointing at a local development server in `portico
// run`) and are connected to.

// egressReason says why a destination is refused; egressAllowed is none.
type egressReason uint8

const (
	egressAllowed egressReason = iota
	refusedLoopback
	refusedLinkLocal
	refusedUnspecified
	refusedOwnAddress
	numEgressReasons
)

// Label is the reason label of portico_proxy_upstream_destinations_refused_total.
func (r egressReason) Label() string {
	return [...]string{"", "loopback", "link_local", "unspecified", "own_address"}[r]
}

// String is the reason in words, for the log and the 502's body.
func (r egressReason) String() string {
	return [...]string{
		"",
		"a loopback address, which a name may not resolve to",
		"a link-local address, which a name may not resolve to",
		"the unspecified address, which a name may not resolve to",
		"an address Portico itself listens on (a proxy listener, the admin endpoint, xDS or the webhook)",
	}[r]
}

// DestinationRefusedError is a connection the proxy would not make. It is a
// connect failure (wrapped in a dial *net.OpError) for retries, outlier
// detection and the connect failure counter.
type DestinationRefusedError struct {
	addr   string // the address the connection was for, after resolution
	Reason egressReason
}

func (e *DestinationRefusedError) Error() string {
	return "destination " + e.addr + " refused: " + e.Reason.String()
}

// localAddrsMaxAge is how long the list of this host's addresses is trusted
// when it does not hold an address: a connection to a port Portico binds on
// every address, at an address the list lacks, reads the list again at most
// this often. Backends commonly listen on such a port (8080), and reading the
// interfaces costs a netlink dump.
const localAddrsMaxAge = time.Second

// RefusalLogEvery is how often a refusal of one cluster and address is logged;
// the line says how many went unlogged since.
const RefusalLogEvery = 10 * time.Second

// maxRefusalKeys bounds the cluster and address pairs whose last log line is
// remembered; beyond, refusals share one rate limit.
const maxRefusalKeys = 1024

// EgressGuard applies the egress rules to every upstream connection of the
// proxy: requests, TCP proxying and health checks.
type EgressGuard struct {
	resolver *net.Resolver
	// protected is replaced whole when the proxy's listeners or the process's
	// servers change (refresh); dials read it without a lock.
	protected atomic.Pointer[protectedAddrs]
	refreshMu sync.Mutex
	local     localAddrs
	// refused counts refusals by reason; a reason's series appears with its first
	// refusal (refusals are rare, so the lookup then is no cost).
	refused *prometheus.CounterVec
	log     refusalLog
}

// NewEgressGuard makes the guard; refused counts its refusals by reason.
func NewEgressGuard(resolver *net.Resolver, refused *prometheus.CounterVec, log *slog.Logger) *EgressGuard {
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	g := &EgressGuard{resolver: resolver, refused: refused, log: refusalLog{log: log, every: RefusalLogEvery, last: make(map[refusalKey]*refusalEntry)}}
	g.protected.Store(&protectedAddrs{})
	g.local.read = net.InterfaceAddrs
	return g
}

// EndpointDialer connects to the endpoints of one cluster: its
// connect_timeout and dns_lookup_family, through the egress guard.
type EndpointDialer struct {
	Guard   *EgressGuard
	Cluster string
	Timeout time.Duration
	Network string // "tcp", "tcp4" or "tcp6"
	// byName: the endpoints are DNS names (STRICT_DNS, LOGICAL_DNS), whose
	// answers must not be local.
	ByName bool
}

// Dial connects to addr, an endpoint of the cluster.
func (d EndpointDialer) Dial(ctx context.Context, addr string) (net.Conn, error) {
	nd := net.Dialer{Timeout: d.Timeout, KeepAlive: 30 * time.Second}
	g := d.Guard
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		// A literal: nothing to resolve, the check is on the address dialled.
		if r := g.Check(ap, d.ByName); r != egressAllowed {
			refusal := g.refuse(d.Cluster, addr, addr, r)
			return nil, &net.OpError{Op: "dial", Net: d.Network, Err: refusal}
		}
		return nd.DialContext(ctx, d.Network, addr)
	}
	nd.Resolver = g.resolver
	nd.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			// Go passes the IP and port it connects to; anything else is not connected to.
			return fmt.Errorf("connecting to %q: not an IP address and port", address)
		}
		if r := g.Check(ap, true); r != egressAllowed {
			return g.refuse(d.Cluster, addr, address, r)
		}
		return nil
	}
	return nd.DialContext(ctx, d.Network, addr)
}

// Check returns why the proxy may not connect to ap, or egressAllowed.
func (g *EgressGuard) Check(ap netip.AddrPort, byName bool) egressReason {
	ip := ap.Addr().Unmap().WithZone("")
	if byName {
		switch {
		case ip.IsLoopback():
			return refusedLoopback
		case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
			return refusedLinkLocal
		case ip.IsUnspecified():
			return refusedUnspecified
		}
	}
	if g.protected.Load().covers(ip, ap.Port(), &g.local) {
		return refusedOwnAddress
	}
	return egressAllowed
}

// refuse counts and logs a refused connection and returns its error.
func (g *EgressGuard) refuse(cluster, endpoint, addr string, r egressReason) error {
	g.refused.WithLabelValues(r.Label()).Inc()
	g.log.note(cluster, endpoint, addr, r)
	return &DestinationRefusedError{addr: addr, Reason: r}
}

// protectedAddrs are the addresses no upstream connection may reach.
type protectedAddrs struct {
	// exact are addresses bound on one IP (unmapped, without zone).
	exact map[netip.AddrPort]struct{}
	// anyLocal are the ports bound on 0.0.0.0 or ::, reachable at every
	// address of this host.
	anyLocal map[uint16]struct{}
	// inputs are the addresses this set was made from, to skip rebuilding it.
	inputs []string
}

// covers reports whether a connection to ip:port (ip unmapped) reaches a
// protected address.
func (s *protectedAddrs) covers(ip netip.Addr, port uint16, local *localAddrs) bool {
	if len(s.exact) == 0 && len(s.anyLocal) == 0 {
		return false
	}
	if ip.IsUnspecified() {
		// Linux connects 0.0.0.0 and :: to this host's loopback address.
		if ip.Is4() {
			ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		} else {
			ip = netip.IPv6Loopback()
		}
	}
	if _, ok := s.exact[netip.AddrPortFrom(ip, port)]; ok {
		return true
	}
	if _, ok := s.anyLocal[port]; !ok {
		return false
	}
	// Unknown local addresses (the interfaces could not be read) count as this
	// host's: Portico's own ports are refused rather than perhaps reached.
	return ip.IsLoopback() || local.has(ip) || local.unknown()
}

// Refresh replaces the protected set with addrs (host:port, as bound or as
// configured; a host name is resolved), unless they are the ones it was made
// from. Port 0 (an address not bound yet) protects nothing.
func (g *EgressGuard) Refresh(ctx context.Context, list func() []string) {
	// Listed under the lock: a refresh that listed earlier must not store
	// after one that listed later.
	g.refreshMu.Lock()
	defer g.refreshMu.Unlock()
	addrs := list()
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	if slices.Equal(g.protected.Load().inputs, addrs) {
		return
	}
	s := &protectedAddrs{exact: make(map[netip.AddrPort]struct{}), anyLocal: make(map[uint16]struct{}), inputs: addrs}
	for _, a := range addrs {
		host, portStr, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil || port == 0 {
			continue
		}
		for _, ip := range g.bindIPs(ctx, host) {
			if ip.IsUnspecified() {
				s.anyLocal[uint16(port)] = struct{}{}
			} else {
				s.exact[netip.AddrPortFrom(ip, uint16(port))] = struct{}{}
			}
		}
	}
	g.protected.Store(s)
}

// bindIPs are the addresses a listen address binds: "" is every address, a
// name the addresses it resolves to (as net.Listen would bind the first).
func (g *EgressGuard) bindIPs(ctx context.Context, host string) []netip.Addr {
	if host == "" {
		return []netip.Addr{netip.IPv4Unspecified()}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap().WithZone("")}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		// Whatever it binds is this host: protect the port everywhere.
		return []netip.Addr{netip.IPv4Unspecified()}
	}
	for i, ip := range ips {
		ips[i] = ip.Unmap().WithZone("")
	}
	return ips
}

// localAddrs are the addresses of this host's interfaces, read again when
// asked about an address they lack and older than localAddrsMaxAge.
type localAddrs struct {
	read func() ([]net.Addr, error)

	mu  sync.Mutex // one read at a time
	cur atomic.Pointer[localSet]
}

// localSet is one reading of the interfaces' addresses.
type localSet struct {
	addrs  map[netip.Addr]struct{}
	when   time.Time
	failed bool // the interfaces could not be read
}

// unknown reports whether the last reading of the interfaces failed.
func (l *localAddrs) unknown() bool {
	s := l.cur.Load()
	return s != nil && s.failed
}

func (l *localAddrs) has(ip netip.Addr) bool {
	if s := l.cur.Load(); s != nil {
		if _, ok := s.addrs[ip]; ok {
			return true
		}
		if time.Since(s.when) < localAddrsMaxAge {
			return false
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.cur.Load()
	if s == nil || time.Since(s.when) >= localAddrsMaxAge {
		s = l.readSet()
		l.cur.Store(s)
	}
	_, ok := s.addrs[ip]
	return ok
}

// readSet reads the interfaces' addresses; an error reads as none, and is
// remembered (unknown) until the next reading.
func (l *localAddrs) readSet() *localSet {
	s := &localSet{addrs: make(map[netip.Addr]struct{}), when: time.Now()}
	addrs, err := l.read()
	s.failed = err != nil
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				s.addrs[ip.Unmap()] = struct{}{}
			}
		}
	}
	return s
}

// refusalLog writes one WARN line per cluster and address per interval.
type refusalLog struct {
	log   *slog.Logger
	every time.Duration

	mu   sync.Mutex
	last map[refusalKey]*refusalEntry
}

type refusalKey struct{ cluster, addr string }

type refusalEntry struct {
	at         time.Time
	suppressed int
}

func (l *refusalLog) note(cluster, endpoint, addr string, r egressReason) {
	now := time.Now()
	key := refusalKey{cluster, addr}
	l.mu.Lock()
	e, ok := l.last[key]
	if !ok && len(l.last) >= maxRefusalKeys {
		l.prune(now)
		if len(l.last) >= maxRefusalKeys {
			key = refusalKey{} // too many at once: one line per interval for them all
			e, ok = l.last[key]
		}
	}
	if ok && now.Sub(e.at) < l.every {
		e.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := 0
	if ok {
		suppressed = e.suppressed
	}
	l.last[key] = &refusalEntry{at: now}
	l.mu.Unlock()
	l.log.Warn("upstream connection refused: the destination is not allowed",
		"service", serviceOfCluster(cluster), "cluster", cluster, "endpoint", endpoint, "address", addr,
		"reason", r.String(), "unlogged_since_last", suppressed)
}

// prune forgets the keys not logged within the interval.
func (l *refusalLog) prune(now time.Time) {
	for k, e := range l.last {
		if now.Sub(e.at) >= l.every {
			delete(l.last, k)
		}
	}
}

// serviceOfCluster is the namespace/name of the Service a cluster is named
// after (the contract names clusters <namespace>/<service>/<port>), or "".
func serviceOfCluster(cluster string) string {
	ns, rest, ok := strings.Cut(cluster, "/")
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, "/")
	if !ok || ns == "" || name == "" {
		return ""
	}
	return ns + "/" + name
}
