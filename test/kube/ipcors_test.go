package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// reply is what a client sees of one response through the embedded proxy.
type reply struct {
	status int
	header http.Header
	body   string
}

// send sends method host/path with headers through the controller's embedded proxy.
func (c *controller) send(method, host, path string, header ...string) reply {
	addr := c.srv.Proxy().ListenerAddr(translate.ListenerHTTP)
	if addr == "" {
		return reply{}
	}
	req, _ := http.NewRequest(method, "http://"+addr+path, nil)
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return reply{}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(body)}
}

// TestServeIPFilterAndCORS: in serve mode, against a real API server with the CRDs of
// deploy/crds, HTTPProxy IP rules (with --num-trusted-hops) and a CORS policy are
// enforced by the embedded proxy, and an invalid rule gets a status saying what to fix.
func TestServeIPFilterAndCORS(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	ctx := context.Background()
	pn := kubetest.NewPodNetwork(t, 1)
	backend(t, pn, "web", 9111)
	const ns = "ipcors"
	createNamespace(t, c, ns)
	createService(t, c, ns, "web", pn.PodIP, 9111)
	for name, spec := range map[string]string{
		"policies": `{"virtualhost": {"fqdn": "ipcors.test",
			"ipAllowPolicy": [{"source": "Peer", "cidr": "127.0.0.1"}],
			"corsPolicy": {"allowOrigin": ["https://app.example.com"], "allowMethods": ["GET", "PUT"], "maxAge": "1m"}},
			"routes": [{"services": [{"name": "web", "port": 80}]},
				{"conditions": [{"prefix": "/remote"}], "ipAllowPolicy": [{"source": "Remote", "cidr": "203.0.113.0/24"}], "services": [{"name": "web", "port": 80}]}]}`,
		"badcidr": `{"virtualhost": {"fqdn": "bad.ipcors.test", "ipDenyPolicy": [{"source": "Peer", "cidr": "10.0.0.0/33"}]},
			"routes": [{"services": [{"name": "web", "port": 80}]}]}`,
	} {
		if err := createHTTPProxyJSON(ctx, cc, ns, name, spec); err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
	}
	ctl := startControllerWith(t, cfg, "ipcors", []string{ns}, func(o *app.ServeOptions) { o.NumTrustedHops = 1 })

	eventually(t, 20*time.Second, "ipcors.test to be served", func() bool {
		code, r := ctl.getWith("ipcors.test", "/")
		return code == 200 && r.Service == "web"
	})
	for _, tc := range []struct {
		path, xff string
		want      int
	}{
		{"/remote", "203.0.113.5", http.StatusOK},
		{"/remote", "203.0.113.5, 198.51.100.1", http.StatusForbidden},
		{"/remote", "", http.StatusForbidden},
	} {
		var h []string
		if tc.xff != "" {
			h = []string{"X-Forwarded-For", tc.xff}
		}
		if r := ctl.send(http.MethodGet, "ipcors.test", tc.path, h...); r.status != tc.want || (r.status == 403 && r.body != "RBAC: access denied") {
			t.Errorf("GET %s with X-Forwarded-For %q: %d %q, want %d", tc.path, tc.xff, r.status, r.body, tc.want)
		}
	}
	pre := ctl.send(http.MethodOptions, "ipcors.test", "/", "Origin", "https://app.example.com", "Access-Control-Request-Method", "PUT")
	if pre.status != 200 || pre.header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		pre.header.Get("Access-Control-Allow-Methods") != "GET,PUT" || pre.header.Get("Access-Control-Max-Age") != "60" {
		t.Errorf("preflight: %d %v, want 200 with the policy's headers", pre.status, pre.header)
	}
	if r := ctl.send(http.MethodGet, "ipcors.test", "/", "Origin", "https://other.example.com"); r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin got Access-Control-Allow-Origin %q", r.header.Get("Access-Control-Allow-Origin"))
	}

	var last string
	if !eventuallyOK(20*time.Second, func() bool {
		p, err := cc.HTTPProxies(ns).Get(ctx, "badcidr", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("%s: %s", p.Status.CurrentStatus, p.Status.Description)
		return proxyStatusMismatch(p.Status, "invalid", `spec.virtualhost.ipDenyPolicy[0].cidr "10.0.0.0/33" is not an IP address or CIDR block`,
			metav1.ConditionFalse, "ErrorPresent", "10.0.0.0/33") == ""
	}) {
		t.Fatalf("badcidr's status: %s", last)
	}
}
