package contour

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/contourdiff"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// release is the Contour release whose HTTPProxy semantics Portico implements.
const release = "github.com/projectcontour/contour@v1.33.8"

// contourDir fetches the release with the go command (from the module cache when it is
// there) and returns its directory. Without the module proxy the test is skipped,
// except in CI (CI set), where that is a failure.
func contourDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", release)
	cmd.Dir = t.TempDir() // outside any module: no go.mod is changed
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err == nil && mod.Error != "" {
		err = errors.New(mod.Error)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("go mod download %s: %v (CI is set: a skip would hide the corpus)", release, err)
		}
		t.Skipf("go mod download %s: %v (no module proxy?)", release, err)
	}
	return mod.Dir
}

var fallbackSecret = types.NamespacedName{Namespace: "projectcontour", Name: "fallback-secret-name"}

// options are those of a Portico that serves Contour's ingress class, with the
// cluster-wide services the documentation configures (a rate limit service, the
// fallback certificate of tls-termination.md).
func options() dag.Options {
	return dag.Options{IngressClassNames: []string{"contour"}, AllowExternalName: true, RateLimitService: true, FallbackCertificate: &fallbackSecret}
}

// documented are the HTTPProxies Contour's documentation shows failing on purpose, or
// that Contour itself refuses, by unit and object: what Portico must say about them
// (a substring of the status), and the references left missing because the page's
// point is that they are. Contour's wording differs; the cause is the same.
var documented = map[string]struct {
	omit   []string
	status dag.StatusValue
	reason string
}{
	// "The HTTPProxy will have condition Valid=false ... service-that-does-not-exist not
	// found": Contour marks the object invalid and still serves its other routes;
	// Portico serves them too and says so with a warning (docs/contour.md).
	"site/content/docs/main/config/fundamentals.md#5 default/multiple-routes-with-a-missing-service": {
		omit: []string{"service-that-does-not-exist"}, status: dag.StatusValid, reason: "service-that-does-not-exist"},
	// "This object will be marked as Invalid by Contour, since the TLS secret doesn't exist yet."
	"site/content/docs/main/guides/cert-manager.md#8 default/httpbinproxy": {
		omit: []string{"httpbinproxy"}, status: dag.StatusInvalid, reason: "Secret default/httpbinproxy not found"},
	// "upstreamValidation requested but secret not found or misconfigured".
	"site/content/docs/main/config/upstream-tls.md#1 default/example": {
		omit: []string{"my-certificate-authority"}, status: dag.StatusInvalid, reason: "Secret default/my-certificate-authority not found"},
	// Gatekeeper's unique-FQDN demonstration: two roots without routes. Contour refuses
	// both (NothingDefined), and the second for its host.
	"site/content/docs/main/guides/gatekeeper.md#4 default/demo":  {status: dag.StatusInvalid, reason: "an HTTPProxy must route something"},
	"site/content/docs/main/guides/gatekeeper.md#4 default/demo2": {status: dag.StatusInvalid, reason: "an HTTPProxy must route something"},
	// A tcpproxy without TLS: Contour refuses it too (TLSMustBeConfigured), though the
	// page shows it as an example of a TCP health check.
	"site/content/docs/main/config/health-checks.md#3 default/tcp-health-check": {status: dag.StatusInvalid, reason: "spec.tcpproxy needs spec.virtualhost.tls"},
}

// notObjects are the units whose HTTPProxies are not objects an API server takes as
// written, with what Portico's reader says about them: fragments written with "...",
// and misspelt or misplaced fields that Contour's API server drops (kubectl warns of an
// unknown field) or refuses.
var notObjects = map[string]string{
	"examples/example-workload/httpproxy/03-routes/httpproxy-lb-request-hash.yaml":  `unknown field "spec.routes[0].loadBalancerPolicy.requestHashPolicies[0].headerHashOptions.name"`, // headerName
	"examples/example-workload/httpproxy/03-routes/httpproxy-response-timeout.yaml": "projectcontour.io/v1alpha1 HTTPProxy",                                                            // no such version
	"site/content/docs/main/config/jwt-verification.md#1":                           `field "spec.routes" must be a list`,                                                              // "..." for the rest
	"site/content/docs/main/config/jwt-verification.md#2":                           "invalid YAML",
	"site/content/docs/main/config/jwt-verification.md#3":                           "invalid YAML",
	"site/content/docs/main/config/jwt-verification.md#4":                           "invalid YAML",
	"site/content/docs/main/config/request-rewriting.md#8":                          `unknown field "spec.fqdn"`, // and requestHeaderPolicy: virtualhost.fqdn, requestHeadersPolicy
	"site/content/docs/main/config/request-rewriting.md#9":                          `unknown field "spec.fqdn"`,
	"site/content/docs/main/config/request-rewriting.md#10":                         `unknown field "spec.fqdn"`,
	"site/content/docs/main/config/request-routing.md#12":                           `unknown field "spec.routes[0].loadBalancerPolicy.requestHashPolicies[0].queryParameterHashOptions.prameterName"`,
	"site/content/docs/main/config/request-routing.md#14":                           `unknown field "spec.virtualhost.routes"`, // routes indented under virtualhost
}

