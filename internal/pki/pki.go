// Package pki issues the certificates Portico needs for its own connections: a small
// certificate authority, and leaf certificates signed by it for the xDS server, the data
// planes that connect to it, and the admission webhook. It keeps no state: the
// controller keeps its authority in Secrets and rotates it (internal/managedtls), and
// `portico certgen` writes one to files (internal/xds/xdstls).
//
// Keys are ECDSA P-256. Certificates are backdated by Backdate so that a peer whose
// clock is a little behind accepts them at once.
package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Backdate is how long before its issue a certificate becomes valid: the clock skew
// tolerated between the issuer and the peers that verify it.
const Backdate = 5 * time.Minute

// Usage says what a leaf certificate is for.
type Usage int

const (
	// ServerAuth certificates identify a TLS server by name.
	ServerAuth Usage = iota
	// ClientAuth certificates identify a TLS client (a data plane) and name no host.
	ClientAuth
)

// CA is a certificate authority: a self-signed certificate and its key.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
	key     *ecdsa.PrivateKey
}

// Leaf is a certificate issued by a CA, with its key.
type Leaf struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA creates a self-signed CA called commonName, valid from now (less Backdate)
// for validity.
func NewCA(commonName string, now time.Time, validity time.Duration) (*CA, error) {
	if validity <= 0 {
		return nil, fmt.Errorf("validity must be positive, got %s", validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	cert, certPEM, keyPEM, err := sign(tmpl, tmpl, key, key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: certPEM, KeyPEM: keyPEM, key: key}, nil
}

// sign creates tmpl's certificate for key, signed by parent's signer, and returns it
// parsed and in PEM, with key in PEM.
func sign(tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) (*x509.Certificate, []byte, []byte, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return cert, encodeCert(der), keyPEM, nil
}

// ParseCA reads a CA from its PEM certificate and key, and checks that they belong
// together and that the certificate may sign others.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the CA key is a %T, want an ECDSA key", pair.PrivateKey)
	}
	if !pair.Leaf.IsCA || pair.Leaf.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("the certificate is not a CA certificate")
	}
	return &CA{Cert: pair.Leaf, CertPEM: certPEM, KeyPEM: keyPEM, key: key}, nil
}

// Issue signs a new key's certificate for names (DNS names or IP addresses; for
// ServerAuth at least one), valid from now (less Backdate) for validity, but never
// beyond the CA's own expiry.
func (ca *CA) Issue(commonName string, names []string, usage Usage, now time.Time, validity time.Duration) (*Leaf, error) {
	if validity <= 0 {
		return nil, fmt.Errorf("validity must be positive, got %s", validity)
	}
	dns, ips := SplitNames(names)
	if usage == ServerAuth && len(dns) == 0 && len(ips) == 0 {
		return nil, errors.New("a server certificate needs at least one name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	eku := x509.ExtKeyUsageServerAuth
	if usage == ClientAuth {
		eku = x509.ExtKeyUsageClientAuth
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		DNSNames:              dns,
		IPAddresses:           ips,
		NotBefore:             now.Add(-Backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{eku},
		BasicConstraintsValid: true,
	}
	cert, certPEM, keyPEM, err := sign(tmpl, ca.Cert, key, ca.key)
	if err != nil {
		return nil, err
	}
	return &Leaf{Cert: cert, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// TLSCertificate returns the leaf as a tls.Certificate.
func (l *Leaf) TLSCertificate() (*tls.Certificate, error) {
	pair, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		return nil, err
	}
	return &pair, nil
}

// ParseLeaf reads a leaf certificate and its key.
func ParseLeaf(certPEM, keyPEM []byte) (*Leaf, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &Leaf{Cert: pair.Leaf, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// IssuedBy reports whether ca signed the leaf.
func (l *Leaf) IssuedBy(ca *x509.Certificate) bool {
	return bytes.Equal(l.Cert.RawIssuer, ca.RawSubject) && l.Cert.CheckSignatureFrom(ca) == nil
}

// Names returns the leaf's DNS names and IP addresses, as Issue takes them.
func (l *Leaf) Names() []string {
	out := slices.Clone(l.Cert.DNSNames)
	for _, ip := range l.Cert.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}

// DueForRenewal reports whether c has less than a third of its lifetime left at now (or
// none): renewing then leaves peers a third of the lifetime's worth of margin, however
// long it is. A certificate not valid yet is not due: it was made by a clock a little
// ahead, and issuing it again would only make the other clock's turn come.
func DueForRenewal(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotAfter.Sub(now) < life/3
}

// ParseBundle reads every certificate of a PEM bundle.
func ParseBundle(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return out, nil
}

// EncodeBundle writes certs as one PEM bundle, in order.
func EncodeBundle(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		buf.Write(encodeCert(c.Raw))
	}
	return buf.Bytes()
}

// Pool returns a pool holding certs.
func Pool(certs []*x509.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool
}

// SplitNames splits names into DNS names and IP addresses, dropping empty and
// repeated ones.
func SplitNames(names []string) ([]string, []net.IP) {
	var dns []string
	var ips []net.IP
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, n)
		}
	}
	return dns, ips
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
