package ratelimit

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// RouteLimits are a route's rate_limits and its virtual host's, converted
// (ParseLimits): the proxy keeps them with the route and hands them to the
// filter in filter.Route.RateLimits.
type RouteLimits struct {
	Route, VirtualHost []Limit
}

// Limit is one RateLimit: its actions make one descriptor, or none when an
// action has no entry for the request.
type Limit struct {
	actions []action
}

// action makes a descriptor entry of a request; ok false: this request gets
// no descriptor from the limit; skip: the action adds no entry but the
// descriptor stands (request_headers' skip_if_absent).
type action func(s *filter.Stream) (e *commonv3.RateLimitDescriptor_Entry, ok bool)

// ParseLimits converts rate_limits (a route action's or a virtual host's).
// Errors name the field.
func ParseLimits(in []*routev3.RateLimit) ([]Limit, error) {
	out := make([]Limit, 0, len(in))
	for i, rl := range in {
		l, err := parseLimit(rl)
		if err != nil {
			return nil, fmt.Errorf("rate_limits[%d]: %w", i, err)
		}
		out = append(out, l)
	}
	return out, nil
}

func parseLimit(rl *routev3.RateLimit) (Limit, error) {
	switch {
	case rl.GetStage().GetValue() != 0:
		return Limit{}, errors.New("stage other than 0 is not supported")
	case rl.GetDisableKey() != "":
		return Limit{}, errors.New("disable_key is not supported")
	case rl.GetLimit() != nil:
		return Limit{}, errors.New("limit is not supported")
	case rl.GetHitsAddend() != nil:
		return Limit{}, errors.New("hits_addend is not supported")
	case rl.GetApplyOnStreamDone():
		return Limit{}, errors.New("apply_on_stream_done is not supported")
	}
	var l Limit
	for i, a := range rl.GetActions() {
		act, err := parseAction(a)
		if err != nil {
			return Limit{}, fmt.Errorf("actions[%d]: %w", i, err)
		}
		l.actions = append(l.actions, act)
	}
	return l, nil
}

func parseAction(a *routev3.RateLimit_Action) (action, error) {
	switch x := a.GetActionSpecifier().(type) {
	case *routev3.RateLimit_Action_GenericKey_:
		key := x.GenericKey.GetDescriptorKey()
		if key == "" {
			key = "generic_key"
		}
		e := &commonv3.RateLimitDescriptor_Entry{Key: key, Value: x.GenericKey.GetDescriptorValue()}
		return func(*filter.Stream) (*commonv3.RateLimitDescriptor_Entry, bool) { return e, true }, nil
	case *routev3.RateLimit_Action_RequestHeaders_:
		h := x.RequestHeaders
		return func(s *filter.Stream) (*commonv3.RateLimitDescriptor_Entry, bool) {
			v := s.Request.Headers.Values(h.GetHeaderName())
			if len(v) == 0 {
				return nil, h.GetSkipIfAbsent()
			}
			return &commonv3.RateLimitDescriptor_Entry{Key: h.GetDescriptorKey(), Value: strings.Join(v, ",")}, true
		}, nil
	case *routev3.RateLimit_Action_RemoteAddress_:
		return func(s *filter.Stream) (*commonv3.RateLimitDescriptor_Entry, bool) {
			if !s.Request.Client.IsValid() {
				return nil, false
			}
			return &commonv3.RateLimitDescriptor_Entry{Key: "remote_address", Value: s.Request.Client.String()}, true
		}, nil
	case *routev3.RateLimit_Action_HeaderValueMatch_:
		return headerValueMatch(x.HeaderValueMatch)
	}
	return nil, fmt.Errorf("%T is not supported", a.GetActionSpecifier())
}

