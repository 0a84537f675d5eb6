package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/portico-dev/portico/internal/kubetest/nodeagent"
)

// pki is the files the API server is started with, all in one directory.
type pki struct {
	caFile     string // CA certificate (PEM); also --client-ca-file
	caPEM      []byte
	certFile   string // serving certificate for 127.0.0.1, ::1 and localhost, signed by the CA
	keyFile    string
	saKeyFile  string // ECDSA P-256 key signing and verifying service account tokens
	tokenFile  string // --token-auth-file
	adminToken string
}

// writePKI generates a CA, a serving certificate signed by it, a service account key
// and a static token file with one admin token (group system:masters) into dir.
func writePKI(dir string) (*pki, error) {
	p := &pki{
		caFile:    filepath.Join(dir, "ca.crt"),
		certFile:  filepath.Join(dir, "apiserver.crt"),
		keyFile:   filepath.Join(dir, "apiserver.key"),
		saKeyFile: filepath.Join(dir, "sa.key"),
		tokenFile: filepath.Join(dir, "tokens.csv"),
	}
	notBefore, notAfter := time.Now().Add(-time.Hour), time.Now().Add(7*24*time.Hour)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "portico-kubetest-ca"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		// The node agent's address too: Pods reach the API server there (StartWorkloads).
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1), net.ParseIP(nodeagent.NodeIP)},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}

	p.adminToken = rand.Text()
	files := map[string][]byte{
		p.caFile:    p.caPEM,
		p.certFile:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		p.keyFile:   ecKeyPEM(key),
		p.saKeyFile: ecKeyPEM(saKey),
		// token,user,uid,"group,..."
		p.tokenFile: fmt.Appendf(nil, "%s,%s,%s,\"system:masters\"\n", p.adminToken, AdminUser, AdminUser),
	}
	for name, data := range files {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func ecKeyPEM(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		panic(err) // only fails for unsupported curves
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err)
	}
	return n
}
