package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/status"
	"github.com/portico-dev/portico/internal/testutil"
)

// Seed 004's multi-team use cases (platform routing by User-Agent, beta opt-in by header,
// tenants by header, each team in its own namespace), as the example of
// docs/httpproxy-teams.md serves them, and permitInsecure across teams.

const teamsExample = "../../examples/httpproxy-teams/manifests"

// teamsFiles returns the example's manifests as they are in the repository, with real echo
// backends in place of backends.yaml (whose Endpoints name run.sh's fixed ports) and the
// certificate run.sh generates for secure.app.localhost.
func teamsFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{
		"backends.yaml": backends(t, "platform/web", "team-ios/backend-ios", "team-android/backend-android",
			"weather/backend-prod", "beta/backend-beta", "org-a/api", "org-a/api-v2", "org-b/api", "acme/solver"),
		"tls.generated.yaml": tlsSecretManifestIn("platform", "app-tls", testutil.SelfSigned("secure.app.localhost")),
	}
	for _, name := range []string{"platform.yaml", "teams.yaml", "weather.yaml", "tenants.yaml"} {
		b, err := os.ReadFile(filepath.Join(teamsExample, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	return files
}

const (
	iPhone  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)"
	android = "Mozilla/5.0 (Linux; Android 14)"
)

// TestHTTPProxyTeamsExample: every request of docs/httpproxy-teams.md, on the example's
// manifests, gets the answer the guide shows.
func TestHTTPProxyTeamsExample(t *testing.T) {
	t.Parallel()
	e := start(t, teamsFiles(t))
	ua := func(agent string, more ...string) []string { return append([]string{"User-Agent", agent}, more...) }
	e.expectRequests("app.localhost", []hpReq{
		// (a) Platform routing: by User-Agent, to teams in other namespaces, on every path.
		{"/home", nil, 200, "platform/web"},
		{"/home", ua(iPhone), 200, "team-ios/backend-ios"},
		{"/home", ua(android), 200, "team-android/backend-android"},
		{"/", ua("Mozilla/5.0 (iPhone)"), 200, "team-ios/backend-ios"},
		{"/deep/path?q=1", ua(android), 200, "team-android/backend-android"},
		{"/home", ua("Mozilla/5.0 (iphone)"), 200, "platform/web"}, // userAgent is case-sensitive
		// Path comes before headers: an iPhone asking for /weather gets the weather team.
		{"/weather", ua("Mozilla/5.0 (iPhone)"), 200, "weather/backend-prod"},

		// (b) Beta opt-in: /weather is the weather team's, and X-Beta: true the beta team's.
		{"/weather/today", nil, 200, "weather/backend-prod"},
		{"/weather/today", []string{"X-Beta", "true"}, 200, "beta/backend-beta"},
		{"/weather", []string{"X-Beta", "True"}, 200, "beta/backend-beta"},
		{"/weather", []string{"X-Beta", "false"}, 200, "weather/backend-prod"},
		{"/news", []string{"X-Beta", "true"}, 200, "platform/web"},
		{"/weatherman", nil, 200, "platform/web"},

		// (c) Tenants: the same path, a header per team.
		{"/api/orders", []string{"X-Tenant", "org-a"}, 200, "org-a/api"},
		{"/api/v2/orders", []string{"X-Tenant", "org-a"}, 200, "org-a/api-v2"},
		{"/api/v2/orders", []string{"X-Tenant", "org-b"}, 200, "org-b/api"},
		{"/api/orders", []string{"X-Tenant", "org-c"}, 404, ""},
		{"/api/orders", nil, 404, ""},
		{"/api/orders", ua("Mozilla/5.0 (iPhone)", "X-Tenant", "org-a"), 200, "org-a/api"},
		{"/home", ua("Mozilla/5.0 (iPhone)", "X-Tenant", "org-a"), 200, "team-ios/backend-ios"},
		// The iOS team's include covers "/" for iPhones; the platform's longer /api route
		// still wins inside it.
		{"/api/orders", ua("Mozilla/5.0 (iPhone)"), 404, ""},
		// The iOS team routes every path it is given, so nothing of it is sealed.
		{"/anything/at/all", ua("Mozilla/5.0 (iPhone)"), 200, "team-ios/backend-ios"},
	})
	for _, agent := range []string{"curl/8.0", "Mozilla/5.0 (iPhone)"} {
		if r := e.get("app.localhost", "/api/orders", "X-Tenant", "org-c", "User-Agent", agent); r.body != "unknown tenant: set X-Tenant\n" {
			t.Errorf("an unknown tenant's body (User-Agent %q) is %q, want the platform's direct response", agent, r.body)
		}
	}

	// The TLS host: plain HTTP is redirected, except the ACME solver that the platform's
	// include grants it to; the iOS team's route asks for it and is not granted it.
	for _, q := range []hpReq{
		{"/home", nil, 0, ""},
		{"/home", ua("Mozilla/5.0 (iPhone)"), 0, ""},
	} {
		r := e.get("secure.app.localhost", q.path, q.header...)
		if loc := r.header.Get("Location"); r.status != http.StatusMovedPermanently || !strings.HasPrefix(loc, "https://secure.app.localhost") || !strings.HasSuffix(loc, "/home") {
			t.Errorf("http://secure.app.localhost/home %q: %d to %q, want 301 to https://secure.app.localhost/home", q.header, r.status, loc)
		}
	}
	e.expectRequests("secure.app.localhost", []hpReq{
		{"/.well-known/acme-challenge/token1", nil, 200, "acme/solver"},
	})
	for agent, want := range map[string]string{"": "platform/web", "Mozilla/5.0 (iPhone)": "team-ios/backend-ios"} {
		r := e.getTLSWith("secure.app.localhost", "/home", "User-Agent", agent)
		if got := answeredBy(r); r.status != 200 || got != want || r.tlsCert != "secure.app.localhost" {
			t.Errorf("https://secure.app.localhost/home from %q: %d from %q with certificate %q, want 200 from %s", agent, r.status, got, r.tlsCert, want)
		}
	}

	// The statuses the guide shows.
	st := proxyStatuses(t, e.dir, dag.Options{})
	for _, obj := range []string{"acme/solver", "beta/weather", "org-a/api", "org-b/api", "platform/app", "platform/secure", "team-android/app", "team-ios/app", "weather/weather"} {
		wantStatus(t, st, obj, dag.StatusValid, "")
	}
	wantStatus(t, st, "team-ios/app", dag.StatusValid, "PermitInsecureNotGranted",
		"spec.routes[0].permitInsecure is ignored on secure.app.localhost: an included route is served over plain HTTP only when every include that leads to it sets permitInsecure: true; it is redirected to HTTPS")
	if d := st["beta/weather"].Description; d != `valid HTTPProxy, included by HTTPProxy weather/weather on app.localhost (prefix "/weather", header x-beta exact "true")` {
		t.Errorf("beta/weather's description is %q, not the guide's", d)
	}
	for _, obj := range []string{"acme/solver", "team-android/app", "platform/app"} {
		if w := st[obj].Warnings; len(w) != 0 {
			t.Errorf("%s has warnings: %+v", obj, w)
		}
	}
}

// getTLSWith is getTLS (HTTP/1.1) with request headers; an empty value is not sent.
func (e *env) getTLSWith(host, path string, header ...string) result {
	e.t.Helper()
	tr := httpsTransport(e, host)
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "https://"+host+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Add(header[i], header[i+1])
		}
	}
	return e.do(req, &http.Client{Transport: tr, Timeout: 10 * time.Second})
}

