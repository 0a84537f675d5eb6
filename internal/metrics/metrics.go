// Package metrics defines the control plane's Prometheus metrics. Each process creates
// its own registry; nothing registers globally.
package metrics

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/portico-dev/portico/internal/dag"
)

// Pipeline holds the metrics of the rebuild path.
type Pipeline struct {
	Rebuilds        prometheus.Counter
	RebuildFailures prometheus.Counter
	RebuildDuration prometheus.Histogram
	LastRebuild     prometheus.Gauge
	Objects         *prometheus.GaugeVec
	StatusWrites    *prometheus.CounterVec
	IngressRoutes   *IngressRoutes
	HTTPProxies     *RouteObjects

	objects seriesSet
}

// IngressRoutes are the IngressRoute metrics of seed 003, under the names it gives them.
type IngressRoutes struct {
	RouteObjects
	DAGRebuilds prometheus.Gauge
}

// RouteObjects count the objects of one delegating kind (IngressRoute, HTTPProxy) by
// status, namespace and virtual host.
type RouteObjects struct {
	kind     string
	Total    *prometheus.GaugeVec // namespace
	Orphaned *prometheus.GaugeVec // namespace
	Roots    *prometheus.GaugeVec // namespace
	Valid    *prometheus.GaugeVec // namespace, vhost
	Invalid  *prometheus.GaugeVec // namespace, vhost

	total, orphaned, roots, valid, invalid seriesSet
}

// routeObjectNames are the metric names of one kind: total, orphaned, root, valid, invalid.
type routeObjectNames struct {
	total, orphaned, root, valid, invalid string
}

func newRouteObjects(kind string, names routeObjectNames) RouteObjects {
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	plural := kind + "s"
	if strings.HasSuffix(kind, "y") {
		plural = kind[:len(kind)-1] + "ies"
	}
	return RouteObjects{
		kind:     kind,
		Total:    gauge(names.total, plural+", whatever their status.", "namespace"),
		Orphaned: gauge(names.orphaned, "Orphaned "+plural+": no root delegates to them.", "namespace"),
		Roots:    gauge(names.root, "Root "+plural+" (with a virtualhost).", "namespace"),
		Valid:    gauge(names.valid, "Valid "+plural+", by virtual host they serve.", "namespace", "vhost"),
		Invalid:  gauge(names.invalid, "Invalid "+plural+", by virtual host (roots: their own; others: empty).", "namespace", "vhost"),
	}
}

func newIngressRoutes() *IngressRoutes {
	return &IngressRoutes{
		RouteObjects: newRouteObjects(dag.KindIngressRoute, routeObjectNames{
			"contour_ingressroute_total", "contour_ingressroute_orphaned_total", "contour_ingressroute_root_total",
			"contour_ingressroute_valid_total", "contour_ingressroute_invalid_total",
		}),
		DAGRebuilds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "contour_ingressroute_dagrebuild_timestamp", Help: "Unix time of the last graph rebuild.",
		}),
	}
}

// newHTTPProxies are the HTTPProxy gauges under the names Contour exposes them.
func newHTTPProxies() *RouteObjects {
	m := newRouteObjects(dag.KindHTTPProxy, routeObjectNames{
		"contour_httpproxy", "contour_httpproxy_orphaned", "contour_httpproxy_root",
		"contour_httpproxy_valid", "contour_httpproxy_invalid",
	})
	return &m
}

func (m *IngressRoutes) collectors() []prometheus.Collector {
	return append(m.RouteObjects.collectors(), m.DAGRebuilds)
}

func (m *RouteObjects) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Total, m.Orphaned, m.Roots, m.Valid, m.Invalid}
}

// observe replaces the gauges with the counts of one build's statuses.
func (m *IngressRoutes) observe(statuses []*dag.Status, at time.Time) {
	m.DAGRebuilds.Set(float64(at.Unix()))
	m.RouteObjects.observe(statuses)
}

// observe replaces the gauges with the counts of one build's statuses.
func (m *RouteObjects) observe(statuses []*dag.Status) {
	total, orphaned, roots, valid, invalid := counts{}, counts{}, counts{}, counts{}, counts{}
	for _, s := range statuses {
		if s.Object.Kind != m.kind || s.Status == dag.StatusIgnored {
			continue
		}
		ns := s.Object.Namespace
		total.add(1, ns)
		// Every series an object could be counted in exists, at zero if need be, so that
		// an alert on `contour_ingressroute_invalid_total > 0` has something to evaluate
		// while all is well, and its first invalid object is a change, not a new series.
		roots.add(boolCount(s.Root), ns)
		orphaned.add(boolCount(s.Status == dag.StatusOrphaned), ns)
		hosts := s.Hosts
		if len(hosts) == 0 {
			hosts = []string{""}
		}
		for _, h := range hosts {
			valid.add(boolCount(s.Status == dag.StatusValid), ns, h)
			invalid.add(boolCount(s.Status == dag.StatusInvalid), ns, h)
		}
	}
	m.total.replace(m.Total, total)
	m.orphaned.replace(m.Orphaned, orphaned)
	m.roots.replace(m.Roots, roots)
	m.valid.replace(m.Valid, valid)
	m.invalid.replace(m.Invalid, invalid)
}

