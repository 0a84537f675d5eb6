// Package xdstls secures the xDS gRPC connection between data planes (Envoy and the
// embedded proxy) and Portico's xDS server with mutual TLS, and generates a small
// self-signed PKI for it, or for the admission webhook's serving certificate
// (`portico certgen`, `portico certgen --webhook`).
//
// Certificates are read from files. Both sides re-read their certificate, key and CA
// bundle on every handshake, so rotating the files (for example a Kubernetes Secret
// volume being updated) takes effect for new connections without a restart, and the
// connections already made are left alone.
package xdstls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/portico-dev/portico/internal/pki"
)

// Files names the PEM files of one side of the xDS connection.
type Files struct {
	CertFile string // this side's certificate (chain)
	KeyFile  string // its private key
	CAFile   string // CA bundle that verifies the peer
}

// Enabled reports whether all three files are set.
func (f Files) Enabled() bool { return f.CertFile != "" && f.KeyFile != "" && f.CAFile != "" }

// Validate returns nil when no file or all files are set, and otherwise an error
// naming the missing flags.
func (f Files) Validate() error {
	if f.CertFile == "" && f.KeyFile == "" && f.CAFile == "" {
		return nil
	}
	var missing []string
	if f.CertFile == "" {
		missing = append(missing, "--xds-tls-cert-file")
	}
	if f.KeyFile == "" {
		missing = append(missing, "--xds-tls-key-file")
	}
	if f.CAFile == "" {
		missing = append(missing, "--xds-tls-ca-file")
	}
	if len(missing) > 0 {
		return fmt.Errorf("xDS TLS is partially configured: %s missing (set all of --xds-tls-cert-file, --xds-tls-key-file and --xds-tls-ca-file, or none)", strings.Join(missing, ", "))
	}
	return nil
}

func (f Files) check() error {
	if err := f.Validate(); err != nil {
		return err
	}
	if !f.Enabled() {
		return errors.New("xDS TLS: no certificate files configured")
	}
	return nil
}

func loadPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("CA file %s: no PEM certificates found", path)
	}
	return pool, nil
}

func loadPair(f Files) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("certificate %s / key %s: %w", f.CertFile, f.KeyFile, err)
	}
	return &cert, nil
}

// serverConfig reads the files and returns the TLS configuration for one handshake.
func serverConfig(f Files) (*tls.Config, error) {
	cert, err := loadPair(f)
	if err != nil {
		return nil, err
	}
	pool, err := loadPool(f.CAFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		NextProtos:   []string{"h2"},
	}, nil
}

// ServerCredentials returns gRPC server credentials that present f's certificate and
// require a client certificate signed by f's CA. The files are read once now (so that
// a bad configuration fails at start-up) and again on every handshake.
func ServerCredentials(f Files) (credentials.TransportCredentials, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	if _, err := serverConfig(f); err != nil {
		return nil, err
	}
	return credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return serverConfig(f)
		},
	}), nil
}

// ClientCredentials returns gRPC client credentials that present f's certificate and
// verify the server against f's CA. serverName, when set, is the name the server's
// certificate must carry; otherwise the host of the dialled address is used. The files
// are read once now (so that a bad configuration fails at start-up) and again on every
// handshake: a rotated certificate or CA bundle (a Secret volume updated in place)
// applies to the next connection, and the connection in use is left alone.
func ClientCredentials(f Files, serverName string) (credentials.TransportCredentials, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	config := func() (*tls.Config, error) { return clientConfig(f) }
	if _, err := config(); err != nil {
		return nil, err
	}
	return DynamicClientCredentials(serverName, config), nil
}

func clientConfig(f Files) (*tls.Config, error) {
	pair, err := loadPair(f)
	if err != nil {
		return nil, err
	}
	pool, err := loadPool(f.CAFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		RootCAs:      pool,
		Certificates: []tls.Certificate{*pair},
	}, nil
}

// DynamicClientCredentials returns gRPC client credentials that ask config for the TLS
// configuration of each handshake, so that certificates and trusted CAs can change
// between connections. serverName, when set, is the name the server's certificate must
// carry (gRPC sends it as the authority); otherwise the dialled host is.
func DynamicClientCredentials(serverName string, config func() (*tls.Config, error)) credentials.TransportCredentials {
	return &dynamicClient{config: config, serverName: serverName}
}

type dynamicClient struct {
	config     func() (*tls.Config, error)
	serverName string
}

// ClientHandshake verifies the server as authority, which gRPC takes from Info's
// ServerName when it is set.
func (d *dynamicClient) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cfg, err := d.config()
	if err != nil {
		return nil, nil, err
	}
	return credentials.NewTLS(cfg).ClientHandshake(ctx, authority, conn)
}

func (d *dynamicClient) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("xdstls: client credentials cannot serve")
}

func (d *dynamicClient) Info() credentials.ProtocolInfo {
	return credentials.NewTLS(&tls.Config{ServerName: d.serverName}).Info()
}

func (d *dynamicClient) Clone() credentials.TransportCredentials {
	c := *d
	return &c
}

// OverrideServerName is part of credentials.TransportCredentials (deprecated there).
func (d *dynamicClient) OverrideServerName(name string) error {
	d.serverName = name
	return nil
}

