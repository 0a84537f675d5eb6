package authz

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// sha1 {SHA} of "pw".
const userLine = "u:{SHA}GpHWL3ymc5liWkNopqtdSjuqYHM=\n"

func usersFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func check(t *testing.T, c authv3.AuthorizationClient, auth string, context map[string]string) *authv3.CheckResponse {
	t.Helper()
	headers := map[string]string{}
	if auth != "" {
		headers["authorization"] = auth
	}
	resp, err := c.Check(t.Context(), &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request:           &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{Headers: headers, Path: "/"}},
		ContextExtensions: context,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Over real gRPC: valid credentials are allowed with the user and context headers,
// others denied with 401 and the realm's challenge.
func TestCheck(t *testing.T) {
	s, err := New(Config{Listen: "127.0.0.1:0", HTPasswd: usersFile(t, userLine), Realm: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	conn, err := grpc.NewClient("passthrough:///"+s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := authv3.NewAuthorizationClient(conn)
	basic := func(up string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(up)) }

	ok := check(t, c, basic("u:pw"), map[string]string{"site": "a", "bad key": "x"})
	if code.Code(ok.GetStatus().GetCode()) != code.Code_OK {
		t.Fatalf("valid credentials: %v", ok)
	}
	got := map[string]string{}
	for _, h := range ok.GetOkResponse().GetHeaders() {
		got[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
	}
	if len(got) != 3 || got["Auth-Username"] != "u" || got["Auth-Context-Site"] != "a" || got[PathHeader] != "/" {
		t.Errorf("upstream headers %v", got)
	}
	for _, auth := range []string{"", basic("u:nope"), basic("v:pw"), "Bearer x", "Basic !!"} {
		resp := check(t, c, auth, nil)
		d := resp.GetDeniedResponse()
		if code.Code(resp.GetStatus().GetCode()) == code.Code_OK || d.GetStatus().GetCode() != 401 ||
			len(d.GetHeaders()) == 0 || d.GetHeaders()[0].GetHeader().GetValue() != `Basic realm="r"` {
			t.Errorf("%q: %v", auth, resp)
		}
	}
}

// With a delay, a check waits, and gives up when its caller does.
func TestDelay(t *testing.T) {
	s, err := New(Config{HTPasswd: usersFile(t, userLine), Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Check(ctx, &authv3.CheckRequest{}); err == nil {
		t.Errorf("a cancelled check answered")
	}
}

func TestClearTextRefused(t *testing.T) {
	_, err := New(Config{HTPasswd: usersFile(t, "u:plain\n")})
	if err == nil || !strings.Contains(err.Error(), "clear-text") {
		t.Errorf("New = %v, want a refusal of the clear-text password", err)
	}
}

// Over real HTTP, as Envoy's http_service asks: valid credentials get 200 with the user
// and what the check carried (path, body, header names); others get 401 with the
// realm's challenge and a body.
func TestHTTPCheck(t *testing.T) {
	s, err := New(Config{Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", HTPasswd: usersFile(t, userLine), Realm: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	ask := func(auth, body string, headers map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://"+s.HTTPAddr()+"/prefix/p?q=1", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "a.example.com"
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("u:pw"))
	resp := ask(basic, "hello", map[string]string{"X-Envoy-Auth-Partial-Body": "true", "X-Extra": "1"})
	sum := sha256.Sum256([]byte("hello"))
	for name, want := range map[string]string{
		UserHeader: "u", PathHeader: "/prefix/p?q=1", BodyBytesHeader: "5", BodySHA256Header: hex.EncodeToString(sum[:]), BodyPartialHeader: "true",
		HeadersHeader: "accept-encoding,authorization,content-length,host,user-agent,x-envoy-auth-partial-body,x-extra",
	} {
		if got := resp.Header.Get(name); resp.StatusCode != http.StatusOK || got != want {
			t.Errorf("allowed: status %d, %s %q, want %q", resp.StatusCode, name, got, want)
		}
	}
	if resp := ask(basic, "", nil); resp.Header.Get(BodyBytesHeader) != "" || resp.Header.Get(PathHeader) == "" {
		t.Errorf("without a body: %v", resp.Header)
	}
	for _, auth := range []string{"", "Basic " + base64.StdEncoding.EncodeToString([]byte("u:no"))} {
		resp := ask(auth, "", nil)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Basic realm="r"` || !strings.Contains(string(body), "unauthorized") || resp.Header.Get(UserHeader) != "" {
			t.Errorf("%q: status %d, headers %v, body %q", auth, resp.StatusCode, resp.Header, body)
		}
	}
}
