package kube

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/authz/authztest"
	"github.com/portico-dev/portico/internal/contourclient"
	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// TestServeExtAuthz: against a real API server with the CRDs of deploy/crds, an
// ExtensionService pointing at a `portico authz` process and an HTTPProxy authorized by
// it: `serve` answers 401 with the server's challenge without credentials, passes
// authorized requests with the server's headers, and writes the ExtensionService's
// status (the Valid condition).
func TestServeExtAuthz(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	ctx := context.Background()
	pn := kubetest.NewPodNetwork(t, 4)
	backend(t, pn, "web", 9301)
	authzAddr := net.JoinHostPort(pn.PodIP, "9302")
	htpasswd := authztest.HTPasswd(t, map[string]string{"alice": "wonderland"})
	pn.Start(t, testutil.PorticoBinary(t), "authz", "--listen", authzAddr, "--htpasswd", htpasswd, "--realm", "kube", "--log-level", "warn")
	eventually(t, 10*time.Second, "portico authz to listen", func() bool {
		conn, err := net.DialTimeout("tcp", authzAddr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})

	const ns = "xa-app"
	createNamespace(t, c, ns)
	createService(t, c, ns, "web", pn.PodIP, 9301)
	createService(t, c, ns, "authz", pn.PodIP, 9302)
	cert := testutil.SelfSigned("auth.xa.test")
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, testutil.TLSSecret(ns, "cert", cert), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	es := `{"apiVersion": "projectcontour.io/v1alpha1", "kind": "ExtensionService", "metadata": {"name": "auth"},
		"spec": {"protocol": "h2c", "services": [{"name": "authz", "port": 80}], "timeoutPolicy": {"response": "30s"}}}`
	if err := cc.ExtensionREST().Post().Namespace(ns).Resource(contourclient.ResourceExtensionServices).Body([]byte(es)).Do(ctx).Error(); err != nil {
		t.Fatalf("creating the ExtensionService: %v", err)
	}
	if err := createHTTPProxyJSON(ctx, cc, ns, "app", `{"virtualhost": {"fqdn": "auth.xa.test", "tls": {"secretName": "cert"},
		"authorization": {"extensionRef": {"name": "auth"}, "authPolicy": {"context": {"team": "xa"}}}},
		"routes": [{"services": [{"name": "web", "port": 80}]},
			{"conditions": [{"prefix": "/open"}], "authPolicy": {"disabled": true}, "services": [{"name": "web", "port": 80}]}]}`); err != nil {
		t.Fatal(err)
	}
	ctl := startController(t, cfg, "xa", []string{ns})

	get := func(path, user string) (int, http.Header, string) {
		addr := ctl.srv.Proxy().ListenerAddr(translate.ListenerHTTPS)
		if addr == "" {
			return 0, nil, ""
		}
		tr := &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{ServerName: "auth.xa.test", InsecureSkipVerify: true}, // self-signed test certificate
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
		}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodGet, "https://auth.xa.test"+path, nil)
		if user != "" {
			req.SetBasicAuth(user, "wonderland")
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0, nil, ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(body)
	}
	eventually(t, 30*time.Second, "the authorized host to answer 200 with the server's user header", func() bool {
		code, _, body := get("/", "alice")
		return code == 200 && strings.Contains(body, `"Auth-Username":["alice"]`) && strings.Contains(body, `"Auth-Context-Team":["xa"]`)
	})
	if code, h, _ := get("/", ""); code != 401 || h.Get("WWW-Authenticate") != `Basic realm="kube"` {
		t.Errorf("without credentials: %d, WWW-Authenticate %q; want 401 with the server's challenge", code, h.Get("WWW-Authenticate"))
	}
	if code, _, _ := get("/open", ""); code != 200 {
		t.Errorf("route with authorization disabled: %d, want 200", code)
	}
	var last string
	if !eventuallyOK(20*time.Second, func() bool {
		got, err := cc.ExtensionServices(ns).Get(ctx, "auth", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false
		}
		if len(got.Status.Conditions) != 1 {
			last = fmt.Sprintf("%d conditions", len(got.Status.Conditions))
			return false
		}
		cond := got.Status.Conditions[0]
		last = fmt.Sprintf("%s %s %s %q", cond.Type, cond.Status, cond.Reason, cond.Message)
		return cond.Type == "Valid" && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == got.Generation
	}) {
		t.Fatalf("ExtensionService status not written; last: %s", last)
	}

	// The Service the ExtensionService names goes away: the HTTPProxy is no longer
	// served rather than served unchecked, and both statuses say why.
	if err := c.CoreV1().Services(ns).Delete(ctx, "authz", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the HTTPProxy to be refused once its ExtensionService is unusable", func() bool {
		p, err := cc.HTTPProxies(ns).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && p.Status.CurrentStatus == "invalid" && strings.Contains(p.Status.Description, "ExtensionService "+ns+"/auth is invalid")
	})
	if code, _, _ := get("/", "alice"); code == 200 {
		t.Errorf("served without its authorization: %d", code)
	}
}

