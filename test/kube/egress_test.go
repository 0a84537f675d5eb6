package kube

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// TestServeRefusesEndpointAtAdminAddress: in `serve` with the embedded proxy and the
// admin endpoint on 0.0.0.0 (its default), a Service whose EndpointSlice points at this
// host's address on the admin port (the host side of the pod network, as a team could
// write it) is answered 502 by the proxy, never with the admin endpoint's /metrics; an
// ordinary Service in the same namespace is served.
func TestServeRefusesEndpointAtAdminAddress(t *testing.T) {
	cfg := env.AdminConfig(t)
	c := kubetest.Clientset(t, cfg)
	ctx := context.Background()
	pn := kubetest.NewPodNetwork(t, 3)
	backend(t, pn, "web", 9001)
	const ns = "egress"
	createNamespace(t, c, ns)
	createService(t, c, ns, "web", pn.PodIP, 9001)
	logs := &testutil.SyncBuffer{}
	ctl := startControllerWith(t, cfg, "only", []string{ns}, func(o *app.ServeOptions) {
		o.AdminAddr = "0.0.0.0:0"
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	var adminPort int
	eventually(t, 20*time.Second, "the admin endpoint to be bound", func() bool {
		_, port, err := net.SplitHostPort(ctl.srv.Admin().Addr())
		adminPort, _ = strconv.Atoi(port)
		return err == nil && adminPort != 0
	})
	// The admin endpoint answers at the host side of the pod network: the address exists.
	if code, body := fetch(t, "http://"+net.JoinHostPort(pn.HostIP, strconv.Itoa(adminPort))+"/metrics", ""); code != 200 || !strings.Contains(body, "portico_") {
		t.Fatalf("the admin endpoint at the pod network's host address: %d, want 200 with metrics", code)
	}
	createService(t, c, ns, "admin", pn.HostIP, int32(adminPort))
	for name, svc := range map[string]string{"web": "web", "admin": "admin"} {
		if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ingress(name, name+".test", "/", svc), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "traffic to web", func() bool {
		code, r := ctl.get(t, "web.test", "/")
		return code == 200 && r.Service == "web"
	})
	proxyURL := func(path string) string {
		return "http://" + ctl.srv.Proxy().ListenerAddr(translate.ListenerHTTP) + path
	}
	var code int
	var body string
	eventually(t, 30*time.Second, "the admin route", func() bool {
		code, body = fetch(t, proxyURL("/metrics"), "admin.test")
		return code != 404
	})
	for _, path := range []string{"/metrics", "/debug/pprof/", "/healthz"} {
		code, body = fetch(t, proxyURL(path), "admin.test")
		if code != 502 || !strings.Contains(body, "destination refused (own_address)") || strings.Contains(body, "portico_") {
			t.Errorf("admin.test%s: %d %.200q, want 502 destination refused (own_address)", path, code, body)
		}
	}
	want := "service=" + ns + "/admin cluster=" + ns + "/admin/80 endpoint=" + net.JoinHostPort(pn.HostIP, strconv.Itoa(adminPort))
	eventually(t, 10*time.Second, "the refusal to be logged", func() bool { return strings.Contains(logs.String(), want) })
}

// fetch GETs url with the Host header host ("" leaves it) and returns the status and
// body; 0 when nothing answered.
func fetch(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