// TestContourCorpus holds Portico to Contour's own examples and documentation: every
// HTTPProxy they show is valid, alone (the admission webhook's check) and with the
// objects it refers to (a build), except the ones the documentation shows failing,
// which fail for the same reason; every build translates into xDS that validates.
func TestContourCorpus(t *testing.T) {
	units, err := corpus(contourDir(t))
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string][]unit{}
	for _, u := range units {
		groups[u.group] = append(groups[u.group], u)
	}
	var c counts
	seen := map[string]bool{}
	for _, u := range units {
		checkProblems(t, u, &c)
		for _, o := range u.objs {
			c.objects++
			p, ok := o.(*contourv1.HTTPProxy)
			if !ok {
				continue
			}
			id := u.name + " " + p.Namespace + "/" + p.Name
			seen[id] = true
			want, special := documented[id]
			g := dag.Build(store.FromObjects(scenario(u, groups[u.group], want.omit)), options())
			if _, err := translate.Translate(g, translate.Options{}); err != nil {
				t.Errorf("%s: translation: %v", id, err)
			}
			st := statusOf(g, p)
			c.proxies++
			switch {
			case special:
				c.documented++
				if !strings.Contains(describe(st), want.reason) || st.Status != want.status {
					t.Errorf("%s: status %s, want %s for %q (as the documentation shows)", id, describe(st), want.status, want.reason)
				}
			case st.Status == dag.StatusInvalid:
				t.Errorf("%s: invalid in Portico: %s", id, describe(st))
			default:
				c.valid++
				if v := dag.ValidateObject(p, nil, options()); len(v.Problems) > 0 {
					t.Errorf("%s: the admission webhook refuses it: %v", id, v.Problems)
				}
				for _, w := range st.Warnings {
					t.Logf("%s: %s", id, w.Message)
				}
			}
		}
	}
	for id := range documented {
		if !seen[id] {
			t.Errorf("documented %s is not in the release any more: update the list", id)
		}
	}
	t.Logf("%d units with %d objects; %d HTTPProxies: %d valid, %d failing as documented; %d units not objects (allowed)",
		len(units), c.objects, c.proxies, c.valid, c.documented, c.notObjects)
}

type counts struct{ objects, proxies, valid, documented, notObjects int }

// checkProblems fails on a unit that Portico's reader cannot read, unless notObjects
// lists it with what the reader says.
func checkProblems(t *testing.T, u unit, c *counts) {
	t.Helper()
	want, allowed := notObjects[u.name]
	if allowed {
		c.notObjects++
	}
	var found bool
	for _, p := range u.problems {
		if allowed && strings.Contains(p.Reason, want) {
			found = true
			continue
		}
		if mentionsKind(p.Reason) {
			t.Errorf("%s: %v", u.name, p)
		}
	}
	if allowed && !found {
		t.Errorf("%s: allowed as not an object (%q), but Portico reads it: remove it from notObjects (problems: %v)", u.name, want, u.problems)
	}
}

// mentionsKind says whether a reader's problem is about a kind Portico reads; one
// about a Deployment or a cert-manager Certificate is not.
func mentionsKind(reason string) bool {
	return !strings.Contains(reason, "does not read") || strings.Contains(reason, "HTTPProxy")
}

func describe(st *dag.Status) string {
	if st == nil {
		return "(no status)"
	}
	var b strings.Builder
	b.WriteString(string(st.Status) + ": " + st.Description)
	for _, w := range st.Warnings {
		b.WriteString("; " + w.Message)
	}
	return b.String()
}

func statusOf(g *dag.Graph, p *contourv1.HTTPProxy) *dag.Status {
	for _, s := range g.Statuses {
		if s.Object.Kind == dag.KindHTTPProxy && s.Object.Namespace == p.Namespace && s.Object.Name == p.Name {
			return s
		}
	}
	return &dag.Status{Status: "(none)"}
}

// portico check --contour on Contour's corpus: every finding is a difference the list
// holds as one, and the count of each is the corpus's figure (the test log shows it).
func TestContourCorpusDifferences(t *testing.T) {
	units, err := corpus(contourDir(t))
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string][]runtime.Object{}
	for _, u := range units {
		groups[u.group] = append(groups[u.group], u.objs...)
	}
	byID := map[string]int{}
	for _, u := range units {
		for _, f := range contourdiff.Find(u.name, u.objs, contourdiff.NewObjects(groups[u.group])) {
			if f.Status != contourdiff.Deliberate || f.Field == "" {
				t.Errorf("%v: not a difference the check may report", f)
			}
			byID[f.ID]++
		}
	}
	// The documentation's teams include one another and route on prefixes without a
	// final "/": both must be found.
	for _, id := range []string{"include-seals", "segment-prefix"} {
		if byID[id] == 0 {
			t.Errorf("no %s found in Contour's corpus", id)
		}
	}
	t.Logf("differences found in Contour's corpus, by kind: %v", byID)
}
