package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/portico-dev/portico/internal/proxy/accesslog"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
	"github.com/portico-dev/portico/internal/proxy/router"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"github.com/prometheus/client_golang/prometheus"
)

// errNoTCPUpstream ends a connection whose cluster has no endpoint to try.
var errNoTCPUpstream = errors.New("no healthy upstream")

// TCP proxying (envoy.filters.network.tcp_proxy) on the TLS listener: a
// filter chain chosen by the ClientHello's SNI either passes the TLS bytes
// through untouched (no transport_socket) or terminates TLS first (a
// DownstreamTlsContext), then copies bytes both ways to an endpoint of the
// cluster, half-closes included.

// defaultTCPIdleTimeout is Envoy's tcp_proxy idle_timeout default.
const defaultTCPIdleTimeout = time.Hour

// TcpProxySpec is a validated TcpProxy.
type TcpProxySpec struct {
	statPrefix string
	accessLog  bool         // access_log: a line per connection
	Clusters   []tcpCluster // weighted_clusters, or the one cluster
	Total      uint64       // sum of the weights
	// IdleTimeout closes a connection after that long without a byte in
	// either direction; 0 disables it.
	IdleTimeout        time.Duration
	MaxConnectAttempts int // connection attempts, each to an endpoint picked again
}

type tcpCluster struct {
	Name   string
	weight uint64
}

// ConvertTCPProxy converts a tcp_proxy network filter.
func ConvertTCPProxy(tp *tcpproxyv3.TcpProxy) (*TcpProxySpec, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("on_demand", tp.GetOnDemand() != nil),
		xdsconv.Set("metadata_match", tp.GetMetadataMatch() != nil),
		xdsconv.Set("downstream_idle_timeout", tp.GetDownstreamIdleTimeout() != nil),
		xdsconv.Set("upstream_idle_timeout", tp.GetUpstreamIdleTimeout() != nil),
		xdsconv.Set("backoff_options", tp.GetBackoffOptions() != nil),
		xdsconv.Set("hash_policy", len(tp.GetHashPolicy()) > 0),
		xdsconv.Set("tunneling_config", tp.GetTunnelingConfig() != nil),
		xdsconv.Set("max_downstream_connection_duration", tp.GetMaxDownstreamConnectionDuration() != nil),
		xdsconv.Set("max_downstream_connection_duration_jitter_percentage", tp.GetMaxDownstreamConnectionDurationJitterPercentage() != nil),
		xdsconv.Set("access_log_flush_interval", tp.GetAccessLogFlushInterval() != nil),
		xdsconv.Set("flush_access_log_on_connected", tp.GetFlushAccessLogOnConnected()),
		xdsconv.Set("access_log_options", tp.GetAccessLogOptions() != nil),
		xdsconv.Set("proxy_protocol_tlvs", len(tp.GetProxyProtocolTlvs()) > 0),
		xdsconv.Set("proxy_protocol_tlv_merge_policy "+tp.GetProxyProtocolTlvMergePolicy().String(), tp.GetProxyProtocolTlvMergePolicy() != 0),
		xdsconv.Set("upstream_connect_mode "+tp.GetUpstreamConnectMode().String(), tp.GetUpstreamConnectMode() != tcpproxyv3.UpstreamConnectMode_IMMEDIATE),
		xdsconv.Set("max_early_data_bytes", tp.GetMaxEarlyDataBytes() != nil),
		xdsconv.Set("check_drain_close", tp.GetCheckDrainClose().GetValue()),
	); err != nil {
		return nil, err
	}
	s := &TcpProxySpec{statPrefix: tp.GetStatPrefix(), IdleTimeout: defaultTCPIdleTimeout, MaxConnectAttempts: 1}
	for _, al := range tp.GetAccessLog() {
		if err := accesslog.Check(al); err != nil {
			return nil, err
		}
		s.accessLog = true
	}
	switch cs := tp.GetClusterSpecifier().(type) {
	case *tcpproxyv3.TcpProxy_Cluster:
		s.Clusters = []tcpCluster{{Name: cs.Cluster, weight: 1}}
	case *tcpproxyv3.TcpProxy_WeightedClusters:
		for _, c := range cs.WeightedClusters.GetClusters() {
			if c.GetMetadataMatch() != nil {
				return nil, fmt.Errorf("weighted_clusters %q: metadata_match is not supported", c.GetName())
			}
			s.Clusters = append(s.Clusters, tcpCluster{Name: c.GetName(), weight: uint64(c.GetWeight())})
		}
	default:
		return nil, fmt.Errorf("cluster specifier %T is not supported", tp.GetClusterSpecifier())
	}
	for _, c := range s.Clusters {
		s.Total += c.weight
	}
	if s.Total == 0 {
		return nil, errors.New("the cluster weights sum to 0")
	}
	if d := tp.GetIdleTimeout(); d != nil {
		s.IdleTimeout = d.AsDuration()
	}
	if n := tp.GetMaxConnectAttempts(); n != nil {
		s.MaxConnectAttempts = int(n.GetValue())
	}
	return s, nil
}