// counts are the values of a gauge vector's series, keyed by their joined label values.
type counts map[string]*labelled

type labelled struct {
	labels []string
	value  float64
}

func (c counts) add(v float64, labels ...string) {
	key := strings.Join(labels, "\x00")
	if l, ok := c[key]; ok {
		l.value += v
		return
	}
	c[key] = &labelled{labels: labels, value: v}
}

// seriesSet remembers which series of a gauge vector the last update set, so that the
// next one can replace them in place: series that stay are set, those that go are
// deleted. A scrape during an update never finds the vector empty, as it could between
// a Reset and the first new value.
type seriesSet map[string][]string

func (s *seriesSet) replace(vec *prometheus.GaugeVec, next counts) {
	for key, labels := range *s {
		if _, ok := next[key]; !ok {
			vec.DeleteLabelValues(labels...)
		}
	}
	kept := make(seriesSet, len(next))
	for key, l := range next {
		vec.WithLabelValues(l.labels...).Set(l.value)
		kept[key] = l.labels
	}
	*s = kept
}

func boolCount(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// NewPipeline creates the pipeline metrics and registers them on reg.
func NewPipeline(reg prometheus.Registerer) *Pipeline {
	m := &Pipeline{
		Rebuilds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "portico_rebuilds_total", Help: "Configuration rebuilds (graph build, translation, publication).",
		}),
		RebuildFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "portico_rebuild_failures_total", Help: "Rebuilds whose configuration was not published.",
		}),
		RebuildDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "portico_rebuild_duration_seconds", Help: "Time to build, translate and publish a configuration.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		LastRebuild: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "portico_last_rebuild_timestamp_seconds", Help: "Unix time of the last published configuration.",
		}),
		Objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portico_objects", Help: "Routing objects by kind and status.",
		}, []string{"kind", "status"}),
		StatusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portico_status_writes_total", Help: "Status updates written to the Kubernetes API, by kind.",
		}, []string{"kind"}),
		IngressRoutes: newIngressRoutes(),
		HTTPProxies:   newHTTPProxies(),
	}
	if reg != nil {
		reg.MustRegister(m.Rebuilds, m.RebuildFailures, m.RebuildDuration, m.LastRebuild, m.Objects, m.StatusWrites)
		reg.MustRegister(m.IngressRoutes.collectors()...)
		reg.MustRegister(m.HTTPProxies.collectors()...)
	}
	return m
}

// ObserveRebuild records one rebuild that started at start. Rebuilds call it one at a
// time (the pipeline runs them in one goroutine).
func (m *Pipeline) ObserveRebuild(start time.Time, statuses []*dag.Status, err error) {
	m.Rebuilds.Inc()
	// The graph was rebuilt even when its translation failed: its statuses stand.
	m.IngressRoutes.observe(statuses, time.Now())
	m.HTTPProxies.observe(statuses)
	if err != nil {
		m.RebuildFailures.Inc()
		return
	}
	m.RebuildDuration.Observe(time.Since(start).Seconds())
	m.LastRebuild.Set(float64(time.Now().Unix()))
	objects := counts{}
	for _, kind := range []string{dag.KindIngress, dag.KindIngressRoute, dag.KindHTTPProxy} {
		for _, st := range []dag.StatusValue{dag.StatusValid, dag.StatusInvalid, dag.StatusOrphaned, dag.StatusIgnored} {
			objects.add(0, kind, string(st))
		}
	}
	// Counted by a comparable key first: one label string per object would allocate
	// tens of thousands of them per rebuild at 10,000 objects.
	byKindStatus := map[[2]string]float64{}
	for _, s := range statuses {
		byKindStatus[[2]string{s.Object.Kind, string(s.Status)}]++
	}
	for k, n := range byKindStatus {
		objects.add(n, k[0], k[1])
	}
	m.objects.replace(m.Objects, objects)
}

// XDS holds the metrics of the xDS server.
type XDS struct {
	Clients prometheus.Gauge
	Pushes  *prometheus.CounterVec
}

// NewXDS creates the xDS metrics and registers them on reg.
func NewXDS(reg prometheus.Registerer) *XDS {
	m := &XDS{
		Clients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "portico_xds_clients", Help: "Connected xDS streams (Envoys and embedded proxies).",
		}),
		Pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portico_xds_pushes_total", Help: "xDS responses sent, by resource type.",
		}, []string{"type"}),
	}
	if reg != nil {
		reg.MustRegister(m.Clients, m.Pushes)
	}
	return m
}

// Cache holds the metrics of the Kubernetes source.
type Cache struct {
	Objects *prometheus.GaugeVec
}

// NewCache creates the cache metrics and registers them on reg.
func NewCache(reg prometheus.Registerer) *Cache {
	m := &Cache{Objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "portico_cached_objects", Help: "Objects held in the controller's cache, by kind.",
	}, []string{"kind"})}
	if reg != nil {
		reg.MustRegister(m.Objects)
	}
	return m
}
