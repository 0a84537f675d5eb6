package e2e

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/testutil"
)

func tlsSecretManifest(name string, c testutil.Cert) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %s}
type: kubernetes.io/tls
data:
  tls.crt: %s
  tls.key: %s
`, name, base64.StdEncoding.EncodeToString(c.CertPEM), base64.StdEncoding.EncodeToString(c.KeyPEM))
}

func TestTLSWithSNI(t *testing.T) {
	one, two := testutil.SelfSigned("one.test"), testutil.SelfSigned("two.test")
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "svc-one", "svc-two"),
		"secrets.yaml":  tlsSecretManifest("one", one) + "---\n" + tlsSecretManifest("two", two),
		"ingress.yaml": `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: tls}
spec:
  tls:
  - {hosts: [one.test], secretName: one}
  - {hosts: [two.test], secretName: two}
  rules:
  - host: one.test
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: svc-one, port: {number: 80}}}}]}
  - host: two.test
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: svc-two, port: {number: 80}}}}]}
`,
	})
	for _, host := range []string{"one.test", "two.test"} {
		for _, h2 := range []bool{false, true} {
			r := e.getTLS(host, "/", h2)
			wantProto := "HTTP/1.1"
			if h2 {
				wantProto = "HTTP/2.0"
			}
			if r.status != 200 || r.service() != "svc-"+strings.TrimSuffix(host, ".test") || r.tlsCert != host || r.proto != wantProto {
				t.Errorf("https://%s (h2=%v): %d from %q, certificate %q, %s", host, h2, r.status, r.service(), r.tlsCert, r.proto)
			}
			if got := r.echo.Headers["X-Forwarded-Proto"]; len(got) != 1 || got[0] != "https" {
				t.Errorf("X-Forwarded-Proto over TLS = %v", got)
			}
		}
	}
	// Ingress TLS does not force HTTPS: the same routes answer on plain HTTP.
	if r := e.get("one.test", "/"); r.service() != "svc-one" {
		t.Errorf("plain HTTP to a TLS host: %d from %q", r.status, r.service())
	}
	// A certificate that does not match its key invalidates TLS for that host only.
	e.write("secrets.yaml", tlsSecretManifest("one", one)+"---\n"+tlsSecretManifest("two", testutil.Cert{CertPEM: two.CertPEM, KeyPEM: one.KeyPEM}))
	e.eventually(5e9, "two.test's HTTPS to stop", func() bool {
		_, err := tryTLS(e, "two.test")
		return err != nil
	})
	if r := e.getTLS("one.test", "/", false); r.service() != "svc-one" {
		t.Errorf("one.test must keep its HTTPS, got %d from %q", r.status, r.service())
	}
	if r := e.get("two.test", "/"); r.service() != "svc-two" {
		t.Errorf("two.test must keep its plain HTTP routes, got %d from %q", r.status, r.service())
	}
}

// tryTLS reports the certificate's name, or the handshake error, for SNI host.
func tryTLS(e *env, host string) (string, error) {
	conn, err := tlsDial(e.httpsAddr(), host)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}
