package hcm

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"strings"

	"github.com/portico-dev/portico/internal/proxy/router"
)

// xfccDetails are the parts of the client certificate the connection
// manager puts in x-forwarded-client-cert (forward_client_cert_details
// SANITIZE_SET, set_current_client_cert_details); nil: the header is
// removed (SANITIZE).
type xfccDetails struct {
	Subject, Cert, Chain, Dns, Uri bool
}

// header is the x-forwarded-client-cert value for a connection, in Envoy's
// format and order (By, Hash, Cert, Chain, Subject, URI, DNS); "" when the
// client sent no certificate.
func (d *xfccDetails) header(cs *tls.ConnectionState, local *tls.Certificate) string {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return ""
	}
	leaf := cs.PeerCertificates[0]
	var parts []string
	if local != nil && local.Leaf != nil {
		for _, u := range local.Leaf.URIs {
			parts = append(parts, "By="+u.String())
		}
	}
	sum := sha256.Sum256(leaf.Raw)
	parts = append(parts, "Hash="+hex.EncodeToString(sum[:]))
	if d.Cert {
		parts = append(parts, `Cert="`+router.URLEncodedPEM(leaf)+`"`)
	}
	if d.Chain {
		var b strings.Builder
		for _, c := range cs.PeerCertificates {
			b.WriteString(router.URLEncodedPEM(c))
		}
		parts = append(parts, `Chain="`+b.String()+`"`)
	}
	if d.Subject {
		parts = append(parts, `Subject="`+leaf.Subject.String()+`"`)
	}
	if d.Uri && len(leaf.URIs) > 0 {
		// Envoy gives the first URI SAN only.
		parts = append(parts, "URI="+leaf.URIs[0].String())
	}
	if d.Dns {
		for _, n := range leaf.DNSNames {
			parts = append(parts, "DNS="+n)
		}
	}
	return strings.Join(parts, ";")
}
