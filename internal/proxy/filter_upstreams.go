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
	http  map[string]*http.Client
	close bool
}

var _ filter.Upstreams = (*filterUpstreams)(nil)

func newFilterUpstreams(p *Proxy) *filterUpstreams {
	return &filterUpstreams{p: p, grpc: map[string]*grpc.ClientConn{}, http: map[string]*http.Client{}}
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
// connections go to the cluster's endpoints, TLS as the cluster says.
func (u *filterUpstreams) HTTP(cluster string) (*http.Client, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if c, ok := u.http[cluster]; ok {
		return c, nil
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) { return u.dial(ctx, cluster, false) }
	c := &http.Client{Transport: &http.Transport{
		DialContext:         dial,
		DialTLSContext:      dial,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}}
	u.http[cluster] = c
	return c, nil
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
