package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/portico-dev/portico/internal/dag"
)

// The HTTPProxy gauges carry Contour's names and the IngressRoute gauges' labels, and
// count only HTTPProxies.
func TestHTTPProxyGaugesCountHTTPProxiesOnly(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewPipeline(reg)
	proxy := func(ns, name string, v dag.StatusValue, root bool, hosts ...string) *dag.Status {
		return &dag.Status{Object: dag.ObjectRef{Kind: dag.KindHTTPProxy, Namespace: ns, Name: name}, Status: v, Root: root, Hosts: hosts}
	}
	m.ObserveRebuild(time.Now(), []*dag.Status{
		proxy("infra", "root", dag.StatusValid, true, "a.example.com"),
		proxy("team", "api", dag.StatusValid, false, "a.example.com"),
		proxy("team", "stray", dag.StatusOrphaned, false),
		proxy("infra", "broken", dag.StatusInvalid, true, "b.example.com"),
		proxy("other", "theirs", dag.StatusIgnored, true, "c.example.com"),
		irStatus("infra", "ir", dag.StatusValid, true, "d.example.com"),
	}, nil)
	want := `
# HELP contour_httpproxy HTTPProxies, whatever their status.
# TYPE contour_httpproxy gauge
contour_httpproxy{namespace="infra"} 2
contour_httpproxy{namespace="team"} 2
# HELP contour_httpproxy_invalid Invalid HTTPProxies, by virtual host (roots: their own; others: empty).
# TYPE contour_httpproxy_invalid gauge
contour_httpproxy_invalid{namespace="infra",vhost="a.example.com"} 0
contour_httpproxy_invalid{namespace="infra",vhost="b.example.com"} 1
contour_httpproxy_invalid{namespace="team",vhost=""} 0
contour_httpproxy_invalid{namespace="team",vhost="a.example.com"} 0
# HELP contour_httpproxy_orphaned Orphaned HTTPProxies: no root delegates to them.
# TYPE contour_httpproxy_orphaned gauge
contour_httpproxy_orphaned{namespace="infra"} 0
contour_httpproxy_orphaned{namespace="team"} 1
# HELP contour_httpproxy_root Root HTTPProxies (with a virtualhost).
# TYPE contour_httpproxy_root gauge
contour_httpproxy_root{namespace="infra"} 2
contour_httpproxy_root{namespace="team"} 0
# HELP contour_httpproxy_valid Valid HTTPProxies, by virtual host they serve.
# TYPE contour_httpproxy_valid gauge
contour_httpproxy_valid{namespace="infra",vhost="a.example.com"} 1
contour_httpproxy_valid{namespace="infra",vhost="b.example.com"} 0
contour_httpproxy_valid{namespace="team",vhost=""} 0
contour_httpproxy_valid{namespace="team",vhost="a.example.com"} 1
`
	names := []string{"contour_httpproxy", "contour_httpproxy_orphaned", "contour_httpproxy_root", "contour_httpproxy_valid", "contour_httpproxy_invalid"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.Objects.WithLabelValues(dag.KindHTTPProxy, string(dag.StatusOrphaned))); got != 1 {
		t.Errorf("portico_objects{kind=HTTPProxy,status=orphaned} = %v, want 1", got)
	}
}
