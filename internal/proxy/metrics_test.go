package proxy

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/portico-dev/portico/internal/proxy/hcm"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"github.com/prometheus/client_golang/prometheus"
)

// requestMetrics are a route's and a Service port's stats, resolved as
// compilation resolves them, with their series created by a first request.
func requestMetrics(t testing.TB) (*hcm.RouteStats, *upstream.Stats) {
	m := newMetrics(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	rs := &hcm.RouteStats{M: m.http, Key: hcm.RouteKey{Listener: "ingress_http", Vhost: "shop.example.com", Route: "httpproxy/shop/web", Path: "/cart"}}
	us := upstream.NewSeries(m.upstream).StatsFor(upstream.ClusterStatKey("web", "shop_web_http"))
	rs.Observe(200, 0.001, 512)
	us.Request(200)
	return rs, us
}

// What a request records finds its series without a lookup or an
// allocation once they exist.
func TestRequestMetricsDoNotAllocate(t *testing.T) {
	rs, us := requestMetrics(t)
	if n := testing.AllocsPerRun(1000, func() {
		rs.Observe(200, 0.001, 512)
		us.Request(200)
		us.Retried()
	}); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}

// BenchmarkRequestMetrics is what a forwarded request records: its route's
// counter and histograms, its Service port's counter.
func BenchmarkRequestMetrics(b *testing.B) {
	rs, us := requestMetrics(b)
	b.ReportAllocs()
	for b.Loop() {
		rs.Observe(200, 0.001, 512)
		us.Request(200)
	}
}

// BenchmarkRouteMetricsManyRoutes records requests spread over 10,000
// routes, each route's series cold in the cache as at 10,000 virtual hosts
// (the vhosts10k scenario of bench/proxy).
func BenchmarkRouteMetricsManyRoutes(b *testing.B) {
	m := newMetrics(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	routes := make([]*hcm.RouteStats, 10000)
	for i := range routes {
		routes[i] = &hcm.RouteStats{M: m.http, Key: hcm.RouteKey{Listener: "ingress_http", Vhost: fmt.Sprintf("vh%05d.test", i), Route: "ingress/default/vh", Path: "/"}}
		routes[i].Observe(200, 0.001, 512)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i = (i + 7919) % len(routes) // a prime stride: neighbours do not follow each other
		routes[i].Observe(200, 0.001, 512)
	}
}

// BenchmarkRouteMetricsScrape gathers the series of 10,000 routes that all
// saw requests: a Prometheus scrape of a proxy with 10,000 virtual hosts.
func BenchmarkRouteMetricsScrape(b *testing.B) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg, slog.New(slog.DiscardHandler))
	for i := range 10000 {
		s := &hcm.RouteStats{M: m.http, Key: hcm.RouteKey{Listener: "ingress_http", Vhost: fmt.Sprintf("vh%05d.test", i), Route: "ingress/default/vh", Path: "/"}}
		s.Observe(200, 0.001, 512)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