// TestHTTPProxyTeamsBreakage is the guide's "When a team's object breaks" and its grant of
// plain HTTP, done live: an include renamed away answers 503 (never the platform's "/"),
// and comes back when fixed; a tenant's bad edit keeps its last good version serving;
// granting permitInsecure on the include serves the iOS team over plain HTTP.
func TestHTTPProxyTeamsBreakage(t *testing.T) {
	t.Parallel()
	files := teamsFiles(t)
	e := start(t, files)
	home := func(agent string) string { return answeredBy(e.get("app.localhost", "/home", "User-Agent", agent)) }
	if got := home(android); got != "team-android/backend-android" {
		t.Fatalf("Android /home before the edit: %q", got)
	}

	// Rename team-android's object.
	renamed := strings.Replace(files["teams.yaml"], "metadata: {name: app, namespace: team-android}", "metadata: {name: app2, namespace: team-android}", 1)
	if renamed == files["teams.yaml"] {
		t.Fatal("teams.yaml no longer declares team-android/app as the test expects")
	}
	e.write("teams.yaml", renamed)
	e.eventually(5*time.Second, "Android requests to answer 503", func() bool {
		return e.get("app.localhost", "/home", "User-Agent", android).status == 503
	})
	e.expectRequests("app.localhost", []hpReq{
		{"/home", []string{"User-Agent", android}, 503, ""},
		{"/", []string{"User-Agent", android}, 503, ""},
		{"/home", nil, 200, "platform/web"},
		{"/home", []string{"User-Agent", iPhone}, 200, "team-ios/backend-ios"},
	})
	st := proxyStatuses(t, e.dir, dag.Options{})
	const notFollowed = `spec.includes[1] (prefix "/", header user-agent contains "Android") is not followed on app.localhost: team-android/app does not exist; requests matching its conditions get 503`
	wantStatus(t, st, "platform/app", dag.StatusValid, "IncludeNotFound", notFollowed)
	if d := st["platform/app"].Description; d != "valid HTTPProxy; "+notFollowed {
		t.Errorf("platform/app's description is %q, not the guide's", d)
	}
	if d := st["team-android/app2"].Description; d != "this HTTPProxy is not included by any root HTTPProxy (it has no spec.virtualhost): include it from a root, or give it a virtualhost" {
		t.Errorf("the orphan's description is %q, not the guide's", d)
	}
	e.write("teams.yaml", files["teams.yaml"])
	e.eventually(5*time.Second, "Android requests to be served again", func() bool { return home(android) == "team-android/backend-android" })

	// A bad regex in org-b's object: invalid, but its previous version still serves.
	broken := strings.Replace(files["tenants.yaml"], "metadata: {name: api, namespace: org-b}\nspec:\n  routes:\n", "metadata: {name: api, namespace: org-b}\nspec:\n  routes:\n  - conditions: [{regex: \"/v[0-9+\"}]\n    services: [{name: api, port: 80}]\n", 1)
	if broken == files["tenants.yaml"] {
		t.Fatal("tenants.yaml no longer declares org-b/api as the test expects")
	}
	e.write("tenants.yaml", broken)
	e.eventually(5*time.Second, "org-b's invalid edit to be reported", func() bool {
		return statusLogged(e, "HTTPProxy", "org-b", "api", `this version is not served: spec.routes[0].conditions[0].regex: \"/v[0-9+\" is not a valid RE2 regular expression: missing closing ] in \"[0-9+\". The previous valid version of this object is still served; fix this version, or delete the object to stop serving it.`)
	})
	e.expectRequests("app.localhost", []hpReq{
		{"/api/orders", []string{"X-Tenant", "org-b"}, 200, "org-b/api"},
		{"/api/v1", []string{"X-Tenant", "org-b"}, 200, "org-b/api"},
	})
	// portico check has no previous version: invalid, and the include of it is not followed.
	st = proxyStatuses(t, e.dir, dag.Options{})
	wantStatus(t, st, "org-b/api", dag.StatusInvalid, "")
	wantStatus(t, st, "platform/app", dag.StatusValid, "IncludeInvalid", "org-b/api")
	e.write("tenants.yaml", files["tenants.yaml"])

	// The platform grants plain HTTP to the iOS team on the TLS host.
	platform := files["platform.yaml"]
	at := strings.Index(platform, "fqdn: secure.app.localhost")
	granted := platform[:at] + strings.Replace(platform[at:], "    namespace: team-ios\n", "    namespace: team-ios\n    permitInsecure: true\n", 1)
	if at < 0 || granted == platform {
		t.Fatal("platform.yaml no longer includes team-ios from secure.app.localhost as the test expects")
	}
	if r := e.get("secure.app.localhost", "/home", "User-Agent", iPhone); r.status != http.StatusMovedPermanently {
		t.Fatalf("plain-HTTP iPhone request before the grant: %d from %q, want 301", r.status, answeredBy(r))
	}
	e.write("platform.yaml", granted)
	e.eventually(5*time.Second, "plain-HTTP iPhone requests to reach backend-ios", func() bool {
		return answeredBy(e.get("secure.app.localhost", "/home", "User-Agent", iPhone)) == "team-ios/backend-ios"
	})
	if r := e.get("secure.app.localhost", "/home"); r.status != http.StatusMovedPermanently {
		t.Errorf("the platform's own route over plain HTTP after the grant: %d, want 301", r.status)
	}
	st = proxyStatuses(t, e.dir, dag.Options{})
	if w := st["team-ios/app"].Warnings; len(w) != 0 {
		t.Errorf("team-ios/app still has warnings after the grant: %+v", w)
	}
}

