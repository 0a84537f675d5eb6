package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/authz"
	"github.com/portico-dev/portico/internal/authz/authztest"
	"github.com/portico-dev/portico/internal/testutil"
)

// External authorization (HTTPProxy virtualhost.authorization, ExtensionService) against
// real `portico authz` servers over real gRPC: allowed requests reach the upstream with
// the server's headers, denied ones get the server's status, headers and body, a server
// that is down or too slow gets 403 unless failOpen, routes carry their context or
// disable the check, and the extension is reached over TLS when its ExtensionService
// asks for it.

var authUsers = map[string]string{"alice": "wonderland"}

// extensionManifest is an ExtensionService named name whose Service (port 80) has the
// endpoint addr; spec holds more fields of its spec.
func extensionManifest(ns, name, addr, spec string) string {
	return serviceManifest(ns, name+"-svc", addr) + fmt.Sprintf(`---
apiVersion: projectcontour.io/v1alpha1
kind: ExtensionService
metadata: {name: %s, namespace: %s}
spec:
  services: [{name: %s-svc, port: 80}]
%s`, name, ns, name, spec)
}

// authProxy is a root HTTPProxy on host, TLS with the Secret cert, authorized as auth
// says, whose routes are given.
func authProxy(name, host, auth, routes string) string {
	return tlsProxy(name, host, "    authorization: "+auth+"\n", routes)
}

const webRoute = "  - services: [{name: web, port: 80}]\n"

// getAuth sends GET https://host/path over the HTTPS listener, with basic credentials
// when user is set.
func (e *env) getAuth(host, path, user, password string) result {
	e.t.Helper()
	var auth string
	if user != "" {
		auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	}
	return e.getTLSWith(host, path, "Authorization", auth)
}

// wantAllowed wants r answered by the web backend, which got the headers want.
func wantAllowed(t *testing.T, r result, want map[string]string) {
	t.Helper()
	if r.status != http.StatusOK || r.service() != "web" {
		t.Fatalf("status %d from %q, want the backend's answer", r.status, r.service())
	}
	for name, v := range want {
		if got := upstreamHeader(r, name); got != v {
			t.Errorf("upstream %s = %q, want %q", name, got, v)
		}
	}
}

