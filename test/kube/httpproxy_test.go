package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/contourclient"
	"github.com/portico-dev/portico/internal/echo"
	"github.com/portico-dev/portico/internal/kubetest"
)

// createHTTPProxyJSON creates an HTTPProxy from the JSON of its spec, as kubectl would
// send it.
func createHTTPProxyJSON(ctx context.Context, c *contourclient.Client, ns, name, spec string) error {
	body := `{"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy", "metadata": {"name": "` + name + `"}, "spec": ` + spec + `}`
	return c.ProjectREST().Post().Namespace(ns).Resource(contourclient.ResourceHTTPProxies).Body([]byte(body)).Do(ctx).Error()
}

// getWith sends a request with headers through the controller's embedded proxy.
func (c *controller) getWith(host, path string, header ...string) (int, echo.Response) {
	r := c.send(http.MethodGet, host, path, header...)
	var e echo.Response
	_ = json.Unmarshal([]byte(r.body), &e)
	return r.status, e
}

// TestServeHTTPProxy: against a real API server with the CRDs of deploy/crds, `serve`
// routes by header across namespaces as seed 004's header delegation example says, and
// writes every HTTPProxy's status (currentStatus, description, and the Valid condition
// with its errors and warnings) in a form the CRD's schema accepts; the status follows
// edits.
func TestServeHTTPProxy(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	ctx := context.Background()
	pn := kubetest.NewPodNetwork(t, 1)
	backend(t, pn, "backend-default", 9101)
	backend(t, pn, "backend-a", 9102)
	backend(t, pn, "backend-b", 9103)
	const root, teamA, teamB = "hp-root", "hp-team-a", "hp-team-b"
	for _, ns := range []string{root, teamA, teamB} {
		createNamespace(t, c, ns)
	}
	createService(t, c, root, "backend-default", pn.PodIP, 9101)
	createService(t, c, teamA, "backend-a", pn.PodIP, 9102)
	createService(t, c, teamB, "backend-b", pn.PodIP, 9103)

	objects := []struct{ ns, name, spec string }{
		{root, "foo", `{"virtualhost": {"fqdn": "foo.hp.test"},
			"routes": [{"conditions": [{"prefix": "/foo"}], "services": [{"name": "backend-default", "port": 80}]}],
			"includes": [
				{"name": "headera", "namespace": "` + teamA + `", "conditions": [{"prefix": "/foo"}, {"header": {"name": "x-header", "exact": "a"}}]},
				{"name": "headerb", "namespace": "` + teamB + `", "conditions": [{"prefix": "/foo"}, {"header": {"name": "x-header", "exact": "b"}}]},
				{"name": "nothere", "namespace": "` + teamB + `", "conditions": [{"prefix": "/gone"}]}]}`},
		{teamA, "headera", `{"routes": [{"services": [{"name": "backend-a", "port": 80}]}]}`},
		{teamB, "headerb", `{"routes": [{"services": [{"name": "backend-b", "port": 80}]}],
			"includes": [{"name": "loop", "conditions": [{"prefix": "/loop"}]}]}`},
		{teamB, "loop", `{"includes": [{"name": "headerb", "conditions": [{"prefix": "/back"}]}]}`},
		{teamB, "stray", `{"routes": [{"services": [{"name": "backend-b", "port": 80}]}]}`},
		// The API server accepts this regex (the schema cannot parse RE2); Portico does not.
		{teamA, "badregex", `{"virtualhost": {"fqdn": "bad.hp.test"}, "routes": [{"conditions": [{"regex": "/(unclosed"}], "services": [{"name": "backend-a", "port": 80}]}]}`},
	}
	for _, o := range objects {
		if err := createHTTPProxyJSON(ctx, cc, o.ns, o.name, o.spec); err != nil {
			t.Fatalf("creating %s/%s: %v", o.ns, o.name, err)
		}
	}
	ctl := startController(t, cfg, "hp", []string{root, teamA, teamB})

	for _, tc := range []struct {
		path, header, want string
	}{
		{"/foo", "a", "backend-a"},
		{"/foo", "b", "backend-b"},
		{"/foo", "", "backend-default"},
	} {
		var header []string
		if tc.header != "" {
			header = []string{"x-header", tc.header}
		}
		eventually(t, 20*time.Second, fmt.Sprintf("GET %s x-header %q to reach %s", tc.path, tc.header, tc.want), func() bool {
			code, r := ctl.getWith("foo.hp.test", tc.path, header...)
			return code == 200 && r.Service == tc.want
		})
	}
	// An include that cannot be followed keeps its requests: 503, never /foo's route.
	if code, _ := ctl.getWith("foo.hp.test", "/gone/x"); code != 503 {
		t.Errorf("GET /gone/x: %d, want 503", code)
	}

	type want struct {
		status, desc string
		cond         metav1.ConditionStatus
		reason       string
		problem      string // a substring of one error or warning message
	}
	check := func(what string, wants map[[2]string]want) {
		t.Helper()
		var last string
		ok := eventuallyOK(20*time.Second, func() bool {
			for key, w := range wants {
				p, err := cc.HTTPProxies(key[0]).Get(ctx, key[1], metav1.GetOptions{})
				if err != nil {
					last = err.Error()
					return false
				}
				if msg := proxyStatusMismatch(p.Status, w.status, w.desc, w.cond, w.reason, w.problem); msg != "" {
					last = fmt.Sprintf("%s/%s: %s", key[0], key[1], msg)
					return false
				}
			}
			return true
		})
		if !ok {
			t.Fatalf("%s: statuses not written; last mismatch: %s", what, last)
		}
	}
	check("initial", map[[2]string]want{
		{root, "foo"}:       {"valid", "valid HTTPProxy", metav1.ConditionTrue, "WarningPresent", "spec.includes[2]"},
		{teamA, "headera"}:  {"valid", "included by HTTPProxy " + root + "/foo on foo.hp.test", metav1.ConditionTrue, "Valid", ""},
		{teamB, "loop"}:     {"invalid", "closes a cycle", metav1.ConditionFalse, "ErrorPresent", "HTTPProxy " + teamB + "/loop"},
		{teamB, "stray"}:    {"orphaned", "not included by any root", metav1.ConditionFalse, "Orphaned", "not included"},
		{teamA, "badregex"}: {"invalid", `"/(unclosed" is not a valid RE2 regular expression`, metav1.ConditionFalse, "ErrorPresent", "regex"},
	})

	// The cycle is broken: loop becomes valid, included under /foo/loop.
	patch := []byte(`{"spec": {"includes": null, "routes": [{"services": [{"name": "backend-b", "port": 80}]}]}}`)
	if _, err := cc.HTTPProxies(teamB).Patch(ctx, "loop", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after the fix", map[[2]string]want{
		{teamB, "loop"}: {"valid", "included by HTTPProxy " + teamB + "/headerb", metav1.ConditionTrue, "Valid", ""},
	})
	p, err := cc.HTTPProxies(teamB).Get(ctx, "loop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Status.Conditions[0]; c.ObservedGeneration != p.Generation {
		t.Errorf("observedGeneration %d, want the object's generation %d", c.ObservedGeneration, p.Generation)
	}
	eventually(t, 10*time.Second, "the repaired include to serve", func() bool {
		code, r := ctl.getWith("foo.hp.test", "/foo/loop", "x-header", "b")
		return code == 200 && r.Service == "backend-b"
	})
}

