package e2e

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// startCookieBackend answers every request with the same cookies, and its name.
func startCookieBackend(t *testing.T, name string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "session=abc; Path=/; Domain=old.example.com; HttpOnly")
		w.Header().Add("Set-Cookie", "prefs=dark; Path=/; SameSite=None")
		w.Header().Add("Set-Cookie", "other=1; Path=/")
		w.Header().Set("X-Backend", name)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestHTTPProxyCookieRewrite: cookieRewritePolicies rewrite the attributes of the
// cookies backends set: a route's apply to every service of the route, a service's
// to its own answers (first, then the route's for the other cookies); cookies without a
// rule pass unchanged.
func TestHTTPProxyCookieRewrite(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": serviceManifest("ck", "a", startCookieBackend(t, "a")) + "---\n" + serviceManifest("ck", "b", startCookieBackend(t, "b")),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: ck, namespace: ck}
spec:
  virtualhost: {fqdn: ck.example.com}
  routes:
  - conditions: [{prefix: /app}]
    cookieRewritePolicies:
    - {name: session, pathRewrite: {value: /app}, domainRewrite: {value: ck.example.com}, secure: true, sameSite: Strict}
    services:
    - name: a
      port: 80
      weight: 1
    - name: b
      port: 80
      weight: 1
      cookieRewritePolicies: [{name: prefs, sameSite: Lax}, {name: session, pathRewrite: {value: /b}}]
`,
	})
	want := map[string][]string{
		"a": {"session=abc; HttpOnly; Path=/app; Domain=ck.example.com; Secure; SameSite=Strict", "prefs=dark; Path=/; SameSite=None", "other=1; Path=/"},
		"b": {"session=abc; Domain=old.example.com; HttpOnly; Path=/b", "prefs=dark; Path=/; SameSite=Lax", "other=1; Path=/"},
	}
	seen := map[string]bool{}
	e.eventually(20*time.Second, "answers from both services", func() bool {
		r := e.get("ck.example.com", "/app")
		backend := r.header.Get("X-Backend")
		if w, ok := want[backend]; ok {
			if got := r.header.Values("Set-Cookie"); !slices.Equal(got, w) {
				t.Fatalf("cookies from %s: %q, want %q", backend, got, w)
			}
			seen[backend] = true
		}
		return len(seen) == 2
	})
}
