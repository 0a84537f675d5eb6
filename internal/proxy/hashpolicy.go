package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// hashPolicy is one RouteAction.hash_policy entry: what a request is hashed
// on for RING_HASH and MAGLEV clusters.
type hashPolicy struct {
	sourceIP bool   // connection_properties.source_ip
	header   string // lower-cased header name; "" for sourceIP
	terminal bool
}

func convertHashPolicies(hps []*routev3.RouteAction_HashPolicy) ([]hashPolicy, error) {
	var out []hashPolicy
	for i, hp := range hps {
		p, err := convertHashPolicy(hp)
		if err != nil {
			return nil, fmt.Errorf("hash_policy #%d: %w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func convertHashPolicy(hp *routev3.RouteAction_HashPolicy) (hashPolicy, error) {
	p := hashPolicy{terminal: hp.GetTerminal()}
	switch s := hp.GetPolicySpecifier().(type) {
	case *routev3.RouteAction_HashPolicy_ConnectionProperties_:
		if !s.ConnectionProperties.GetSourceIp() {
			return p, errors.New("connection_properties without source_ip is not supported")
		}
		p.sourceIP = true
	case *routev3.RouteAction_HashPolicy_Header_:
		if s.Header.GetRegexRewrite() != nil {
			return p, errors.New("header.regex_rewrite is not supported")
		}
		p.header = strings.ToLower(s.Header.GetHeaderName())
	default:
		return p, fmt.Errorf("%T is not supported (only connection_properties.source_ip and header)", hp.GetPolicySpecifier())
	}
	return p, nil
}

// requestHash combines the hashes of the policies as Envoy does: each new
// hash is XORed into the previous one rotated left by one bit, and a
// terminal policy that produced a hash ends the evaluation. No hash at all
// (e.g. an absent header) means the load balancer picks at random.
func requestHash(policies []hashPolicy, r *http.Request, ri *requestInfo) pickContext {
	var pc pickContext
	for _, p := range policies {
		if h, ok := p.evaluate(r, ri); ok {
			if pc.hasHash {
				pc.hash = pc.hash<<1 | pc.hash>>63
			}
			pc.hash ^= h
			pc.hasHash = true
		}
		if p.terminal && pc.hasHash {
			break
		}
	}
	return pc
}

func (p hashPolicy) evaluate(r *http.Request, ri *requestInfo) (uint64, bool) {
	if p.sourceIP {
		ip, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			return 0, false
		}
		return xxHash64String(ip), true
	}
	return headerHash(p.header, ri)
}

// headerHash hashes a header's values, sorted so that their order does not
// matter, each value seeding the next one's hash (Envoy's hash of a span).
func headerHash(name string, ri *requestInfo) (uint64, bool) {
	var values []string
	if strings.HasPrefix(name, ":") || name == "host" {
		v, ok := ri.headerValue(name)
		if !ok {
			return 0, false
		}
		values = []string{v}
	} else {
		values = slices.Clone(ri.header.Values(name))
	}
	if len(values) == 0 {
		return 0, false
	}
	slices.Sort(values)
	var h uint64
	for _, v := range values {
		h = xxHash64([]byte(v), h)
	}
	return h, true
}
