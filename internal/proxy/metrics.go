package proxy

import (
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's Prometheus collectors. They always exist (so the
// hot path needs no nil checks) and are registered only when a Registerer is
// configured.
type metrics struct {
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	xdsUpdates *prometheus.CounterVec
	retries    *prometheus.CounterVec
	// healthyEndpoints exists for clusters with active health checks.
	healthyEndpoints *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer, log *slog.Logger) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "portico",
			Subsystem: "proxy",
			Name:      "requests_total",
			Help:      "Downstream HTTP requests by listener, upstream cluster (empty for local replies) and status code.",
		}, []string{"listener", "cluster", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "portico",
			Subsystem: "proxy",
			Name:      "request_duration_seconds",
			Help:      "Time from receiving a downstream request to finishing its response.",
			Buckets:   prometheus.DefBuckets,
		}, []string{"listener", "cluster"}),
		xdsUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "portico",
			Subsystem: "proxy",
			Name:      "xds_updates_total",
			Help:      "xDS responses by resource type and outcome (ack or nack).",
		}, []string{"type", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "portico",
			Subsystem: "proxy",
			Name:      "upstream_retries_total",
			Help:      "Retries of upstream requests (route retry_policy) by cluster.",
		}, []string{"cluster"}),
		healthyEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "portico",
			Subsystem: "proxy",
			Name:      "cluster_healthy_endpoints",
			Help:      "Endpoints passing active health checks, by cluster (clusters with health_checks only).",
		}, []string{"cluster"}),
	}
	if reg != nil {
		m.requests = register(reg, m.requests, log)
		m.duration = register(reg, m.duration, log)
		m.xdsUpdates = register(reg, m.xdsUpdates, log)
		m.retries = register(reg, m.retries, log)
		m.healthyEndpoints = register(reg, m.healthyEndpoints, log)
	}
	return m
}

// register registers c, reusing an identical collector that is already
// registered (e.g. a second Proxy sharing one registry).
func register[C prometheus.Collector](reg prometheus.Registerer, c C, log *slog.Logger) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	log.Warn("cannot register proxy metrics", "error", err)
	return c
}

func (m *metrics) request(listener, cluster string, status int, elapsed time.Duration) {
	m.requests.WithLabelValues(listener, cluster, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(listener, cluster).Observe(elapsed.Seconds())
}

func (m *metrics) xdsUpdate(typeURL, result string) {
	m.xdsUpdates.WithLabelValues(shortTypeName(typeURL), result).Inc()
}

func (m *metrics) retry(cluster string) {
	m.retries.WithLabelValues(cluster).Inc()
}
