// Package authz implements `portico authz`: a small external authorization server
// speaking Envoy's ext_authz gRPC v3 protocol (envoy.service.auth.v3.Authorization),
// with HTTP basic authentication against an htpasswd file. It is the authorization
// server of the project's tests and examples, in the family of `portico echo`: both data
// planes ask it over real gRPC.
//
// With Config.HTTPListen it also answers the same checks as the plain HTTP
// authorization server of Envoy's http_service (HTTPProxy serviceType: http): any
// method and path; 200 allows, with the answer's headers, 401 denies.
//
// A request with valid basic credentials is allowed, and the upstream receives
// Auth-Username (the user) and, for each context entry the proxy sent (HTTPProxy
// authPolicy.context) whose key is a header name, Auth-Context-<Key>; the Authorization
// header is kept. The answer also says what the server was asked, so that what the
// proxy sends can be seen upstream: Auth-Path (the path and query it was asked about),
// and when the check carried a body, Auth-Body-Bytes, Auth-Body-Sha256 and
// Auth-Body-Partial (the x-envoy-auth-partial-body it came with), and over gRPC
// Auth-Body-Field ("body" or "raw_body"); over HTTP, Auth-Headers lists the names of
// the request headers it received. Any other request is denied with 401, a
// WWW-Authenticate challenge naming the realm, and a short body. With a delay, every
// check waits that long first, as a slow server would.
package authz

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	htpasswd "github.com/tg123/go-htpasswd"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// DefaultRealm is the realm of the challenge when Config.Realm is empty.
const DefaultRealm = "portico"

// Headers the upstream of an allowed request receives.
const (
	UserHeader          = "Auth-Username"
	ContextHeaderPrefix = "Auth-Context-"
	// PathHeader is the path (with its query) the check was about: over HTTP, the
	// check's own, with the proxy's path prefix.
	PathHeader = "Auth-Path"
	// BodyBytesHeader and BodySHA256Header (hex) describe the body the check
	// carried, when it carried one; BodyPartialHeader is the
	// x-envoy-auth-partial-body it came with, BodyFieldHeader (gRPC) the field
	// it was in: "body" (text) or "raw_body" (pack_as_bytes).
	BodyBytesHeader   = "Auth-Body-Bytes"
	BodySHA256Header  = "Auth-Body-Sha256"
	BodyPartialHeader = "Auth-Body-Partial"
	BodyFieldHeader   = "Auth-Body-Field"
	// HeadersHeader lists, over HTTP, the lower-case names of the check's
	// headers, sorted and joined by ",".
	HeadersHeader = "Auth-Headers"
)

// partialBodyHeader is the proxy's: whether the body sent is the start of a longer one.
const partialBodyHeader = "x-envoy-auth-partial-body"

// hashes are the htpasswd formats accepted: every hash the library knows, never a
// clear-text password.
var hashes = []htpasswd.PasswdParser{htpasswd.AcceptMd5, htpasswd.AcceptSha, htpasswd.AcceptBcrypt, htpasswd.AcceptSsha, htpasswd.AcceptCryptSha}

// Config configures a Server.
type Config struct {
	// Listen is the TCP address to bind, e.g. "127.0.0.1:9100" or ":0".
	Listen string
	// HTPasswd is the htpasswd file of the users (bcrypt, SHA-crypt, APR1/MD5-crypt,
	// SHA or SSHA hashes; clear text is refused).
	HTPasswd string
	// Realm is named in the 401 challenge; empty means DefaultRealm.
	Realm string
	// Delay makes every check wait this long before answering.
	Delay time.Duration
	// TLSCertFile and TLSKeyFile (PEM), when set, serve gRPC, and HTTP checks, over
	// TLS; without them, in clear text.
	TLSCertFile string
	TLSKeyFile  string
	// HTTPListen, when set, is the TCP address to answer plain HTTP checks on
	// (HTTP/1.1 or HTTP/2: h2c in clear text, or over TLS with TLSCertFile),
	// besides gRPC on Listen.
	HTTPListen string
	// Logger receives one line per check; nil discards them.
	Logger *slog.Logger
}

// Server is an authorization server. Create it with New, then Start or Run it.
type Server struct {
	authv3.UnimplementedAuthorizationServer
	cfg   Config
	log   *slog.Logger
	users *htpasswd.File

	mu     sync.Mutex
	ln     net.Listener
	grpc   *grpc.Server
	done   chan error
	httpLn net.Listener
	http   *http.Server
}