// proxyStatusMismatch says how a written HTTPProxy status differs from what is wanted,
// or "".
func proxyStatusMismatch(s contourv1.HTTPProxyStatus, status, desc string, cond metav1.ConditionStatus, reason, problem string) string {
	if s.CurrentStatus != status || !strings.Contains(s.Description, desc) {
		return fmt.Sprintf("%q %q, want %q containing %q", s.CurrentStatus, s.Description, status, desc)
	}
	if len(s.Conditions) != 1 || s.Conditions[0].Type != "Valid" {
		return fmt.Sprintf("conditions %+v, want one Valid condition", s.Conditions)
	}
	c := s.Conditions[0]
	if c.Status != cond || c.Reason != reason {
		return fmt.Sprintf("Valid condition %s/%s, want %s/%s", c.Status, c.Reason, cond, reason)
	}
	if problem == "" {
		return ""
	}
	for _, sc := range append(append([]contourv1.SubCondition{}, c.Errors...), c.Warnings...) {
		if strings.Contains(sc.Message, problem) && sc.Status == metav1.ConditionTrue && sc.Type != "" && sc.Reason != "" {
			return ""
		}
	}
	return fmt.Sprintf("no error or warning mentions %q: errors %+v warnings %+v", problem, c.Errors, c.Warnings)
}
