package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/portico-dev/portico/internal/testutil"
)

// jwtProxy is an HTTPProxy on api.test whose routes require tokens of the
// provider "main" (the default), the same key set forwarding the token
// ("forwarding"), an unreachable key set ("down"), or the key set of the Secret
// jwks ("local"); /public requires none.
func jwtProxy(jwksURL, downURL, public string) string {
	return fmt.Sprintf(`apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: api}
spec:
  virtualhost:
    fqdn: api.test
    tls: {secretName: api}
    jwtProviders:
    - name: main
      default: true
      issuer: https://issuer.test
      audiences: [api, api2]
      remoteJWKS: {uri: %[1]q, cacheDuration: 2s}
    - name: forwarding
      forwardJWT: true
      remoteJWKS: {uri: %[1]q}
    - name: down
      remoteJWKS: {uri: %[2]q, timeout: 500ms}
    - name: local
      localJWKS: {secretName: jwks, key: jwks.json}
  routes:
  - services: [{name: app, port: 80}]
  - conditions: [{prefix: /public}]
    services: [{name: app, port: 80}]
    jwtVerificationPolicy: %[3]s
  - conditions: [{prefix: /forward}]
    services: [{name: app, port: 80}]
    jwtVerificationPolicy: {require: forwarding}
  - conditions: [{prefix: /down}]
    services: [{name: app, port: 80}]
    jwtVerificationPolicy: {require: down}
  - conditions: [{prefix: /local}]
    services: [{name: app, port: 80}]
    jwtVerificationPolicy: {require: local}
`, jwksURL, downURL, public)
}

// unreachableURL is a key set URL on ip whose connections are refused.
func unreachableURL(t *testing.T, ip string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/jwks.json"
}

// getBearer sends GET https://host/path with token (none when "") as a Bearer
// credential.
func (e *env) getBearer(host, path, token string) result {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+host+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return e.doTLS(req, host, false)
}

func TestJWTVerification(t *testing.T) {
	ip := testutil.NonLoopbackIP(t)
	jwks := testutil.StartJWKS(t, ip)
	localKey := testutil.NewSigningKey("local-1")
	localSet, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{localKey.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "app"),
		"secret.yaml":   tlsSecretManifest("api", testutil.SelfSigned("api.test")),
		"jwks.yaml":     fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: jwks}\nstringData:\n  jwks.json: %q\n", localSet),
		"proxy.yaml":    jwtProxy(jwks.URL, unreachableURL(t, ip), "{disabled: true}"),
	})
	const issuer = "https://issuer.test"
	valid := jwks.Token(testutil.Claims(issuer, "api2"))

	e.eventually(10*time.Second, "a valid token to be accepted", func() bool {
		return e.getBearer("api.test", "/", valid).service() == "app"
	})
	r := e.getBearer("api.test", "/", valid)
	if _, forwarded := r.echo.Headers["Authorization"]; forwarded {
		t.Errorf("the token reached the backend without forwardJWT: %v", r.echo.Headers["Authorization"])
	}
	if r := e.getBearer("api.test", "/forward", valid); r.service() != "app" || strings.Join(r.echo.Headers["Authorization"], "") != "Bearer "+valid {
		t.Errorf("forwardJWT: %d from %q, Authorization %v", r.status, r.service(), r.echo.Headers["Authorization"])
	}

	expired := testutil.Claims(issuer, "api")
	expired.Expiry = jwt.NewNumericDate(time.Now().Add(-10 * time.Minute))
	notYet := testutil.Claims(issuer, "api")
	notYet.NotBefore = jwt.NewNumericDate(time.Now().Add(10 * time.Minute))
	withinSkew := testutil.Claims(issuer, "api")
	withinSkew.Expiry = jwt.NewNumericDate(time.Now().Add(-20 * time.Second)) // Envoy allows 60s of clock skew
	for _, tc := range []struct {
		name, token string
		status      int
		body        string
	}{
		{"missing", "", 401, "Jwt is missing"},
		{"garbage", "not.a.token", 401, "Jwt is not in the form"},
		{"expired", jwks.Token(expired), 401, "Jwt is expired"},
		{"not yet valid", jwks.Token(notYet), 401, "Jwt not yet valid"},
		{"wrong issuer", jwks.Token(testutil.Claims("https://other.test", "api")), 401, "Jwt issuer is not configured"},
		{"wrong audience", jwks.Token(testutil.Claims(issuer, "billing")), 403, "Audiences in Jwt are not allowed"},
		{"signed by another key of the same id", testutil.StartJWKS(t, ip).Token(testutil.Claims(issuer, "api")), 401, "Jwt verification fails"},
		{"expired within the clock skew", jwks.Token(withinSkew), 200, ""},
	} {
		r := e.getBearer("api.test", "/", tc.token)
		if r.status != tc.status || !strings.HasPrefix(r.body, tc.body) || (tc.status == 200) != (r.service() == "app") {
			t.Errorf("%s: %d %q from %q, want %d %q", tc.name, r.status, r.body, r.service(), tc.status, tc.body)
		}
		if tc.status == 401 && !strings.HasPrefix(r.header.Get("Www-Authenticate"), `Bearer realm="https://api.test/"`) {
			t.Errorf("%s: WWW-Authenticate %q", tc.name, r.header.Get("Www-Authenticate"))
		}
	}
	if r := e.getBearer("api.test", "/public", ""); r.service() != "app" {
		t.Errorf("a route with verification disabled: %d %q", r.status, r.body)
	}
	// A key set from a Secret.
	if r := e.getBearer("api.test", "/local", testutil.SignToken(localKey, testutil.Claims(issuer, "api"))); r.service() != "app" {
		t.Errorf("a token of the Secret's key set: %d %q", r.status, r.body)
	}
	if r := e.getBearer("api.test", "/local", valid); r.status != 401 {
		t.Errorf("a token of another key set on /local: %d %q, want 401", r.status, r.body)
	}
	// An unreachable key set fails its own route only.
	if r := e.getBearer("api.test", "/down", valid); r.status != 401 || r.body != "Jwks remote fetch is failed" {
		t.Errorf("unreachable key set: %d %q, want 401 Jwks remote fetch is failed", r.status, r.body)
	}
	if r := e.getBearer("api.test", "/", valid); r.service() != "app" {
		t.Errorf("after the unreachable key set: %d %q", r.status, r.body)
	}
	// Plain HTTP redirects: a token is only verified over TLS.
	if r := e.get("api.test", "/"); r.status != 301 {
		t.Errorf("plain HTTP: %d, want 301", r.status)
	}

	// Rotation: a token of a new key is accepted once the key set is fetched again
	// (an unknown key id, or the cache's 2s running out); the old key's tokens are
	// refused once the cache no longer holds it.
	fetches := jwks.Fetches()
	jwks.Rotate(false)
	rotated := jwks.Token(testutil.Claims(issuer, "api"))
	e.eventually(30*time.Second, "a token of the new key to be accepted", func() bool {
		return e.getBearer("api.test", "/", rotated).service() == "app"
	})
	e.eventually(30*time.Second, "a token of the removed key to be refused", func() bool {
		return e.getBearer("api.test", "/", valid).status == 401
	})
	if jwks.Fetches() <= fetches {
		t.Errorf("the key set was not fetched again after rotation")
	}

	// Editing only the policy changes what is served.
	e.write("proxy.yaml", jwtProxy(jwks.URL, unreachableURL(t, ip), "{require: main}"))
	e.eventually(10*time.Second, "/public to require a token", func() bool {
		return e.getBearer("api.test", "/public", "").status == 401
	})
	if r := e.getBearer("api.test", "/public", rotated); r.service() != "app" {
		t.Errorf("/public with a token: %d %q", r.status, r.body)
	}
}