// pickCluster chooses a cluster by weight, per connection.
func (s *TcpProxySpec) pickCluster() string {
	if len(s.Clusters) == 1 {
		return s.Clusters[0].Name
	}
	n := router.RandUint64N(s.Total)
	for _, c := range s.Clusters {
		if n < c.weight {
			return c.Name
		}
		n -= c.weight
	}
	return s.Clusters[len(s.Clusters)-1].Name
}

// How a TCP proxy connection ended (the termination of its access log line):
// by the first of these to happen.
const (
	tcpEndDownstreamClosed = "downstream_closed" // the client ended its side first (FIN, or TLS close_notify)
	tcpEndUpstreamClosed   = "upstream_closed"   // the upstream ended its side first
	tcpEndDownstreamReset  = "downstream_reset"  // reading from or writing to the client failed first
	tcpEndUpstreamReset    = "upstream_reset"    // reading from or writing to the upstream failed first
	tcpEndIdleTimeout      = "idle_timeout"      // idle_timeout without a byte either way
	tcpEndDrained          = "drained"           // the listener's drain closed it (removed, or the proxy stopped)
	tcpEndTLSHandshake     = "tls_handshake_failure"
	tcpEndConnectFailure   = "upstream_connect_failure"
	tcpEndNoHealthy        = "no_healthy_upstream"
	tcpEndNoCluster        = "no_cluster"
)

// serveTCP proxies one downstream connection of a tcp_proxy chain: down is
// the raw connection (its ClientHello replayed) for passthrough, or the
// terminated TLS connection; sni is the server name the client sent. It
// returns when both directions are done, counting the connection in its
// Service port's series and writing its access log line.
func (s *Set) serveTCP(lc *Config, fc *FilterChain, down net.Conn, sni string, conns *connTracker) {
	defer down.Close()
	spec := fc.Tcp
	c := &accesslog.ConnEntry{Start: time.Now(), ServerName: sni, StatPrefix: spec.statPrefix, TLS: "passthrough"}
	e := &accesslog.Entry{Ctx: context.Background(), Listener: lc.Name, RemoteAddr: down.RemoteAddr().String(), Conn: c}
	defer s.logTCP(spec, e)
	if fc.TlsConfig != nil {
		c.TLS = "terminated"
		tc := tls.Server(down, fc.TlsConfig)
		ctx := context.Background()
		if spec.IdleTimeout > 0 {
			// A handshake that stalls is idle.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, spec.IdleTimeout)
			defer cancel()
		}
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Termination, c.DownstreamErr = tcpEndTLSHandshake, err
			return
		}
		down = tc
	}
	e.Cluster = spec.pickCluster()
	cl, _ := lc.Clusters.Get(e.Cluster)
	if cl != nil {
		e.Service = cl.Stats.Label
	}
	up, endpoint, err := s.connectTCP(cl, spec.MaxConnectAttempts)
	if err != nil {
		c.Termination, e.UpstreamErr = connectTermination(cl, err), err
		return
	}
	defer up.Close()
	e.UpstreamHost = endpoint
	ts := cl.Stats.TCPSeries()
	ts.Connections.Inc()
	ts.Active.Inc()
	defer ts.Active.Dec()
	var clean bool
	c.Received, c.Sent, c.Termination, clean = splice(down, up, spec.IdleTimeout, ts)
	if !clean && conns.forced.Load() {
		c.Termination = tcpEndDrained
	}
}

