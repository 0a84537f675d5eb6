package kube

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

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
	const ns = "xa-app"
	startAuthzApp(t, c, cc, pn, authzApp{ns: ns, host: "auth.xa.test", webPort: 9301, authzPort: 9302, protocol: "h2c"})
	if err := createHTTPProxyJSON(ctx, cc, ns, "app", `{"virtualhost": {"fqdn": "auth.xa.test", "tls": {"secretName": "cert"},
		"authorization": {"extensionRef": {"name": "auth"}, "authPolicy": {"context": {"team": "xa"}}}},
		"routes": [{"services": [{"name": "web", "port": 80}]},
			{"conditions": [{"prefix": "/open"}], "authPolicy": {"disabled": true}, "services": [{"name": "web", "port": 80}]}]}`); err != nil {
		t.Fatal(err)
	}
	ctl := startController(t, cfg, "xa", []string{ns})

	get := func(path, user string) (int, http.Header, string) {
		return httpsRequest(ctl, "auth.xa.test", http.MethodGet, path, "", user)
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
	const ns = "xah-app"
	startAuthzApp(t, c, cc, pn, authzApp{ns: ns, host: "auth.xah.test", webPort: 9311, authzPort: 9313, protocol: "http/1.1"})
	if err := createHTTPProxyJSON(ctx, cc, ns, "app", `{"virtualhost": {"fqdn": "auth.xah.test", "tls": {"secretName": "cert"},
		"authorization": {"extensionRef": {"name": "auth"}, "serviceType": "http", "withRequestBody": {"maxRequestBytes": 8},
			"httpSettings": {"pathPrefix": "/verify", "allowedUpstreamHeaders": [{"prefix": "auth-"}]}}},
		"routes": [{"services": [{"name": "web", "port": 80}]}]}`); err != nil {
		t.Fatal(err)
	}
	ctl := startController(t, cfg, "xah", []string{ns})

	do := func(method, body, user string) (int, http.Header, string) {
		return httpsRequest(ctl, "auth.xah.test", method, "/orders", body, user)
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

// authzApp is a namespace with a backend and a `portico authz` process (gRPC on
// authzPort, or HTTP there when protocol is http/1.1) behind an ExtensionService "auth",
// and a TLS certificate "cert" for host.
type authzApp struct {
	ns, host           string
	webPort, authzPort int32
	protocol           string
}

// startAuthzApp starts the backend and the authorization server on the pod network and
// creates the namespace, their Services, the certificate and the ExtensionService.
func startAuthzApp(t *testing.T, c kubernetes.Interface, cc *contourclient.Client, pn *kubetest.PodNetwork, a authzApp) {
	t.Helper()
	ctx := context.Background()
	backend(t, pn, "web", int(a.webPort))
	authzAddr := net.JoinHostPort(pn.PodIP, strconv.Itoa(int(a.authzPort)))
	htpasswd := authztest.HTPasswd(t, map[string]string{"alice": "wonderland"})
	args := []string{"authz", "--listen", authzAddr, "--htpasswd", htpasswd, "--realm", "kube", "--log-level", "warn"}
	if a.protocol == "http/1.1" {
		args[2] = net.JoinHostPort(pn.PodIP, strconv.Itoa(int(a.authzPort)+1000)) // gRPC out of the way
		args = append(args, "--http-listen", authzAddr)
	}
	pn.Start(t, testutil.PorticoBinary(t), args...)
	eventually(t, 10*time.Second, "portico authz to listen on "+authzAddr, func() bool {
		conn, err := net.DialTimeout("tcp", authzAddr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	createNamespace(t, c, a.ns)
	createService(t, c, a.ns, "web", pn.PodIP, a.webPort)
	createService(t, c, a.ns, "authz", pn.PodIP, a.authzPort)
	cert := testutil.SelfSigned(a.host)
	if _, err := c.CoreV1().Secrets(a.ns).Create(ctx, testutil.TLSSecret(a.ns, "cert", cert), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	es := fmt.Sprintf(`{"apiVersion": "projectcontour.io/v1alpha1", "kind": "ExtensionService", "metadata": {"name": "auth"},
		"spec": {"protocol": %q, "services": [{"name": "authz", "port": 80}], "timeoutPolicy": {"response": "30s"}}}`, a.protocol)
	if err := cc.ExtensionREST().Post().Namespace(a.ns).Resource(contourclient.ResourceExtensionServices).Body([]byte(es)).Do(ctx).Error(); err != nil {
		t.Fatalf("creating the ExtensionService: %v", err)
	}
}

// httpsRequest sends one request for host through the controller's HTTPS listener, with
// alice's basic credentials when user is set; a failed exchange is status 0.
func httpsRequest(ctl *controller, host, method, path, body, user string) (int, http.Header, string) {
	addr := ctl.srv.Proxy().ListenerAddr(translate.ListenerHTTPS)
	if addr == "" {
		return 0, nil, ""
	}
	tr := &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{ServerName: host, InsecureSkipVerify: true}, // self-signed test certificate
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(method, "https://"+host+path, strings.NewReader(body))
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
