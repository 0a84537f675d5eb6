package e2e

import (
	"net/http"
	"testing"
	"time"
)

// TestHTTPProxySlowStart: with slowStartPolicy, an endpoint that joins a Service gets
// a small share of the requests at first (here its minimum weight, 10%, as its hour-long
// window has barely begun), while one added without the policy gets its full share.
func TestHTTPProxySlowStart(t *testing.T) {
	t.Parallel()
	a, b := startEcho(t, "ss", "a"), startEcho(t, "ss", "b")
	proxy := `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: ss, namespace: ss}
spec:
  virtualhost: {fqdn: ss.example.com}
  routes:
  - conditions: [{prefix: /slow}]
    services: [{name: app, port: 80, slowStartPolicy: {window: 1h}}]
  - conditions: [{prefix: /full}]
    services: [{name: app, port: 80}]
`
	e := start(t, map[string]string{"backends.yaml": serviceManifest("ss", "app", a), "proxy.yaml": proxy})
	e.waitFor("ss.example.com", "/slow", "a", http.StatusOK)
	e.waitFor("ss.example.com", "/full", "a", http.StatusOK)
	e.write("backends.yaml", serviceManifest("ss", "app", a, b))
	share := func(path string) float64 {
		n := 0
		for range 400 {
			if e.get("ss.example.com", path).service() == "b" {
				n++
			}
		}
		return float64(n) / 400
	}
	e.eventually(20*time.Second, "b to get requests on /full", func() bool { return share("/full") > 0.3 })
	if s := share("/slow"); s == 0 || s > 0.25 {
		t.Errorf("the new endpoint got %.0f%% of /slow's requests, want about 9%% (its minimum weight)", 100*s)
	}
}