// connectTermination says why no upstream connection was made.
func connectTermination(cl *upstream.Cluster, err error) string {
	switch {
	case cl == nil:
		return tcpEndNoCluster
	case errors.Is(err, errNoTCPUpstream):
		return tcpEndNoHealthy
	}
	return tcpEndConnectFailure
}

// logTCP writes a connection's access log line when its chain asks for
// one; without, a connection that failed is logged as a plain message.
func (s *Set) logTCP(spec *TcpProxySpec, e *accesslog.Entry) {
	c := e.Conn
	e.Time = time.Now()
	e.Elapsed = e.Time.Sub(c.Start)
	if spec.accessLog && s.AccessLog.Enabled(e.Ctx) {
		s.AccessLog.Add(e)
		return
	}
	switch c.Termination {
	case tcpEndTLSHandshake:
		s.Log.Debug("tcp_proxy: TLS handshake failed", "listener", e.Listener, "remote", e.RemoteAddr, "error", c.DownstreamErr)
	case tcpEndNoCluster, tcpEndNoHealthy, tcpEndConnectFailure:
		s.Log.Info("tcp_proxy: no upstream connection", "listener", e.Listener, "stat_prefix", c.StatPrefix, "cluster", e.Cluster,
			"remote", e.RemoteAddr, "error", e.UpstreamErr)
	}
}

// connectTCP connects to an endpoint of cl picked by its load balancer
// (healthy, not ejected), making up to attempts connection attempts, each to
// an endpoint picked again (tcp_proxy max_connect_attempts, 1 by default).
// Connect failures and successes feed outlier detection.
func (s *Set) connectTCP(cl *upstream.Cluster, attempts int) (net.Conn, string, error) {
	if cl == nil {
		return nil, "", errors.New("unknown cluster")
	}
	var lastErr error
	for n := 0; n < max(attempts, 1); n++ {
		i, ok := cl.Pick(upstream.PickContext{})
		if !ok {
			return nil, "", errNoTCPUpstream
		}
		cl.State.Served.Store(true)
		endpoint := cl.Endpoints[i]
		var conn net.Conn
		var err error
		if cl.TLS != nil {
			conn, err = upstream.DialTLS(context.Background(), cl.Dialer, endpoint, cl.TLS, false)
		} else {
			conn, err = cl.Dialer.Dial(context.Background(), endpoint)
		}
		if cl.Outlier != nil {
			cl.Outlier.Record(cl.OutlierHosts[i], err != nil)
		}
		if err == nil {
			return conn, endpoint, nil
		}
		cl.Stats.ConnectFailed()
		lastErr = err
	}
	return nil, "", lastErr
}

