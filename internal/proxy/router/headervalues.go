package router

import (
	"crypto/sha1" //nolint:gosec // Envoy's DOWNSTREAM_PEER_FINGERPRINT_1 is SHA-1 by definition
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// The command operators of header values that name the connection, its TLS
// session and the exchange: what Envoy's header formatter gives for each,
// from what the connection manager knows. A value Envoy has not (a TLS
// operator on a plaintext connection, the upstream of a request not yet
// forwarded) is empty, which drops the header unless keep_empty_value.

// StreamInfo is what the connection manager tells the header formatter about
// an exchange beyond its request.
type StreamInfo struct {
	// UpstreamHost is the endpoint ("ip:port") of the last upstream attempt;
	// "" before one.
	UpstreamHost string
	// ResponseFlags are Envoy's short response flags of the response, comma
	// separated ("UH", "UF,URX"); "" for none.
	ResponseFlags string
	// Details are Envoy's response code details ("via_upstream",
	// "no_healthy_upstream"); "" while unknown.
	Details string
	// Certificates gives the certificate the listener presented; nil on a
	// plaintext listener.
	Certificates ServedCertificates
}

// ServedCertificates is a TLS listener, as the certificates it presents.
type ServedCertificates interface {
	ServedCertificate(sni string) *tls.Certificate
}

// operators are the operators without argument the proxy evaluates per
// request, by name: with REQ and HOSTNAME, every dynamic header value
// Contour documents for HTTPProxy headers policies.
var operators = map[string]func(*RouteHeaders) string{
	"PROTOCOL":                               (*RouteHeaders).protocol,
	"DOWNSTREAM_REMOTE_ADDRESS":              (*RouteHeaders).downstreamRemoteAddress,
	"DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT": (*RouteHeaders).downstreamRemoteAddressWithoutPort,
	"DOWNSTREAM_LOCAL_ADDRESS":               (*RouteHeaders).downstreamLocalAddress,
	"DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT":  (*RouteHeaders).downstreamLocalAddressWithoutPort,
	"DOWNSTREAM_LOCAL_PORT":                  (*RouteHeaders).downstreamLocalPort,
	"DOWNSTREAM_LOCAL_URI_SAN":               localCert(func(c *x509.Certificate) string { return uriSANs(c) }),
	"DOWNSTREAM_LOCAL_SUBJECT":               localCert(func(c *x509.Certificate) string { return distinguishedName(c.RawSubject) }),
	"DOWNSTREAM_PEER_URI_SAN":                peerCert(uriSANs),
	"DOWNSTREAM_PEER_SUBJECT":                peerCert(func(c *x509.Certificate) string { return distinguishedName(c.RawSubject) }),
	"DOWNSTREAM_PEER_ISSUER":                 peerCert(func(c *x509.Certificate) string { return distinguishedName(c.RawIssuer) }),
	"DOWNSTREAM_PEER_FINGERPRINT_256":        peerCert(func(c *x509.Certificate) string { s := sha256.Sum256(c.Raw); return hex.EncodeToString(s[:]) }),
	"DOWNSTREAM_PEER_FINGERPRINT_1":          peerCert(func(c *x509.Certificate) string { s := sha1.Sum(c.Raw); return hex.EncodeToString(s[:]) }), //nolint:gosec // see the import
	"DOWNSTREAM_PEER_SERIAL":                 peerCert(serialNumber),
	"DOWNSTREAM_PEER_CERT":                   peerCert(URLEncodedPEM),
	"DOWNSTREAM_PEER_CERT_V_START":           peerCert(func(c *x509.Certificate) string { return envoyTime(c.NotBefore.UTC()) }),
	"DOWNSTREAM_PEER_CERT_V_END":             peerCert(func(c *x509.Certificate) string { return envoyTime(c.NotAfter.UTC()) }),
	"DOWNSTREAM_TLS_VERSION":                 tlsState(func(cs *tls.ConnectionState) string { return tlsVersionName(cs.Version) }),
	"DOWNSTREAM_TLS_CIPHER":                  tlsState(func(cs *tls.ConnectionState) string { return cipherName(cs.CipherSuite) }),
	// Go's TLS stack does not expose the session's id: the value is empty.
	"DOWNSTREAM_TLS_SESSION_ID": func(*RouteHeaders) string { return "" },
	"UPSTREAM_REMOTE_ADDRESS":   (*RouteHeaders).upstreamRemoteAddress,
	"RESPONSE_FLAGS":            (*RouteHeaders).responseFlags,
	"RESPONSE_CODE_DETAILS":     (*RouteHeaders).responseCodeDetails,
}

// operatorNames lists operators, sorted, for error messages.
func operatorNames() []string {
	names := make([]string, 0, len(operators))
	for n := range operators {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// protocol is %PROTOCOL%: Envoy writes "HTTP/2", not "HTTP/2.0".
func (rh *RouteHeaders) protocol() string {
	r := rh.r
	switch {
	case r.ProtoMajor == 2:
		return "HTTP/2"
	case r.ProtoMajor == 3:
		return "HTTP/3"
	case r.ProtoMajor == 1 && r.ProtoMinor == 0:
		return "HTTP/1.0"
	}
	return "HTTP/1.1"
}

// downstreamRemote is the client's address as the connection manager decides
// it: the peer, or the X-Forwarded-For address it trusts, which has no port
// (Envoy gives it port 0).
func (rh *RouteHeaders) downstreamRemote() (netip.AddrPort, bool) {
	if a, ok := rh.client.ForwardedClient(rh.r.Header.Values("X-Forwarded-For")); ok {
		return netip.AddrPortFrom(a, 0), true
	}
	return addrPort(rh.r.RemoteAddr)
}

func (rh *RouteHeaders) downstreamRemoteAddress() string {
	if a, ok := rh.downstreamRemote(); ok {
		return a.String()
	}
	return rh.r.RemoteAddr
}

func (rh *RouteHeaders) downstreamRemoteAddressWithoutPort() string {
	return DownstreamRemoteIP(rh.client, rh.r)
}

// downstreamLocal is the address the connection was accepted on.
func (rh *RouteHeaders) downstreamLocal() (netip.AddrPort, bool) {
	a, ok := rh.r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return netip.AddrPort{}, false
	}
	return addrPort(a.String())
}

func (rh *RouteHeaders) downstreamLocalAddress() string {
	if a, ok := rh.downstreamLocal(); ok {
		return a.String()
	}
	return ""
}

func (rh *RouteHeaders) downstreamLocalAddressWithoutPort() string {
	if a, ok := rh.downstreamLocal(); ok {
		return a.Addr().String()
	}
	return ""
}

func (rh *RouteHeaders) downstreamLocalPort() string {
	if a, ok := rh.downstreamLocal(); ok {
		return fmt.Sprint(a.Port())
	}
	return ""
}

// addrPort parses "ip:port", an IPv4-mapped IPv6 address as the IPv4 one
// (as Envoy's listeners report them).
func addrPort(s string) (netip.AddrPort, bool) {
	a, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()), true
}

// upstreamRemoteAddress is the endpoint that answered: on response headers
// only, since request headers are evaluated before Envoy picks one.
func (rh *RouteHeaders) upstreamRemoteAddress() string {
	if !rh.responding || rh.Stream == nil {
		return ""
	}
	return rh.Stream.UpstreamHost
}

// responseFlags is "-" when no flag is set, as Envoy writes it.
func (rh *RouteHeaders) responseFlags() string {
	if !rh.responding || rh.Stream == nil || rh.Stream.ResponseFlags == "" {
		return "-"
	}
	return rh.Stream.ResponseFlags
}

// responseCodeDetails is "via_upstream" on an upstream's response, as Envoy's
// router sets it before the response headers are evaluated.
func (rh *RouteHeaders) responseCodeDetails() string {
	switch {
	case !rh.responding:
		return ""
	case rh.fromUpstream:
		return "via_upstream"
	case rh.Stream == nil:
		return ""
	}
	return rh.Stream.Details
}

// tlsState makes an operator of the downstream TLS session; empty on a
// plaintext connection.
func tlsState(f func(*tls.ConnectionState) string) func(*RouteHeaders) string {
	return func(rh *RouteHeaders) string {
		if rh.r.TLS == nil {
			return ""
		}
		return f(rh.r.TLS)
	}
}

// peerCert makes an operator of the client's certificate; empty when the
// client sent none.
func peerCert(f func(*x509.Certificate) string) func(*RouteHeaders) string {
	return tlsState(func(cs *tls.ConnectionState) string {
		if len(cs.PeerCertificates) == 0 {
			return ""
		}
		return f(cs.PeerCertificates[0])
	})
}

// localCert makes an operator of the certificate the listener presented for
// the connection's server name.
func localCert(f func(*x509.Certificate) string) func(*RouteHeaders) string {
	return func(rh *RouteHeaders) string {
		if rh.r.TLS == nil || rh.Stream == nil || rh.Stream.Certificates == nil {
			return ""
		}
		c := rh.Stream.Certificates.ServedCertificate(rh.r.TLS.ServerName)
		if c == nil {
			return ""
		}
		leaf := c.Leaf
		if leaf == nil && len(c.Certificate) > 0 {
			leaf, _ = x509.ParseCertificate(c.Certificate[0])
		}
		if leaf == nil {
			return ""
		}
		return f(leaf)
	}
}

// uriSANs are a certificate's URI subject alternative names, comma separated.
func uriSANs(c *x509.Certificate) string {
	names := make([]string, len(c.URIs))
	for i, u := range c.URIs {
		names[i] = u.String()
	}
	return strings.Join(names, ",")
}

// serialNumber is the serial in lower-case hex, whole bytes, as BoringSSL's
// BN_bn2hex writes it for Envoy.
func serialNumber(c *x509.Certificate) string {
	if c.SerialNumber == nil || c.SerialNumber.Sign() == 0 {
		return "0"
	}
	return hex.EncodeToString(c.SerialNumber.Bytes())
}

// URLEncodedPEM is Envoy's URL-encoded PEM of a certificate
// (%DOWNSTREAM_PEER_CERT%, the Cert of x-forwarded-client-cert).
func URLEncodedPEM(c *x509.Certificate) string {
	return pemEscaper.Replace(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})))
}

