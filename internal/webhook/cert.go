package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// File names in the certificate directory: the keys of a kubernetes.io/tls Secret (what
// cert-manager and `portico certgen --webhook` write), as a Secret volume mounts them.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// certificate serves the key pair in a directory, reading it again when the files
// change: a Secret volume is updated in place when cert-manager renews the certificate,
// and new connections must get the new one without a restart.
type certificate struct {
	certFile, keyFile string
	log               *slog.Logger

	mu sync.Mutex
	// cur is the last pair that loaded, served until another one loads; certInfo and
	// keyInfo are what the files were when it was read.
	cur               *tls.Certificate
	certInfo, keyInfo os.FileInfo
	// lastErr is the last load failure, logged once rather than on every handshake.
	lastErr string
}

func newCertificate(dir string, log *slog.Logger) *certificate {
	return &certificate{certFile: filepath.Join(dir, CertFile), keyFile: filepath.Join(dir, KeyFile), log: log}
}

// GetCertificate is tls.Config.GetCertificate: the current pair, read again first if
// either file changed. While the files are missing or do not load (a rotation in
// progress, a Secret not created yet), the last pair that loaded keeps being served; if
// none ever did, the handshake fails (and the API server applies the failurePolicy).
func (c *certificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	certInfo, err1 := os.Stat(c.certFile)
	keyInfo, err2 := os.Stat(c.keyFile)
	if err := errors.Join(err1, err2); err != nil {
		return c.fallback(err)
	}
	if c.cur != nil && unchanged(c.certInfo, certInfo) && unchanged(c.keyInfo, keyInfo) {
		return c.cur, nil
	}
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return c.fallback(err)
	}
	c.cur, c.certInfo, c.keyInfo, c.lastErr = &pair, certInfo, keyInfo, ""
	if leaf := pair.Leaf; leaf != nil {
		c.log.Info("webhook certificate loaded", "file", c.certFile, "names", names(leaf), "not_after", leaf.NotAfter)
	}
	return c.cur, nil
}

func (c *certificate) fallback(err error) (*tls.Certificate, error) {
	err = fmt.Errorf("webhook certificate %s / key %s: %w", c.certFile, c.keyFile, err)
	if msg := err.Error(); msg != c.lastErr {
		c.lastErr = msg
		if c.cur != nil {
			c.log.Warn("cannot read the webhook certificate; serving the previous one", "err", err)
		} else {
			c.log.Warn("cannot read the webhook certificate; admission requests fail (and the API server applies the webhook's failurePolicy) until it can", "err", err)
		}
	}
	if c.cur != nil {
		return c.cur, nil
	}
	return nil, err
}

// unchanged reports whether a file is still the one it was: same file, size and time.
func unchanged(was, is os.FileInfo) bool {
	return os.SameFile(was, is) && was.Size() == is.Size() && was.ModTime().Equal(is.ModTime())
}

// names are the subject alternative names of a certificate, for logs.
func names(c *x509.Certificate) []string {
	out := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}
