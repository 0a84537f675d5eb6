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
	"k8s.io/apimachinery/pkg/runtime"
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
  - matches: [{path: {value: /strip}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}]
    backendRefs: [{name: plain, port: 80}]
---
kind: HTTPRoute
metadata: {name: secure, namespace: default}
spec:
  parentRefs: [{name: gw, sectionName: https}]
  rules: [{backendRefs: [{name: secure, port: 80}]}]`)
	objs = append(objs, echoService(t, "plain", plain), echoEndpoints(t, "plain", plain), echoService(t, "secure", secure), echoEndpoints(t, "secure", secure),
		testutil.TLSSecret("default", "cert", cert))

	gw := types.NamespacedName{Namespace: "default", Name: "gw"}
	httpName, httpsName := translate.GatewayListenerName(gw, 80), translate.GatewayListenerName(gw, 443)
	p := serveGateways(t, ctx, objs, httpName, httpsName)

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{ServerName: "secure.example.com", InsecureSkipVerify: true}}}
	// getPath returns the status, the backend's service and the path it saw.
	getPath := func(url, host string) (int, string, string, http.Header) {
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
		var answer struct{ Service, Path string }
		_ = json.Unmarshal(body, &answer)
		return resp.StatusCode, answer.Service, answer.Path, resp.Header
	}
	get := func(url, host string) (int, string, http.Header) {
		t.Helper()
		code, service, _, h := getPath(url, host)
		return code, service, h
	}

	httpAddr, httpsAddr := p.ListenerAddr(httpName), p.ListenerAddr(httpsName)
	for path, want := range map[string]string{"/strip/x/y": "/x/y", "/strip": "/"} {
		if code, _, got, _ := getPath("http://"+httpAddr+path, "any.example.org"); code != 200 || got != want {
			t.Errorf("HTTP listener %s: %d, backend saw %q, want %q", path, code, got, want)
		}
	}
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

// TestGatewayAPIPassthroughEndToEnd serves, on one port, a TLS listener that passes
// the connections for a TLSRoute's host through to a backend that terminates TLS itself,
// and an HTTPS listener without a hostname that terminates every other server name; a
// server name within the TLS listener's hostname that no TLSRoute serves is closed, not
// left to the HTTPS listener. On another port a TLS listener terminates TLS and sends
// its TLSRoute the decrypted stream.
func TestGatewayAPIPassthroughEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := testutil.StartTLSEcho(t, echo.Config{Service: "db"}, testutil.SelfSigned("db.example.com"))
	plain := testutil.StartEcho(t, echo.Config{Service: "plain"})
	anyCert := testutil.SelfSigned("portico.example.com")
	objs := testutil.DecodeObjects(t, gatewayGW+`
  - {name: tls, protocol: TLS, port: 443, hostname: "*.example.com", tls: {mode: Passthrough}}
  - {name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: any}]}}
  - {name: term, protocol: TLS, port: 8443, hostname: term.example.com, tls: {mode: Terminate, certificateRefs: [{name: any}]}}
---
kind: TLSRoute
metadata: {name: term}
spec:
  parentRefs: [{name: gw, sectionName: term}]
  rules: [{backendRefs: [{name: plain, port: 80}]}]
---
kind: TLSRoute
metadata: {name: db}
spec:
  parentRefs: [{name: gw, sectionName: tls}]
  hostnames: [db.example.com]
  rules: [{backendRefs: [{name: db, port: 80}]}]
