package jwtauthn

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/testutil"
)

func packed(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func remote(uri, cluster string) *jwtv3.JwtProvider_RemoteJwks {
	return &jwtv3.JwtProvider_RemoteJwks{RemoteJwks: &jwtv3.RemoteJwks{HttpUri: &corev3.HttpUri{Uri: uri, HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: cluster}}}}
}

func requirement(provider string) *jwtv3.JwtRequirement {
	return &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: provider}}
}

// What the filter does not implement is a NACK naming the field, never a
// provider that accepts more than its configuration says.
func TestConfigurationsRefused(t *testing.T) {
	ok := func() *jwtv3.JwtProvider {
		return &jwtv3.JwtProvider{JwksSourceSpecifier: remote("https://idp.test/keys", "jwks")}
	}
	for _, tc := range []struct {
		name string
		edit func(*jwtv3.JwtAuthentication)
		want string
	}{
		{"rules", func(c *jwtv3.JwtAuthentication) { c.Rules = []*jwtv3.RequirementRule{{}} }, "rules: not supported"},
		{"from_headers", func(c *jwtv3.JwtAuthentication) {
			c.Providers["p"].FromHeaders = []*jwtv3.JwtHeader{{Name: "x-token"}}
		}, "from_headers, from_params, from_cookies: not supported"},
		{"claim_to_headers", func(c *jwtv3.JwtAuthentication) {
			c.Providers["p"].ClaimToHeaders = []*jwtv3.JwtClaimToHeader{{HeaderName: "x-sub", ClaimName: "sub"}}
		}, "claim_to_headers: not supported"},
		{"local_jwks from a file", func(c *jwtv3.JwtAuthentication) {
			c.Providers["p"].JwksSourceSpecifier = &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/etc/jwks.json"}}}
		}, "local_jwks: only inline_string and inline_bytes are supported"},
		{"local_jwks not a key set", func(c *jwtv3.JwtAuthentication) {
			c.Providers["p"].JwksSourceSpecifier = &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: `{"keys": []}`}}}
		}, "local_jwks: the key set has no keys"},
		{"no cluster", func(c *jwtv3.JwtAuthentication) {
			c.Providers["p"].JwksSourceSpecifier = remote("https://idp.test/keys", "")
		}, "http_uri.cluster is required"},
		{"bad uri", func(c *jwtv3.JwtAuthentication) {
			c.Providers["p"].JwksSourceSpecifier = remote("idp.test/keys", "jwks")
		}, "an http or https URL is required"},
		{"unknown provider", func(c *jwtv3.JwtAuthentication) { c.RequirementMap["r"] = requirement("nobody") }, `requirement_map["r"].provider_name: no provider "nobody"`},
		{"requirement not a provider name", func(c *jwtv3.JwtAuthentication) { c.RequirementMap["r"] = &jwtv3.JwtRequirement{} }, "only provider_name is supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &jwtv3.JwtAuthentication{Providers: map[string]*jwtv3.JwtProvider{"p": ok()}, RequirementMap: map[string]*jwtv3.JwtRequirement{"p": requirement("p")}}
			tc.edit(cfg)
			_, err := Factory{}.New(packed(t, cfg))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// A filter whose provider "p" already holds the key set of key, as after a
// fetch: verification alone, no sockets.
func primed(t testing.TB, issuer string, audiences []string, key *jose.JSONWebKey) *jwtFilter {
	t.Helper()
	f, err := Factory{}.New(packed(t, &jwtv3.JwtAuthentication{
		Providers:      map[string]*jwtv3.JwtProvider{"p": {Issuer: issuer, Audiences: audiences, JwksSourceSpecifier: remote("https://idp.test/keys", "jwks")}},
		RequirementMap: map[string]*jwtv3.JwtRequirement{"p": requirement("p")},
	}))
	if err != nil {
		t.Fatal(err)
	}
	jf := f.(*jwtFilter)
	ks := jf.requirements["p"].keys
	ks.keys = &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.Public()}}
	ks.fetchedAt = time.Now()
	ks.expires = ks.fetchedAt.Add(time.Hour)
	return jf
}