var pemEscaper = strings.NewReplacer("\n", "%0A", " ", "%20", "+", "%2B", "/", "%2F", "=", "%3D")

// envoyTime is Envoy's default date format of the certificate validity
// operators: ISO 8601 in UTC, with milliseconds.
func envoyTime(t time.Time) string {
	return t.Format("2006-01-02T15:04:05.000Z")
}

// tlsVersionName is the version as BoringSSL names it.
func tlsVersionName(v uint16) string {
	switch v {
	case tls.VersionTLS10:
		return "TLSv1"
	case tls.VersionTLS11:
		return "TLSv1.1"
	case tls.VersionTLS12:
		return "TLSv1.2"
	case tls.VersionTLS13:
		return "TLSv1.3"
	}
	return ""
}

// cipherNames are BoringSSL's names of the suites Go's TLS stack may
// negotiate (TLS 1.3's have the IANA names in both).
var cipherNames = map[uint16]string{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256:       "ECDHE-ECDSA-AES128-GCM-SHA256",
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256:         "ECDHE-RSA-AES128-GCM-SHA256",
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384:       "ECDHE-ECDSA-AES256-GCM-SHA384",
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384:         "ECDHE-RSA-AES256-GCM-SHA384",
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-ECDSA-CHACHA20-POLY1305",
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256:   "ECDHE-RSA-CHACHA20-POLY1305",
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA:          "ECDHE-ECDSA-AES128-SHA",
	tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA:            "ECDHE-RSA-AES128-SHA",
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA:          "ECDHE-ECDSA-AES256-SHA",
	tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA:            "ECDHE-RSA-AES256-SHA",
	tls.TLS_RSA_WITH_AES_128_GCM_SHA256:               "AES128-GCM-SHA256",
	tls.TLS_RSA_WITH_AES_256_GCM_SHA384:               "AES256-GCM-SHA384",
	tls.TLS_RSA_WITH_AES_128_CBC_SHA:                  "AES128-SHA",
	tls.TLS_RSA_WITH_AES_256_CBC_SHA:                  "AES256-SHA",
	tls.TLS_AES_128_GCM_SHA256:                        "TLS_AES_128_GCM_SHA256",
	tls.TLS_AES_256_GCM_SHA384:                        "TLS_AES_256_GCM_SHA384",
	tls.TLS_CHACHA20_POLY1305_SHA256:                  "TLS_CHACHA20_POLY1305_SHA256",
}

