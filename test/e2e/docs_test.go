package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// logfmtKeys returns the keys of a log line in slog's text format, in order.
func logfmtKeys(line string) []string {
	var keys []string
	for _, m := range regexp.MustCompile(`(?:^|\s)([a-z_]+)=`).FindAllStringSubmatch(line, -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// TestDocumentedLogLineMatchesRealOutput: the sample "manifest skipped" line in
// docs/run-mode.md has the keys, in the order, that `portico run` really writes.
func TestDocumentedLogLineMatchesRealOutput(t *testing.T) {
	doc, err := os.ReadFile("../../docs/run-mode.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.Contains(line, `msg="manifest skipped"`) {
			documented = line
			break
		}
	}
	if documented == "" {
		t.Fatal(`docs/run-mode.md has no sample msg="manifest skipped" line`)
	}

	typo := strings.Replace(ingressManifest("shop", "shop.test", []pathRule{{"Prefix", "/", "s"}}, ""), "pathType", "pathtype", 1)
	e := start(t, map[string]string{"ingress.yaml": typo})
	var real string
	e.eventually(5*time.Second, "the malformed file to be logged", func() bool {
		for _, line := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(line, `msg="manifest skipped"`) {
				real = line
				return true
			}
		}
		return false
	})
	if got, want := strings.Join(logfmtKeys(documented), " "), strings.Join(logfmtKeys(real), " "); got != want {
		t.Errorf("documented keys %q, real %q\ndocumented: %s\nreal:       %s", got, want, documented, real)
	}
	if !strings.Contains(documented, `unknown field \"spec.rules[0].http.paths[0].pathtype\"`) || !strings.Contains(real, `unknown field \"spec.rules[0].http.paths[0].pathtype\"`) {
		t.Errorf("the reasons differ in form:\ndocumented: %s\nreal:       %s", documented, real)
	}
}

// TestHTTPProxyTeamsGuideCheckTable: the first `portico check` table of
// docs/httpproxy-teams.md is what `portico check` prints for the example's manifests (with
// the TLS Secret run.sh generates), row for row.
func TestHTTPProxyTeamsGuideCheckTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/httpproxy-teams.md")
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "$ bin/portico check examples/httpproxy-teams/manifests\n"
	_, after, ok := strings.Cut(string(doc), prompt)
	if !ok {
		t.Fatal("docs/httpproxy-teams.md shows no portico check of the example")
	}
	documented, _, _ := strings.Cut(after, "```")
	dir := t.TempDir()
	for name, content := range teamsFiles(t) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, _, _ := runBinary(t, portico(t), "check", dir)
	// Columns are padded to the widest cell: compare the cells.
	cells := func(table string) []string {
		var rows []string
		for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
			rows = append(rows, strings.Join(strings.Fields(line), " "))
		}
		return rows
	}
	got, want := cells(out), cells(documented)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("docs/httpproxy-teams.md's check table differs from portico check:\ndocumented:\n%s\nreal:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
}

// checkDocumentedKeys compares the keys of a real access log line with those of the
// sample line of docs/metrics.md that has marker.
func checkDocumentedKeys(t *testing.T, marker, real string) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.Contains(line, "msg=access") && strings.Contains(line, " "+marker+" ") {
			documented = line
			break
		}
	}
	if documented == "" {
		t.Fatalf("docs/metrics.md has no sample access line with %s", marker)
	}
	if got, want := strings.Join(logfmtKeys(documented), " "), strings.Join(logfmtKeys(real), " "); got != want {
		t.Errorf("documented keys %q, real %q\ndocumented: %s\nreal:       %s", got, want, documented, real)
	}
}