func upstreamHeader(r result, name string) string {
	if v := r.echo.Headers[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func TestExtAuthz(t *testing.T) {
	t.Parallel()
	fast := authztest.StartAuthz(t, authz.Config{Realm: "shop"}, authUsers)
	// The slow server answers after a minute: far beyond the 250ms its host waits,
	// whatever the machine's load. The others are given 30s, so that only a server
	// that is down or slow on purpose is ever too late.
	slow := authztest.StartAuthz(t, authz.Config{Delay: time.Minute}, authUsers)
	down := authztest.StartAuthz(t, authz.Config{}, authUsers)
	downAddr := down.Addr()
	if err := down.Shutdown(); err != nil {
		t.Fatal(err)
	}
	authCert := testutil.SelfSigned("authz.auth.svc")
	secure := authztest.StartTLSAuthz(t, authz.Config{}, authUsers, authCert)
	cert := testutil.SelfSigned("a.example.com", "slow.example.com", "down.example.com", "open.example.com", "tls.example.com")

	e := start(t, map[string]string{
		"backends.yaml": backends(t, "web"),
		"secrets.yaml":  tlsSecretManifest("cert", cert) + "---\n" + caSecretManifest("auth", "authz-ca", authCert),
		"extensions.yaml": strings.Join([]string{
			extensionManifest("auth", "fast", fast.Addr(), "  protocol: h2c\n"),
			extensionManifest("auth", "slow", slow.Addr(), "  protocol: h2c\n"),
			extensionManifest("auth", "down", downAddr, "  protocol: h2c\n"),
			extensionManifest("auth", "secure", secure.Addr(), "  validation: {caSecret: authz-ca, subjectName: authz.auth.svc}\n"),
		}, "---\n"),
		"a.yaml": authProxy("a", "a.example.com", `{extensionRef: {name: fast, namespace: auth}, responseTimeout: 30s, authPolicy: {context: {site: a, tier: web}}}`, webRoute+`
  - conditions: [{prefix: /public}]
    authPolicy: {disabled: true}
    services: [{name: web, port: 80}]
  - conditions: [{prefix: /admin}]
    authPolicy: {context: {tier: admin}}
    services: [{name: web, port: 80}]
`),
		"slow.yaml": authProxy("slow", "slow.example.com", `{extensionRef: {name: slow, namespace: auth}, responseTimeout: 250ms}`, webRoute),
		"down.yaml": authProxy("down", "down.example.com", `{extensionRef: {name: down, namespace: auth}}`, webRoute),
		"open.yaml": authProxy("open", "open.example.com", `{extensionRef: {name: down, namespace: auth}, failOpen: true}`, webRoute),
		"tls.yaml":  authProxy("tls", "tls.example.com", `{extensionRef: {name: secure, namespace: auth}, responseTimeout: 30s}`, webRoute),
	})

	t.Run("denied with the server's status, headers and body", func(t *testing.T) {
		for _, creds := range [][2]string{{"", ""}, {"alice", "wrong"}, {"mallory", "wonderland"}} {
			r := e.getAuth("a.example.com", "/", creds[0], creds[1])
			if r.status != http.StatusUnauthorized || r.service() != "" {
				t.Fatalf("%q: status %d from %q, want 401 from the authorization server", creds[0], r.status, r.service())
			}
			if got := r.header.Get("WWW-Authenticate"); got != `Basic realm="shop"` {
				t.Errorf("%q: WWW-Authenticate %q", creds[0], got)
			}
			if !strings.Contains(r.body, "unauthorized") {
				t.Errorf("%q: body %q is not the server's", creds[0], r.body)
			}
		}
	})
	t.Run("allowed with the server's headers and the host's context", func(t *testing.T) {
		wantAllowed(t, e.getAuth("a.example.com", "/", "alice", "wonderland"), map[string]string{"Auth-Username": "alice", "Auth-Context-Site": "a", "Auth-Context-Tier": "web"})
	})
	t.Run("route context over the host's", func(t *testing.T) {
		r := e.getAuth("a.example.com", "/admin", "alice", "wonderland")
		if upstreamHeader(r, "Auth-Context-Tier") != "admin" || upstreamHeader(r, "Auth-Context-Site") != "a" {
			t.Errorf("upstream headers %v", r.echo.Headers)
		}
	})
	t.Run("route disabled", func(t *testing.T) {
		r := e.getAuth("a.example.com", "/public/x", "", "")
		if r.status != http.StatusOK || r.service() != "web" || upstreamHeader(r, "Auth-Username") != "" {
			t.Errorf("status %d from %q, headers %v", r.status, r.service(), r.echo.Headers)
		}
	})
	t.Run("slow server past responseTimeout", func(t *testing.T) {
		r := e.getAuth("slow.example.com", "/", "alice", "wonderland")
		if r.status != http.StatusForbidden || r.service() != "" {
			t.Errorf("status %d from %q, want 403 from the proxy", r.status, r.service())
		}
	})
	t.Run("server down", func(t *testing.T) {
		r := e.getAuth("down.example.com", "/", "alice", "wonderland")
		if r.status != http.StatusForbidden || r.service() != "" {
			t.Errorf("status %d from %q, want 403 from the proxy", r.status, r.service())
		}
	})
	t.Run("server down, failOpen", func(t *testing.T) {
		r := e.getAuth("open.example.com", "/", "", "")
		if r.status != http.StatusOK || r.service() != "web" {
			t.Errorf("status %d from %q, want the upstream's answer", r.status, r.service())
		}
	})
	t.Run("TLS to the extension", func(t *testing.T) {
		if r := e.getAuth("tls.example.com", "/", "alice", "wonderland"); r.status != http.StatusOK || upstreamHeader(r, "Auth-Username") != "alice" {
			t.Errorf("status %d, upstream headers %v", r.status, r.echo.Headers)
		}
		if r := e.getAuth("tls.example.com", "/", "", ""); r.status != http.StatusUnauthorized {
			t.Errorf("without credentials: status %d, want 401", r.status)
		}
	})
	t.Run("an edit of the policy alone is served", func(t *testing.T) {
		e.write("a.yaml", authProxy("a", "a.example.com", `{extensionRef: {name: fast, namespace: auth}, responseTimeout: 30s, authPolicy: {disabled: true}}`, webRoute+`
  - conditions: [{prefix: /admin}]
    authPolicy: {context: {tier: admin}}
    services: [{name: web, port: 80}]
`))
		e.eventually(10*time.Second, "the host's check to be disabled", func() bool {
			return e.getAuth("a.example.com", "/", "", "").status == http.StatusOK
		})
		// A route's own policy enables it again.
		if r := e.getAuth("a.example.com", "/admin", "", ""); r.status != http.StatusUnauthorized {
			t.Errorf("/admin without credentials: status %d, want 401", r.status)
		}
	})
	t.Run("plain HTTP is redirected, never served unchecked", func(t *testing.T) {
		if r := e.get("down.example.com", "/"); r.status != http.StatusMovedPermanently {
			t.Errorf("plain HTTP: status %d, want 301", r.status)
		}
	})
}

// `portico check` shows what is wrong with an authorization and an ExtensionService,
// each with the words of its status, and exits 1.
func TestCheckShowsAuthorizationProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	manifests := `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: open}
spec:
  virtualhost:
    fqdn: open.example.com
    authorization: {extensionRef: {name: authz}}
  routes: [{services: [{name: web, port: 80}]}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: settings}
spec:
  virtualhost:
    fqdn: settings.example.com
    tls: {secretName: cert}
    authorization: {extensionRef: {name: authz}, httpSettings: {allowedUpstreamHeaders: [{exact: a, prefix: b}]}}
  routes: [{services: [{name: web, port: 80}]}]
---
apiVersion: projectcontour.io/v1alpha1
kind: ExtensionService
metadata: {name: authz}
spec:
  protocolVersion: v2
  services: [{name: authz, port: 80}]
`
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code := runBinary(t, portico(t), "check", dir, "-o", "json")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	var rows []struct{ Kind, Name, Status, Description string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]string{
		"HTTPProxy/open":         "spec.virtualhost.authorization needs spec.virtualhost.tls",
		"HTTPProxy/settings":     "httpSettings can only be set when serviceType is http",
		"ExtensionService/authz": `spec.protocolVersion "v2"`,
	}
	for _, r := range rows {
		if w, ok := want[r.Kind+"/"+r.Name]; ok {
			delete(want, r.Kind+"/"+r.Name)
			if r.Status != "invalid" || !strings.Contains(r.Description, w) {
				t.Errorf("%s %s: %s %q, want invalid with %q", r.Kind, r.Name, r.Status, r.Description, w)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("no row for %v in %s", want, out)
	}
}

// In `portico run`, an edit that makes an ExtensionService invalid keeps its last valid
// version serving: the host it authorizes stays up, still checked, and its status says
// what is wrong.
func TestExtensionServiceBadEditKeepsServing(t *testing.T) {
	t.Parallel()
	srv := authztest.StartAuthz(t, authz.Config{}, authUsers)
	cert := testutil.SelfSigned("kept.example.com")
	e := start(t, map[string]string{
		"backends.yaml":  backends(t, "web"),
		"secrets.yaml":   tlsSecretManifest("cert", cert),
		"extension.yaml": extensionManifest("auth", "fast", srv.Addr(), "  protocol: h2c\n"),
		"kept.yaml":      authProxy("kept", "kept.example.com", `{extensionRef: {name: fast, namespace: auth}, responseTimeout: 30s}`, webRoute),
	})
	if r := e.getAuth("kept.example.com", "/", "alice", "wonderland"); r.status != http.StatusOK {
		t.Fatalf("before the edit: %d", r.status)
	}
	e.write("extension.yaml", extensionManifest("auth", "fast", srv.Addr(), "  protocol: h2c\n  protocolVersion: v2\n"))
	e.eventually(10*time.Second, "the ExtensionService's status to say the edit is not served", func() bool {
		resp, err := http.Get("http://" + e.runner.Admin().Addr() + "/statuses?status=invalid")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var rows []struct{ Kind, Name, Description string }
		if json.NewDecoder(resp.Body).Decode(&rows) != nil {
			return false
		}
		for _, r := range rows {
			if r.Kind == "ExtensionService" && r.Name == "fast" {
				return strings.Contains(r.Description, "previous valid version") && strings.Contains(r.Description, `"v2"`)
			}
		}
		return false
	})
	if r := e.getAuth("kept.example.com", "/", "alice", "wonderland"); r.status != http.StatusOK || upstreamHeader(r, "Auth-Username") != "alice" {
		t.Errorf("after the bad edit: %d, headers %v", r.status, r.echo.Headers)
	}
	if r := e.getAuth("kept.example.com", "/", "", ""); r.status != http.StatusUnauthorized {
		t.Errorf("after the bad edit, without credentials: %d, want 401", r.status)
	}
}
