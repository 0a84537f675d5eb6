package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Helpers for the retry, idle timeout, load balancing and health check tests.

// scriptedBackend answers with handle, which gets the 1-based number of the
// request (health checks on /healthz are not counted).
type scriptedBackend struct {
	srv  *httptest.Server
	hits atomic.Int64
}

func (b *scriptedBackend) addr() string { return b.srv.Listener.Addr().String() }

func startScripted(t *testing.T, handle func(n int64, w http.ResponseWriter, r *http.Request)) *scriptedBackend {
	t.Helper()
	b := &scriptedBackend{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handle(b.hits.Add(1), w, r)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// failFirst answers the first n requests with status (and a body naming
// the attempt), then 200 "ok" with the request body echoed after it.
func failFirst(n int64, status int) func(int64, http.ResponseWriter, *http.Request) {
	return func(i int64, w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if i <= n {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, "attempt "+strconv.FormatInt(i, 10))
			return
		}
		_, _ = io.WriteString(w, "ok "+string(body))
	}
}

// sleepUntilCancelled blocks the handler for d or until the client goes away.
func sleepUntilCancelled(r *http.Request, d time.Duration) {
	select {
	case <-time.After(d):
	case <-r.Context().Done():
	}
}

// retryRoute routes prefix (a path_separated_prefix: "/a" does not catch
// "/ab") to cluster with a retry policy.
func retryRoute(cluster, prefix string, rp *routev3.RetryPolicy, mutate ...func(a *routev3.RouteAction)) *routev3.Route {
	return withAction(toCluster(cluster, separatedMatch(prefix)), func(a *routev3.RouteAction) {
		a.RetryPolicy = rp
		for _, m := range mutate {
			m(a)
		}
	})
}

// lbCluster is an EDS cluster with a load-balancing policy.
func lbCluster(name string, policy clusterv3.Cluster_LbPolicy) *clusterv3.Cluster {
	c := edsCluster(name)
	c.LbPolicy = policy
	return c
}

// httpHealthCheck is the health check shape the translator emits.
func httpHealthCheck(path, host string, interval time.Duration, unhealthy, healthy uint32) *corev3.HealthCheck {
	return &corev3.HealthCheck{
		Timeout:            durationpb.New(time.Second),
		Interval:           durationpb.New(interval),
		NoTrafficInterval:  durationpb.New(interval),
		UnhealthyThreshold: wrapperspb.UInt32(unhealthy),
		HealthyThreshold:   wrapperspb.UInt32(healthy),
		HealthChecker: &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{
			Path: path, Host: host,
		}},
	}
}

// accessRecord waits for the access log line of a request.
func accessRecord(t *testing.T, p *testProxy, requestID string) map[string]any {
	t.Helper()
	var rec map[string]any
	waitFor(t, "access log of "+requestID, func() bool {
		for _, r := range p.logs.records("access") {
			if r["request_id"] == requestID {
				rec = r
				return true
			}
		}
		return false
	})
	return rec
}

// attemptsOf returns the attempts the access log reports for a response.
func attemptsOf(t *testing.T, p *testProxy, r result) int {
	t.Helper()
	rec := accessRecord(t, p, r.Header.Get("X-Request-Id"))
	n, _ := rec["attempts"].(float64)
	return int(n)
}

// endpointHealthy reports the health of an endpoint in the applied configuration.
func endpointHealthy(p *testProxy, cluster, endpoint string) bool {
	snap := p.current.Load()
	if snap == nil {
		return false
	}
	c := snap.clusterNamed(cluster)
	return c != nil && c.Health != nil && c.Health.Healthy(endpoint)
}

// clientFrom is an HTTP client whose connections come from a given local
// IP (any 127.0.0.0/8 address works on loopback), for source IP hashing.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return d.DialContext(ctx, network, addr)
			},
		},
	}
}

// gaugeValue returns a gauge of the proxy's registry by name and cluster label.
func gaugeValue(t *testing.T, p *testProxy, name, cluster string) (float64, bool) {
	t.Helper()
	mfs, err := p.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "service_name" && l.GetValue() == cluster {
					if m.GetGauge() != nil {
						return m.GetGauge().GetValue(), true
					}
					return m.GetCounter().GetValue(), true
				}
			}
		}
	}
	return 0, false
}
