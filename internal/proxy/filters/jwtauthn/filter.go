package jwtauthn

import (
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// jwtFilter verifies the token of the requirement a route names. It does
// nothing on a route without one (RouteScoped).
type jwtFilter struct {
	requirements map[string]*provider
}

func (*jwtFilter) RouteScoped() bool { return true }

// Clusters are those of the providers' key sets.
func (f *jwtFilter) Clusters() []string {
	out := make([]string, 0, len(f.requirements))
	for _, p := range f.requirements {
		if !p.keys.static && !slices.Contains(out, p.keys.cluster) {
			out = append(out, p.keys.cluster)
		}
	}
	slices.Sort(out)
	return out
}

// provider is one JwtProvider.
type provider struct {
	name              string
	issuer            string
	audiences         []string
	forward           bool
	requireExpiration bool
	clockSkew         time.Duration
	keys              *keySet
	verified          verifiedTokens
}

// signatureAlgorithms are those a token may be signed with: Envoy's list.
var signatureAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.HS256, jose.HS384, jose.HS512, jose.EdDSA,
}

// failure is why a request is refused: the status and body Envoy answers.
type failure struct {
	status int
	body   string
}

// The failures, as Envoy words them: 403 for a token meant for someone else,
// 401 otherwise.
var (
	errMissing       = &failure{401, "Jwt is missing"}
	errBadFormat     = &failure{401, "Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections"}
	errVerification  = &failure{401, "Jwt verification fails"}
	errExpired       = &failure{401, "Jwt is expired"}
	errNotYetValid   = &failure{401, "Jwt not yet valid"}
	errNoExpiration  = &failure{401, "Jwt doesn't have expiration time"}
	errIssuer        = &failure{401, "Jwt issuer is not configured"}
	errAudience      = &failure{403, "Audiences in Jwt are not allowed"}
	errNoKey         = &failure{401, "Jwks doesn't have key to match kid or alg from Jwt"}
	errFetch         = &failure{401, "Jwks remote fetch is failed"}
	errNoRequirement = &failure{403, "Jwt requirement is not configured"}
)

func (f *jwtFilter) DecodeHeaders(s *filter.Stream, cfg any) *filter.LocalReply {
	pr, _ := cfg.(*perRoute)
	if pr == nil {
		return nil
	}
	p := f.requirements[pr.requirement]
	if p == nil {
		return reply(s, errNoRequirement)
	}
	token, fromHeader := extractToken(&s.Request)
	if token == "" {
		return reply(s, errMissing)
	}
	if f := p.verify(s, token); f != nil {
		return reply(s, f)
	}
	if fromHeader && !p.forward {
		s.Request.Headers.Del("Authorization")
	}
	return nil
}

// extractToken finds the token where Envoy looks by default: the Authorization
// header's Bearer value, then the access_token query parameter.
func extractToken(r *filter.Request) (token string, fromHeader bool) {
	for _, v := range r.Headers.Values("Authorization") {
		if len(v) > 7 && strings.EqualFold(v[:7], "Bearer ") {
			return strings.TrimSpace(v[7:]), true
		}
	}
	if r.RawQuery != "" && strings.Contains(r.RawQuery, "access_token=") {
		if q, err := url.ParseQuery(r.RawQuery); err == nil {
			return q.Get("access_token"), false
		}
	}
	return "", false
}

// verify checks the token's signature with the provider's keys, then its
// claims. An unknown key id fetches the key set again (at most every
// refetchInterval): the issuer may have rotated its keys since the last fetch.
func (p *provider) verify(s *filter.Stream, token string) *failure {
	set, gen, err := p.keys.get(s, false)
	if err != nil {
		return errFetch
	}
	if v, ok := p.verified.lookup(token, gen); ok {
		return p.checkTimes(v, time.Now())
	}
	tok, err := jwt.ParseSigned(token, signatureAlgorithms)
	if err != nil {
		return errBadFormat
	}
	if len(tok.Headers) != 1 {
		return errBadFormat
	}
	h := tok.Headers[0]
	candidates := matchingKeys(set, h)
	if len(candidates) == 0 && h.KeyID != "" {
		if set, gen, err = p.keys.get(s, true); err == nil {
			candidates = matchingKeys(set, h)
		}
	}
	if len(candidates) == 0 {
		return errNoKey
	}
	var claims jwt.Claims
	verified := false
	for _, k := range candidates {
		if tok.Claims(k.Key, &claims) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return errVerification
	}
	if f := p.checkClaims(&claims, time.Now()); f != nil {
		return f
	}
	p.verified.add(token, timesOf(&claims, gen))
	return nil
}

func timesOf(c *jwt.Claims, gen uint64) verifiedToken {
	v := verifiedToken{gen: gen, hasExpiry: c.Expiry != nil, hasNBF: c.NotBefore != nil}
	if v.hasExpiry {
		v.expiry = c.Expiry.Time()
	}
	if v.hasNBF {
		v.notBefore = c.NotBefore.Time()
	}
	return v
}

// matchingKeys are the keys of set that may have signed a token with header h:
// those of its key id (all when it has none), of its algorithm when they say.
func matchingKeys(set *jose.JSONWebKeySet, h jose.Header) []jose.JSONWebKey {
	if set == nil {
		return nil
	}
	keys := set.Keys
	if h.KeyID != "" {
		keys = set.Key(h.KeyID)
	}
	out := make([]jose.JSONWebKey, 0, len(keys))
	for _, k := range keys {
		if (k.Algorithm == "" || k.Algorithm == h.Algorithm) && (k.Use == "" || k.Use == "sig") {
			out = append(out, k)
		}
	}
	return out
}

// checkClaims applies the provider's issuer and audiences, and the token's
// time limits with the clock skew Envoy allows.
func (p *provider) checkClaims(c *jwt.Claims, now time.Time) *failure {
	if f := p.checkTimes(timesOf(c, 0), now); f != nil {
		return f
	}
	switch {
	case p.issuer != "" && c.Issuer != p.issuer:
		return errIssuer
	case len(p.audiences) > 0 && !slices.ContainsFunc(c.Audience, func(a string) bool { return slices.Contains(p.audiences, a) }):
		return errAudience
	}
	return nil
}

// checkTimes applies a token's time limits with the clock skew Envoy allows.
func (p *provider) checkTimes(v verifiedToken, now time.Time) *failure {
	switch {
	case !v.hasExpiry && p.requireExpiration:
		return errNoExpiration
	case v.hasExpiry && now.After(v.expiry.Add(p.clockSkew)):
		return errExpired
	case v.hasNBF && now.Add(p.clockSkew).Before(v.notBefore):
		return errNotYetValid
	}
	return nil
}

// reply is Envoy's answer to a request that fails a requirement, with a
// WWW-Authenticate challenge.
func reply(s *filter.Stream, f *failure) *filter.LocalReply {
	r := &s.Request
	challenge := `Bearer realm="` + r.Scheme + "://" + r.Authority + r.Path + `"`
	if f != errMissing {
		challenge += `, error="invalid_token"`
	}
	return &filter.LocalReply{
		Status:  f.status,
		Body:    f.body,
		Headers: []filter.HeaderValue{{Name: "Www-Authenticate", Value: challenge, Overwrite: true}},
		Details: "jwt_authn_access_denied{" + strings.ReplaceAll(f.body, " ", "_") + "}",
	}
}