// TestHTTPProxyPermitInsecureAcrossTeams: on a TLS host, a root's own route may set
// permitInsecure; an included route is served over plain HTTP only when it sets it and
// every include on its way does; an intermediate object cannot widen the root's grant.
// Everything else is redirected to HTTPS, and over HTTPS everything is served.
func TestHTTPProxyPermitInsecureAcrossTeams(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "infra/web", "infra/public", "granted/app", "refused/app", "mid/app", "leaf/app", "leaf2/app"),
		"secret.yaml":   tlsSecretManifestIn("infra", "tls", testutil.SelfSigned("secure.example.com")),
		"proxies.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: infra}
spec:
  virtualhost:
    fqdn: secure.example.com
    tls: {secretName: tls}
  routes:
  - services: [{name: web, port: 80}]
  - conditions: [{prefix: /public}]
    permitInsecure: true
    services: [{name: public, port: 80}]
  includes:
  - name: app
    namespace: granted
    permitInsecure: true
    conditions: [{prefix: /granted}]
  - name: app
    namespace: refused
    conditions: [{prefix: /refused}]
  - name: app
    namespace: mid
    conditions: [{prefix: /mid}]
  - name: app
    namespace: leaf2
    permitInsecure: true
    conditions: [{prefix: /chain}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: app, namespace: granted}
