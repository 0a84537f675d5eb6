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

// recorder is a Registerer that notes the name and the labels of every metric registered
// on it.
type recorder struct{ names map[string][]string }

var (
	fqName         = regexp.MustCompile(`fqName: "([^"]+)"`)
	variableLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

func (r *recorder) Register(c prometheus.Collector) error {
	descs := make(chan *prometheus.Desc)
	go func() {
		c.Describe(descs)
		close(descs)
	}()
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			var labels []string
			if l := variableLabels.FindStringSubmatch(d.String()); l != nil && l[1] != "" {
				labels = strings.Split(l[1], ",")
			}
			r.names[m[1]] = labels
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
// register, with their labels.
func registeredNames(t *testing.T) map[string][]string {
	t.Helper()
	rec := &recorder{names: map[string][]string{}}
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
		if _, ok := registered[baseName(registered, name)]; !ok {
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
		"portico_proxy_upstream_connect_failures_total", "portico_proxy_tcp_connections_total", "portico_proxy_tcp_sent_bytes_total",
		"portico_rebuilds_total", "envoy_http_downstream_rq_total",
	} {
		if !used[want] {
			t.Errorf("the dashboard has no panel on %s", want)
		}
	}
	if envoy == 0 {
		t.Error("the dashboard has no Envoy panels")
	}
}

// baseName is the registered metric a series name belongs to: a histogram's _bucket, _sum
// and _count series are its own.
func baseName(registered map[string][]string, name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suffix); ok {
			if _, ok := registered[b]; ok {
				return b
			}
		}
	}
	return name
}

var (
	selector    = regexp.MustCompile(`\b((?:portico|contour)_[a-zA-Z0-9_]+)\{([^}]*)\}`)
	matcherName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	byClause    = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
	labelValues = regexp.MustCompile(`label_values\(((?:portico|contour)_[a-zA-Z0-9_]+)(?:\{[^}]*\})?\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\)`)
)

// The dashboard's queries select, group and list only labels that their Portico metrics
// have: a renamed label (cluster became service_namespace, service_name, service_port)
// fails this test instead of leaving a panel with one unlabelled line.
func TestDashboardQueriesOnlyRegisteredLabels(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "deploy", "grafana", "portico-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	registered := registeredNames(t)
	has := func(metric, label string) bool {
		base := baseName(registered, metric)
		if label == "job" || label == "instance" || (label == "le" && base != metric) {
			return true // target labels, and a histogram's buckets
		}
		for _, l := range registered[base] {
			if l == label {
				return true
			}
		}
		return false
	}
	checked := 0
	for _, q := range queries(dash) {
		var metrics []string
		for _, m := range metricName.FindAllString(q, -1) {
			if !strings.HasPrefix(m, "envoy_") {
				metrics = append(metrics, m)
			}
		}
		for _, sel := range selector.FindAllStringSubmatch(q, -1) {
			for _, m := range matcherName.FindAllStringSubmatch(sel[2], -1) {
				checked++
				if !has(sel[1], m[1]) {
					t.Errorf("%s has no label %q: %s", sel[1], m[1], q)
				}
			}
		}
		for _, by := range byClause.FindAllStringSubmatch(q, -1) {
			for _, label := range strings.Split(by[1], ",") {
				label = strings.TrimSpace(label)
				for _, m := range metrics {
					checked++
					if !has(m, label) {
						t.Errorf("%s has no label %q to group by: %s", m, label, q)
					}
				}
			}
		}
		for _, lv := range labelValues.FindAllStringSubmatch(q, -1) {
			checked++
			if !has(lv[1], lv[2]) {
				t.Errorf("%s has no label %q to list: %s", lv[1], lv[2], q)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no label of a Portico metric found in the dashboard's queries")
	}
}

// The names the dashboard test relies on are what the proxy registers (the recorder
// sees every collector), with their labels.
func TestRecorderSeesProxyMetrics(t *testing.T) {
	names := registeredNames(t)
	for _, want := range []string{"portico_proxy_requests_total", "portico_proxy_cluster_healthy_endpoints", "portico_rebuilds_total", "portico_xds_clients"} {
		if _, ok := names[want]; !ok {
			t.Errorf("%s not recorded (have %d names)", want, len(names))
		}
	}
	if got := strings.Join(names["portico_proxy_requests_total"], ","); got != "listener,vhost,route,path,code_class" {
		t.Errorf("portico_proxy_requests_total labels %q", got)
	}
}