// New reads the htpasswd file and returns an unstarted Server.
func New(cfg Config) (*Server, error) {
	if cfg.Realm == "" {
		cfg.Realm = DefaultRealm
	}
	var bad []string
	users, err := htpasswd.New(cfg.HTPasswd, hashes, func(err error) { bad = append(bad, err.Error()) })
	if err != nil {
		return nil, fmt.Errorf("htpasswd file %s: %w", cfg.HTPasswd, err)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("htpasswd file %s: %s (one user:hash per line; clear-text passwords are refused: hash them with htpasswd -B)", cfg.HTPasswd, strings.Join(bad, "; "))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log.With("component", "authz"), users: users}, nil
}

// Start binds the listen address and serves in the background; Addr is valid once it
// returns.
func (s *Server) Start() error {
	var opts []grpc.ServerOption
	var httpTLS *tls.Config
	if s.cfg.TLSCertFile != "" || s.cfg.TLSKeyFile != "" {
		cert, err := tls.LoadX509KeyPair(s.cfg.TLSCertFile, s.cfg.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("TLS certificate: %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
		httpTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return err
	}
	var httpLn net.Listener
	if s.cfg.HTTPListen != "" {
		if httpLn, err = net.Listen("tcp", s.cfg.HTTPListen); err != nil {
			ln.Close()
			return err
		}
	}
	gs := grpc.NewServer(opts...)
	authv3.RegisterAuthorizationServer(gs, s)
	hs := newHTTPServer(http.HandlerFunc(s.serveHTTP), httpTLS)
	s.mu.Lock()
	s.ln, s.grpc, s.done = ln, gs, make(chan error, 2)
	s.httpLn, s.http = httpLn, hs
	s.mu.Unlock()
	s.log.Info("serving ext_authz v3", "addr", ln.Addr().String(), "tls", len(opts) > 0, "realm", s.cfg.Realm, "delay", s.cfg.Delay)
	go func() { s.done <- gs.Serve(ln) }()
	if httpLn != nil {
		s.log.Info("serving HTTP authorization", "addr", httpLn.Addr().String(), "tls", httpTLS != nil)
		go func() {
			if httpTLS != nil {
				s.done <- hs.ServeTLS(httpLn, "", "")
				return
			}
			s.done <- hs.Serve(httpLn)
		}()
	}
	return nil
}

// newHTTPServer serves HTTP checks as a proxy may send them, whatever the
// ExtensionService's protocol: HTTP/1.1 and HTTP/2 (h2c with prior knowledge in
// clear text; over TLS, when tlsConfig is set, h2 or http/1.1 by ALPN).
func newHTTPServer(h http.Handler, tlsConfig *tls.Config) *http.Server {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	if tlsConfig != nil {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: time.Minute, Protocols: protocols, TLSConfig: tlsConfig}
}

// HTTPAddr is the bound address of HTTP checks, or "" without them or before Start.
func (s *Server) HTTPAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.httpLn == nil {
		return ""
	}
	return s.httpLn.Addr().String()
}

// Addr is the bound address, or "" before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Run starts the server and serves until ctx is done, then stops (Shutdown).
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(); err != nil {
		return err
	}
	select {
	case err := <-s.done:
		return err
	case <-ctx.Done():
	}
	return s.Shutdown()
}

