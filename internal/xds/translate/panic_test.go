package translate

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/source/manifest"
	"github.com/portico-dev/portico/internal/store"
)

// TestPanicThresholdFollowsHealthChecks: every way a manifest asks for an active health
// check (an HTTPProxy route's healthCheckPolicy, a tcpproxy's, an IngressRoute's and an
// IngressRoute service's) gives a cluster with panic mode off, so that a client gets a 503
// when every endpoint fails its check; every other cluster keeps Envoy's default
// threshold (no common_lb_config).
func TestPanicThresholdFollowsHealthChecks(t *testing.T) {
	objs, problems := manifest.Decode("panic.yaml", []byte(`
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: web, namespace: hp}
spec:
  virtualhost: {fqdn: web.example.com}
  routes:
  - conditions: [{prefix: /checked}]
    services: [{name: checked, port: 80}]
    healthCheckPolicy: {path: /healthz}
  - conditions: [{prefix: /passive}]
    services: [{name: passive, port: 80}]
    failurePolicy: {consecutive5xx: 3}
  - services: [{name: plain, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: db, namespace: hp}
spec:
  virtualhost: {fqdn: db.example.com, tls: {passthrough: true}}
  tcpproxy: {services: [{name: db, port: 5432}], healthCheckPolicy: {intervalSeconds: 5}}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: shop, namespace: ir}
spec:
  virtualhost: {fqdn: shop.example.com}
  healthCheck: {path: /healthz}
  routes:
  - {match: /, services: [{name: shop, port: 80}]}
  - {match: /api, services: [{name: api, port: 80, healthCheck: {path: /ready}}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: blog, namespace: ir}
spec:
  virtualhost: {fqdn: blog.example.com}
  routes:
  - {match: /, services: [{name: blog, port: 80}]}
`+services("hp", "checked", "passive", "plain", "db")+services("ir", "shop", "api", "blog")))
	if len(problems) > 0 {
		t.Fatalf("manifest problems: %v", problems)
	}
	g := dag.Build(store.FromObjects(objs), dag.Options{})
	for _, s := range g.Statuses {
		if s.Status != dag.StatusValid {
			t.Errorf("status of %s = %s: %s", s.Object, s.Status, s.Description)
		}
	}
	res, err := Translate(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Cluster names start with namespace/service/port; an IngressRoute's health check
	// adds a suffix.
	checked := map[string]bool{"hp/checked": true, "hp/db": true, "ir/shop": true, "ir/api": true, "hp/passive": false, "hp/plain": false, "ir/blog": false}
	seen := map[string]bool{}
	for _, r := range res.Clusters {
		c := r.(*clusterv3.Cluster)
		if err := c.ValidateAll(); err != nil {
			t.Errorf("cluster %s: %v", c.Name, err)
		}
		svc := strings.Join(strings.SplitN(c.Name, "/", 3)[:2], "/")
		want, ok := checked[svc]
		if !ok {
			t.Errorf("unexpected cluster %s", c.Name)
			continue
		}
		seen[svc] = true
		if got := len(c.HealthChecks) > 0; got != want {
			t.Errorf("cluster %s: health checked %v, want %v", c.Name, got, want)
		}
		switch {
		case want && (c.CommonLbConfig.GetHealthyPanicThreshold() == nil || c.CommonLbConfig.GetHealthyPanicThreshold().GetValue() != 0):
			t.Errorf("health-checked cluster %s: common_lb_config %v, want healthy_panic_threshold 0", c.Name, c.CommonLbConfig)
		case !want && c.CommonLbConfig != nil:
			t.Errorf("cluster %s without a health check: common_lb_config %v, want none (Envoy's default threshold)", c.Name, c.CommonLbConfig)
		}
	}
	for svc := range checked {
		if !seen[svc] {
			t.Errorf("no cluster for %s", svc)
		}
	}
}

// services declares Services with one port 80 (and 5432) each in namespace ns.
func services(ns string, names ...string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString("\n---\napiVersion: v1\nkind: Service\nmetadata: {name: " + n + ", namespace: " + ns + "}\nspec: {ports: [{name: http, port: 80}, {name: pg, port: 5432}]}\n")
	}
	return b.String()
}
