// Package jwtauthn is Envoy's JWT authentication filter
// (envoy.filters.http.jwt_authn) for the embedded proxy: a route's requirement
// names a provider, whose token the request must carry, signed by a key of the
// provider's key set and valid for its issuer, audiences and time.
//
// Tokens are verified with go-jose (github.com/go-jose/go-jose/v4): a JOSE
// library with no dependencies beyond the standard library, maintained, with a
// published threat model, whose JWT package parses only the algorithms it is
// given and verifies before it decodes claims.
package jwtauthn

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// Envoy's defaults.
const (
	defaultClockSkew     = 60 * time.Second
	defaultCacheDuration = 10 * time.Minute
	defaultFetchTimeout  = time.Second
)

// Factory makes the filter from a JwtAuthentication.
type Factory struct{}

var _ filter.PerRouteFactory = Factory{}

func (Factory) Name() string                { return "envoy.filters.http.jwt_authn" }
func (Factory) ConfigType() proto.Message   { return &jwtv3.JwtAuthentication{} }
func (Factory) PerRouteType() proto.Message { return &jwtv3.PerRouteConfig{} }

// New converts the providers and the requirement map. Rules (route matching of
// the filter's own) are not supported: routes select requirements by name.
func (Factory) New(a *anypb.Any) (filter.Filter, error) {
	var cfg jwtv3.JwtAuthentication
	if err := a.UnmarshalTo(&cfg); err != nil {
		return nil, err
	}
	if len(cfg.GetRules()) > 0 {
		return nil, errors.New("rules: not supported; select requirement_map entries per route (PerRouteConfig.requirement_name)")
	}
	if cfg.GetFilterStateRules() != nil {
		return nil, errors.New("filter_state_rules: not supported")
	}
	providers := make(map[string]*provider, len(cfg.GetProviders()))
	for name, p := range cfg.GetProviders() {
		pv, err := newProvider(name, p)
		if err != nil {
			return nil, fmt.Errorf("providers[%q]: %w", name, err)
		}
		providers[name] = pv
	}
	f := &jwtFilter{requirements: make(map[string]*provider, len(cfg.GetRequirementMap()))}
	for name, r := range cfg.GetRequirementMap() {
		pname := r.GetProviderName()
		if pname == "" {
			return nil, fmt.Errorf("requirement_map[%q]: only provider_name is supported", name)
		}
		p, ok := providers[pname]
		if !ok {
			return nil, fmt.Errorf("requirement_map[%q].provider_name: no provider %q", name, pname)
		}
		f.requirements[name] = p
	}
	return f, nil
}

// newProvider converts one provider. Fields that would change what is
// accepted, or what the upstream receives, and that the filter does not
// implement are refused rather than ignored.
func newProvider(name string, p *jwtv3.JwtProvider) (*provider, error) {
	switch {
	case len(p.GetFromHeaders()) > 0 || len(p.GetFromParams()) > 0 || len(p.GetFromCookies()) > 0:
		return nil, errors.New("from_headers, from_params, from_cookies: not supported; tokens are read from the Authorization header's Bearer value or the access_token query parameter")
	case p.GetForwardPayloadHeader() != "" || len(p.GetClaimToHeaders()) > 0:
		return nil, errors.New("forward_payload_header, claim_to_headers: not supported")
	case p.GetSubjects() != nil:
		return nil, errors.New("subjects: not supported")
	}
	out := &provider{
		name:              name,
		issuer:            p.GetIssuer(),
		audiences:         p.GetAudiences(),
		forward:           p.GetForward(),
		requireExpiration: p.GetRequireExpiration(),
		clockSkew:         defaultClockSkew,
	}
	if s := p.GetClockSkewSeconds(); s > 0 {
		out.clockSkew = time.Duration(s) * time.Second
	}
	if local := p.GetLocalJwks(); local != nil {
		keys, err := localKeySet(local)
		if err != nil {
			return nil, fmt.Errorf("local_jwks: %w", err)
		}
		out.keys = keys
		return out, nil
	}
	remote := p.GetRemoteJwks()
	if remote == nil {
		return nil, errors.New("remote_jwks or local_jwks is required")
	}
	uri := remote.GetHttpUri()
	if uri.GetCluster() == "" {
		return nil, errors.New("remote_jwks.http_uri.cluster is required")
	}
	u, err := url.Parse(uri.GetUri())
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("remote_jwks.http_uri.uri %q: an http or https URL is required", uri.GetUri())
	}
	if remote.GetAsyncFetch() != nil || remote.GetRetryPolicy() != nil {
		return nil, errors.New("remote_jwks.async_fetch, remote_jwks.retry_policy: not supported")
	}
	out.keys = &keySet{uri: uri.GetUri(), cluster: uri.GetCluster(), timeout: defaultFetchTimeout, cacheDuration: defaultCacheDuration}
	if d := uri.GetTimeout(); d != nil && d.AsDuration() > 0 {
		out.keys.timeout = d.AsDuration()
	}
	if d := remote.GetCacheDuration(); d != nil && d.AsDuration() > 0 {
		out.keys.cacheDuration = d.AsDuration()
	}
	return out, nil
}

// perRoute is a route's requirement: the name of a requirement_map entry.
type perRoute struct {
	requirement string
	disabled    bool
}

// DisablesFilter lets the chain skip the filter on a disabled route.
func (p *perRoute) DisablesFilter() bool { return p.disabled }

// ParsePerRoute converts a PerRouteConfig.
func (Factory) ParsePerRoute(a *anypb.Any) (any, error) {
	var cfg jwtv3.PerRouteConfig
	if err := a.UnmarshalTo(&cfg); err != nil {
		return nil, err
	}
	if cfg.GetDisabled() {
		return &perRoute{disabled: true}, nil
	}
	name := cfg.GetRequirementName()
	if name == "" {
		return nil, errors.New("requirement_name or disabled is required")
	}
	return &perRoute{requirement: name}, nil
}

// localKeySet is a key set given inline: it never expires nor is fetched.
func localKeySet(ds *corev3.DataSource) (*keySet, error) {
	var data []byte
	switch {
	case ds.GetInlineString() != "":
		data = []byte(ds.GetInlineString())
	case len(ds.GetInlineBytes()) > 0:
		data = ds.GetInlineBytes()
	default:
		return nil, errors.New("only inline_string and inline_bytes are supported")
	}
	set, err := parseKeySet(data)
	if err != nil {
		return nil, err
	}
	return &keySet{keys: set, static: true, gen: 1}, nil
}
