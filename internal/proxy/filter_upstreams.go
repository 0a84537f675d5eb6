package proxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/upstream"
)

// filterUpstreams lets filters reach clusters of the configuration in
// service (filter.Upstreams): an authorization, rate limit or JWKS service
// is a cluster like any other, with its endpoints, health, TLS and the
// egress rules. Clients are kept per cluster name across swaps, since each
// connection looks its cluster up again when it dials.
type filterUpstreams struct {
	p *Proxy

	mu    sync.Mutex
	grpc  map[string]*grpc.ClientConn
	http  map[httpClientKey]*http.Client
	close bool
}

// httpClientKey names a filter HTTP client: a cluster, and whether it speaks
// HTTP/2 (which a configuration swap may change).
type httpClientKey struct {
	cluster string
	h2      bool
}

var _ filter.Upstreams = (*filterUpstreams)(nil)

func newFilterUpstreams(p *Proxy) *filterUpstreams {
	return &filterUpstreams{p: p, grpc: map[string]*grpc.ClientConn{}, http: map[httpClientKey]*http.Client{}}
}

// Dial connects to an endpoint of cluster, chosen by its load balancer,
// over TLS when the cluster's transport socket says so.
func (u *filterUpstreams) Dial(ctx context.Context, cluster string) (net.Conn, error) {
	return u.dial(ctx, cluster, false)
}

func (u *filterUpstreams) dial(ctx context.Context, cluster string, h2 bool) (net.Conn, error) {
	snap := u.p.current.Load()
	if snap == nil {
		return nil, fmt.Errorf("cluster %q: no configuration yet", cluster)
	}
	cl, ok := snap.clusters.Get(cluster)
	if !ok || cl == nil {
		return nil, fmt.Errorf("cluster %q is not configured", cluster)
	}
	i, ok := cl.Pick(upstream.PickContext{})
	if !ok {
		return nil, fmt.Errorf("cluster %q: no healthy upstream", cluster)
	}
	addr := cl.Endpoints[i]
	if cl.TLS != nil {
		return upstream.DialTLS(ctx, cl.Dialer, addr, cl.TLS, h2)
	}
	if cl.Dialer.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cl.Dialer.Timeout)
		defer cancel()
	}
	return cl.Dialer.Dial(ctx, addr)
}

// GRPC returns the cluster's shared gRPC client connection. TLS, when the
// cluster has it, is done by the dialer, so gRPC sees a ready connection.
func (u *filterUpstreams) GRPC(cluster string) (grpc.ClientConnInterface, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.close {
		return nil, fmt.Errorf("cluster %q: the proxy is shutting down", cluster)
	}
	if cc, ok := u.grpc[cluster]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient("passthrough:///"+cluster,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return u.dial(ctx, cluster, true)
		}),
	)
	if err != nil {
		return nil, err
	}
	u.grpc[cluster] = cc
	return cc, nil
}

// HTTP returns a client for the cluster: whatever the URL's scheme and host,
// connections go to the cluster's endpoints, with the cluster's TLS and
// protocol (HTTP/2 with prior knowledge over its h2 or h2c connections, as
// Envoy's HTTP client speaks to an HTTP/2 cluster).
func (u *filterUpstreams) HTTP(cluster string) (*http.Client, error) {
	key := httpClientKey{cluster: cluster, h2: u.speaksHTTP2(cluster)}
	u.mu.Lock()
	defer u.mu.Unlock()
	if c, ok := u.http[key]; ok {
		return c, nil
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) { return u.dial(ctx, cluster, key.h2) }
	protocols := new(http.Protocols)
	if key.h2 {
		protocols.SetUnencryptedHTTP2(true) // http:// URLs over the dialed (h2c or TLS h2) connection
		protocols.SetHTTP2(true)
	} else {
		protocols.SetHTTP1(true)
	}
	c := &http.Client{Transport: &http.Transport{
		Protocols:           protocols,
		DialContext:         dial,
		DialTLSContext:      dial,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		// No Accept-Encoding of the client's own: a filter's request carries the
		// headers the filter sends (an authorization check the allowed ones only).
		DisableCompression: true,
	}}
	u.http[key] = c
	return c, nil
}

// speaksHTTP2 reports whether the cluster, in the configuration in service,
// speaks HTTP/2.
func (u *filterUpstreams) speaksHTTP2(cluster string) bool {
	snap := u.p.current.Load()
	if snap == nil {
		return false
	}
	cl, ok := snap.clusters.Get(cluster)
	return ok && cl != nil && cl.HTTP2
}

// shutdown closes every client; later calls fail.
func (u *filterUpstreams) shutdown() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.close = true
	for _, cc := range u.grpc {
		_ = cc.Close()
	}
	for _, c := range u.http {
		c.CloseIdleConnections()
	}
}