func headerValueMatch(m *routev3.RateLimit_Action_HeaderValueMatch) (action, error) {
	if m.GetDefaultValue() != "" {
		return nil, errors.New("header_value_match.default_value is not supported")
	}
	key := m.GetDescriptorKey()
	if key == "" {
		key = "header_match"
	}
	expect := m.GetExpectMatch() == nil || m.GetExpectMatch().GetValue()
	matchers := make([]headerMatcher, 0, len(m.GetHeaders()))
	for i, h := range m.GetHeaders() {
		hm, err := parseHeaderMatcher(h)
		if err != nil {
			return nil, fmt.Errorf("header_value_match.headers[%d]: %w", i, err)
		}
		matchers = append(matchers, hm)
	}
	e := &commonv3.RateLimitDescriptor_Entry{Key: key, Value: m.GetDescriptorValue()}
	return func(s *filter.Stream) (*commonv3.RateLimitDescriptor_Entry, bool) {
		all := true
		for _, hm := range matchers {
			all = all && hm.matches(s.Request.Headers)
		}
		return e, all == expect
	}, nil
}

// headerMatcher is a route HeaderMatcher of the kinds HTTPProxy's header
// conditions make: present, or a string match; repeated headers are matched
// as one value joined by ",", as Envoy does.
type headerMatcher struct {
	name          string
	present       bool // a present_match: only presence counts
	match         func(string) bool
	invert        bool
	missingAsNull bool // treat_missing_header_as_empty
}

func parseHeaderMatcher(h *routev3.HeaderMatcher) (headerMatcher, error) {
	hm := headerMatcher{name: h.GetName(), invert: h.GetInvertMatch(), missingAsNull: h.GetTreatMissingHeaderAsEmpty()}
	if strings.HasPrefix(hm.name, ":") {
		return hm, fmt.Errorf("pseudo-header %q is not supported", hm.name)
	}
	switch x := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_PresentMatch:
		hm.present = true
		if !x.PresentMatch {
			hm.invert = !hm.invert
		}
	case *routev3.HeaderMatcher_ExactMatch:
		v := x.ExactMatch
		hm.match = func(s string) bool { return s == v }
	case *routev3.HeaderMatcher_StringMatch:
		sm := x.StringMatch
		fold := sm.GetIgnoreCase()
		norm := func(s string) string {
			if fold {
				return strings.ToLower(s)
			}
			return s
		}
		switch {
		case sm.GetExact() != "" || sm.GetMatchPattern() == nil:
			v := norm(sm.GetExact())
			hm.match = func(s string) bool { return norm(s) == v }
		case sm.GetPrefix() != "":
			v := norm(sm.GetPrefix())
			hm.match = func(s string) bool { return strings.HasPrefix(norm(s), v) }
		case sm.GetSuffix() != "":
			v := norm(sm.GetSuffix())
			hm.match = func(s string) bool { return strings.HasSuffix(norm(s), v) }
		case sm.GetContains() != "":
			v := norm(sm.GetContains())
			hm.match = func(s string) bool { return strings.Contains(norm(s), v) }
		case sm.GetSafeRegex() != nil:
			re, err := regexp.Compile("^(?:" + sm.GetSafeRegex().GetRegex() + ")$")
			if err != nil {
				return hm, fmt.Errorf("safe_regex: %w", err)
			}
			hm.match = re.MatchString
		default:
			return hm, fmt.Errorf("string_match %T is not supported", sm.GetMatchPattern())
		}
	default:
		return hm, fmt.Errorf("%T is not supported", h.GetHeaderMatchSpecifier())
	}
	return hm, nil
}

func (hm headerMatcher) matches(h filter.Headers) bool {
	vs := h.Values(hm.name)
	if hm.present {
		return (len(vs) > 0) != hm.invert
	}
	if len(vs) == 0 && !hm.missingAsNull {
		// A missing header fails the match, inverted or not, as in Envoy.
		return false
	}
	return hm.match(strings.Join(vs, ",")) != hm.invert
}

// descriptors are the request's descriptors from limits.
func descriptors(s *filter.Stream, limits []Limit) []*commonv3.RateLimitDescriptor {
	var out []*commonv3.RateLimitDescriptor
	for _, l := range limits {
		d := &commonv3.RateLimitDescriptor{}
		ok := true
		for _, a := range l.actions {
			e, keep := a(s)
			if !keep {
				ok = false
				break
			}
			if e != nil {
				d.Entries = append(d.Entries, e)
			}
		}
		if ok && len(d.Entries) > 0 {
			out = append(out, d)
		}
	}
	return out
}
