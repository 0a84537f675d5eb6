package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/echo"
	"github.com/portico-dev/portico/internal/proxy"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/server"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// TestGatewayAPIEndToEnd serves a Gateway with an HTTP and an HTTPS listener through
// the embedded proxy on the translated resources, and sends real requests to `portico
// echo` backends: each listener's routes answer on its own address, for its own hosts.
func TestGatewayAPIEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plain := testutil.StartEcho(t, echo.Config{Service: "plain"})
	secure := testutil.StartEcho(t, echo.Config{Service: "secure"})
	cert := testutil.SelfSigned("secure.example.com")

	objs := testutil.DecodeObjects(t, `kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: portico
  listeners:
  - {name: http, protocol: HTTP, port: 80}
  - {name: https, protocol: HTTPS, port: 443, hostname: secure.example.com, tls: {certificateRefs: [{name: cert}]}}
---
kind: HTTPRoute
metadata: {name: plain, namespace: default}
spec:
  parentRefs: [{name: gw, sectionName: http}]
  rules:
  - matches: [{path: {value: /app}}]
    filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: x-route, value: plain}]}}]
    backendRefs: [{name: plain, port: 80}]
---
kind: HTTPRoute
metadata: {name: secure, namespace: default}
spec:
  parentRefs: [{name: gw, sectionName: https}]
  rules: [{backendRefs: [{name: secure, port: 80}]}]`)
	objs = append(objs, echoService(t, "plain", plain), echoEndpoints(t, "plain", plain), echoService(t, "secure", secure), echoEndpoints(t, "secure", secure),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cert"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: cert.CertPEM, corev1.TLSPrivateKeyKey: cert.KeyPEM}})

	g := dag.Build(store.FromObjects(objs), withGatewayAPI(dag.Options{}))
	for _, st := range g.Statuses {
		if st.Status != dag.StatusValid {
			t.Fatalf("%s: %s: %s", st.Object, st.Status, st.Description)
		}
	}
	res, err := translate.Translate(g, translate.Options{HTTPAddress: "127.0.0.1:0", HTTPSAddress: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(slog.New(slog.DiscardHandler), nil)
	if _, err := srv.Publish(ctx, res); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		if err := <-served; err != nil {
			t.Errorf("xDS server: %v", err)
		}
	})

	gw := types.NamespacedName{Namespace: "default", Name: "gw"}
	httpName, httpsName := translate.GatewayListenerName(gw, 80), translate.GatewayListenerName(gw, 443)
	p := proxy.New(proxy.Config{
		XDSAddress: lis.Addr().String(),
		ListenerAddrs: map[string]string{translate.ListenerHTTP: "127.0.0.1:0", translate.ListenerHTTPS: "127.0.0.1:0",
			httpName: "127.0.0.1:0", httpsName: "127.0.0.1:0"},
		Logger: slog.New(slog.DiscardHandler),
	})
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	t.Cleanup(func() {
		if err := <-ran; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	testutil.Eventually(t, 30*time.Second, "the proxy is ready with both Gateway listeners", func() bool {
		return p.Ready() && p.ListenerAddr(httpName) != "" && p.ListenerAddr(httpsName) != ""
	})

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{ServerName: "secure.example.com", InsecureSkipVerify: true}}}
	get := func(url, host string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s (Host %s): %v", url, host, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var answer struct{ Service string }
		_ = json.Unmarshal(body, &answer)
		return resp.StatusCode, answer.Service, resp.Header
	}

	httpAddr, httpsAddr := p.ListenerAddr(httpName), p.ListenerAddr(httpsName)
	if code, svc, h := get("http://"+httpAddr+"/app/x", "any.example.org"); code != 200 || svc != "plain" || h.Get("X-Route") != "plain" {
		t.Errorf("HTTP listener /app/x: %d from %q (x-route %q), want 200 from plain with x-route plain", code, svc, h.Get("X-Route"))
	}
	if code, _, _ := get("http://"+httpAddr+"/other", "any.example.org"); code != 404 {
		t.Errorf("HTTP listener /other: %d, want 404 (no route)", code)
	}
	if code, svc, _ := get("https://"+httpsAddr+"/anything", "secure.example.com"); code != 200 || svc != "secure" {
		t.Errorf("HTTPS listener: %d from %q, want 200 from secure", code, svc)
	}
	// The HTTPS listener's routes are not the HTTP listener's, and the reverse.
	if code, svc, _ := get("http://"+httpAddr+"/anything", "secure.example.com"); code != 404 {
		t.Errorf("HTTP listener, Host secure.example.com: %d from %q, want 404", code, svc)
	}
	if code, svc, _ := get("https://"+httpsAddr+"/app", "secure.example.com"); svc != "secure" {
		t.Errorf("HTTPS listener /app: %d from %q, want the secure listener's route", code, svc)
	}
}

// echoService is a Service with port 80 for an echo backend at addr.
func echoService(t *testing.T, name, addr string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
}

// echoEndpoints points the Service's port at the echo backend at addr.
func echoEndpoints(t *testing.T, name, addr string) *corev1.Endpoints {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: host}}, Ports: []corev1.EndpointPort{{Port: int32(n)}}}}}
}
