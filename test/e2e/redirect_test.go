package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// startRedirector answers every request with a redirect, without reading its body:
// /old, /chain/2, /see (303) and /plain to /new, /chain/1 to /chain/2, /loop to
// itself, /tls to https, /upload to /sink.
func startRedirector(t *testing.T) string {
	t.Helper()
	to := map[string]string{
		"/old":     "http://redirect.example.com/new?from=old",
		"/chain/1": "http://redirect.example.com/chain/2",
		"/chain/2": "http://redirect.example.com/new",
		"/loop":    "http://redirect.example.com/loop",
		"/tls":     "https://redirect.example.com/new",
		"/see":     "http://redirect.example.com/new",
		"/plain":   "http://redirect.example.com/new",
		"/upload":  "http://redirect.example.com/sink",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", to[r.URL.Path])
		if r.URL.Path == "/see" {
			w.WriteHeader(http.StatusSeeOther)
			return
		}
		w.WriteHeader(http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestHTTPProxyInternalRedirect: with internalRedirectPolicy the proxy follows the
// backend's redirects itself, and the client gets the answer of their target (routed
// afresh, x-envoy-original-url set, a 303 made a GET, a body of up to 1 MiB sent again); redirects past
// maxInternalRedirects, to another scheme, back to a route already gone through
// (denyRepeatedRouteRedirect), or with another status reach the client; a route
// without the policy passes redirects on.
func TestHTTPProxyInternalRedirect(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "redir/app") + "---\n" + serviceManifest("redir", "redirector", startRedirector(t)) + "---\n" +
			serviceManifest("redir", "sink", startBodySink(t)),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: r, namespace: redir}
spec:
  virtualhost: {fqdn: redirect.example.com}
  routes:
  - conditions: [{prefix: /new}]
    services: [{name: app, port: 80}]
  - conditions: [{prefix: /old}]
    internalRedirectPolicy: {redirectResponseCodes: [302]}
    services: [{name: redirector, port: 80}]
  - conditions: [{prefix: /chain}]
    internalRedirectPolicy: {maxInternalRedirects: 1}
    services: [{name: redirector, port: 80}]
  - conditions: [{prefix: /loop}]
    internalRedirectPolicy: {maxInternalRedirects: 5, denyRepeatedRouteRedirect: true}
    services: [{name: redirector, port: 80}]
  - conditions: [{prefix: /tls}]
    internalRedirectPolicy: {}
    services: [{name: redirector, port: 80}]
  - conditions: [{prefix: /see}]
    internalRedirectPolicy: {redirectResponseCodes: [303]}
    services: [{name: redirector, port: 80}]
  - conditions: [{prefix: /plain}]
    services: [{name: redirector, port: 80}]
  - conditions: [{prefix: /sink}]
    services: [{name: sink, port: 80}]
  - conditions: [{prefix: /upload}]
    internalRedirectPolicy: {}
    services: [{name: redirector, port: 80}]
`,
	})
	e.waitFor("redirect.example.com", "/new", "app", http.StatusOK)
	checkRedirectBodies(t, e)

	r := e.get("redirect.example.com", "/old")
	if r.status != http.StatusOK || r.service() != "app" || r.echo.Path != "/new" {
		t.Fatalf("/old: %d from %q (%s), want the answer of /new", r.status, r.service(), r.echo.Path)
	}
	if got := r.echo.Headers["X-Envoy-Original-Url"]; len(got) != 1 || got[0] != "http://redirect.example.com/old" {
		t.Errorf("x-envoy-original-url = %q", got)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+e.httpAddr()+"/see", http.NoBody)
	req.Host = "redirect.example.com"
	if r := e.do(req, e.client); r.service() != "app" || r.echo.Method != http.MethodGet {
		t.Errorf("POST /see (303): %d from %q with %s, want a GET to /new", r.status, r.service(), r.echo.Method)
	}
	for path, why := range map[string]string{
		"/chain/1": "the second redirect is past maxInternalRedirects 1",
		"/loop":    "the target is a route already gone through",
		"/tls":     "a redirect to another scheme is not followed by default",
		"/plain":   "the route has no internalRedirectPolicy",
	} {
		if r := e.get("redirect.example.com", path); r.status != http.StatusFound || r.header.Get("Location") == "" {
			t.Errorf("%s: %d (Location %q), want the redirect itself: %s", path, r.status, r.header.Get("Location"), why)
		}
	}
	if r := e.get("redirect.example.com", "/chain/1"); r.header.Get("Location") != "http://redirect.example.com/new" {
		t.Errorf("/chain/1: Location %q, want /chain/2's (the first redirect was followed)", r.header.Get("Location"))
	}
}

// startBodySink answers every request with the length and SHA-256 of the body it
// received, in X-Body-Length and X-Body-Sha256.
func startBodySink(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Body-Length", strconv.FormatInt(n, 10))
		w.Header().Set("X-Body-Sha256", hex.EncodeToString(h.Sum(nil)))
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// checkRedirectBodies: a request with a body follows an internal redirect when the
// proxy received the whole body within its buffer limit (1 MiB, as Envoy's default):
// the target gets the same body, byte for byte. A longer body is not sent twice: the
// client gets the redirect.
func checkRedirectBodies(t *testing.T, e *env) {
	t.Helper()
	post := func(size int) (result, []byte) {
		body := make([]byte, size)
		rand.Read(body)
		req, _ := http.NewRequest(http.MethodPost, "http://"+e.httpAddr()+"/upload", bytes.NewReader(body))
		req.Host = "redirect.example.com"
		return e.do(req, e.client), body
	}
	for _, size := range []int{100, 200 << 10, 1<<20 - 1} {
		r, body := post(size)
		sum := sha256.Sum256(body)
		if r.status != http.StatusOK || r.header.Get("X-Body-Length") != strconv.Itoa(size) || r.header.Get("X-Body-Sha256") != hex.EncodeToString(sum[:]) {
			t.Errorf("POST /upload with %d bytes: %d, the target got %s bytes (sha256 %s), want the redirect followed with the body intact",
				size, r.status, r.header.Get("X-Body-Length"), r.header.Get("X-Body-Sha256"))
		}
	}
	if r, _ := post(1<<20 + 1024); r.status != http.StatusFound || r.header.Get("Location") != "http://redirect.example.com/sink" {
		t.Errorf("POST /upload with a body over 1 MiB: %d (Location %q), want the redirect itself", r.status, r.header.Get("Location"))
	}
}
