package router

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/portico-dev/portico/internal/proxy/upstream"
)

// HashPolicy is one RouteAction.hash_policy entry: what a request is hashed
// on for RING_HASH and MAGLEV clusters.
type HashPolicy struct {
	Kind     hashKind
	SourceIP bool   // connection_properties.source_ip
	Header   string // lower-cased header name
	Terminal bool
	// query_parameter: the parameter's name; cookie: the cookie's name.
	Name string
	// cookie: with a ttl, a client without the cookie gets one generated
	// (and hashed on), set with Max-Age (unless 0) and Path (unless "").
	HasTTL     bool
	TtlSeconds int64
	path       string
	attributes string // "; name=value" for each of the cookie's attributes
}

type hashKind uint8

const (
	hashHeader hashKind = iota // also source IP, see sourceIP
	HashQueryParameter
	HashCookie
)

func convertHashPolicies(hps []*routev3.RouteAction_HashPolicy) ([]HashPolicy, error) {
	var out []HashPolicy
	for i, hp := range hps {
		p, err := convertHashPolicy(hp)
		if err != nil {
			return nil, fmt.Errorf("hash_policy #%d: %w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func convertHashPolicy(hp *routev3.RouteAction_HashPolicy) (HashPolicy, error) {
	p := HashPolicy{Terminal: hp.GetTerminal()}
	switch s := hp.GetPolicySpecifier().(type) {
	case *routev3.RouteAction_HashPolicy_ConnectionProperties_:
		if !s.ConnectionProperties.GetSourceIp() {
			return p, errors.New("connection_properties without source_ip is not supported")
		}
		p.SourceIP = true
	case *routev3.RouteAction_HashPolicy_Header_:
		if s.Header.GetRegexRewrite() != nil {
			return p, errors.New("header.regex_rewrite is not supported")
		}
		p.Header = strings.ToLower(s.Header.GetHeaderName())
	case *routev3.RouteAction_HashPolicy_QueryParameter_:
		p.Kind, p.Name = HashQueryParameter, s.QueryParameter.GetName()
	case *routev3.RouteAction_HashPolicy_Cookie_:
		c := s.Cookie
		if c.GetTtl() != nil {
			d := c.GetTtl().AsDuration()
			if d < 0 {
				return p, fmt.Errorf("cookie %q: negative ttl %v", c.GetName(), d)
			}
			// Envoy counts Max-Age in whole seconds, truncating.
			p.HasTTL, p.TtlSeconds = true, int64(d/time.Second)
		}
		p.Kind, p.Name, p.path = HashCookie, c.GetName(), c.GetPath()
		for _, a := range c.GetAttributes() {
			p.attributes += "; " + a.GetName()
			if a.GetValue() != "" {
				p.attributes += "=" + a.GetValue()
			}
		}
	default:
		return p, fmt.Errorf("%T is not supported (only connection_properties.source_ip, header, query_parameter and cookie)", hp.GetPolicySpecifier())
	}
	return p, nil
}

// RequestHash combines the hashes of the policies as Envoy does: each new
// hash is XORed into the previous one rotated left by one bit, and a
// terminal policy that produced a hash ends the evaluation. No hash at all
// (e.g. an absent header) means the load balancer picks at random.
func RequestHash(policies []HashPolicy, r *http.Request, ri *RequestInfo) upstream.PickContext {
	pc, _ := HashRequest(policies, r, ri)
	return pc
}

// HashRequest is requestHash that also returns the Set-Cookie values of the
// cookies that cookie policies generated, for the upstream's response.
func HashRequest(policies []HashPolicy, r *http.Request, ri *RequestInfo) (upstream.PickContext, []string) {
	var pc upstream.PickContext
	var cookies []string
	for _, p := range policies {
		h, ok := p.evaluate(r, ri)
		if !ok && p.Kind == HashCookie && p.HasTTL {
			var c string
			h, c = p.generateCookie(r)
			ok, cookies = true, append(cookies, c)
		}
		if ok {
			if pc.HasHash {
				pc.Hash = pc.Hash<<1 | pc.Hash>>63
			}
			pc.Hash ^= h
			pc.HasHash = true
		}
		if p.Terminal && pc.HasHash {
			break
		}
	}
	return pc, cookies
}

func (p HashPolicy) evaluate(r *http.Request, ri *RequestInfo) (uint64, bool) {
	switch p.Kind {
	case HashQueryParameter:
		v, ok := firstQueryValue(ri.RawQuery, p.Name)
		if !ok {
			return 0, false
		}
		return upstream.XXHash64String(v), true
	case HashCookie:
		// An empty value counts as absent, as in Envoy.
		if v := cookieValue(ri.Header, p.Name); v != "" {
			return upstream.XXHash64String(v), true
		}
		return 0, false
	}
	if p.SourceIP {
		// The client's address as the connection manager decides it: behind
		// trusted hops, X-Forwarded-For's, as Envoy hashes its remote address.
		if ri.Client != nil {
			if a, ok := ri.Client.ForwardedClient(ri.Header.Values("X-Forwarded-For")); ok {
				return upstream.XXHash64String(a.String()), true
			}
		}
		ip, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			return 0, false
		}
		return upstream.XXHash64String(ip), true
	}
	return headerHash(p.Header, ri)
}

// headerHash hashes a header's values, sorted so that their order does not
// matter, each value seeding the next one's hash (Envoy's hash of a span).
func headerHash(name string, ri *RequestInfo) (uint64, bool) {
	var values []string
	if strings.HasPrefix(name, ":") || name == "host" {
		v, ok := ri.headerValue(name)
		if !ok {
			return 0, false
		}
		values = []string{v}
	} else {
		values = slices.Clone(ri.Header.Values(name))
	}
	if len(values) == 0 {
		return 0, false
	}
	slices.Sort(values)
	var h uint64
	for _, v := range values {
		h = upstream.XXHash64([]byte(v), h)
	}
	return h, true
}

// cookieValue returns the value of the first cookie called name in the
// Cookie headers, parsed as Envoy does: "; "-separated pairs, leading
// spaces dropped, surrounding double quotes removed.
func cookieValue(h http.Header, name string) string {
	for _, line := range h["Cookie"] {
		for line != "" {
			var c string
			c, line, _ = strings.Cut(line, ";")
			k, v, ok := strings.Cut(strings.TrimLeft(c, " "), "=")
			if !ok || k != name {
				continue
			}
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v
		}
	}
	return ""
}

// generateCookie makes the cookie Envoy makes for a client without one: its
// value is the hex xxHash64 of the connection's remote and local addresses
// (the same for every request of the connection), and the request is hashed
// on that value, as it will be when the client sends it back.
func (p HashPolicy) generateCookie(r *http.Request) (uint64, string) {
	local := ""
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		local = a.String()
	}
	value := fmt.Sprintf("%016x", upstream.XXHash64String(r.RemoteAddr+local))
	c := p.Name + "=\"" + value + "\""
	if p.TtlSeconds != 0 {
		c += "; Max-Age=" + strconv.FormatInt(p.TtlSeconds, 10)
	}
	if p.path != "" {
		c += "; Path=" + p.path
	}
	c += p.attributes + "; HttpOnly"
	return upstream.XXHash64String(value), c
}