---
kind: HTTPRoute
metadata: {name: plain}
spec:
  parentRefs: [{name: gw, sectionName: https}]
  rules: [{backendRefs: [{name: plain, port: 80}]}]`)
	objs = append(objs, echoService(t, "db", db), echoEndpoints(t, "db", db), echoService(t, "plain", plain), echoEndpoints(t, "plain", plain),
		testutil.TLSSecret("default", "any", anyCert))
	gw := types.NamespacedName{Namespace: "default", Name: "gw"}
	name, termName := translate.GatewayListenerName(gw, 443), translate.GatewayListenerName(gw, 8443)
	p := serveGateways(t, ctx, objs, name, termName)
	addr, termAddr := p.ListenerAddr(name), p.ListenerAddr(termName)

	for _, tc := range []struct{ addr, sni, service, certFor string }{
		{addr, "db.example.com", "db", "db.example.com"},               // passed through: the backend's certificate
		{addr, "other.org", "plain", "portico.example.com"},            // terminated by the hostname-less listener
		{termAddr, "term.example.com", "plain", "portico.example.com"}, // terminated, then a TCP stream
	} {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{ServerName: tc.sni, InsecureSkipVerify: true}}}
		resp, err := client.Get("https://" + tc.addr + "/")
		if err != nil {
			t.Errorf("SNI %s: %v", tc.sni, err)
			continue
		}
		var answer struct{ Service string }
		_ = json.NewDecoder(resp.Body).Decode(&answer)
		resp.Body.Close()
		if answer.Service != tc.service {
			t.Errorf("SNI %s: answered by %q, want %q", tc.sni, answer.Service, tc.service)
		}
		if got := resp.TLS.PeerCertificates[0].DNSNames; len(got) == 0 || got[0] != tc.certFor {
			t.Errorf("SNI %s: certificate for %v, want %s", tc.sni, got, tc.certFor)
		}
	}
	// web.example.com is the TLS listener's (*.example.com) and no TLSRoute has it.
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "web.example.com", InsecureSkipVerify: true})
	if err == nil {
		conn.Close()
		t.Errorf("SNI web.example.com: TLS handshake with the certificate for %v, want the connection closed", conn.ConnectionState().PeerCertificates[0].DNSNames)
	}
}

// gatewayGW starts the manifests of the end-to-end tests: a GatewayClass of Portico's
// and Gateway default/gw of that class, whose listeners follow.
const gatewayGW = `kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: portico
  listeners:`

// serveGateways builds and translates objs, serves them to an embedded proxy whose
// listeners named in listeners bind ephemeral loopback ports, and returns the proxy
// once it is ready with them all.
func serveGateways(t *testing.T, ctx context.Context, objs []runtime.Object, listeners ...string) *proxy.Proxy {
	t.Helper()
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
	addrs := map[string]string{translate.ListenerHTTP: "127.0.0.1:0", translate.ListenerHTTPS: "127.0.0.1:0"}
	for _, name := range listeners {
		addrs[name] = "127.0.0.1:0"
	}
	// The data plane of the Gateway whose listeners are named, as serve deploys one.
	gw, ok := translate.GatewayOf(listeners[0])
	if !ok {
		t.Fatalf("%s is not a Gateway's listener", listeners[0])
	}
	p := proxy.New(proxy.Config{XDSAddress: lis.Addr().String(), Gateway: gw.String(), ListenerAddrs: addrs, Logger: slog.New(slog.DiscardHandler)})
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	t.Cleanup(func() {
		if err := <-ran; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	testutil.Eventually(t, 30*time.Second, "the proxy is ready with the Gateway's listeners", func() bool {
		if !p.Ready() {
			return false
		}
		for _, name := range listeners {
			if p.ListenerAddr(name) == "" {
				return false
			}
		}
		return true
	})
	return p
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

// TestGatewayAPISeveralCertificatesEndToEnd serves an HTTPS listener with two
// certificateRefs: each client gets the certificate of the name it asked for (SNI),
// the first one when neither matches.
func TestGatewayAPISeveralCertificatesEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	web := testutil.StartEcho(t, echo.Config{Service: "web"})
	objs := testutil.DecodeObjects(t, gatewayGW+`
  - {name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: a}, {name: b}]}}
---
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: web, port: 80}]}]`)
	objs = append(objs, echoService(t, "web", web), echoEndpoints(t, "web", web),
		testutil.TLSSecret("default", "a", testutil.SelfSigned("a.example.com")), testutil.TLSSecret("default", "b", testutil.SelfSigned("b.example.com")))
	name := translate.GatewayListenerName(types.NamespacedName{Namespace: "default", Name: "gw"}, 443)
	addr := serveGateways(t, ctx, objs, name).ListenerAddr(name)
	for sni, want := range map[string]string{"a.example.com": "a.example.com", "b.example.com": "b.example.com", "c.example.com": "a.example.com"} {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{ServerName: sni, InsecureSkipVerify: true}}}
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/", nil)
		req.Host = sni
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("SNI %s: %v", sni, err)
			continue
		}
		resp.Body.Close()
		if got := resp.TLS.PeerCertificates[0].DNSNames; resp.StatusCode != 200 || len(got) == 0 || got[0] != want {
			t.Errorf("SNI %s: %d with the certificate for %v, want 200 with %s's", sni, resp.StatusCode, got, want)
		}
	}
}

// gatewayWithListenerSet is Gateway default/gw with an HTTP listener on port 80 and
// ListenerSet default/extra, whose listener team takes team.example.com on port 8080.
const gatewayWithListenerSet = gatewayGW + `
  - {name: http, protocol: HTTP, port: 80}
  allowedListeners: {namespaces: {from: Same}}