func stream(token, query string) *filter.Stream {
	s := filter.NewStream(context.Background(), &filter.Env{})
	h := filter.HeaderMap{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	s.Request = filter.Request{Method: "GET", Scheme: "https", Authority: "api.test", Path: "/x", RawQuery: query, Headers: h}
	return s
}

func TestDecodeHeaders(t *testing.T) {
	key := signingKey(t, "k1")
	other := signingKey(t, "k1")
	f := primed(t, "https://issuer.test", []string{"api"}, key)
	claims := func(edit func(*jwt.Claims)) jwt.Claims {
		c := testutil.Claims("https://issuer.test", "api")
		if edit != nil {
			edit(&c)
		}
		return c
	}
	valid := testutil.SignToken(key, claims(nil))
	for _, tc := range []struct {
		name         string
		token, query string
		status       int
		body         string
	}{
		{"valid", valid, "", 0, ""},
		{"valid in access_token", "", "a=1&access_token=" + valid, 0, ""},
		{"missing", "", "", 401, "Jwt is missing"},
		{"malformed", "abc", "", 401, "Jwt is not in the form"},
		{"signature removed", strings.Join(strings.Split(valid, ".")[:2], ".") + ".", "", 401, "Jwt verification fails"},
		{"other key", testutil.SignToken(other, claims(nil)), "", 401, "Jwt verification fails"},
		{"expired beyond the skew", testutil.SignToken(key, claims(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(time.Now().Add(-61 * time.Second)) })), "", 401, "Jwt is expired"},
		{"expired within the skew", testutil.SignToken(key, claims(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(time.Now().Add(-30 * time.Second)) })), "", 0, ""},
		{"not before, within the skew", testutil.SignToken(key, claims(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(time.Now().Add(30 * time.Second)) })), "", 0, ""},
		{"not before", testutil.SignToken(key, claims(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(time.Now().Add(5 * time.Minute)) })), "", 401, "Jwt not yet valid"},
		{"no expiry", testutil.SignToken(key, claims(func(c *jwt.Claims) { c.Expiry = nil })), "", 0, ""},
		{"issuer", testutil.SignToken(key, claims(func(c *jwt.Claims) { c.Issuer = "https://evil.test" })), "", 401, "Jwt issuer is not configured"},
		{"audience", testutil.SignToken(key, claims(func(c *jwt.Claims) { c.Audience = jwt.Audience{"billing"} })), "", 403, "Audiences in Jwt are not allowed"},
		{"one of the audiences", testutil.SignToken(key, claims(func(c *jwt.Claims) { c.Audience = jwt.Audience{"billing", "api"} })), "", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stream(tc.token, tc.query)
			lr := f.DecodeHeaders(s, &perRoute{requirement: "p"})
			switch {
			case tc.status == 0 && lr != nil:
				t.Fatalf("refused: %d %q", lr.Status, lr.Body)
			case tc.status == 0:
				if tc.token != "" && s.Request.Headers.Get("Authorization") != "" {
					t.Errorf("the token is forwarded without forward: true")
				}
			case lr == nil:
				t.Fatalf("accepted, want %d %q", tc.status, tc.body)
			case lr.Status != tc.status || !strings.HasPrefix(lr.Body, tc.body):
				t.Errorf("%d %q, want %d %q", lr.Status, lr.Body, tc.status, tc.body)
			}
		})
	}
	if lr := f.DecodeHeaders(stream("", ""), nil); lr != nil {
		t.Errorf("a route without a requirement: %d %q", lr.Status, lr.Body)
	}
}

// signingKey is an ES256 key with key id kid.
func signingKey(t testing.TB, kid string) *jose.JSONWebKey {
	t.Helper()
	s := testutil.NewSigningKey(kid)
	return s
}

// BenchmarkDecodeHeaders is the filter's cost per request on a route requiring a
// token, without sockets: "cached" for a token seen before (what a client
// sending its token on every request costs), "uncached" for a new token each
// time (an ES256 signature verified; the key set cached).
func BenchmarkDecodeHeaders(b *testing.B) {
	key := signingKey(b, "k1")
	f := primed(b, "https://issuer.test", []string{"api"}, key)
	token := testutil.SignToken(key, testutil.Claims("https://issuer.test", "api"))
	pr := &perRoute{requirement: "p"}
	for _, cached := range []bool{true, false} {
		name := "cached"
		if !cached {
			name = "uncached"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !cached {
					f.requirements["p"].verified = verifiedTokens{}
				}
				if lr := f.DecodeHeaders(stream(token, ""), pr); lr != nil {
					b.Fatal(lr.Body)
				}
			}
		})
	}
}

// A verified token is remembered, but its time limits are checked on every
// request, and a new key set forgets it.
func TestVerifiedTokensExpire(t *testing.T) {
	key := signingKey(t, "k1")
	f := primed(t, "https://issuer.test", []string{"api"}, key)
	token := testutil.SignToken(key, testutil.Claims("https://issuer.test", "api"))
	pr := &perRoute{requirement: "p"}
	if lr := f.DecodeHeaders(stream(token, ""), pr); lr != nil {
		t.Fatalf("refused: %q", lr.Body)
	}
	p := f.requirements["p"]
	v, ok := p.verified.lookup(token, p.keys.gen)
	if !ok {
		t.Fatal("a verified token is not remembered")
	}
	v.expiry = time.Now().Add(-2 * time.Minute)
	p.verified.add(token, v)
	if lr := f.DecodeHeaders(stream(token, ""), pr); lr == nil || lr.Body != "Jwt is expired" {
		t.Errorf("a remembered token past its expiry: %+v, want Jwt is expired", lr)
	}
	// A key set without the token's key: the remembered verdict no longer holds.
	p.keys.keys = &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{signingKey(t, "k2").Public()}}
	p.keys.gen++
	if lr := f.DecodeHeaders(stream(token, ""), pr); lr == nil || lr.Status != 401 {
		t.Errorf("a remembered token whose key left the key set: %+v, want 401", lr)
	}
}

// A key set given inline verifies tokens without a cluster.
func TestLocalKeySet(t *testing.T) {
	key := signingKey(t, "k1")
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Factory{}.New(packed(t, &jwtv3.JwtAuthentication{
		Providers: map[string]*jwtv3.JwtProvider{"p": {JwksSourceSpecifier: &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{
			Specifier: &corev3.DataSource_InlineString{InlineString: string(set)},
		}}}},
		RequirementMap: map[string]*jwtv3.JwtRequirement{"p": requirement("p")},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c := f.(filter.ClusterUser).Clusters(); len(c) != 0 {
		t.Errorf("clusters %v, want none", c)
	}
	pr := &perRoute{requirement: "p"}
	if lr := f.DecodeHeaders(stream(testutil.SignToken(key, testutil.Claims("i", "a")), ""), pr); lr != nil {
		t.Errorf("refused: %q", lr.Body)
	}
	if lr := f.DecodeHeaders(stream(testutil.SignToken(signingKey(t, "k2"), testutil.Claims("i", "a")), ""), pr); lr == nil || lr.Status != 401 {
		t.Errorf("a token of another key: %+v, want 401", lr)
	}
}