spec:
  routes:
  - conditions: [{prefix: /open}]
    permitInsecure: true
    services: [{name: app, port: 80}]
  - services: [{name: app, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: app, namespace: refused}
spec:
  routes:
  - permitInsecure: true
    services: [{name: app, port: 80}]
---
# mid is not granted plain HTTP by the root; its grant to leaf widens nothing.
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: app, namespace: mid}
spec:
  routes:
  - services: [{name: app, port: 80}]
  includes:
  - name: app
    namespace: leaf
    permitInsecure: true
    conditions: [{prefix: /leaf}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: app, namespace: leaf}
spec:
  routes:
  - permitInsecure: true
    services: [{name: app, port: 80}]
---
# leaf2 is granted by the root, but its include of leaf3 does not grant.
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: app, namespace: leaf2}
spec:
  routes:
  - permitInsecure: true
    services: [{name: app, port: 80}]
  includes:
  - name: app
    namespace: leaf3
    conditions: [{prefix: /deeper}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: app, namespace: leaf3}
spec:
  routes:
  - permitInsecure: true
    services: [{name: app, port: 80}]
`,
		"leaf3.yaml": backends(t, "leaf3/app"),
	})
	served := map[string]string{
		"/public/x":           "infra/public",
		"/granted/open":       "granted/app",
		"/granted/open/file":  "granted/app",
		"/chain":              "leaf2/app",
		"/chain/x":            "leaf2/app",
		"/":                   "",
		"/x":                  "",
		"/granted":            "",
		"/granted/closed":     "",
		"/refused":            "",
		"/refused/x":          "",
		"/mid":                "",
		"/mid/leaf":           "",
		"/mid/leaf/x":         "",
		"/chain/deeper":       "",
		"/chain/deeper/x":     "",
		"/publicity":          "",
		"/granted/openhouse":  "",
		"/public/../refused/": "",
	}
	for path, from := range served {
		r := e.get("secure.example.com", path)
		if from != "" {
			if got := answeredBy(r); r.status != 200 || got != from {
				t.Errorf("http://secure.example.com%s: %d from %q, want 200 from %s over plain HTTP", path, r.status, got, from)
			}
			continue
		}
		if r.status != http.StatusMovedPermanently || !strings.HasPrefix(r.header.Get("Location"), "https://secure.example.com") || r.service() != "" {
			t.Errorf("http://secure.example.com%s: %d to %q from %q, want a 301 to HTTPS", path, r.status, r.header.Get("Location"), r.service())
		}
	}
	// Over HTTPS every route is served.
	for path, from := range map[string]string{
		"/": "infra/web", "/public": "infra/public", "/granted/open": "granted/app", "/granted/closed": "granted/app",
		"/refused/x": "refused/app", "/mid": "mid/app", "/mid/leaf/x": "leaf/app", "/chain": "leaf2/app", "/chain/deeper": "leaf3/app",
	} {
		r := e.getTLSWith("secure.example.com", path)
		if got := answeredBy(r); r.status != 200 || got != from {
			t.Errorf("https://secure.example.com%s: %d from %q, want 200 from %s", path, r.status, got, from)
		}
	}
	st := proxyStatuses(t, e.dir, dag.Options{})
	const notGranted = "spec.routes[0].permitInsecure is ignored on secure.example.com"
	wantStatus(t, st, "refused/app", dag.StatusValid, "PermitInsecureNotGranted", notGranted)
	wantStatus(t, st, "leaf/app", dag.StatusValid, "PermitInsecureNotGranted", notGranted)
	wantStatus(t, st, "leaf3/app", dag.StatusValid, "PermitInsecureNotGranted", notGranted)
	for _, obj := range []string{"infra/root", "granted/app", "mid/app", "leaf2/app"} {
		wantStatus(t, st, obj, dag.StatusValid, "")
		if w := st[obj].Warnings; len(w) != 0 {
			t.Errorf("%s has warnings: %+v", obj, w)
		}
	}
}

// TestHTTPProxyCheckCommandJSON: `portico check -o json` lists HTTPProxies with their
// status, and their errors and warnings one by one as {type, reason, message}.
func TestHTTPProxyCheckCommandJSON(t *testing.T) {
	t.Parallel()
	bin := portico(t)
	dir := t.TempDir()
	files := map[string]string{
		"backends.yaml": serviceManifest("root", "web", "127.0.0.1:1") + "---\n" + serviceManifest("team", "app", "127.0.0.1:1"),
		"proxies.yaml":  includeProblems,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runBinary(t, bin, "check", dir, "-o", "json")
	if code != 1 {
		t.Errorf("check with invalid HTTPProxies: exit %d, want 1\nstderr: %s", code, errOut)
	}
	var entries []status.Entry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("stdout is not a JSON array of entries: %v\n%s", err, out)
	}
	byName := map[string]status.Entry{}
	for _, en := range entries {
		if en.Kind == "HTTPProxy" {
			byName[en.Namespace+"/"+en.Name] = en
		}
	}
	has := func(ps []status.Problem, typ, reason, text string) bool {
		for _, p := range ps {
			if p.Type == typ && p.Reason == reason && strings.Contains(p.Message, text) {
				return true
			}
		}
		return false
	}
	root := byName["root/root"]
	if root.Status != "valid" || len(root.Errors) != 0 ||
		!has(root.Warnings, "IncludeError", "IncludeNotFound", "team/nothere does not exist") ||
		!has(root.Warnings, "IncludeError", "IncludeInvalid", "team/broken") ||
		!has(root.Warnings, "IncludeError", "RootIncludesRoot", "root/other") {
		t.Errorf("root/root: %+v", root)
	}
	broken := byName["team/broken"]
	if broken.Status != "invalid" || !strings.HasPrefix(broken.Description, "not served:") || !has(broken.Errors, "RouteError", "InvalidCondition", `"/v[0-9+" is not a valid RE2 regular expression`) {
		t.Errorf("team/broken: %+v", broken)
	}
	if b := byName["loop/b"]; b.Status != "invalid" || !has(b.Errors, "IncludeError", "IncludeCreatesCycle", "loop/a") {
		t.Errorf("loop/b: %+v", b)
	}
	if b := byName["team/borrow"]; b.Status != "valid" || !has(b.Warnings, "ServiceError", "ServiceUnresolved", "web") {
		t.Errorf("team/borrow: %+v", b)
	}
	if a := byName["loop/a"]; a.Status != "valid" || !has(a.Warnings, "IncludeError", "IncludeInvalid", "loop/b is invalid") {
		t.Errorf("loop/a: %+v", a)
	}
	if o := byName["root/other"]; o.Status != "valid" || !has(o.Warnings, "IncludeError", "RootIncluded", "HTTPProxy root/root includes it") {
		t.Errorf("root/other: %+v", o)
	}
	for _, obj := range []string{"team/team"} {
		if en := byName[obj]; en.Status != "valid" || len(en.Errors) != 0 || len(en.Warnings) != 0 {
			t.Errorf("%s: %+v, want valid without problems", obj, en)
		}
	}
	// The table for people names every HTTPProxy.
	out, _, _ = runBinary(t, bin, "check", dir)
	for _, want := range []string{"HTTPProxy", "broken", "invalid", "borrow"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

// TestHTTPProxyCheckJSONOrphanError: docs/httpproxy.md (Status) says an orphaned
// HTTPProxy's Valid condition has one error of type and reason Orphaned, and that
// `portico check -o json` gives the same errors and warnings per object.
func TestHTTPProxyCheckJSONOrphanError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "orphan.yaml"), []byte(`
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: orphan, namespace: team}
spec:
  routes:
  - services: [{name: app, port: 80}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := app.Check(dir, dag.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range status.Entries(res.Statuses) {
		if en.Kind != "HTTPProxy" {
			continue
		}
		if en.Status != "orphaned" || len(en.Errors) != 1 || en.Errors[0].Type != "Orphaned" || en.Errors[0].Reason != "Orphaned" || en.Errors[0].Message != en.Description {
			t.Errorf("check -o json for an orphan: %+v, want one error {Orphaned, Orphaned, the description}", en)
		}
	}
}
