package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/echo"
	"github.com/portico-dev/portico/internal/testutil"
)

// healthEndpoint is a backend address with an echo server on one port and a health
// server, which says what the test tells it, on another.
type healthEndpoint struct {
	ip, servingPort, healthPort string
	healthy                     atomic.Bool
}

func startHealthEndpoint(t *testing.T, ip, name string) *healthEndpoint {
	t.Helper()
	ep := &healthEndpoint{ip: ip}
	_, ep.servingPort, _ = net.SplitHostPort(testutil.StartEcho(t, echo.Config{Listen: ip + ":0", Service: name, Namespace: "hp"}))
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && ep.healthy.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	_, ep.healthPort, _ = net.SplitHostPort(l.Addr().String())
	return ep
}

// healthBackends declares the Service hp/app whose endpoints are a and b, each
// serving on port "http" (80) and checked on port "health" (8081).
func healthBackends(a, b *healthEndpoint) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: app, namespace: hp}
spec:
  ports: [{name: http, port: 80}, {name: health, port: 8081}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: app, namespace: hp}
subsets:
- addresses: [{ip: %s}]
  ports: [{name: http, port: %s}, {name: health, port: %s}]
- addresses: [{ip: %s}]
  ports: [{name: http, port: %s}, {name: health, port: %s}]
`, a.ip, a.servingPort, a.healthPort, b.ip, b.servingPort, b.healthPort)
}

// TestHTTPProxyHealthPort: with healthPort, the active health checks of a service go to
// that port of each endpoint, not to the serving port (whose echo server would answer
// 200 to the check): the health servers decide which endpoint gets the traffic.
func TestHTTPProxyHealthPort(t *testing.T) {
	t.Parallel()
	a, b := startHealthEndpoint(t, "127.0.0.1", "a"), startHealthEndpoint(t, "127.0.0.2", "b")
	a.healthy.Store(true)
	e := start(t, map[string]string{
		"backends.yaml": healthBackends(a, b),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: hp, namespace: hp}
spec:
  virtualhost: {fqdn: hp.example.com}
  routes:
  - services: [{name: app, port: 80, healthPort: 8081}]
    healthCheckPolicy: {path: /healthz, intervalSeconds: 1, timeoutSeconds: 2, unhealthyThresholdCount: 1, healthyThresholdCount: 1}
`,
	})
	only := func(want string) func() bool {
		return func() bool {
			for range 6 {
				if got := e.get("hp.example.com", "/").service(); got != want {
					return false
				}
			}
			return true
		}
	}
	e.eventually(20*time.Second, "every request answered by a (b's health port says no)", only("a"))
	a.healthy.Store(false)
	b.healthy.Store(true)
	e.eventually(20*time.Second, "every request answered by b (a's health port says no)", only("b"))
}