// Shutdown stops serving: checks in flight are given a few seconds to finish, then
// their connections are closed. Shutting down an unstarted or stopped server is a
// no-op.
func (s *Server) Shutdown() error {
	s.mu.Lock()
	gs, hs, httpLn, done := s.grpc, s.http, s.httpLn, s.done
	s.grpc = nil
	s.mu.Unlock()
	if gs == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	var httpErr error
	if httpLn != nil {
		if httpErr = hs.Shutdown(ctx); httpErr != nil {
			_ = hs.Close()
		}
	}
	select {
	case <-stopped:
	case <-ctx.Done():
		gs.Stop()
	}
	for range 1 + btoi(httpLn != nil) {
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	if errors.Is(httpErr, context.DeadlineExceeded) {
		return nil // the checks in flight were cut, as gRPC's are
	}
	return httpErr
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Check answers one authorization request.
func (s *Server) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	if s.cfg.Delay > 0 {
		t := time.NewTimer(s.cfg.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	hr := req.GetAttributes().GetRequest().GetHttp()
	user, ok := s.authenticate(hr.GetHeaders()["authorization"])
	s.log.Info("check", "host", hr.GetHost(), "path", hr.GetPath(), "user", user, "allowed", ok)
	if !ok {
		return s.deny(), nil
	}
	seen := received{path: hr.GetPath(), partial: hr.GetHeaders()[partialBodyHeader]}
	switch {
	case len(hr.GetRawBody()) > 0:
		seen.body, seen.field = hr.GetRawBody(), "raw_body"
	case hr.GetBody() != "":
		seen.body, seen.field = []byte(hr.GetBody()), "body"
	}
	seen.hasBody = seen.field != "" || seen.partial != ""
	return allow(user, req.GetAttributes().GetContextExtensions(), seen.headers()), nil
}

// received is what a check asked about, which an allowing answer reports.
type received struct {
	path    string
	hasBody bool
	body    []byte
	partial string // x-envoy-auth-partial-body
	field   string // gRPC's body or raw_body
	names   string // HTTP: the check's header names
}

// headers are the answer's headers reporting r, in a fixed order.
func (r received) headers() [][2]string {
	out := [][2]string{{PathHeader, r.path}}
	if r.hasBody {
		sum := sha256.Sum256(r.body)
		out = append(out, [2]string{BodyBytesHeader, strconv.Itoa(len(r.body))}, [2]string{BodySHA256Header, hex.EncodeToString(sum[:])})
		if r.partial != "" {
			out = append(out, [2]string{BodyPartialHeader, r.partial})
		}
		if r.field != "" {
			out = append(out, [2]string{BodyFieldHeader, r.field})
		}
	}
	if r.names != "" {
		out = append(out, [2]string{HeadersHeader, r.names})
	}
	return out
}

// serveHTTP answers a check of Envoy's http_service: the request is the client's,
// with its method, the proxy's path prefix before its path, its Host, Authorization
// and the headers the proxy allows, and its body when the proxy sends it.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Delay > 0 {
		t := time.NewTimer(s.cfg.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	user, ok := s.authenticate(r.Header.Get("Authorization"))
	s.log.Info("check", "protocol", "http", "host", r.Host, "path", r.URL.RequestURI(), "user", user, "allowed", ok)
	if !ok {
		d := s.deny().GetDeniedResponse()
		for _, h := range d.GetHeaders() {
			w.Header().Set(h.GetHeader().GetKey(), h.GetHeader().GetValue())
		}
		w.WriteHeader(int(d.GetStatus().GetCode()))
		_, _ = io.WriteString(w, d.GetBody())
		return
	}
	names := make([]string, 0, len(r.Header)+1)
	names = append(names, "host")
	for name := range r.Header {
		names = append(names, strings.ToLower(name))
	}
	sort.Strings(names)
	seen := received{path: r.URL.RequestURI(), body: body, partial: r.Header.Get(partialBodyHeader), names: strings.Join(names, ",")}
	seen.hasBody = len(body) > 0 || seen.partial != ""
	w.Header().Set(UserHeader, user)
	for _, h := range seen.headers() {
		w.Header().Set(h[0], h[1])
	}
	w.WriteHeader(http.StatusOK)
}

// authenticate returns the user of valid basic credentials.
func (s *Server) authenticate(header string) (string, bool) {
	scheme, encoded, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return "", false
	}
	user, password, ok := strings.Cut(string(raw), ":")
	if !ok || !s.users.Match(user, password) {
		return user, false
	}
	return user, true
}

func (s *Server) deny() *authv3.CheckResponse {
	return &authv3.CheckResponse{
		Status: &status.Status{Code: int32(code.Code_UNAUTHENTICATED)},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
			Headers: []*corev3.HeaderValueOption{
				header("WWW-Authenticate", fmt.Sprintf("Basic realm=%q", s.cfg.Realm)),
				header("Content-Type", "text/plain; charset=utf-8"),
			},
			Body: "unauthorized: send valid basic credentials\n",
		}},
	}
}

// allow is the answer to an authenticated request: the user, and the context entries in
// key order, as headers for the upstream, then more.
func allow(user string, context map[string]string, more [][2]string) *authv3.CheckResponse {
	headers := []*corev3.HeaderValueOption{header(UserHeader, user)}
	keys := make([]string, 0, len(context))
	for k := range context {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !headerToken(k) {
			continue // not a header name: nothing to send it as
		}
		headers = append(headers, header(ContextHeaderPrefix+textproto.CanonicalMIMEHeaderKey(k), context[k]))
	}
	for _, h := range more {
		headers = append(headers, header(h[0], h[1]))
	}
	return &authv3.CheckResponse{
		Status:       &status.Status{Code: int32(code.Code_OK)},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{Headers: headers}},
	}
}

// headerToken reports whether k can be part of a header name.
func headerToken(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func header(name, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: name, Value: value}, Append: wrapperspb.Bool(false)}
}
