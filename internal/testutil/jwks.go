package testutil

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// JWKSServer is a JSON Web Key Set server: it serves the public keys of the
// signing keys it holds at /jwks.json, signs tokens with the newest one, and
// rotates keys when the test says so, as an identity provider does.
type JWKSServer struct {
	// URL is the key set's URL.
	URL string

	mu      sync.Mutex
	keys    []*jose.JSONWebKey // private keys, newest last
	next    int
	fetches int
}

// StartJWKS starts a JWKSServer on ip (a port of its own) with one key; it
// serves until the test ends. ip must not be loopback when a proxy fetches from
// it by name: the proxy refuses loopback answers for DNS clusters.
func StartJWKS(t testing.TB, ip string) *JWKSServer {
	t.Helper()
	s := &JWKSServer{}
	s.Rotate(false)
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	s.URL = "http://" + l.Addr().String() + "/jwks.json"
	return s
}

func (s *JWKSServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/jwks.json" {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.fetches++
	set := jose.JSONWebKeySet{}
	for _, k := range s.keys {
		set.Keys = append(set.Keys, k.Public())
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(set)
}

// NewSigningKey returns a new ES256 signing key with key id kid.
func NewSigningKey(kid string) *jose.JSONWebKey {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return &jose.JSONWebKey{Key: priv, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"}
}

// Rotate makes a new signing key, the one tokens are signed with from now on,
// and returns its key id. With keepOld the previous keys stay in the set (an
// issuer announcing a new key); without, the set holds the new key alone.
func (s *JWKSServer) Rotate(keepOld bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	k := NewSigningKey("key-" + strconv.Itoa(s.next))
	if keepOld {
		s.keys = append(s.keys, k)
	} else {
		s.keys = []*jose.JSONWebKey{k}
	}
	return k.KeyID
}

// Fetches is how many times the key set was fetched.
func (s *JWKSServer) Fetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches
}

// Token signs claims (jwt.Claims and any other fields) with the newest key.
func (s *JWKSServer) Token(claims ...any) string {
	s.mu.Lock()
	k := s.keys[len(s.keys)-1]
	s.mu.Unlock()
	return SignToken(k, claims...)
}

// SignToken signs claims with key (ES256), its key id in the header.
func SignToken(key *jose.JSONWebKey, claims ...any) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		panic(err)
	}
	b := jwt.Signed(signer)
	for _, c := range claims {
		b = b.Claims(c)
	}
	out, err := b.Serialize()
	if err != nil {
		panic(err)
	}
	return out
}

// Claims are a token's registered claims valid from an hour ago for an hour.
func Claims(issuer string, audience ...string) jwt.Claims {
	now := time.Now()
	return jwt.Claims{Issuer: issuer, Subject: "alice", Audience: audience,
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Hour)), Expiry: jwt.NewNumericDate(now.Add(time.Hour))}
}
