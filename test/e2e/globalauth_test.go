package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/authz"
	"github.com/portico-dev/portico/internal/authz/authztest"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/testutil"
)

// The installation's external authorization (Contour's globalExtAuth, --global-ext-auth)
// against real `portico authz` servers: a host without an authorization of its own is
// checked over plain HTTP and HTTPS with the global context, a host that disables it is
// not (but for a route that enables it again), a host with its own server is checked
// by its own, a route's context is merged over the global one, and an Ingress on the
// plain listener is checked too, as in Contour.

// plainProxy is a root HTTPProxy on host without TLS; vh holds more virtualhost fields.
func plainProxy(name, host, vh, routes string) string {
	return fmt.Sprintf(`apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: %s}
spec:
  virtualhost:
    fqdn: %s
%s  routes:
%s`, name, host, vh, routes)
}

// tlsProxy is a root HTTPProxy on host with TLS (the Secret cert); vh holds more
// virtualhost fields.
func tlsProxy(name, host, vh, routes string) string {
	return plainProxy(name, host, "    tls: {secretName: cert}\n"+vh, routes)
}

// getBasic sends GET http://host/path on the plain listener with basic credentials
// when user is set.
func (e *env) getBasic(host, path, user, password string) result {
	e.t.Helper()
	if user == "" {
		return e.get(host, path)
	}
	return e.get(host, path, "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
}

func startGlobalAuth(t *testing.T, files map[string]string) *env {
	t.Helper()
	g, err := dag.ParseGlobalAuthorization(&contourv1.AuthorizationServer{
		ExtensionServiceRef: contourv1.ExtensionServiceReference{Namespace: "auth", Name: "global"},
		// Generous: only a server that is down is ever too late.
		ResponseTimeout: "30s",
		AuthPolicy:      &contourv1.AuthorizationPolicy{Context: map[string]string{"site": "all", "tier": "web"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return startWith(t, files, app.RunOptions{GlobalAuthorization: g})
}

func TestGlobalExtAuth(t *testing.T) {
	t.Parallel()
	global := authztest.StartAuthz(t, authz.Config{Realm: "global"}, authUsers)
	own := authztest.StartAuthz(t, authz.Config{Realm: "own"}, map[string]string{"bob": "builder"})
	cert := testutil.SelfSigned("tls.example.com", "unchecked.example.com", "own.example.com")
	e := startGlobalAuth(t, map[string]string{
		"backends.yaml": backends(t, "web"),
		"secrets.yaml":  tlsSecretManifest("cert", cert),
		"extensions.yaml": extensionManifest("auth", "global", global.Addr(), "  protocol: h2c\n") + "---\n" +
			extensionManifest("auth", "own", own.Addr(), "  protocol: h2c\n"),
		"plain.yaml": plainProxy("plain", "plain.example.com", "", webRoute+`
  - conditions: [{prefix: /admin}]
    authPolicy: {context: {tier: admin}}
    services: [{name: web, port: 80}]
  - conditions: [{prefix: /public}]
    authPolicy: {disabled: true}
    services: [{name: web, port: 80}]
`),
		"tls.yaml": tlsProxy("tls", "tls.example.com", "", webRoute),
		"unchecked.yaml": tlsProxy("unchecked", "unchecked.example.com", "    authorization: {authPolicy: {disabled: true}}\n", webRoute+`
  - conditions: [{prefix: /secure}]
    authPolicy: {context: {tier: secure}}
    services: [{name: web, port: 80}]
`),
		"own.yaml": tlsProxy("own", "own.example.com", "    authorization: {extensionRef: {name: own, namespace: auth}, responseTimeout: 30s, authPolicy: {context: {site: own}}}\n", webRoute),
		"ingress.yaml": `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: ing}
spec:
  ingressClassName: portico
  rules:
  - host: ing.example.com
    http:
      paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]
`,
	})

	t.Run("a host without its own is checked over plain HTTP with the global context", func(t *testing.T) {
		if r := e.getBasic("plain.example.com", "/", "", ""); r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") != `Basic realm="global"` {
			t.Fatalf("without credentials: %d from %q, WWW-Authenticate %q; want 401 from the global server", r.status, r.service(), r.header.Get("WWW-Authenticate"))
		}
		wantAllowed(t, e.getBasic("plain.example.com", "/", "alice", "wonderland"), map[string]string{"Auth-Username": "alice", "Auth-Context-Site": "all", "Auth-Context-Tier": "web"})
	})
	t.Run("a route's context merged over the global one", func(t *testing.T) {
		r := e.getBasic("plain.example.com", "/admin", "alice", "wonderland")
		if upstreamHeader(r, "Auth-Context-Tier") != "admin" || upstreamHeader(r, "Auth-Context-Site") != "all" {
			t.Errorf("status %d, upstream headers %v", r.status, r.echo.Headers)
		}
	})
	t.Run("a route that disables it is not checked", func(t *testing.T) {
		if r := e.getBasic("plain.example.com", "/public", "", ""); r.status != http.StatusOK || upstreamHeader(r, "Auth-Username") != "" {
			t.Errorf("status %d from %q, upstream headers %v", r.status, r.service(), r.echo.Headers)
		}
	})
	t.Run("a TLS host without its own is checked over HTTPS", func(t *testing.T) {
		if r := e.getAuth("tls.example.com", "/", "", ""); r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") != `Basic realm="global"` {
			t.Errorf("without credentials: %d, WWW-Authenticate %q; want 401 from the global server", r.status, r.header.Get("WWW-Authenticate"))
		}
		if r := e.getAuth("tls.example.com", "/", "alice", "wonderland"); r.status != http.StatusOK || upstreamHeader(r, "Auth-Context-Site") != "all" {
			t.Errorf("with credentials: %d, upstream headers %v", r.status, r.echo.Headers)
		}
	})
	t.Run("a host that disables it is not checked, but a route enabling it again is", func(t *testing.T) {
		if r := e.getAuth("unchecked.example.com", "/", "", ""); r.status != http.StatusOK || r.service() != "web" || upstreamHeader(r, "Auth-Username") != "" {
			t.Errorf("/: %d from %q, upstream headers %v; want the backend's answer, unchecked", r.status, r.service(), r.echo.Headers)
		}
		if r := e.getAuth("unchecked.example.com", "/secure", "", ""); r.status != http.StatusUnauthorized {
			t.Errorf("/secure without credentials: %d, want 401", r.status)
		}
		// The host's policy replaces the global one: its context is the route's alone.
		r := e.getAuth("unchecked.example.com", "/secure", "alice", "wonderland")
		if r.status != http.StatusOK || upstreamHeader(r, "Auth-Context-Tier") != "secure" || upstreamHeader(r, "Auth-Context-Site") != "" {
			t.Errorf("/secure with credentials: %d, upstream headers %v", r.status, r.echo.Headers)
		}
	})
	t.Run("a host with its own server uses its own", func(t *testing.T) {
		if r := e.getAuth("own.example.com", "/", "alice", "wonderland"); r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") != `Basic realm="own"` {
			t.Errorf("the global server's user: %d, WWW-Authenticate %q; want 401 from the host's own server", r.status, r.header.Get("WWW-Authenticate"))
		}
		r := e.getAuth("own.example.com", "/", "bob", "builder")
		if r.status != http.StatusOK || upstreamHeader(r, "Auth-Context-Site") != "own" || upstreamHeader(r, "Auth-Context-Tier") != "" {
			t.Errorf("its own user: %d, upstream headers %v", r.status, r.echo.Headers)
		}
	})
	t.Run("an Ingress on the plain listener is checked, as in Contour", func(t *testing.T) {
		if r := e.getBasic("ing.example.com", "/", "", ""); r.status != http.StatusUnauthorized {
			t.Errorf("without credentials: %d from %q, want 401", r.status, r.service())
		}
		if r := e.getBasic("ing.example.com", "/", "alice", "wonderland"); r.status != http.StatusOK || r.service() != "web" {
			t.Errorf("with credentials: %d from %q", r.status, r.service())
		}
	})
	t.Run("a TLS host's redirect is checked as its route", func(t *testing.T) {
		if r := e.getBasic("tls.example.com", "/", "", ""); r.status != http.StatusUnauthorized {
			t.Errorf("plain HTTP without credentials: %d, want 401", r.status)
		}
		if r := e.getBasic("tls.example.com", "/", "alice", "wonderland"); r.status != http.StatusMovedPermanently {
			t.Errorf("plain HTTP with credentials: %d, want 301", r.status)
		}
	})
}

// Without its ExtensionService, the global authorization fails closed: the HTTPProxy
// hosts that rely on it are invalid (their status says why), one that disables it is
// served, and the plain listener's other requests get 403; creating the
// ExtensionService serves them.
func TestGlobalExtAuthMissingExtensionService(t *testing.T) {
	t.Parallel()
	global := authztest.StartAuthz(t, authz.Config{Realm: "global"}, authUsers)
	e := startGlobalAuth(t, map[string]string{
		"backends.yaml":  backends(t, "web"),
		"plain.yaml":     plainProxy("plain", "plain.example.com", "", webRoute),
		"unchecked.yaml": plainProxy("unchecked", "unchecked.example.com", "    authorization: {authPolicy: {disabled: true}}\n", webRoute),
	})
	if r := e.getBasic("unchecked.example.com", "/", "", ""); r.status != http.StatusOK || r.service() != "web" {
		t.Errorf("the host that disables it: %d from %q, want the backend's answer", r.status, r.service())
	}
	// `portico check` with the same setting shows the statuses.
	out, _, code := runBinary(t, portico(t), "check", e.dir, "-o", "json", "--global-ext-auth", "{extensionRef: {namespace: auth, name: global}}")
	var rows []struct{ Kind, Name, Status, Description string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 1 {
		t.Fatalf("exit code %d, %v: %s", code, err, out)
	}
	for _, r := range rows {
		switch r.Kind + "/" + r.Name {
		case "HTTPProxy/plain":
			if r.Status != "invalid" || !strings.Contains(r.Description, "ExtensionService auth/global not found") {
				t.Errorf("the host relying on it: %s %q", r.Status, r.Description)
			}
		case "HTTPProxy/unchecked":
			if r.Status != "valid" {
				t.Errorf("the host that disables it: %s %q", r.Status, r.Description)
			}
		}
	}
	if r := e.getBasic("plain.example.com", "/", "alice", "wonderland"); r.status == http.StatusOK {
		t.Errorf("the host relying on it was served: %d from %q", r.status, r.service())
	}
	e.write("extensions.yaml", extensionManifest("auth", "global", global.Addr(), "  protocol: h2c\n"))
	e.eventually(10*time.Second, "the host to be served, checked", func() bool {
		return e.getBasic("plain.example.com", "/", "alice", "wonderland").status == http.StatusOK
	})
	if r := e.getBasic("plain.example.com", "/", "", ""); r.status != http.StatusUnauthorized {
		t.Errorf("without credentials: %d, want 401", r.status)
	}
}
