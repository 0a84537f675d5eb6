package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/authz"
	"github.com/portico-dev/portico/internal/authz/authztest"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/echo"
	"github.com/portico-dev/portico/internal/testutil"
)

// External authorization by HTTP servers (serviceType: http, httpSettings) and with the
// request body (withRequestBody, over HTTP and gRPC), against real `portico authz`
// servers: what the server is sent (path under pathPrefix, allowed headers only, the
// body and x-envoy-auth-partial-body) is what it reports in its answer's headers, which
// the upstream gets when allowedUpstreamHeaders lets them through.

// startBodyBackend answers every request as an echo backend named "upload" would, with
// the body it received in X-Upstream-Body (hex).
func startBodyBackend(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Upstream-Body", hex.EncodeToString(body))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echo.Response{Service: "upload", Method: r.Method, Path: r.URL.Path, Headers: r.Header})
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// postAuth sends POST https://host/path with body and alice's credentials; length -1
// sends it chunked.
func (e *env) postAuth(host, path, body string, length int64) result {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, "https://"+host+path, io.NopCloser(strings.NewReader(body)))
	if err != nil {
		e.t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("alice:wonderland")))
	return e.doTLS(req, host, false)
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// httpAuthHost is an HTTPProxy on host, authorized by the ExtensionService ext as auth
// says (more fields), routed to web and, under /upload, to the body backend.
func httpAuthHost(name, host, auth string) string {
	return authProxy(name, host, auth, webRoute+`
  - conditions: [{prefix: /upload}]
    services: [{name: upload, port: 80}]
  - conditions: [{prefix: /public}]
    authPolicy: {disabled: true}
    services: [{name: web, port: 80}]
  - conditions: [{prefix: /context}]
    authPolicy: {context: {tier: admin}}
    services: [{name: web, port: 80}]
`)
}

