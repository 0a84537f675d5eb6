package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/status"
)

// timeAttr is a log line's time, left out when lines are compared to find one written
// twice.
var timeAttr = regexp.MustCompile(`^time=\S+ `)

// TestRunLogsEachMessageOnce reads the whole log of a `portico run` through a few edits
// (an object turned invalid and fixed, a good file broken, a file removed) next to a
// file broken from the start: every line at INFO and above is written once, an unknown
// position is left
// out rather than written as 0, no line repeats a key, and a problem that makes requests
// fail is a WARN.
func TestRunLogsEachMessageOnce(t *testing.T) {
	typo := `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: typo}
spec:
  virtualhost: {fqdn: typo.localhost}
  routes:
  - conditions: [{prefix: /}]
    servces: [{name: web, port: 80}]
`
	teams := `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: teams}
spec:
  virtualhost: {fqdn: teams.localhost}
  includes: [{name: nowhere, conditions: [{prefix: /team}]}]
  routes: [{services: [{name: web, port: 80}]}]
`
	extra := ingressManifest("extra", "extra.localhost", []pathRule{{"Prefix", "/", "web"}}, "")
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "api", "web", "shipping"),
		"shop.yaml":     shop("Prefix", "api"),
		"teams.yaml":    teams,
		"typo.yaml":     typo,
		"extra.yaml":    extra,
	})
	e.waitFor("shop.localhost", "/api/orders", "api", 200)

	// An edit that makes shop invalid (its last valid version keeps serving), then the fix.
	e.write("shop.yaml", shop("prefix", "shipping"))
	e.eventually(5*time.Second, "shop's invalid edit to be logged", func() bool {
		return statusLogged(e, "Ingress", "default", "shop", "status=invalid")
	})
	e.write("shop.yaml", shop("Prefix", "shipping"))
	e.waitFor("shop.localhost", "/api/orders", "shipping", 200)
	// A good file broken: its last good version keeps serving.
	e.write("extra.yaml", strings.Replace(extra, "pathType", "pathtype", 1))
	e.eventually(5*time.Second, "extra.yaml's problem to be logged", func() bool {
		return strings.Contains(e.logs.String(), "keeping this file's last good version")
	})
	e.remove("extra.yaml")
	e.waitFor("extra.localhost", "/", "web", 200) // the default backend now answers it
	e.eventually(5*time.Second, "extra's removal to be logged", func() bool {
		return strings.Contains(e.logs.String(), `object="Ingress default/extra"`)
	})

	logs := e.logs.String()
	seen := map[string]bool{}
	lastStatus := map[string]string{} // an object's status may go back to a previous one
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if strings.Contains(line, " level=DEBUG ") {
			continue // what a user reads runs at INFO
		}
		body := timeAttr.ReplaceAllString(line, "")
		if obj, ok := statusObject(body); ok {
			if lastStatus[obj] == body {
				t.Errorf("status logged twice in a row: %s", body)
			}
			lastStatus[obj] = body
		} else if seen[body] {
			t.Errorf("logged twice: %s", body)
		}
		seen[body] = true
		if strings.Contains(line, " line=0") || strings.Contains(line, " document=0") {
			t.Errorf("an unknown position logged as 0: %s", line)
		}
		keys := logfmtKeys(line)
		for i, k := range keys {
			for _, k2 := range keys[i+1:] {
				if k == k2 {
					t.Errorf("key %s twice in: %s", k, line)
				}
			}
		}
	}
	for _, want := range []string{
		// The broken file is reported once, at the misspelt field's line, though every
		// reload since lists it.
		`level=WARN msg="manifest skipped" file=` + e.dir + `/typo.yaml line=8 document=1 reason="unknown field \"spec.routes[0].servces\""`,
		// An include that is not followed makes requests fail: WARN, though the root is valid.
		`level=WARN msg=status component=status kind=HTTPProxy namespace=default name=teams status=valid`,
		// The first build's summary.
		`level=INFO msg="status summary" component=status objects=3 valid=3 with_warnings=1 invalid=0 orphaned=0 ignored=0 logged=3`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %s", want)
		}
	}
	if n := strings.Count(logs, "configuration applied"); n == 0 {
		t.Errorf("the proxy never logged an applied configuration")
	}
}

var statusLineObject = regexp.MustCompile(` msg=status .*(kind=\S+ namespace=\S+ name=\S+) `)

