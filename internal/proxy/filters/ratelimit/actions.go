package ratelimit

import (
	"errors"
	"fmt"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
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
		for i := range matchers {
			all = all && matchers[i].matches(s.Request.Headers)
		}
		return e, all == expect
	}, nil
}

// headerMatcher is a route HeaderMatcher on a request header: repeated
// headers are matched as one value joined by ",", as Envoy does.
type headerMatcher struct {
	name  string
	match xdsconv.HeaderMatcher
}

func parseHeaderMatcher(h *routev3.HeaderMatcher) (headerMatcher, error) {
	if strings.HasPrefix(h.GetName(), ":") {
		return headerMatcher{}, fmt.Errorf("pseudo-header %q is not supported", h.GetName())
	}
	m, err := xdsconv.NewHeaderMatcher(h)
	return headerMatcher{name: h.GetName(), match: m}, err
}

func (hm *headerMatcher) matches(h filter.Headers) bool {
	vs := h.Values(hm.name)
	return hm.match.Match(strings.Join(vs, ","), len(vs) > 0)
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
