package proxy

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
)

// TCP proxying (envoy.filters.network.tcp_proxy) on the TLS listener: a
// filter chain chosen by the ClientHello's SNI either passes the TLS bytes
// through untouched (no transport_socket) or terminates TLS first (a
// DownstreamTlsContext), then copies bytes both ways to an endpoint of the
// cluster, half-closes included.

// defaultTCPIdleTimeout is Envoy's tcp_proxy idle_timeout default.
const defaultTCPIdleTimeout = time.Hour

// tcpProxySpec is a validated TcpProxy.
type tcpProxySpec struct {
	statPrefix string
	clusters   []tcpCluster // weighted_clusters, or the one cluster
	total      uint64       // sum of the weights
	// idleTimeout closes a connection after that long without a byte in
	// either direction; 0 disables it.
	idleTimeout        time.Duration
	maxConnectAttempts int // connection attempts, each to an endpoint picked again
}

type tcpCluster struct {
	name   string
	weight uint64
}

func convertTCPProxy(tp *tcpproxyv3.TcpProxy) (*tcpProxySpec, error) {
	if err := unsupported(
		field{"on_demand", tp.GetOnDemand() != nil},
		field{"metadata_match", tp.GetMetadataMatch() != nil},
		field{"downstream_idle_timeout", tp.GetDownstreamIdleTimeout() != nil},
		field{"upstream_idle_timeout", tp.GetUpstreamIdleTimeout() != nil},
		field{"access_log", len(tp.GetAccessLog()) > 0},
		field{"backoff_options", tp.GetBackoffOptions() != nil},
		field{"hash_policy", len(tp.GetHashPolicy()) > 0},
		field{"tunneling_config", tp.GetTunnelingConfig() != nil},
		field{"max_downstream_connection_duration", tp.GetMaxDownstreamConnectionDuration() != nil},
		field{"max_downstream_connection_duration_jitter_percentage", tp.GetMaxDownstreamConnectionDurationJitterPercentage() != nil},
		field{"access_log_flush_interval", tp.GetAccessLogFlushInterval() != nil},
		field{"flush_access_log_on_connected", tp.GetFlushAccessLogOnConnected()},
		field{"access_log_options", tp.GetAccessLogOptions() != nil},
		field{"proxy_protocol_tlvs", len(tp.GetProxyProtocolTlvs()) > 0},
		field{"proxy_protocol_tlv_merge_policy " + tp.GetProxyProtocolTlvMergePolicy().String(), tp.GetProxyProtocolTlvMergePolicy() != 0},
		field{"upstream_connect_mode " + tp.GetUpstreamConnectMode().String(), tp.GetUpstreamConnectMode() != tcpproxyv3.UpstreamConnectMode_IMMEDIATE},
		field{"max_early_data_bytes", tp.GetMaxEarlyDataBytes() != nil},
		field{"check_drain_close", tp.GetCheckDrainClose().GetValue()},
	); err != nil {
		return nil, err
	}
	s := &tcpProxySpec{statPrefix: tp.GetStatPrefix(), idleTimeout: defaultTCPIdleTimeout, maxConnectAttempts: 1}
	switch cs := tp.GetClusterSpecifier().(type) {
	case *tcpproxyv3.TcpProxy_Cluster:
		s.clusters = []tcpCluster{{name: cs.Cluster, weight: 1}}
	case *tcpproxyv3.TcpProxy_WeightedClusters:
		for _, c := range cs.WeightedClusters.GetClusters() {
			if c.GetMetadataMatch() != nil {
				return nil, fmt.Errorf("weighted_clusters %q: metadata_match is not supported", c.GetName())
			}
			s.clusters = append(s.clusters, tcpCluster{name: c.GetName(), weight: uint64(c.GetWeight())})
		}
	default:
		return nil, fmt.Errorf("cluster specifier %T is not supported", tp.GetClusterSpecifier())
	}
	for _, c := range s.clusters {
		s.total += c.weight
	}
	if s.total == 0 {
		return nil, errors.New("the cluster weights sum to 0")
	}
	if d := tp.GetIdleTimeout(); d != nil {
		s.idleTimeout = d.AsDuration()
	}
	if n := tp.GetMaxConnectAttempts(); n != nil {
		s.maxConnectAttempts = int(n.GetValue())
	}
	return s, nil
}

// pickCluster chooses a cluster by weight, per connection.
func (s *tcpProxySpec) pickCluster() string {
	if len(s.clusters) == 1 {
		return s.clusters[0].name
	}
	n := randUint64N(s.total)
	for _, c := range s.clusters {
		if n < c.weight {
			return c.name
		}
		n -= c.weight
	}
	return s.clusters[len(s.clusters)-1].name
}

