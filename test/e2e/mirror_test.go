package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a backend that keeps what it received.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
	addr string
}

type recorded struct {
	host, path, body string
	header           http.Header
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{host: r.Host, path: r.URL.RequestURI(), body: string(body), header: r.Header.Clone()})
		rec.mu.Unlock()
		w.WriteHeader(http.StatusTeapot) // never seen by the client
	}))
	t.Cleanup(srv.Close)
	rec.addr = srv.Listener.Addr().String()
	return rec
}

func (r *recorder) received() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

// TestHTTPProxyMirror: a service with mirror: true gets a copy of every request the
// route forwards (its body too, its Host with "-shadow" appended, the route's request
// headers policy applied), while the client only ever sees the route's own service's
// answer; a mirror that does not answer changes nothing for the client.
func TestHTTPProxyMirror(t *testing.T) {
	t.Parallel()
	shadow := startRecorder(t)
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "mirror/app") + "---\n" + serviceManifest("mirror", "shadow", shadow.addr) +
			"---\n" + serviceManifest("mirror", "dead", "127.0.0.1:1"),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: m, namespace: mirror}
spec:
  virtualhost: {fqdn: mirror.example.com}
  routes:
  - conditions: [{prefix: /api}]
    requestHeadersPolicy: {set: [{name: X-Route, value: api}]}
    services: [{name: app, port: 80}, {name: shadow, port: 80, mirror: true}]
  - conditions: [{prefix: /dead}]
    services: [{name: app, port: 80}, {name: dead, port: 80, mirror: true}]
`,
	})
	e.waitFor("mirror.example.com", "/api", "app", http.StatusOK)

	req, err := http.NewRequest(http.MethodPost, "http://"+e.httpAddr()+"/api/orders?id=7", strings.NewReader(`{"order":7}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "mirror.example.com"
	if r := e.do(req, e.client); r.status != http.StatusOK || r.service() != "app" || r.echo.Method != http.MethodPost {
		t.Fatalf("POST /api/orders: %d from %q, want app's answer", r.status, r.service())
	}
	var copy recorded
	e.eventually(10*time.Second, "the mirror received the POST", func() bool {
		for _, c := range shadow.received() {
			if c.path == "/api/orders?id=7" {
				copy = c
				return true
			}
		}
		return false
	})
	if copy.host != "mirror.example.com-shadow" || copy.body != `{"order":7}` || copy.header.Get("X-Route") != "api" || copy.header.Get("X-Request-Id") == "" {
		t.Errorf("the copy: Host %q, body %q, X-Route %q, X-Request-Id %q; want the request as it went upstream, Host with -shadow",
			copy.host, copy.body, copy.header.Get("X-Route"), copy.header.Get("X-Request-Id"))
	}
	for range 5 {
		if r := e.get("mirror.example.com", "/dead"); r.status != http.StatusOK || r.service() != "app" {
			t.Fatalf("GET /dead with an unreachable mirror: %d from %q, want app's answer", r.status, r.service())
		}
	}
}
