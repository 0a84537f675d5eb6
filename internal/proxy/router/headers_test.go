package router

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // the operator's definition
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/proxy/internal/xdstest"
)

func TestParseHeaderFormat(t *testing.T) {
	host, _ := os.Hostname()
	r := httptest.NewRequest(http.MethodGet, "http://h.example.com/p?q=1", nil)
	r.RemoteAddr = "192.0.2.9:4711"
	r.Header.Set("X-In", "input-value")
	r.Header.Set("X-Alt", "alternative")
	r.Header["Cookie"] = []string{"a=1", "b=2"}
	ri := &RequestInfo{Method: "GET", Scheme: "http", Authority: "h.example.com", Path: "/p", RawQuery: "q=1", Header: r.Header}
	rh := NewRouteHeaders(nil, r, ri, &ClientAddressing{UseRemoteAddress: true})
	for in, want := range map[string]string{
		"plain":                            "plain",
		"100%%":                            "100%",
		"%%REQ(x)%%":                       "%REQ(x)%",
		"<%REQ(x-in)%>":                    "<input-value>",
		"%REQ(X-IN)%":                      "input-value", // header names are case-insensitive
		"%REQ(x-in):5%":                    "input",
		"%REQ(x-none)%":                    "", // an absent header is empty, not "-"
		"%REQ(x-none?x-alt)%":              "alternative",
		"%REQ(x-in?x-alt)%":                "input-value",
		"%REQ(:authority)%%REQ(:path)%":    "h.example.com/p?q=1",
		"%REQ(:method)% %REQ(:scheme)%":    "GET http",
		"%REQ(host)%":                      "h.example.com", // Envoy's header map finds :authority under "host"
		"%REQ(Host):3%":                    "h.e",
		"%REQ(x-in):18446744073709551615%": "input-value", // Envoy reads lengths as a size_t
		"%REQ(x-in):9223372036854775808%":  "input-value",
		"%REQ(x-none?Host)%":               "h.example.com",
		"%REQ(cookie)%":                    "a=1; b=2",
		"ip=%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%": "ip=192.0.2.9",
		"%DOWNSTREAM_REMOTE_ADDRESS%":                 "192.0.2.9:4711",
		"%PROTOCOL%":                                  "HTTP/1.1",
		"%HOSTNAME%":                                  host,
		"%HOSTNAME%-%%":                               host + "-%",
	} {
		f, err := parseHeaderFormat(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := f.eval(rh); got != want {
			t.Errorf("%q = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"50%":                                "no valid command operator at position 2",
		"%foo%":                              "no valid command operator",
		"%START_TIME%":                       "%START_TIME% is not supported",
		"%RESP(x)%":                          "%RESP% is not supported",
		"%UPSTREAM_HOST%":                    "%UPSTREAM_HOST% is not supported",
		"%REQ%":                              "needs a header name",
		"%REQ()%":                            "needs a header name",
		"%PROTOCOL(x)%":                      "takes no argument",
		"%REQ(a?b?c)%":                       "want %REQ(name)%",
		"%DOWNSTREAM_PEER_CERT_V_START(%Y)%": "takes no argument nor length",
		"%PROTOCOL:3%":                       "takes no argument nor length",
		"%REQ(x-in):18446744073709551616%":   "length of %REQ%", // beyond a size_t, as Envoy
	} {
		if _, err := parseHeaderFormat(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one mentioning %q", in, err, want)
		}
	}
	// Over HTTP/2 and without use_remote_address.
	r.ProtoMajor, r.ProtoMinor = 2, 0
	r.Header.Set("X-Forwarded-For", "203.0.113.1, 198.51.100.2")
	rh = NewRouteHeaders(nil, r, ri, &ClientAddressing{})
	f, _ := parseHeaderFormat("%PROTOCOL% %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% %DOWNSTREAM_REMOTE_ADDRESS%")
	if got := f.eval(rh); got != "HTTP/2 198.51.100.2 198.51.100.2:0" {
		t.Errorf("got %q, want the protocol as Envoy writes it and the last X-Forwarded-For address", got)
	}
}

// TestHeaderMutationSemantics checks one level's mutations against Envoy's
// HeaderParser::evaluateHeaders: removals first, conditions checked before any
// write of the level, overwrites before additions, empty values dropped.
func TestHeaderMutationSemantics(t *testing.T) {
	deprecated := func(name, value string, app bool) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: name, Value: value}, Append: wrapperspb.Bool(app)}
	}
	keepEmpty := xdstest.HVO("x-keep", "%REQ(x-none)%", xdstest.OverwriteOrAdd)
	keepEmpty.KeepEmptyValue = true
	m, err := convertHeaderMutation("request", []*corev3.HeaderValueOption{
		xdstest.HVO("x-append", "two", xdstest.AppendOrAdd),
		xdstest.HVO("x-absent-present", "new", xdstest.IfAbsent),
		xdstest.HVO("x-absent-missing", "new", xdstest.IfAbsent),
		xdstest.HVO("x-exists-present", "new", xdstest.OverwriteExists),
		xdstest.HVO("x-exists-missing", "new", xdstest.OverwriteExists),
		xdstest.Set("x-set", "new"),
		xdstest.Set("x-removed", "added back"), // removal happens first
		xdstest.HVO("x-removed-2", "new", xdstest.IfAbsent),
		xdstest.Set("x-both", "set"),
		xdstest.HVO("x-both", "appended", xdstest.AppendOrAdd), // overwrites first, then additions
		xdstest.Set("x-empty", "%REQ(x-none)%"),                // dropped: empty
		keepEmpty,
		deprecated("x-dep-true", "two", true),
		deprecated("x-dep-false", "new", false),
		xdstest.HVO("x-default", "two", xdstest.AppendOrAdd),
	}, []string{"x-removed", "X-Removed-2"})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{
		"X-Append": {"one"}, "X-Absent-Present": {"old"}, "X-Exists-Present": {"old"}, "X-Set": {"old1", "old2"},
		"X-Removed": {"old"}, "X-Removed-2": {"old"}, "X-Both": {"old"}, "X-Empty": {"old"}, "X-Dep-True": {"one"},
		"X-Dep-False": {"old"}, "X-Default": {"one"},
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	m.apply(h, NewRouteHeaders(nil, r, &RequestInfo{Header: r.Header}, &ClientAddressing{}))
	want := http.Header{
		"X-Append": {"one", "two"}, "X-Absent-Present": {"old"}, "X-Absent-Missing": {"new"}, "X-Exists-Present": {"new"},
		"X-Set": {"new"}, "X-Removed": {"added back"}, "X-Removed-2": {"new"}, "X-Both": {"set", "appended"},
		"X-Empty": {"old"}, "X-Keep": {""}, "X-Dep-True": {"one", "two"}, "X-Dep-False": {"new"}, "X-Default": {"one", "two"},
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
}

// servedCertificate is a TLS listener presenting one certificate.
type servedCertificate struct{ c *tls.Certificate }

func (s servedCertificate) ServedCertificate(string) *tls.Certificate { return s.c }

// testCertificate makes a self-signed certificate with the fields the
// operators read.
func testCertificate(t *testing.T, subject pkix.Name, serial int64, uri string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(uri)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      subject,
		NotBefore:    time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC),
		NotAfter:     time.Date(2034, 1, 2, 3, 4, 5, 0, time.UTC),
		URIs:         []*url.URL{u},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConnectionOperators holds each operator on the connection, its TLS
// session and the exchange to what Envoy gives: empty where Envoy has no value
// (plaintext, a request not forwarded yet), "-" for no response flags.
func TestConnectionOperators(t *testing.T) {
	peer := testCertificate(t, pkix.Name{CommonName: "client", Organization: []string{"Example"}, OrganizationalUnit: []string{"team, a"}}, 0x0102ab, "spiffe://example.org/client")
	local := testCertificate(t, pkix.Name{CommonName: "h.example.com"}, 7, "spiffe://example.org/proxy")
	sum256, sum1 := sha256.Sum256(peer.Raw), sha1.Sum(peer.Raw) //nolint:gosec // the operator's definition

	newRequest := func(tlsState *tls.ConnectionState) *RouteHeaders {
		r := httptest.NewRequest(http.MethodGet, "http://h.example.com/p", nil)
		r.RemoteAddr = "[::ffff:192.0.2.9]:4711"
		r.TLS = tlsState
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 8443}))
		ri := &RequestInfo{Method: "GET", Scheme: "https", Authority: "h.example.com", Path: "/p", Header: r.Header}
		rh := NewRouteHeaders(nil, r, ri, &ClientAddressing{UseRemoteAddress: true})
		rh.Stream = &StreamInfo{UpstreamHost: "10.0.0.1:8080", Certificates: servedCertificate{&tls.Certificate{Leaf: local}}}
		return rh
	}
	tlsRequest := newRequest(&tls.ConnectionState{
		Version: tls.VersionTLS12, CipherSuite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		ServerName: "h.example.com", PeerCertificates: []*x509.Certificate{peer},
	})
	plainRequest := newRequest(nil)
	plainRequest.Stream.Certificates = nil

	for _, c := range []struct {
		op         string
		tls, plain string
	}{
		{"DOWNSTREAM_REMOTE_ADDRESS", "192.0.2.9:4711", "192.0.2.9:4711"},
		{"DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT", "192.0.2.9", "192.0.2.9"},
		{"DOWNSTREAM_LOCAL_ADDRESS", "10.1.2.3:8443", "10.1.2.3:8443"},
		{"DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT", "10.1.2.3", "10.1.2.3"},
		{"DOWNSTREAM_LOCAL_PORT", "8443", "8443"},
		{"DOWNSTREAM_LOCAL_URI_SAN", "spiffe://example.org/proxy", ""},
		{"DOWNSTREAM_LOCAL_SUBJECT", "CN=h.example.com", ""},
		{"DOWNSTREAM_PEER_URI_SAN", "spiffe://example.org/client", ""},
		{"DOWNSTREAM_PEER_SUBJECT", `CN=client,OU=team\, a,O=Example`, ""},
		{"DOWNSTREAM_PEER_ISSUER", `CN=client,OU=team\, a,O=Example`, ""},
		{"DOWNSTREAM_PEER_FINGERPRINT_256", hex.EncodeToString(sum256[:]), ""},
		{"DOWNSTREAM_PEER_FINGERPRINT_1", hex.EncodeToString(sum1[:]), ""},
		{"DOWNSTREAM_PEER_SERIAL", "0102ab", ""},
		{"DOWNSTREAM_PEER_CERT_V_START", "2024-01-02T03:04:05.000Z", ""},
		{"DOWNSTREAM_PEER_CERT_V_END", "2034-01-02T03:04:05.000Z", ""},
		{"DOWNSTREAM_TLS_VERSION", "TLSv1.2", ""},
		{"DOWNSTREAM_TLS_CIPHER", "ECDHE-ECDSA-AES128-GCM-SHA256", ""},
		{"DOWNSTREAM_TLS_SESSION_ID", "", ""},
		// Request headers are evaluated before Envoy picks an endpoint or answers.
		{"UPSTREAM_REMOTE_ADDRESS", "", ""},
		{"RESPONSE_FLAGS", "-", "-"},
		{"RESPONSE_CODE_DETAILS", "", ""},
	} {
		f, err := parseHeaderFormat("%" + c.op + "%")
		if err != nil {
			t.Errorf("%s: %v", c.op, err)
			continue
		}
		if got := f.eval(tlsRequest); got != c.tls {
			t.Errorf("%%%s%% over TLS = %q, want %q", c.op, got, c.tls)
		}
		if got := f.eval(plainRequest); got != c.plain {
			t.Errorf("%%%s%% over plaintext = %q, want %q", c.op, got, c.plain)
		}
	}
	f, _ := parseHeaderFormat("%DOWNSTREAM_PEER_CERT%")
	if got, want := f.eval(tlsRequest), "-----BEGIN%20CERTIFICATE-----%0A"; !strings.HasPrefix(got, want) || strings.ContainsAny(got, "\n +/=") {
		t.Errorf("%%DOWNSTREAM_PEER_CERT%% = %q, want the URL-encoded PEM", got)
	}
	tlsRequest.r.TLS.Version, tlsRequest.r.TLS.CipherSuite = tls.VersionTLS13, tls.TLS_AES_256_GCM_SHA384
	f, _ = parseHeaderFormat("%DOWNSTREAM_TLS_VERSION% %DOWNSTREAM_TLS_CIPHER%")
	if got, want := f.eval(tlsRequest), "TLSv1.3 TLS_AES_256_GCM_SHA384"; got != want {
		t.Errorf("TLS 1.3: %q, want %q", got, want)
	}

	// On responses: the endpoint that answered, the upstream's details; a local
	// reply's flags and details.
	f, _ = parseHeaderFormat("%UPSTREAM_REMOTE_ADDRESS%|%RESPONSE_FLAGS%|%RESPONSE_CODE_DETAILS%")
	m := &headerMutation{add: []headerAdd{{name: "X-Out", action: overwriteIfExistsOrAdd, value: f}}}
	tlsRequest.Plan = &mutationPlan{response: []*headerMutation{m}}
	h := http.Header{}
	tlsRequest.ApplyResponse(h, true)
	if got, want := h.Get("X-Out"), "10.0.0.1:8080|-|via_upstream"; got != want {
		t.Errorf("upstream response: %q, want %q", got, want)
	}
	tlsRequest.Stream = &StreamInfo{ResponseFlags: "UH", Details: "no_healthy_upstream"}
	tlsRequest.ApplyResponse(h, false)
	if got, want := h.Get("X-Out"), "|UH|no_healthy_upstream"; got != want {
		t.Errorf("local reply: %q, want %q", got, want)
	}
}