// TestServeExtAuthzHTTP: the HTTP flavour in `serve`, against a real API server with the
// CRDs of deploy/crds (their schema and CEL rules accept it): an ExtensionService of
// protocol http/1.1 pointing at `portico authz --http-listen`, an HTTPProxy with
// serviceType http, httpSettings and withRequestBody. Denied without credentials,
// allowed with the server's headers the HTTPProxy lets through (the path it was asked,
// under pathPrefix; the body it got), and a body over maxRequestBytes refused with 413.
func TestServeExtAuthzHTTP(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	ctx := context.Background()
	pn := kubetest.NewPodNetwork(t, 4)
	backend(t, pn, "web", 9311)
	authzAddr := net.JoinHostPort(pn.PodIP, "9313")
	htpasswd := authztest.HTPasswd(t, map[string]string{"alice": "wonderland"})
	pn.Start(t, testutil.PorticoBinary(t), "authz", "--listen", net.JoinHostPort(pn.PodIP, "9312"), "--http-listen", authzAddr,
		"--htpasswd", htpasswd, "--realm", "kube", "--log-level", "warn")
	eventually(t, 10*time.Second, "portico authz to listen for HTTP", func() bool {
		conn, err := net.DialTimeout("tcp", authzAddr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})

	const ns = "xah-app"
	createNamespace(t, c, ns)
	createService(t, c, ns, "web", pn.PodIP, 9311)
	createService(t, c, ns, "authz", pn.PodIP, 9313)
	cert := testutil.SelfSigned("auth.xah.test")
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, testutil.TLSSecret(ns, "cert", cert), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	es := `{"apiVersion": "projectcontour.io/v1alpha1", "kind": "ExtensionService", "metadata": {"name": "auth"},
		"spec": {"protocol": "http/1.1", "services": [{"name": "authz", "port": 80}], "timeoutPolicy": {"response": "30s"}}}`
	if err := cc.ExtensionREST().Post().Namespace(ns).Resource(contourclient.ResourceExtensionServices).Body([]byte(es)).Do(ctx).Error(); err != nil {
		t.Fatalf("creating the ExtensionService: %v", err)
	}
	if err := createHTTPProxyJSON(ctx, cc, ns, "app", `{"virtualhost": {"fqdn": "auth.xah.test", "tls": {"secretName": "cert"},
		"authorization": {"extensionRef": {"name": "auth"}, "serviceType": "http", "withRequestBody": {"maxRequestBytes": 8},
			"httpSettings": {"pathPrefix": "/verify", "allowedUpstreamHeaders": [{"prefix": "auth-"}]}}},
		"routes": [{"services": [{"name": "web", "port": 80}]}]}`); err != nil {
		t.Fatal(err)
	}
	ctl := startController(t, cfg, "xah", []string{ns})

	do := func(method, body, user string) (int, http.Header, string) {
		addr := ctl.srv.Proxy().ListenerAddr(translate.ListenerHTTPS)
		if addr == "" {
			return 0, nil, ""
		}
		tr := &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{ServerName: "auth.xah.test", InsecureSkipVerify: true}, // self-signed test certificate
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
		}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest(method, "https://auth.xah.test/orders", strings.NewReader(body))
		if user != "" {
			req.SetBasicAuth(user, "wonderland")
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0, nil, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	eventually(t, 30*time.Second, "the authorized host to answer 200 with the server's headers", func() bool {
		code, _, body := do(http.MethodGet, "", "alice")
		return code == 200 && strings.Contains(body, `"Auth-Username":["alice"]`) && strings.Contains(body, `"Auth-Path":["/verify/orders"]`)
	})
	if code, h, _ := do(http.MethodGet, "", ""); code != 401 || h.Get("WWW-Authenticate") != `Basic realm="kube"` {
		t.Errorf("without credentials: %d, WWW-Authenticate %q; want 401 with the server's challenge", code, h.Get("WWW-Authenticate"))
	}
	if code, _, body := do(http.MethodPost, "12345", "alice"); code != 200 || !strings.Contains(body, `"Auth-Body-Bytes":["5"]`) {
		t.Errorf("a 5-byte body: %d %s; want 200 with Auth-Body-Bytes 5", code, body)
	}
	if code, _, _ := do(http.MethodPost, "123456789", "alice"); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a 9-byte body over maxRequestBytes 8: %d, want 413", code)
	}
}
