package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testutil"
)

// TestTenantsCannotTakeEachOthersTraffic: a newer Ingress in another namespace can take
// neither a host's certificate, nor its "/" or default backend, nor its paths.
func TestTenantsCannotTakeEachOthersTraffic(t *testing.T) {
	a, b := testutil.SelfSigned("shop.example.com"), testutil.SelfSigned("shop.example.com")
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "team-a/shop", "team-b/squat"),
		"team-a.yaml": tlsSecretManifestIn("team-a", "tls", a) + `---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: team-a, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  defaultBackend: {service: {name: shop, port: {number: 80}}}
  tls: [{hosts: [shop.example.com], secretName: tls}]
  rules: [{host: shop.example.com, http: {paths: [{path: /api, pathType: Prefix, backend: {service: {name: shop, port: {number: 80}}}}]}}]
`,
		"team-b.yaml": tlsSecretManifestIn("team-b", "tls", b) + `---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: squat, namespace: team-b, creationTimestamp: "2025-01-01T00:00:00Z"}
spec:
  tls: [{hosts: [shop.example.com], secretName: tls}]
  rules:
  - http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: squat, port: {number: 80}}}}]}
  - host: shop.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: squat, port: {number: 80}}}}]}
`,
	})
	for _, path := range []string{"/api", "/other"} {
		if r := e.get("shop.example.com", path); r.service() != "shop" {
			t.Errorf("shop.example.com%s: %d from %q, want team-a's shop", path, r.status, r.service())
		}
	}
	if r := e.get("unknown.example.com", "/"); r.service() != "shop" {
		t.Errorf("unknown host: %d from %q, want team-a's default backend", r.status, r.service())
	}
	if r := e.getTLS("shop.example.com", "/other", false); r.service() != "shop" {
		t.Errorf("https: %d from %q", r.status, r.service())
	}
	conn, err := tlsDial(e.httpsAddr(), "shop.example.com")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0].Raw; string(got) != string(certDER(t, a)) {
		t.Error("shop.example.com is served with a certificate other than team-a's")
	}
}

// TestWildcardHostDoesNotFallThroughToHostlessRules: a host matched by a wildcard rule
// is a known host: an unmatched path is 404, not the hostless rules.
func TestWildcardHostDoesNotFallThroughToHostlessRules(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "api", "any"),
		"ing.yaml": `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: w}
spec:
  rules:
  - host: "*.example.com"
    http: {paths: [{path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}]}
  - host: x.other.com
    http: {paths: [{path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}]}
  - http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: any, port: {number: 80}}}}]}
`,
	})
	for _, tc := range []struct {
		host, path, service string
		status              int
	}{
		{"z.example.com", "/api", "api", 200},
		{"z.example.com", "/other", "", 404},
		{"x.other.com", "/other", "", 404},
		{"a.b.example.com", "/other", "any", 200}, // not matched by the wildcard: any host
		{"nowhere.test", "/api", "any", 200},
	} {
		if r := e.get(tc.host, tc.path); r.status != tc.status || r.service() != tc.service {
			t.Errorf("%s%s: %d from %q, want %d from %q", tc.host, tc.path, r.status, r.service(), tc.status, tc.service)
		}
	}
}

// TestMisdirectedRequest: an HTTP/2 connection opened for one host and reused for another
// that the same certificate covers gets 421, so browsers retry on a new connection.
func TestMisdirectedRequest(t *testing.T) {
	wild := testutil.SelfSigned("*.example.com")
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "a", "b"),
		"ing.yaml": tlsSecretManifestIn("default", "wild", wild) + `---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: two}
spec:
  tls: [{hosts: [a.example.com, b.example.com], secretName: wild}]
  rules:
  - {host: a.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: a, port: {number: 80}}}}]}}
  - {host: b.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: b, port: {number: 80}}}}]}}
`,
	})
	tr := &http.Transport{
		ForceAttemptHTTP2: true,
		TLSClientConfig:   &tls.Config{ServerName: "a.example.com", InsecureSkipVerify: true}, // self-signed test certificate
		DialTLSContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&tls.Dialer{Config: &tls.Config{ServerName: "a.example.com", InsecureSkipVerify: true, NextProtos: []string{"h2"}}}).DialContext(ctx, network, e.httpsAddr())
		},
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	req, _ := http.NewRequest(http.MethodGet, "https://a.example.com/", nil)
	req.Host = "b.example.com" // as a browser reusing a.example.com's connection would
	r := e.do(req, client)
	if r.status != http.StatusMisdirectedRequest {
		t.Errorf("b.example.com over a.example.com's connection: %d from %q, want 421", r.status, r.service())
	}
}

func tlsSecretManifestIn(namespace, name string, c testutil.Cert) string {
	return strings.Replace(tlsSecretManifest(name, c), "metadata: {name: "+name+"}", "metadata: {name: "+name+", namespace: "+namespace+"}", 1)
}

func certDER(t *testing.T, c testutil.Cert) []byte {
	t.Helper()
	pair, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair.Certificate[0]
}
