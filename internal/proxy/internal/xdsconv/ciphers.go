package xdsconv

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
)

// cipherSuiteIDs are the TLS 1.2 cipher suites of tls_params.cipher_suites, by their
// OpenSSL (BoringSSL) names as Envoy takes them, that Go's crypto/tls implements: the
// names Contour accepts, every one of them. TLS 1.3 suites are not configurable, in
// Envoy as in Go.
var cipherSuiteIDs = map[string]uint16{
	"ECDHE-ECDSA-CHACHA20-POLY1305": tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-RSA-CHACHA20-POLY1305":   tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-ECDSA-AES128-GCM-SHA256": tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-RSA-AES128-GCM-SHA256":   tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-ECDSA-AES128-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA,
	"ECDHE-RSA-AES128-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
	"AES128-GCM-SHA256":             tls.TLS_RSA_WITH_AES_128_GCM_SHA256,
	"AES128-SHA":                    tls.TLS_RSA_WITH_AES_128_CBC_SHA,
	"ECDHE-ECDSA-AES256-GCM-SHA384": tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-RSA-AES256-GCM-SHA384":   tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-ECDSA-AES256-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
	"ECDHE-RSA-AES256-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
	"AES256-GCM-SHA384":             tls.TLS_RSA_WITH_AES_256_GCM_SHA384,
	"AES256-SHA":                    tls.TLS_RSA_WITH_AES_256_CBC_SHA,
}

// CipherSuites returns the crypto/tls IDs of Envoy's cipher_suites: names, and
// equal-preference groups "[A|B]" of names. Go chooses among the allowed suites by its
// own preference order, so Envoy's order and groups only say which are allowed. A name
// Go does not implement is refused, naming it. Nil for none: Go's defaults.
func CipherSuites(specs []string) ([]uint16, error) {
	var out []uint16
	for _, spec := range specs {
		names := []string{spec}
		if group, ok := strings.CutPrefix(spec, "["); ok {
			inner, closed := strings.CutSuffix(group, "]")
			if !closed {
				return nil, fmt.Errorf("cipher suite group %q has no closing ]", spec)
			}
			names = strings.Split(inner, "|")
		}
		for _, name := range names {
			id, ok := cipherSuiteIDs[name]
			if !ok {
				return nil, fmt.Errorf("cipher suite %q is not supported (Go's crypto/tls implements %s)", name, strings.Join(CipherSuiteNames(), ", "))
			}
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out, nil
}

// CipherSuiteNames are the names CipherSuites takes, sorted.
func CipherSuiteNames() []string {
	names := make([]string, 0, len(cipherSuiteIDs))
	for name := range cipherSuiteIDs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
