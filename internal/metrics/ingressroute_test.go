package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/portico-dev/portico/internal/dag"
)

func irStatus(ns, name string, v dag.StatusValue, root bool, hosts ...string) *dag.Status {
	return &dag.Status{Object: dag.ObjectRef{Kind: dag.KindIngressRoute, Namespace: ns, Name: name}, Status: v, Root: root, Hosts: hosts}
}

// The seed-003 gauges count IngressRoutes by namespace (and virtual host), follow each
// rebuild (objects that disappear stop being counted), and leave other kinds out.
func TestIngressRouteGaugesFollowRebuilds(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewPipeline(reg)
	m.ObserveRebuild(time.Now(), []*dag.Status{
		irStatus("infra", "root", dag.StatusValid, true, "a.example.com", "www.a.example.com"),
		irStatus("web", "site", dag.StatusValid, false, "a.example.com"),
		irStatus("web", "green", dag.StatusOrphaned, false),
		irStatus("infra", "dup", dag.StatusInvalid, true, "b.example.com"),
		irStatus("other", "theirs", dag.StatusIgnored, false),
		{Object: dag.ObjectRef{Kind: dag.KindIngress, Namespace: "web", Name: "ing"}, Status: dag.StatusValid},
	}, nil)
	want := `
# HELP contour_ingressroute_invalid_total Invalid IngressRoutes, by virtual host (roots: their own; others: empty).
# TYPE contour_ingressroute_invalid_total gauge
contour_ingressroute_invalid_total{namespace="infra",vhost="a.example.com"} 0
contour_ingressroute_invalid_total{namespace="infra",vhost="b.example.com"} 1
contour_ingressroute_invalid_total{namespace="infra",vhost="www.a.example.com"} 0
contour_ingressroute_invalid_total{namespace="web",vhost=""} 0
contour_ingressroute_invalid_total{namespace="web",vhost="a.example.com"} 0
# HELP contour_ingressroute_orphaned_total Orphaned IngressRoutes: no root delegates to them.
# TYPE contour_ingressroute_orphaned_total gauge
contour_ingressroute_orphaned_total{namespace="infra"} 0
contour_ingressroute_orphaned_total{namespace="web"} 1
# HELP contour_ingressroute_root_total Root IngressRoutes (with a virtualhost).
# TYPE contour_ingressroute_root_total gauge
contour_ingressroute_root_total{namespace="infra"} 2
contour_ingressroute_root_total{namespace="web"} 0
# HELP contour_ingressroute_total IngressRoutes, whatever their status.
# TYPE contour_ingressroute_total gauge
contour_ingressroute_total{namespace="infra"} 2
contour_ingressroute_total{namespace="web"} 2
# HELP contour_ingressroute_valid_total Valid IngressRoutes, by virtual host they serve.
# TYPE contour_ingressroute_valid_total gauge
contour_ingressroute_valid_total{namespace="infra",vhost="a.example.com"} 1
contour_ingressroute_valid_total{namespace="infra",vhost="b.example.com"} 0
contour_ingressroute_valid_total{namespace="infra",vhost="www.a.example.com"} 1
contour_ingressroute_valid_total{namespace="web",vhost=""} 0
contour_ingressroute_valid_total{namespace="web",vhost="a.example.com"} 1
`
	names := []string{"contour_ingressroute_total", "contour_ingressroute_orphaned_total", "contour_ingressroute_root_total", "contour_ingressroute_valid_total", "contour_ingressroute_invalid_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if ts := testutil.ToFloat64(m.IngressRoutes.DAGRebuilds); time.Since(time.Unix(int64(ts), 0)) > time.Minute {
		t.Fatalf("dagrebuild timestamp %v is not recent", ts)
	}

	m.ObserveRebuild(time.Now(), []*dag.Status{irStatus("web", "green", dag.StatusOrphaned, false)}, nil)
	want = `
# HELP contour_ingressroute_total IngressRoutes, whatever their status.
# TYPE contour_ingressroute_total gauge
contour_ingressroute_total{namespace="web"} 1
# HELP contour_ingressroute_valid_total Valid IngressRoutes, by virtual host they serve.
# TYPE contour_ingressroute_valid_total gauge
contour_ingressroute_valid_total{namespace="web",vhost=""} 0
# HELP contour_ingressroute_invalid_total Invalid IngressRoutes, by virtual host (roots: their own; others: empty).
# TYPE contour_ingressroute_invalid_total gauge
contour_ingressroute_invalid_total{namespace="web",vhost=""} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "contour_ingressroute_total", "contour_ingressroute_valid_total", "contour_ingressroute_invalid_total"); err != nil {
		t.Fatal(err)
	}
}