// TestJWTExample: the key set and tokens of examples/jwt verify as its run.sh
// and docs/httpproxy.md say (the tokens are valid until 2100).
func TestJWTExample(t *testing.T) {
	ip := testutil.NonLoopbackIP(t)
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir("../../examples/jwt/keys")), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	token := func(name string) string {
		b, err := os.ReadFile("../../examples/jwt/keys/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	proxy, err := os.ReadFile("../../examples/jwt/httpproxy.yaml.in")
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "api"),
		"secret.yaml":   tlsSecretManifest("api-tls", testutil.SelfSigned("api.jwt.localhost")),
		"proxy.yaml":    strings.ReplaceAll(string(proxy), "JWKS_ADDRESS", l.Addr().String()),
	})
	e.eventually(10*time.Second, "the example's token to be accepted", func() bool {
		return e.getBearer("api.jwt.localhost", "/orders", token("token.txt")).service() == "api"
	})
	if r := e.getBearer("api.jwt.localhost", "/orders", token("token-billing.txt")); r.status != 403 {
		t.Errorf("the example's billing token: %d %q, want 403", r.status, r.body)
	}
}

// TestCheckJWTProviders: `portico check` says what is wrong with JWT providers and
// policies, every problem at once, and exits 1.
func TestCheckJWTProviders(t *testing.T) {
	dir := t.TempDir()
	manifest := `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: api}
spec:
  virtualhost:
    fqdn: api.example.com
    jwtProviders:
    - {name: a, default: true, remoteJWKS: {uri: "http://127.0.0.1:8090/metrics"}}
    - {name: b, default: true, remoteJWKS: {uri: "https://idp.example.com/keys"}}
  routes:
  - services: [{name: web, port: 80}]
    jwtVerificationPolicy: {require: c}
`
	if err := os.WriteFile(dir+"/api.yaml", []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runBinary(t, portico(t), "check", dir, "-o", "json")
	var entries []struct{ Status, Description string }
	if err := json.Unmarshal([]byte(out), &entries); err != nil || code != 1 || len(entries) != 1 {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	for _, part := range []string{
		"spec.virtualhost.jwtProviders needs spec.virtualhost.tls.secretName",
		`remoteJWKS.uri "http://127.0.0.1:8090/metrics": 127.0.0.1 is this machine`,
		`jwtProviders[1] ("b") and provider "a" are both default`,
		`spec.routes[0].jwtVerificationPolicy.require names provider "c"`,
	} {
		if !strings.Contains(entries[0].Description, part) || entries[0].Status != "invalid" {
			t.Errorf("%s: %q does not say %q", entries[0].Status, entries[0].Description, part)
		}
	}
}