func TestExtAuthzHTTP(t *testing.T) {
	t.Parallel()
	fast := authztest.StartHTTPAuthz(t, authz.Config{Realm: "shop"}, authUsers)
	slow := authztest.StartHTTPAuthz(t, authz.Config{Delay: time.Minute}, authUsers)
	down := authztest.StartHTTPAuthz(t, authz.Config{}, authUsers)
	downAddr := down.HTTPAddr()
	if err := down.Shutdown(); err != nil {
		t.Fatal(err)
	}
	grpcAuthz := authztest.StartAuthz(t, authz.Config{}, authUsers)
	hosts := []string{"h.example.com", "body.example.com", "partial.example.com", "gbody.example.com", "gbytes.example.com", "slow.example.com", "down.example.com", "open.example.com"}
	cert := testutil.SelfSigned(hosts...)
	const http11 = "  protocol: http/1.1\n"
	const upstreamAuth = `allowedUpstreamHeaders: [{exact: auth-username}, {prefix: auth-body-}]`
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "web") + "---\n" + serviceManifest("default", "upload", startBodyBackend(t)),
		"secrets.yaml":  tlsSecretManifest("cert", cert),
		"extensions.yaml": strings.Join([]string{
			extensionManifest("auth", "fast", fast.HTTPAddr(), http11),
			extensionManifest("auth", "slow", slow.HTTPAddr(), http11),
			extensionManifest("auth", "down", downAddr, http11),
			extensionManifest("auth", "grpc", grpcAuthz.Addr(), "  protocol: h2c\n"),
		}, "---\n"),
		"h.yaml": httpAuthHost("h", "h.example.com", `{extensionRef: {name: fast, namespace: auth}, serviceType: http, responseTimeout: 30s,
      httpSettings: {pathPrefix: /check, allowedAuthorizationHeaders: [{exact: x-tenant}, {prefix: X-Team-, ignoreCase: true}],
        allowedUpstreamHeaders: [{exact: auth-username}, {exact: auth-path}, {suffix: -headers}]}}`),
		"body.yaml":    httpAuthHost("body", "body.example.com", `{extensionRef: {name: fast, namespace: auth}, serviceType: http, responseTimeout: 30s, withRequestBody: {maxRequestBytes: 16}, httpSettings: {`+upstreamAuth+`}}`),
		"partial.yaml": httpAuthHost("partial", "partial.example.com", `{extensionRef: {name: fast, namespace: auth}, serviceType: http, responseTimeout: 30s, withRequestBody: {maxRequestBytes: 16, allowPartialMessage: true}, httpSettings: {`+upstreamAuth+`}}`),
		"gbody.yaml":   httpAuthHost("gbody", "gbody.example.com", `{extensionRef: {name: grpc, namespace: auth}, responseTimeout: 30s, withRequestBody: {maxRequestBytes: 16}}`),
		"gbytes.yaml":  httpAuthHost("gbytes", "gbytes.example.com", `{extensionRef: {name: grpc, namespace: auth}, responseTimeout: 30s, withRequestBody: {maxRequestBytes: 16, allowPartialMessage: true, packAsBytes: true}}`),
		"slow.yaml":    httpAuthHost("slow", "slow.example.com", `{extensionRef: {name: slow, namespace: auth}, serviceType: http, responseTimeout: 250ms}`),
		"down.yaml":    httpAuthHost("down", "down.example.com", `{extensionRef: {name: down, namespace: auth}, serviceType: http}`),
		"open.yaml":    httpAuthHost("open", "open.example.com", `{extensionRef: {name: down, namespace: auth}, serviceType: http, failOpen: true}`),
	})

	t.Run("denied with the server's status, headers and body", func(t *testing.T) {
		for _, creds := range [][2]string{{"", ""}, {"alice", "wrong"}} {
			r := e.getAuth("h.example.com", "/", creds[0], creds[1])
			if r.status != http.StatusUnauthorized || r.service() != "" || r.header.Get("WWW-Authenticate") != `Basic realm="shop"` || !strings.Contains(r.body, "unauthorized") ||
				r.header.Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Errorf("%q: status %d from %q, WWW-Authenticate %q, Content-Type %q, body %q; want the server's 401", creds[0], r.status, r.service(), r.header.Get("WWW-Authenticate"), r.header.Get("Content-Type"), r.body)
			}
		}
	})
	t.Run("allowed, asked under pathPrefix", func(t *testing.T) {
		r := e.getAuth("h.example.com", "/a/b?q=1", "alice", "wonderland")
		if r.status != http.StatusOK || r.service() != "web" {
			t.Fatalf("status %d from %q", r.status, r.service())
		}
		if got := upstreamHeader(r, "Auth-Username"); got != "alice" {
			t.Errorf("upstream Auth-Username %q", got)
		}
		if got := upstreamHeader(r, authz.PathHeader); got != "/check/a/b?q=1" {
			t.Errorf("the server was asked about %q, want /check/a/b?q=1", got)
		}
	})
	t.Run("only the allowed request headers reach the server", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, "https://h.example.com/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("alice", "wonderland")
		req.Header.Set("X-Tenant", "t1")
		req.Header.Set("X-TEAM-Blue", "b")
		req.Header.Set("X-Other", "o")
		req.Header.Set("Cookie", "c=1")
		r := e.doTLS(req, "h.example.com", false)
		got := strings.Split(upstreamHeader(r, authz.HeadersHeader), ",")
		for _, want := range []string{"authorization", "host", "x-tenant", "x-team-blue"} {
			if !containsString(got, want) {
				t.Errorf("the server did not get %s: it got %v", want, got)
			}
		}
		for _, not := range []string{"x-other", "cookie", "accept-encoding"} {
			if containsString(got, not) {
				t.Errorf("the server got %s, which is not allowed: %v", not, got)
			}
		}
	})
	t.Run("only the allowed answer headers reach the upstream", func(t *testing.T) {
		// body.example.com lets through Auth-Username and Auth-Body-*: the server's
		// Auth-Path and Auth-Headers stay behind.
		r := e.postAuth("body.example.com", "/", "0123456789", 10)
		if r.status != http.StatusOK || upstreamHeader(r, "Auth-Username") != "alice" {
			t.Fatalf("status %d, upstream headers %v", r.status, r.echo.Headers)
		}
		for _, name := range []string{authz.PathHeader, authz.HeadersHeader} {
			if v := upstreamHeader(r, name); v != "" {
				t.Errorf("upstream got %s: %q, which is not allowed", name, v)
			}
		}
	})
	t.Run("route disabled", func(t *testing.T) {
		if r := e.getAuth("h.example.com", "/public/x", "", ""); r.status != http.StatusOK || r.service() != "web" {
			t.Errorf("status %d from %q", r.status, r.service())
		}
	})
	t.Run("route context: ignored over HTTP, the route still checked", func(t *testing.T) {
		if r := e.getAuth("h.example.com", "/context", "", ""); r.status != http.StatusUnauthorized {
			t.Errorf("without credentials: %d, want 401", r.status)
		}
		r := e.getAuth("h.example.com", "/context", "alice", "wonderland")
		if r.status != http.StatusOK || upstreamHeader(r, "Auth-Username") != "alice" || upstreamHeader(r, "Auth-Context-Tier") != "" {
			t.Errorf("status %d, upstream headers %v", r.status, r.echo.Headers)
		}
		st := proxyStatuses(t, e.dir, dag.Options{})
		wantStatus(t, st, "default/h", dag.StatusValid, "AuthContextIgnored", "spec.routes[3].authPolicy.context is ignored")
	})
	t.Run("slow server past responseTimeout", func(t *testing.T) {
		if r := e.getAuth("slow.example.com", "/", "alice", "wonderland"); r.status != http.StatusForbidden || r.service() != "" {
			t.Errorf("status %d from %q, want 403 from the proxy", r.status, r.service())
		}
	})
	t.Run("server down", func(t *testing.T) {
		if r := e.getAuth("down.example.com", "/", "alice", "wonderland"); r.status != http.StatusForbidden || r.service() != "" {
			t.Errorf("status %d from %q, want 403 from the proxy", r.status, r.service())
		}
	})
	t.Run("server down, failOpen", func(t *testing.T) {
		r := e.getAuth("open.example.com", "/", "", "")
		if r.status != http.StatusOK || r.service() != "web" || upstreamHeader(r, "X-Envoy-Auth-Failure-Mode-Allowed") != "true" {
			t.Errorf("status %d from %q, headers %v; want the upstream's answer, marked", r.status, r.service(), r.echo.Headers)
		}
	})
	bodyChecks := []struct {
		host, body     string
		length         int64
		status         int
		sent           string // what the server got of the body
		partial, field string
	}{
		{"body.example.com", "0123456789abcdef", 16, 200, "0123456789abcdef", "false", ""},
		{"body.example.com", "0123456789", -1, 200, "0123456789", "false", ""},
		{"body.example.com", "0123456789abcdefg", 17, 413, "", "", ""},
		{"body.example.com", "0123456789abcdefg", -1, 413, "", "", ""},
		{"partial.example.com", strings.Repeat("x", 100) + "end", 103, 200, strings.Repeat("x", 16), "true", ""},
		{"partial.example.com", "short", 5, 200, "short", "false", ""},
		{"gbody.example.com", "héllo", -1, 200, "héllo", "false", "body"},
		{"gbody.example.com", strings.Repeat("y", 17), 17, 413, "", "", ""},
		{"gbytes.example.com", "\x00\x01binary\xff" + strings.Repeat("z", 20), -1, 200, "\x00\x01binary\xff" + strings.Repeat("z", 7), "true", "raw_body"},
	}
	for _, tc := range bodyChecks {
		t.Run("withRequestBody "+tc.host+" "+strconv.Itoa(len(tc.body))+" bytes, length "+strconv.FormatInt(tc.length, 10), func(t *testing.T) {
			r := e.postAuth(tc.host, "/upload", tc.body, tc.length)
			if r.status != tc.status {
				t.Fatalf("status %d (%q), want %d", r.status, r.body, tc.status)
			}
			if tc.status != http.StatusOK {
				if r.service() != "" {
					t.Errorf("the upstream answered a refused body")
				}
				return
			}
			if got, _ := hex.DecodeString(r.header.Get("X-Upstream-Body")); r.service() != "upload" || string(got) != tc.body {
				t.Errorf("the upstream (%q) got %q, want the whole body %q", r.service(), got, tc.body)
			}
			want := map[string]string{authz.BodyBytesHeader: strconv.Itoa(len(tc.sent)), authz.BodySHA256Header: sha(tc.sent), authz.BodyPartialHeader: tc.partial, authz.BodyFieldHeader: tc.field}
			for name, v := range want {
				if got := upstreamHeader(r, name); got != v {
					t.Errorf("the server reported %s %q, want %q", name, got, v)
				}
			}
		})
	}
	t.Run("an edit of withRequestBody alone is served", func(t *testing.T) {
		e.write("body.yaml", httpAuthHost("body", "body.example.com", `{extensionRef: {name: fast, namespace: auth}, serviceType: http, responseTimeout: 30s, withRequestBody: {maxRequestBytes: 64}, httpSettings: {`+upstreamAuth+`}}`))
		body := strings.Repeat("b", 40)
		e.eventually(10*time.Second, "a 40-byte body to be allowed", func() bool {
			return e.postAuth("body.example.com", "/upload", body, 40).status == http.StatusOK
		})
		if r := e.postAuth("body.example.com", "/upload", body, 40); upstreamHeader(r, authz.BodyBytesHeader) != "40" {
			t.Errorf("the server got %q bytes, want 40", upstreamHeader(r, authz.BodyBytesHeader))
		}
	})
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// HTTP authorization servers behind ExtensionServices that speak HTTP/2, as every one
// behind a Contour ExtensionService does: h2c, and h2 (the default: TLS, verified
// against the CA of validation), reached by `portico authz --http-listen` with and
// without --tls-cert. A client's own Auth-Username never reaches the upstream beside
// or instead of the server's.
func TestExtAuthzHTTPOverHTTP2(t *testing.T) {
	t.Parallel()
	h2c := authztest.StartHTTPAuthz(t, authz.Config{}, authUsers)
	authCert := testutil.SelfSigned("authz.auth.svc")
	h2 := authztest.StartTLSAuthz(t, authz.Config{HTTPListen: "127.0.0.1:0"}, authUsers, authCert)
	hosts := []string{"h2c.example.com", "h2.example.com"}
	const upstreamAuth = `httpSettings: {allowedUpstreamHeaders: [{exact: auth-username}]}`
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "web"),
		"secrets.yaml":  tlsSecretManifest("cert", testutil.SelfSigned(hosts...)) + "---\n" + caSecretManifest("auth", "authz-ca", authCert),
		"extensions.yaml": strings.Join([]string{
			extensionManifest("auth", "h2c", h2c.HTTPAddr(), "  protocol: h2c\n"),
			extensionManifest("auth", "h2", h2.HTTPAddr(), "  validation: {caSecret: authz-ca, subjectName: authz.auth.svc}\n"),
		}, "---\n"),
		"h2c.yaml": authProxy("h2c", "h2c.example.com", `{extensionRef: {name: h2c, namespace: auth}, serviceType: http, responseTimeout: 30s, `+upstreamAuth+`}`, webRoute),
		"h2.yaml":  authProxy("h2", "h2.example.com", `{extensionRef: {name: h2, namespace: auth}, serviceType: http, responseTimeout: 30s, `+upstreamAuth+`}`, webRoute),
	})
	for _, host := range hosts {
		t.Run(host, func(t *testing.T) {
			if r := e.getAuth(host, "/", "alice", "wrong"); r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("wrong password: %d (WWW-Authenticate %q), want the server's 401", r.status, r.header.Get("WWW-Authenticate"))
			}
			req, err := http.NewRequest(http.MethodGet, "https://"+host+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.SetBasicAuth("alice", "wonderland")
			req.Header.Add("Auth-Username", "mallory")
			r := e.doTLS(req, host, false)
			if r.status != http.StatusOK || r.service() != "web" {
				t.Fatalf("alice: %d from %q, want 200 from web", r.status, r.service())
			}
			if got := r.echo.Headers["Auth-Username"]; len(got) != 1 || got[0] != "alice" {
				t.Errorf("upstream Auth-Username %q, want only the server's alice", got)
			}
		})
	}
}
