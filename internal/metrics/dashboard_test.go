package metrics_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/proxy"
)

// recorder is a Registerer that notes the name of every metric registered on it.
type recorder struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	descs := make(chan *prometheus.Desc)
	go func() {
		c.Describe(descs)
		close(descs)
	}()
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r *recorder) Unregister(prometheus.Collector) bool { return true }

// registeredNames are the names of the metrics the controller and the embedded proxy
// register.
func registeredNames(t *testing.T) map[string]bool {
	t.Helper()
	rec := &recorder{names: map[string]bool{}}
	metrics.NewPipeline(rec)
	metrics.NewXDS(rec)
	metrics.NewCache(rec)
	proxy.New(proxy.Config{Registerer: rec})
	if len(rec.names) == 0 {
		t.Fatal("no metric names recorded")
	}
	return rec.names
}

// queries returns every PromQL expression of a Grafana dashboard: panel targets' expr
// and template variables' queries, at any depth.
func queries(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			if s, ok := child.(string); ok && (k == "expr" || k == "query" || k == "definition") {
				out = append(out, s)
				continue
			}
			out = append(out, queries(child)...)
		}
	case []any:
		for _, child := range x {
			out = append(out, queries(child)...)
		}
	}
	return out
}

var metricName = regexp.MustCompile(`\b(portico|contour|envoy)_[a-zA-Z0-9_]+`)

// The Grafana dashboard in deploy/grafana only queries Portico metrics that exist: a
// renamed or removed metric fails this test instead of leaving an empty panel.
func TestDashboardQueriesOnlyRegisteredMetrics(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "deploy", "grafana", "portico-dashboard.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	registered := registeredNames(t)
	used := map[string]bool{}
	for _, q := range queries(dash) {
		for _, name := range metricName.FindAllString(q, -1) {
			used[name] = true
		}
	}
	var unknown []string
	envoy := 0
	for name := range used {
		if strings.HasPrefix(name, "envoy_") {
			envoy++
			continue // Envoy's own stats (its /stats/prometheus), not ours to register
		}
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && registered[b] {
				base = b
			}
		}
		if !registered[base] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("the dashboard queries metrics that neither the controller nor the embedded proxy registers: %v", unknown)
	}
	// The dashboard covers what operators look at first, on both data planes.
	for _, want := range []string{
		"portico_proxy_requests_total", "portico_proxy_request_duration_seconds_bucket", "portico_proxy_response_size_bytes_bucket",
		"portico_proxy_upstream_retries_total", "portico_proxy_upstream_timeouts_total", "portico_proxy_upstream_per_try_timeouts_total",
		"portico_proxy_upstream_connect_failures_total", "portico_rebuilds_total", "envoy_http_downstream_rq_total",
	} {
		if !used[want] {
			t.Errorf("the dashboard has no panel on %s", want)
		}
	}
	if envoy == 0 {
		t.Error("the dashboard has no Envoy panels")
	}
}

// The names the dashboard test relies on are what the proxy registers (the recorder
// sees every collector).
func TestRecorderSeesProxyMetrics(t *testing.T) {
	names := registeredNames(t)
	for _, want := range []string{"portico_proxy_requests_total", "portico_proxy_cluster_healthy_endpoints", "portico_rebuilds_total", "portico_xds_clients"} {
		if !names[want] {
			t.Errorf("%s not recorded (have %d names)", want, len(names))
		}
	}
}
