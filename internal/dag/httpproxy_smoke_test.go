package dag

import (
	"testing"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

func proxy(t testing.TB, doc string) *contourv1.HTTPProxy {
	return fromYAML[contourv1.HTTPProxy](t, doc)
}

func TestHTTPProxySmokeHeaderDelegation(t *testing.T) {
	g := build(
		proxy(t, `
metadata: {name: root, namespace: default}
spec:
  virtualhost: {fqdn: foo.example.com}
  includes:
  - name: headera
    namespace: team-a
    conditions: [{prefix: /foo}, {header: {name: x-header, exact: a}}]
  - name: headerb
    namespace: team-b
    conditions: [{prefix: /foo}, {header: {name: x-header, exact: b}}, {userAgent: Chrome}]
  routes:
  - conditions: [{prefix: /foo}]
    services: [{name: backend-default, port: 9999}]
`),
		proxy(t, `
metadata: {name: headera, namespace: team-a}
spec:
  routes:
  - services: [{name: backend-a, port: 9999}]
`),
		proxy(t, `
metadata: {name: headerb, namespace: team-b}
spec:
  routes:
  - services: [{name: backend-b, port: 9999}]
`),
		svc("default", "backend-default", ":9999"), svc("team-a", "backend-a", ":9999"), svc("team-b", "backend-b", ":9999"),
	)
	for _, s := range g.Statuses {
		t.Logf("%s %s %q %+v", s.Object, s.Status, s.Description, s.Warnings)
	}
	vh := httpHost(g, "foo.example.com")
	if vh == nil {
		t.Fatal("no host")
	}
	for _, r := range vh.Routes {
		t.Logf("%v %+v -> %s", r.Path, r.Headers, r.Clusters[0].Cluster.Name)
	}
	if len(vh.Routes) != 3 || vh.Routes[0].Clusters[0].Cluster.Service.Name != "backend-b" || vh.Routes[1].Clusters[0].Cluster.Service.Name != "backend-a" {
		t.Errorf("wrong order")
	}
}