// serveTCP proxies one downstream connection of a tcp_proxy chain: down is
// the raw connection (its ClientHello replayed) for passthrough, or the
// terminated TLS connection. It returns when both directions are done.
func (p *Proxy) serveTCP(lc *listenerConfig, fc *filterChain, down net.Conn) {
	defer down.Close()
	spec := fc.tcp
	if fc.tlsConfig != nil {
		tc := tls.Server(down, fc.tlsConfig)
		ctx := context.Background()
		if spec.idleTimeout > 0 {
			// A handshake that stalls is idle.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, spec.idleTimeout)
			defer cancel()
		}
		if err := tc.HandshakeContext(ctx); err != nil {
			p.log.Debug("tcp_proxy: TLS handshake failed", "listener", lc.name, "remote", down.RemoteAddr().String(), "error", err)
			return
		}
		down = tc
	}
	name := spec.pickCluster()
	cl, _ := lc.clusters.get(name)
	up, endpoint, err := p.connectTCP(cl, spec.maxConnectAttempts)
	if err != nil {
		p.log.Info("tcp_proxy: no upstream connection", "listener", lc.name, "stat_prefix", spec.statPrefix, "cluster", name,
			"remote", down.RemoteAddr().String(), "error", err)
		return
	}
	defer up.Close()
	start := time.Now()
	sent, received := splice(down, up, spec.idleTimeout)
	p.log.Debug("tcp_proxy: connection closed", "listener", lc.name, "stat_prefix", spec.statPrefix, "cluster", name,
		"upstream_host", endpoint, "remote", down.RemoteAddr().String(), "bytes_sent", sent, "bytes_received", received,
		"duration_ms", time.Since(start).Milliseconds())
}

// connectTCP connects to an endpoint of cl picked by its load balancer
// (healthy, not ejected), making up to attempts connection attempts, each to
// an endpoint picked again (tcp_proxy max_connect_attempts, 1 by default).
// Connect failures and successes feed outlier detection.
func (p *Proxy) connectTCP(cl *upstreamCluster, attempts int) (net.Conn, string, error) {
	if cl == nil {
		return nil, "", errors.New("unknown cluster")
	}
	var lastErr error
	for n := 0; n < max(attempts, 1); n++ {
		i, ok := cl.pick(pickContext{})
		if !ok {
			return nil, "", errNoHealthyUpstream
		}
		cl.state.served.Store(true)
		endpoint := cl.endpoints[i]
		var conn net.Conn
		var err error
		if cl.tls != nil {
			conn, err = dialTLS(context.Background(), cl.dialer, endpoint, cl.tls, false)
		} else {
			conn, err = cl.dialer.dial(context.Background(), endpoint)
		}
		if cl.outlier != nil {
			cl.outlier.record(cl.outlierHosts[i], err != nil)
		}
		if err == nil {
			return conn, endpoint, nil
		}
		cl.state.stats.get().connectFailures.Inc()
		lastErr = err
	}
	return nil, "", lastErr
}

// splice copies bytes both ways until both directions have ended. The end of
// one direction (EOF) is passed on as a half-close; an error, or idleTimeout
// without a byte either way, closes both connections.
func splice(down, up net.Conn, idleTimeout time.Duration) (sent, received int64) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	closeBoth := func() {
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
				idle := time.Since(time.Unix(0, last.Load()))
				if idle >= idleTimeout {
					closeBoth()
					return
				}
				timer.Reset(idleTimeout - idle)
			}
		}()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		received = copyHalf(down, up, &last, closeBoth)
	}()
	sent = copyHalf(up, down, &last, closeBoth)
	wg.Wait()
	return sent, received
}

// copyHalf copies src to dst; at src's EOF it half-closes dst, on an error it
// closes both connections (abort). It returns the bytes copied.
func copyHalf(dst, src net.Conn, last *atomic.Int64, abort func()) int64 {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		nr, rerr := src.Read(buf)
		if nr > 0 {
			last.Store(time.Now().UnixNano())
			nw, werr := dst.Write(buf[:nr])
			n += int64(nw)
			if werr != nil {
				abort()
				return n
			}
		}
		if rerr == io.EOF {
			if closeWrite(dst) != nil {
				abort()
			}
			return n
		}
		if rerr != nil {
			abort()
			return n
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
	t.mu.Lock()
	for c := range t.conns {
		_ = c.Close()
	}
	t.mu.Unlock()
	<-ended
}