// File names written by Generate.
const (
	CACertFile     = "ca.crt"
	CAKeyFile      = "ca.key"
	ServerCertFile = "xds.crt"
	ServerKeyFile  = "xds.key"
	ClientCertFile = "client.crt"
	ClientKeyFile  = "client.key"
)

// Generate writes a new CA (ca.crt, ca.key), a server certificate for the xDS server
// (xds.crt, xds.key; its names are serverNames plus localhost and 127.0.0.1) and a
// client certificate for data planes (client.crt, client.key) into dir, all ECDSA
// P-256 and valid for validity. Keys are written with mode 0600.
func Generate(dir string, serverNames []string, validity time.Duration) error {
	now := time.Now()
	ca, err := newCA(dir, "portico-xds-ca", now, validity)
	if err != nil {
		return err
	}
	if err := writePair(dir, CACertFile, CAKeyFile, ca.CertPEM, ca.KeyPEM); err != nil {
		return err
	}
	names := append(append([]string{}, serverNames...), "localhost", "127.0.0.1")
	cn := "localhost"
	if len(serverNames) > 0 && serverNames[0] != "" {
		cn = serverNames[0]
	}
	server, err := ca.Issue(cn, names, pki.ServerAuth, now, validity)
	if err != nil {
		return err
	}
	if err := writePair(dir, ServerCertFile, ServerKeyFile, server.CertPEM, server.KeyPEM); err != nil {
		return err
	}
	client, err := ca.Issue("portico-xds-client", nil, pki.ClientAuth, now, validity)
	if err != nil {
		return err
	}
	return writePair(dir, ClientCertFile, ClientKeyFile, client.CertPEM, client.KeyPEM)
}

// File names written by GenerateWebhook: the names of a kubernetes.io/tls Secret's
// keys, so that a Secret made from them mounts as what --webhook-cert-dir expects.
const (
	WebhookCACertFile = "ca.crt"
	WebhookCertFile   = "tls.crt"
	WebhookKeyFile    = "tls.key"
)

// GenerateWebhook writes a new CA certificate (ca.crt: the caBundle of the
// ValidatingWebhookConfiguration) and a serving certificate for the admission webhook
// signed by it (tls.crt, tls.key) into dir, ECDSA P-256 and valid for validity. The
// serving certificate's names are exactly serverNames (DNS names or IPs); the API
// server calls a webhook Service as <service>.<namespace>.svc. The CA's key is not
// kept: to rotate, generate everything again and replace the caBundle.
func GenerateWebhook(dir string, serverNames []string, validity time.Duration) error {
	dns, ips := pki.SplitNames(serverNames)
	if len(dns) == 0 && len(ips) == 0 {
		return errors.New("the webhook certificate needs at least one server name")
	}
	now := time.Now()
	ca, err := newCA(dir, "portico-webhook-ca", now, validity)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, WebhookCACertFile), ca.CertPEM, 0o644); err != nil {
		return err
	}
	cn := ""
	if len(dns) > 0 {
		cn = dns[0]
	} else {
		cn = ips[0].String()
	}
	leaf, err := ca.Issue(cn, serverNames, pki.ServerAuth, now, validity)
	if err != nil {
		return err
	}
	return writePair(dir, WebhookCertFile, WebhookKeyFile, leaf.CertPEM, leaf.KeyPEM)
}

// newCA creates dir and a self-signed CA called cn, valid for validity.
func newCA(dir, cn string, now time.Time, validity time.Duration) (*pki.CA, error) {
	if validity <= 0 {
		return nil, fmt.Errorf("validity must be positive, got %s", validity)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return pki.NewCA(cn, now, validity)
}

func writePair(dir, certFile, keyFile string, certPEM, keyPEM []byte) error {
	if err := writeFile(filepath.Join(dir, keyFile), keyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, certFile), certPEM, 0o644)
}

// writeFile writes data with mode perm, also when the file already exists.
func writeFile(path string, data []byte, perm os.FileMode) error {
	if err := os.WriteFile(path, data, perm); err != nil {
		return err
	}
	return os.Chmod(path, perm)
}

func readLeaf(certFile string) (*x509.Certificate, error) {
	data, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate found", certFile)
	}
	return x509.ParseCertificate(block.Bytes)
}

// CertificateName returns a name the certificate in certFile is valid for (its first
// DNS name, else its first IP address), for a client that must verify it while
// dialling an address the certificate does not name (such as 0.0.0.0).
func CertificateName(certFile string) (string, error) {
	c, err := readLeaf(certFile)
	if err != nil {
		return "", err
	}
	switch {
	case len(c.DNSNames) > 0:
		return c.DNSNames[0], nil
	case len(c.IPAddresses) > 0:
		return c.IPAddresses[0].String(), nil
	}
	return "", fmt.Errorf("%s: the certificate has no DNS or IP subject alternative name", certFile)
}

// AllowsClientAuth reports whether the certificate in certFile may be used as a TLS
// client certificate (no extended key usage, or one that includes client auth).
func AllowsClientAuth(certFile string) (bool, error) {
	c, err := readLeaf(certFile)
	if err != nil {
		return false, err
	}
	if len(c.ExtKeyUsage) == 0 {
		return true, nil
	}
	for _, u := range c.ExtKeyUsage {
		if u == x509.ExtKeyUsageClientAuth || u == x509.ExtKeyUsageAny {
			return true, nil
		}
	}
	return false, nil
}
