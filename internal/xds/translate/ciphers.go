package translate

import (
	"fmt"
	"slices"
	"strings"
)

// DefaultCipherSuites are Contour's default TLS 1.2 cipher suites (ECDHE key exchange
// with AES-GCM or ChaCha20-Poly1305 only; the bracketed suites are of equal preference).
// Portico does not apply them unless told (--tls-cipher-suites): they allow no TLS 1.1
// handshake, which IngressRoute hosts allow by default.
var DefaultCipherSuites = []string{
	"[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]",
	"[ECDHE-RSA-AES128-GCM-SHA256|ECDHE-RSA-CHACHA20-POLY1305]",
	"ECDHE-ECDSA-AES256-GCM-SHA384",
	"ECDHE-RSA-AES256-GCM-SHA384",
}

// CipherSuiteNames are the cipher suites an installation may list: those Contour
// accepts, which Envoy and Go's crypto/tls (the embedded proxy) both implement.
var CipherSuiteNames = []string{
	"AES128-GCM-SHA256",
	"AES128-SHA",
	"AES256-GCM-SHA384",
	"AES256-SHA",
	"ECDHE-ECDSA-AES128-GCM-SHA256",
	"ECDHE-ECDSA-AES128-SHA",
	"ECDHE-ECDSA-AES256-GCM-SHA384",
	"ECDHE-ECDSA-AES256-SHA",
	"ECDHE-ECDSA-CHACHA20-POLY1305",
	"ECDHE-RSA-AES128-GCM-SHA256",
	"ECDHE-RSA-AES128-SHA",
	"ECDHE-RSA-AES256-GCM-SHA384",
	"ECDHE-RSA-AES256-SHA",
	"ECDHE-RSA-CHACHA20-POLY1305",
}

// CheckCipherSuites says which entry of list is not a cipher suite of CipherSuiteNames
// or an equal-preference group of them ("[A|B]"), as Contour refuses it.
func CheckCipherSuites(list []string) error {
	for _, entry := range list {
		names := []string{entry}
		if inner, ok := strings.CutPrefix(entry, "["); ok {
			inner, ok = strings.CutSuffix(inner, "]")
			if !ok {
				return fmt.Errorf("cipher suite group %q has no closing ]", entry)
			}
			names = strings.Split(inner, "|")
		}
		for _, name := range names {
			if !slices.Contains(CipherSuiteNames, name) {
				return fmt.Errorf("unknown cipher suite %q: use %s, or an equal-preference group such as [%s|%s]",
					name, strings.Join(CipherSuiteNames, ", "), DefaultCipherSuites[2], DefaultCipherSuites[3])
			}
		}
	}
	return nil
}