---
kind: ListenerSet
metadata: {name: extra}
spec:
  parentRef: {name: gw}
  listeners: [{name: team, protocol: HTTP, port: 8080, hostname: team.example.com}]`

// TestListenerSetEndToEnd serves a Gateway whose ListenerSet adds a listener on a port
// of its own: a route attached to the ListenerSet answers there, and only for the
// ListenerSet listener's hostname.
func TestListenerSetEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	web := testutil.StartEcho(t, echo.Config{Service: "web"})
	objs := testutil.DecodeObjects(t, gatewayWithListenerSet+`
---
kind: HTTPRoute
metadata: {name: team}
spec:
  parentRefs: [{kind: ListenerSet, group: gateway.networking.k8s.io, name: extra}]
  rules: [{backendRefs: [{name: web, port: 80}]}]`)
	objs = append(objs, echoService(t, "web", web), echoEndpoints(t, "web", web))
	gw := types.NamespacedName{Namespace: "default", Name: "gw"}
	httpName, teamName := translate.GatewayListenerName(gw, 80), translate.GatewayListenerName(gw, 8080)
	p := serveGateways(t, ctx, objs, httpName, teamName)
	client := &http.Client{Timeout: 10 * time.Second}
	for _, tc := range []struct {
		addr, host string
		code       int
	}{
		{p.ListenerAddr(teamName), "team.example.com", 200},
		{p.ListenerAddr(teamName), "other.example.com", 404},
		{p.ListenerAddr(httpName), "team.example.com", 404}, // the Gateway's own listener has no route
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+tc.addr+"/", nil)
		req.Host = tc.host
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s, Host %s: %v", tc.addr, tc.host, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s, Host %s: %d, want %d", tc.addr, tc.host, resp.StatusCode, tc.code)
		}
	}
}

// TestBackendTLSPolicyEndToEnd sends a Gateway's requests to a backend that serves
// TLS (`portico echo --tls-cert --tls-key`): with a BackendTLSPolicy whose CA signed
// its certificate they arrive over TLS; with one whose CA did not, they fail (5xx)
// rather than reach it unverified.
func TestBackendTLSPolicyEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cert := testutil.SelfSigned("secure.example.com") // its own CA
	backend := testutil.StartTLSEcho(t, echo.Config{Service: "secure"}, cert)
	objs := testutil.DecodeObjects(t, httpRouteOnGW+`
  - matches: [{path: {value: /good}}]
    backendRefs: [{name: good, port: 80}]
  - matches: [{path: {value: /bad}}]
    backendRefs: [{name: bad, port: 80}]
---
kind: BackendTLSPolicy
metadata: {name: good}
spec:
  targetRefs: [{group: "", kind: Service, name: good}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: right-ca}], hostname: secure.example.com}
---
kind: BackendTLSPolicy
metadata: {name: bad}
spec:
  targetRefs: [{group: "", kind: Service, name: bad}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: wrong-ca}], hostname: secure.example.com}`)
	caMap := func(name string, pem []byte) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: map[string]string{"ca.crt": string(pem)}}
	}
	objs = append(objs, echoService(t, "good", backend), echoEndpoints(t, "good", backend), echoService(t, "bad", backend), echoEndpoints(t, "bad", backend),
		caMap("right-ca", cert.CertPEM), caMap("wrong-ca", testutil.SelfSigned("secure.example.com").CertPEM))
	name := translate.GatewayListenerName(types.NamespacedName{Namespace: "default", Name: "gw"}, 80)
	addr := serveGateways(t, ctx, objs, name).ListenerAddr(name)
	if code, answer := getEcho(t, "http://"+addr+"/good"); code != 200 || answer.Service != "secure" || !answer.TLS {
		t.Errorf("/good: %d from %q (TLS %t), want 200 from secure over TLS", code, answer.Service, answer.TLS)
	}
	if code, _ := getEcho(t, "http://"+addr+"/bad"); code < 500 {
		t.Errorf("/bad (certificate not signed by the policy's CA): %d, want 5xx", code)
	}
}

// httpRouteOnGW is Gateway default/gw with one HTTP listener on port 80 and HTTPRoute
// default/r attached to it, whose rules follow.
const httpRouteOnGW = gatewayGW + `
  - {name: http, protocol: HTTP, port: 80}