// splice copies bytes both ways until both directions have ended, counting
// them in ts as they go. The end of one direction (EOF) is passed on as a
// half-close; an error, or idleTimeout without a byte either way, closes
// both connections. It returns the bytes received from down and sent to it,
// how the connection ended (the first end of a direction, error or idle
// timeout), and whether both directions ended cleanly.
func splice(down, up net.Conn, idleTimeout time.Duration, ts *upstream.TCPSeries) (received, sent int64, end string, clean bool) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	var first sync.Once
	record := func(why string) { first.Do(func() { end = why }) }
	var idle atomic.Bool
	abort := func(why string) {
		record(why)
		_ = down.Close()
		_ = up.Close()
	}
	if idleTimeout > 0 {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			timer := time.NewTimer(idleTimeout)
			defer timer.Stop()
			for {
				select {
				case <-stop:
					return
				case <-timer.C:
				}
				since := time.Since(time.Unix(0, last.Load()))
				if since >= idleTimeout {
					idle.Store(true)
					abort(tcpEndIdleTimeout)
					return
				}
				timer.Reset(idleTimeout - since)
			}
		}()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var upClean bool
	go func() {
		defer wg.Done()
		received, upClean = copyHalf(up, down, halfCopy{last: &last, record: record, abort: abort, counter: ts.Sent,
			srcClosed: tcpEndDownstreamClosed, srcReset: tcpEndDownstreamReset, dstReset: tcpEndUpstreamReset})
	}()
	sent, downClean := copyHalf(down, up, halfCopy{last: &last, record: record, abort: abort, counter: ts.Received,
		srcClosed: tcpEndUpstreamClosed, srcReset: tcpEndUpstreamReset, dstReset: tcpEndDownstreamReset})
	wg.Wait()
	// Both directions have ended, so one of them recorded; an idle timeout
	// that fires now records nothing more.
	first.Do(func() {})
	return received, sent, end, upClean && downClean && !idle.Load()
}

// halfCopy is one direction of a spliced connection.
type halfCopy struct {
	last    *atomic.Int64 // when a byte last went either way (UnixNano)
	record  func(why string)
	abort   func(why string)
	counter prometheus.Counter // bytes copied
	// srcClosed is the termination of the source's EOF; srcReset and
	// dstReset those of an error reading the source or writing the
	// destination.
	srcClosed, srcReset, dstReset string
}

// copyHalf copies src to dst; at src's EOF it half-closes dst, on an error it
// closes both connections (abort). It returns the bytes copied and whether
// the direction ended cleanly (EOF passed on).
func copyHalf(dst, src net.Conn, h halfCopy) (int64, bool) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		nr, rerr := src.Read(buf)
		if nr > 0 {
			h.last.Store(time.Now().UnixNano())
			nw, werr := dst.Write(buf[:nr])
			n += int64(nw)
			h.counter.Add(float64(nw))
			if werr != nil {
				h.abort(h.dstReset)
				return n, false
			}
		}
		if rerr == io.EOF {
			h.record(h.srcClosed)
			if closeWrite(dst) != nil {
				h.abort(h.dstReset)
				return n, false
			}
			return n, true
		}
		if rerr != nil {
			h.abort(h.srcReset)
			return n, false
		}
	}
}

// closeWrite half-closes a connection: a TCP FIN, or a TLS close_notify.
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// connTracker holds a listener's connections that are not HTTP's (those
// waiting for their ClientHello and TCP-proxied ones), so that they end when
// the listener is drained.
type connTracker struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	// forced is set when the drain time ran out and the connections left
	// are being closed.
	forced atomic.Bool
}

// add tracks c; false when the listener is closing (the caller closes c).
func (t *connTracker) add(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if t.conns == nil {
		t.conns = make(map[net.Conn]struct{})
	}
	t.conns[c] = struct{}{}
	t.wg.Add(1)
	return true
}

func (t *connTracker) done(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	t.wg.Done()
}

// drain lets the tracked connections end on their own until ctx is done,
// then closes the rest, and waits for their goroutines.
func (t *connTracker) drain(ctx context.Context) {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	ended := make(chan struct{})
	go func() {
		t.wg.Wait()
		close(ended)
	}()
	select {
	case <-ended:
		return
	case <-ctx.Done():
	}
	t.forced.Store(true)
	t.mu.Lock()
	for c := range t.conns {
		_ = c.Close()
	}
	t.mu.Unlock()
	<-ended
}
