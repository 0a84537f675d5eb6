package contourdiff

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// docs/contour.md holds Table() as it is: the list lives here, the page shows it.
func TestDocsTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/contour.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), Table()) {
		t.Errorf("docs/contour.md does not hold the table of differences; paste this in place of its table:\n%s", Table())
	}
}

// The table is what users read (docs/contour.md, portico check --contour): no row
// carries a note for the project's own reviewers.
func TestDifferencesAreFinal(t *testing.T) {
	for _, d := range Differences {
		for _, text := range []string{d.Contour, d.Portico, d.Do} {
			if strings.Contains(text, "LEAD") || strings.Contains(text, "CHECK") || strings.Contains(text, "TODO") {
				t.Errorf("difference %s: %q is a note to reviewers, not what the user is told", d.ID, text)
			}
		}
	}
}

// Every difference a field asks for is found in testdata/manifests, at that field,
// and nothing else is.
func TestCheckDirFindsEveryDifference(t *testing.T) {
	findings, problems, err := CheckDir("testdata/manifests")
	if err != nil || len(problems) > 0 {
		t.Fatalf("CheckDir: %v, %v", err, problems)
	}
	type row struct{ File, Object, Field, ID string }
	var got []row
	for _, f := range findings {
		got = append(got, row{filepath.Base(f.File), f.Object, f.Field, f.ID})
	}
	want := []row{
		{"services.yaml", "HTTPProxy platform/globalauth", "spec.virtualhost.authorization", "global-authorization"},
		{"teams.yaml", "HTTPProxy platform/root", "spec.includes[0]", "include-seals"},
		{"teams.yaml", "HTTPProxy platform/root", "spec.includes[0].conditions[0].prefix", "segment-prefix"},
		{"teams.yaml", "HTTPProxy platform/root", "spec.virtualhost.authorization", "authorization-route-cache"},
		{"teams.yaml", "HTTPProxy platform/root", "spec.virtualhost.authorization.failOpen", "authorization-fail-open"},
		{"teams.yaml", "HTTPProxy platform/root", "spec.ingressClassName", "ingress-class"},
		{"teams.yaml", "HTTPProxy blog/blog", "spec.routes[0].conditions[0].prefix", "segment-prefix"},
		{"teams.yaml", "HTTPProxy blog/blog", "spec.routes[0].permitInsecure", "included-permit-insecure"},
		{"teams.yaml", "HTTPProxy blog/blog", "spec.routes[0].services[1].validation", "validation-clear-text"},
		{"teams.yaml", "HTTPProxy blog/blog", "metadata.annotations[kubernetes.io/ingress.class]", "ingress-class"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	found := map[string]bool{}
	for _, f := range findings {
		found[f.ID] = true
	}
	for _, d := range Differences {
		if (d.proxy != nil || d.service != nil) && !found[d.ID] {
			t.Errorf("testdata/manifests asks for no %s: add a field that does", d.ID)
		}
	}
}

// A finding's line names the file, object and field, and says what each does and
// what to do.
func TestFindingString(t *testing.T) {
	findings, _, _ := CheckDir("testdata/manifests")
	line := findings[0].String()
	for _, part := range []string{"testdata/manifests/services.yaml: HTTPProxy platform/globalauth: spec.virtualhost.authorization: Contour: an authorization without extensionRef", "; Portico: it uses the global server", "; do: configure globalExtAuth"} {
		if !strings.Contains(line, part) {
			t.Errorf("%q does not contain %q", line, part)
		}
	}
}

// Every row says what each does; the ones a field asks for say what to do.
func TestDifferencesComplete(t *testing.T) {
	ids := map[string]bool{}
	for _, d := range Differences {
		if d.ID == "" || d.Contour == "" || d.Portico == "" || ids[d.ID] {
			t.Errorf("%+v: needs a unique ID, Contour and Portico", d)
		}
		ids[d.ID] = true
		if d.Status == Deliberate && d.Do == "" {
			t.Errorf("%s differs and says nothing to do", d.ID)
		}
		if (d.proxy != nil || d.service != nil) && d.Field == "" {
			t.Errorf("%s is found in fields but names none", d.ID)
		}
	}
}