---
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: gw}]
  rules:`

// echoAnswer is what these tests read of a `portico echo` answer.
type echoAnswer struct {
	Service string
	TLS     bool
}

// getEcho sends a GET to url and returns the status and the echo backend's answer
// (zero when the proxy answered itself).
func getEcho(t *testing.T, url string) (int, echoAnswer) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer echoAnswer
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	return resp.StatusCode, answer
}

// TestBackendTLSPolicySANsEndToEnd: BackendTLSPolicies whose subjectAltNames are
// hostnames, URIs (a SPIFFE ID) or both, in front of one `portico echo` TLS backend
// whose certificate carries abc.example.com and spiffe://abc.example.com/test-identity.
// A policy naming any SAN of the certificate reaches it over TLS; one naming none gets
// 5xx from the proxy.
func TestBackendTLSPolicySANsEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cert := testutil.SelfSignedWithURIs([]string{"spiffe://abc.example.com/test-identity"}, "abc.example.com", "other.example.com")
	backend := testutil.StartTLSEcho(t, echo.Config{Service: "secure"}, cert)
	cases := []struct {
		name     string
		sans     string
		accepted bool
	}{
		{"san-dns", `[{type: Hostname, hostname: abc.example.com}]`, true},
		{"san-dns-mismatch", `[{type: Hostname, hostname: dce.example.com}]`, false},
		{"san-uri", `[{type: URI, uri: "spiffe://abc.example.com/test-identity"}]`, true},
		{"san-uri-mismatch", `[{type: URI, uri: "spiffe://def.example.com/test-identity"}]`, false},
		{"multiple-sans", `[{type: URI, uri: "spiffe://def.example.com/test-identity"}, {type: Hostname, hostname: abc.example.com}]`, true},
		{"multiple-mismatch-sans", `[{type: URI, uri: "spiffe://def.example.com/test-identity"}, {type: Hostname, hostname: def.example.com}]`, false},
	}
	manifests := httpRouteOnGW
	var policies string
	objs := []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ca"}, Data: map[string]string{"ca.crt": string(cert.CertPEM)}}}
	for _, tc := range cases {
		manifests += `
  - matches: [{path: {type: Exact, value: /` + tc.name + `}}]
    backendRefs: [{name: ` + tc.name + `, port: 80}]`
		policies += `
---
kind: BackendTLSPolicy
metadata: {name: ` + tc.name + `}
spec:
  targetRefs: [{group: "", kind: Service, name: ` + tc.name + `}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}]
    hostname: abc.example.com
    subjectAltNames: ` + tc.sans
		objs = append(objs, echoService(t, tc.name, backend), echoEndpoints(t, tc.name, backend))
	}
	objs = append(objs, testutil.DecodeObjects(t, manifests+policies)...)
	name := translate.GatewayListenerName(types.NamespacedName{Namespace: "default", Name: "gw"}, 80)
	addr := serveGateways(t, ctx, objs, name).ListenerAddr(name)
	for _, tc := range cases {
		code, answer := getEcho(t, "http://"+addr+"/"+tc.name)
		switch {
		case tc.accepted && (code != 200 || answer.Service != "secure" || !answer.TLS):
			t.Errorf("/%s: %d from %q (TLS %t), want 200 from secure over TLS", tc.name, code, answer.Service, answer.TLS)
		case !tc.accepted && (code < 500 || answer.Service != ""):
			t.Errorf("/%s (no SAN of the certificate listed): %d from %q, want 5xx from the proxy", tc.name, code, answer.Service)
		}
	}
}