func cipherName(id uint16) string {
	if n, ok := cipherNames[id]; ok {
		return n
	}
	return tls.CipherSuiteName(id)
}

// dnAttributeNames are OpenSSL's short names of distinguished name
// attributes, which Envoy's RFC 2253 form uses.
var dnAttributeNames = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.4":                    "SN",
	"2.5.4.5":                    "serialNumber",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.9":                    "street",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.12":                   "title",
	"2.5.4.17":                   "postalCode",
	"2.5.4.42":                   "GN",
	"0.9.2342.19200300.100.1.1":  "UID",
	"0.9.2342.19200300.100.1.25": "DC",
	"1.2.840.113549.1.9.1":       "emailAddress",
}

// distinguishedName is a DER-encoded name in RFC 2253 form, as Envoy prints
// subjects and issuers: the last RDN first, OpenSSL's attribute names, the
// special characters escaped; "" if raw does not parse.
func distinguishedName(raw []byte) string {
	var seq pkix.RDNSequence
	if rest, err := asn1.Unmarshal(raw, &seq); err != nil || len(rest) > 0 {
		return ""
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if i < len(seq)-1 {
			b.WriteByte(',')
		}
		for j, atv := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			name, ok := dnAttributeNames[atv.Type.String()]
			if !ok {
				name = atv.Type.String()
			}
			b.WriteString(name)
			b.WriteByte('=')
			b.WriteString(escapeDNValue(fmt.Sprint(atv.Value)))
		}
	}
	return b.String()
}

// escapeDNValue escapes an attribute value as RFC 2253 asks.
func escapeDNValue(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case strings.IndexByte(",+\"<>;\\", c) >= 0,
			c == '#' && i == 0,
			c == ' ' && (i == 0 || i == len(v)-1):
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
