package e2e

import (
	"os"
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