// statusObject returns the object a status log line is about.
func statusObject(line string) (string, bool) {
	m := statusLineObject.FindStringSubmatch(line)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// TestStatusesEndpoint: the admin endpoint's /statuses answers what `portico check -o
// json` prints for the same files, and follows edits.
func TestStatusesEndpoint(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "api", "web"),
		"shop.yaml":     shop("Prefix", "api"),
		"orphan.yaml":   "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {name: orphan}\nspec:\n  routes: [{match: /, services: [{name: web, port: 80}]}]\n",
	})
	get := func(query string) (int, []status.Entry) {
		t.Helper()
		resp, err := http.Get("http://" + e.runner.Admin().Addr() + "/statuses" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var entries []status.Entry
		if resp.StatusCode == http.StatusOK {
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if err := json.NewDecoder(resp.Body).Decode(&entries); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, entries
	}
	stdout, stderr, code := runCLI(t, "check", e.dir, "-o", "json")
	var want []status.Entry
	if err := json.Unmarshal([]byte(stdout), &want); err != nil || code != 1 { // the orphan fails check
		t.Fatalf("check -o json: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	code, got := get("")
	if code != http.StatusOK || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("GET /statuses: %d %v\nportico check -o json: %v", code, got, want)
	}
	if code, got := get("?status=orphaned,invalid"); code != http.StatusOK || len(got) != 1 || got[0].Name != "orphan" {
		t.Errorf("GET /statuses?status=orphaned,invalid: %d %v, want the orphan alone", code, got)
	}
	if code, _ := get("?status=broken"); code != http.StatusBadRequest {
		t.Errorf("GET /statuses?status=broken: %d, want 400", code)
	}

	e.write("shop.yaml", shop("prefix", "api"))
	e.eventually(5*time.Second, "/statuses to show shop invalid", func() bool {
		_, got := get("?status=invalid")
		return len(got) == 1 && got[0].Name == "shop" && strings.Contains(got[0].Description, "pathType")
	})
}

// TestRunLogStaysReadableAtScale: a file of thousands of HTTPProxies (the was
// 17,588 in 5 MB) logs a summary and the objects needing attention, not a line per
// object; a change that reaches every object is bounded the same way; and every status
// is still there on /statuses.
func TestRunLogStaysReadableAtScale(t *testing.T) {
	const n = 2000
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf(`apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: app-%04d}
spec:
  virtualhost: {fqdn: app-%04d.localhost}
  routes: [{services: [{name: web, port: 80}]}]
`, i, i))
	}
	// Two of them are invalid from the start: the ones to read.
	docs[10] = strings.Replace(docs[10], "port: 80", "port: 0", 1)
	docs[1500] = strings.Replace(docs[1500], "port: 80", "port: 0", 1)
	web := backends(t, "web")
	e := start(t, map[string]string{"web.yaml": web, "proxies.yaml": strings.Join(docs, "---\n")})
	e.waitFor("app-0001.localhost", "/", "web", 200)

	statusLines := func() []string {
		var out []string
		for _, l := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(l, "component=status ") {
				out = append(out, l)
			}
		}
		return out
	}
	first := statusLines()
	if len(first) != 3 || !strings.Contains(first[0], "name=app-0010 status=invalid") || !strings.Contains(first[1], "name=app-1500 status=invalid") ||
		!strings.Contains(first[2], fmt.Sprintf(`level=INFO msg="status summary" component=status objects=%d valid=%d with_warnings=0 invalid=2`, n, n-2)) ||
		!strings.Contains(first[2], "see_all=") {
		t.Fatalf("first build: want the two invalid objects and a summary, got %d lines:\n%s", len(first), strings.Join(first, "\n"))
	}

	// The Service every route uses goes away: every object changes (valid, with a warning).
	e.remove("web.yaml")
	e.eventually(30*time.Second, "the summary of the change", func() bool {
		return strings.Contains(e.logs.String(), fmt.Sprintf("changed=%d", n-2))
	})
	all := statusLines()[len(first):]
	if len(all) != status.MaxLogged+1 {
		t.Errorf("a change of %d objects logged %d status lines, want %d and a summary:\n%s", n-2, len(all), status.MaxLogged, strings.Join(all, "\n"))
	}
	if !strings.Contains(all[len(all)-1], fmt.Sprintf(`level=WARN msg="status summary" component=status objects=%d valid=%d with_warnings=%d invalid=2`, n, n-2, n-2)) {
		t.Errorf("summary: %s", all[len(all)-1])
	}

	resp, err := http.Get("http://" + e.runner.Admin().Addr() + "/statuses")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var entries []status.Entry
	if err := json.NewDecoder(resp.Body).Decode(&entries); err != nil || len(entries) != n {
		t.Fatalf("/statuses: %d entries (%v), want %d", len(entries), err, n)
	}
}
