package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"text/template"
	"time"
)

// smallBody is the backend's fixed response, the size of a small API answer.
const smallBody = "hello from the benchmark backend\n"

// largeSize is the size of the large-response scenario's file.
const largeSize = 1 << 20

// ports are the loopback ports of every server, chosen free at start.
type ports struct {
	Backend                                 int
	PorticoHTTP, PorticoHTTPS, PorticoAdmin int
	PorticoPprof                            int // --pprof-addr, for -cpuprofile
	NginxHTTP, NginxHTTPS                   int
	// The baseline portico's, when there is one.
	BaselineHTTP, BaselineHTTPS, BaselineAdmin int
}

func freePorts() (ports, error) {
	var ps [10]int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := range ps {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ports{}, err
		}
		lns = append(lns, ln)
		ps[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports{Backend: ps[0], PorticoHTTP: ps[1], PorticoHTTPS: ps[2], PorticoAdmin: ps[3], NginxHTTP: ps[4], NginxHTTPS: ps[5],
		BaselineHTTP: ps[6], BaselineHTTPS: ps[7], BaselineAdmin: ps[8], PorticoPprof: ps[9]}, nil
}

// freePort is one more free loopback port (for the -bare sides).
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// url is a base URL on localhost: the name the certificate and the Ingress
// carry, so that SNI and Host match on both sides.
func url(scheme string, port int) string {
	return scheme + "://localhost:" + strconv.Itoa(port)
}

// writeFiles writes the certificate, the nginx configurations, the backend's
// files and Portico's manifests into the work directory.
func (b *bench) writeFiles() error {
	certPEM, keyPEM, err := selfSignedCert()
	if err != nil {
		return err
	}
	for _, d := range []string{"manifests", "www", "tmp", "nginx-vhosts"} {
		if err := os.MkdirAll(filepath.Join(b.dir, d), 0o755); err != nil {
			return err
		}
	}
	large := bytes.Repeat([]byte("0123456789abcdef"), largeSize/16)
	files := map[string][]byte{
		"tls.crt":  certPEM,
		"tls.key":  keyPEM,
		"www/1mb":  large,
		"www/body": []byte(smallBody),
	}
	data := map[string]any{
		"Dir":     b.dir,
		"Ports":   b.ports,
		"Body":    smallBody,
		"CertB64": base64.StdEncoding.EncodeToString(certPEM),
		"KeyB64":  base64.StdEncoding.EncodeToString(keyPEM),
	}
	for name, tmpl := range map[string]string{
		"nginx-backend.conf":       nginxBackendConf,
		"nginx-proxy.conf":         nginxProxyConf,
		"manifests/backend.yaml":   porticoManifests,
		"manifests/bench-tls.yaml": porticoSecret,
	} {
		content, err := render(name, tmpl, data)
		if err != nil {
			return err
		}
		files[name] = content
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(b.dir, name), content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// render executes tmpl, which may use the templates "location" (nginx) and
// "rule" (an Ingress's), on data.
func render(name, tmpl string, data any) ([]byte, error) {
	t := template.Must(template.New(name).Parse(nginxLocation + ingressRule))
	template.Must(t.Parse(tmpl))
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// selfSignedCert returns a P-256 certificate for localhost and 127.0.0.1,
// the key type most deployments serve.
func selfSignedCert() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// The backend: one nginx worker answering a fixed body or a 1 MiB file.
// keepalive_requests is raised on every nginx so that no side reconnects
// every 1000 requests (Portico, like Envoy, has no such limit).
const nginxBackendConf = `user root;
daemon off;
worker_processes 1;
pid {{.Dir}}/nginx-backend.pid;
error_log {{.Dir}}/nginx-backend-error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  keepalive_requests 10000000;
  client_body_temp_path {{.Dir}}/tmp/backend-body;
  proxy_temp_path {{.Dir}}/tmp/backend-proxy;
  fastcgi_temp_path {{.Dir}}/tmp/backend-fastcgi;
  uwsgi_temp_path {{.Dir}}/tmp/backend-uwsgi;
  scgi_temp_path {{.Dir}}/tmp/backend-scgi;
  server {
    listen 127.0.0.1:{{.Ports.Backend}} backlog=4096;
    location = /1mb { root {{.Dir}}/www; default_type application/octet-stream; }
    location / { default_type text/plain; return 200 "{{.Body}}"; }
  }
}
`

// The nginx under test: one worker, upstream keepalive (the counterpart of
// Portico's and Envoy's connection pools), the headers Portico adds (X-Forwarded-For,
// X-Forwarded-Proto, X-Request-Id to the upstream and the client) and a buffered
// access log line per request, as Portico logs every request. Responses larger
// than its buffers stream through instead of going to a temporary file on disk,
// as they stream through Portico.
const nginxProxyConf = `user root;
daemon off;
worker_processes 1;
pid {{.Dir}}/nginx-proxy.pid;
error_log {{.Dir}}/nginx-proxy-error.log warn;
events { worker_connections 8192; }
http {
  access_log {{.Dir}}/nginx-proxy-access.log combined buffer=64k flush=1s;
  keepalive_requests 10000000;
  client_body_temp_path {{.Dir}}/tmp/proxy-body;
  proxy_temp_path {{.Dir}}/tmp/proxy-proxy;
  fastcgi_temp_path {{.Dir}}/tmp/proxy-fastcgi;
  uwsgi_temp_path {{.Dir}}/tmp/proxy-uwsgi;
  scgi_temp_path {{.Dir}}/tmp/proxy-scgi;
  upstream backend {
    server 127.0.0.1:{{.Ports.Backend}};
    keepalive 512;
    keepalive_requests 10000000;
  }
  server {
    listen 127.0.0.1:{{.Ports.NginxHTTP}} backlog=4096;
    listen 127.0.0.1:{{.Ports.NginxHTTPS}} ssl http2 backlog=4096;
    server_name localhost;
    ssl_certificate {{.Dir}}/tls.crt;
    ssl_certificate_key {{.Dir}}/tls.key;
    {{template "location"}}
  }
  # The vhosts10k scenario's server blocks (vhosts.go), written before it runs.
  include {{.Dir}}/nginx-vhosts/*.conf;
}
`

// nginxLocation is what the nginx under test does with a request, in the
// localhost server and in each of the vhosts10k scenario's.
const nginxLocation = `{{define "location"}}location / {
      proxy_pass http://backend;
      proxy_max_temp_file_size 0;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Request-Id $request_id;
      add_header X-Request-Id $request_id;
    }{{end}}`

// Portico's side: an Ingress for localhost (plain and TLS) routing to a Service
// whose Endpoints are the backend.
const porticoManifests = `apiVersion: v1
kind: Service
metadata: {name: backend, namespace: default}
spec:
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: backend, namespace: default}
subsets:
- addresses: [{ip: 127.0.0.1}]
  ports: [{name: http, port: {{.Ports.Backend}}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: bench, namespace: default}
spec:
  tls: [{hosts: [localhost], secretName: bench-tls}]
  rules:
{{template "rule" "localhost"}}`

// ingressRule is the rule of Portico's Ingresses, for the host it is given:
// everything to the backend's Service.
const ingressRule = `{{define "rule"}}  - host: {{.}}
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service: {name: backend, port: {name: http}}
{{end}}`

const porticoSecret = `apiVersion: v1
kind: Secret
metadata: {name: bench-tls, namespace: default}
type: kubernetes.io/tls
data:
  tls.crt: {{.CertB64}}
  tls.key: {{.KeyB64}}
`

// waitReady waits until both of a side's URLs answer 200 through the proxy.
func waitReady(ctx context.Context, s *side, logFile string) error {
	for _, u := range []string{s.http + "/", s.https + "/"} {
		if err := waitURL(ctx, u, "", logFile); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// waitURL waits until u answers 200, asked for host when it is not "" (a proxy
// that has just been given 10,000 hosts may take a while).
func waitURL(ctx context.Context, u, host, logFile string) error {
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // our own self-signed certificate
	}
	what := u
	if host != "" {
		what += " for " + host
	}
	deadline := time.Now().Add(120 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		if host != "" {
			req.Host = host
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %w (%v); log:\n%s", what, errNotReady, err, tail(logFile))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
