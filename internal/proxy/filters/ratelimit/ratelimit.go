// Package ratelimit is Envoy's envoy.filters.http.ratelimit for the embedded
// proxy: global rate limits decided by a rate limit service
// (envoy.service.ratelimit.v3.RateLimitService over gRPC, such as
// envoyproxy/ratelimit), reached as a cluster of the proxy's configuration.
//
// The descriptors come from the route's rate_limits and its virtual host's
// (route fields, which the proxy converts with ParseRouteLimits and hands over
// in filter.Route.RateLimits); typed_per_filter_config (RateLimitPerRoute)
// says whether the virtual host's apply. A request with no descriptor is not
// sent to the service.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.http.ratelimit"

// defaultTimeout is Envoy's for a call to the service.
const defaultTimeout = 20 * time.Millisecond

// Factory makes the filter; register it in the proxy's registry.
type Factory struct{}

func (Factory) Name() string                { return Name }
func (Factory) ConfigType() proto.Message   { return &ratelimitv3.RateLimit{} }
func (Factory) PerRouteType() proto.Message { return &ratelimitv3.RateLimitPerRoute{} }

// Filter asks the rate limit service about each request with descriptors.
type Filter struct {
	domain         string
	cluster        string
	timeout        time.Duration
	failClosed     bool
	errorStatus    int
	limitedStatus  int
	limitedGRPC    int // grpc-status of a limited gRPC request; 0: limitedStatus's
	xEnvoyHeader   bool
	xRateLimit     bool
	limitedHeaders []filter.HeaderValue
}

// New converts the connection manager's configuration.
func (Factory) New(a *anypb.Any) (filter.Filter, error) {
	var m ratelimitv3.RateLimit
	if err := filter.Unmarshal(a, &m); err != nil {
		return nil, err
	}
	if err := filter.Unsupported(
		filter.Field{Name: "stage", Set: m.GetStage() != 0},
		filter.Field{Name: "request_type other than both", Set: m.GetRequestType() != "" && m.GetRequestType() != "both"},
		filter.Field{Name: "filter_enabled", Set: m.GetFilterEnabled() != nil},
		filter.Field{Name: "filter_enforced", Set: m.GetFilterEnforced() != nil},
		filter.Field{Name: "failure_mode_deny_percent", Set: m.GetFailureModeDenyPercent() != nil},
		filter.Field{Name: "rate_limits", Set: len(m.GetRateLimits()) > 0},
		filter.Field{Name: "enable_retry_after_header", Set: m.GetEnableRetryAfterHeader()},
	); err != nil {
		return nil, err
	}
	svc := m.GetRateLimitService()
	if svc.GetTransportApiVersion() != corev3.ApiVersion_V3 {
		return nil, errors.New("rate_limit_service.transport_api_version must be V3")
	}
	cluster := svc.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	if cluster == "" {
		return nil, errors.New("rate_limit_service.grpc_service: only envoy_grpc (a cluster) is supported")
	}
	f := &Filter{
		domain:        m.GetDomain(),
		cluster:       cluster,
		timeout:       defaultTimeout,
		failClosed:    m.GetFailureModeDeny(),
		errorStatus:   http.StatusInternalServerError,
		limitedStatus: http.StatusTooManyRequests,
		xEnvoyHeader:  !m.GetDisableXEnvoyRatelimitedHeader(),
		xRateLimit:    m.GetEnableXRatelimitHeaders() == ratelimitv3.RateLimit_DRAFT_VERSION_03,
	}
	if t := m.GetTimeout(); t != nil {
		f.timeout = t.AsDuration()
	}
	if s := m.GetRateLimitedStatus(); s != nil {
		f.limitedStatus = int(s.GetCode())
	}
	if m.GetRateLimitedAsResourceExhausted() {
		f.limitedGRPC = grpcResourceExhausted
	}
	if s := m.GetStatusOnError(); s != nil {
		f.errorStatus = int(s.GetCode())
	}
	for i, h := range m.GetResponseHeadersToAdd() {
		if len(h.GetHeader().GetRawValue()) > 0 {
			return nil, fmt.Errorf("response_headers_to_add[%d].header.raw_value is not supported", i)
		}
		f.limitedHeaders = append(f.limitedHeaders, filter.HeaderValue{Name: h.GetHeader().GetKey(), Value: h.GetHeader().GetValue(),
			Overwrite: h.GetAppendAction() == corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD})
	}
	return f, nil
}

// grpcResourceExhausted is gRPC's RESOURCE_EXHAUSTED, which
// rate_limited_as_resource_exhausted gives limited gRPC requests instead of
// the UNAVAILABLE of a 429.
const grpcResourceExhausted = 8

// Clusters is the rate limit service's cluster, which the proxy keeps with
// the connection manager.
func (f *Filter) Clusters() []string { return []string{f.cluster} }

// perRoute is a RateLimitPerRoute, converted.
type perRoute struct {
	vhost ratelimitv3.RateLimitPerRoute_VhRateLimitsOptions
}

// ParsePerRoute converts a route's RateLimitPerRoute.
func (Factory) ParsePerRoute(a *anypb.Any) (any, error) {
	var m ratelimitv3.RateLimitPerRoute
	if err := filter.Unmarshal(a, &m); err != nil {
		return nil, err
	}
	switch {
	case len(m.GetRateLimits()) > 0:
		return nil, errors.New("rate_limits is not supported: the route's own rate_limits are")
	case m.GetDomain() != "":
		return nil, errors.New("domain is not supported")
	case m.GetOverrideOption() != ratelimitv3.RateLimitPerRoute_DEFAULT:
		return nil, errors.New("override_option is not supported")
	}
	return &perRoute{vhost: m.GetVhRateLimits()}, nil
}

// DecodeHeaders asks the service about the request's descriptors.
func (f *Filter) DecodeHeaders(s *filter.Stream, cfg any) *filter.LocalReply {
	limits, _ := s.Route.RateLimits.(*RouteLimits)
	if limits == nil {
		return nil
	}
	pr, _ := cfg.(*perRoute)
	descs := descriptors(s, limits.Route)
	vh := ratelimitv3.RateLimitPerRoute_OVERRIDE
	if pr != nil {
		vh = pr.vhost
	}
	if vh == ratelimitv3.RateLimitPerRoute_INCLUDE || (vh == ratelimitv3.RateLimitPerRoute_OVERRIDE && len(limits.Route) == 0) {
		descs = append(descs, descriptors(s, limits.VirtualHost)...)
	}
	if len(descs) == 0 {
		return nil
	}
	resp, err := f.ask(s, descs)
	if err != nil {
		if s.Env != nil && s.Env.Log != nil {
			s.Env.Log.Warn("rate limit service call failed", "cluster", f.cluster, "fail_closed", f.failClosed, "error", err)
		}
		if f.failClosed {
			return &filter.LocalReply{Status: f.errorStatus, Details: "rate_limiter_error"}
		}
		return nil
	}
	if f.xRateLimit {
		for _, h := range xRateLimitHeaders(resp) {
			s.SetResponseHeader(h.Name, h.Value)
		}
	}
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		for _, h := range resp.GetRequestHeadersToAdd() {
			s.Request.Headers.Set(h.GetKey(), h.GetValue())
		}
		for _, h := range resp.GetResponseHeadersToAdd() {
			s.AddResponseHeader(h.GetKey(), h.GetValue())
		}
		return nil
	}
	lr := &filter.LocalReply{Status: f.limitedStatus, GRPCStatus: f.limitedGRPC, Details: "request_rate_limited", Body: string(resp.GetRawBody())}
	for _, h := range resp.GetResponseHeadersToAdd() {
		lr.Headers = append(lr.Headers, filter.HeaderValue{Name: h.GetKey(), Value: h.GetValue()})
	}
	lr.Headers = append(lr.Headers, f.limitedHeaders...)
	if f.xEnvoyHeader {
		lr.Headers = append(lr.Headers, filter.HeaderValue{Name: "x-envoy-ratelimited", Value: "true", Overwrite: true})
	}
	return lr
}

func (f *Filter) ask(s *filter.Stream, descs []*commonv3.RateLimitDescriptor) (*rlsv3.RateLimitResponse, error) {
	if s.Env == nil || s.Env.Upstreams == nil {
		return nil, errors.New("no upstreams to reach the rate limit service")
	}
	conn, err := s.Env.Upstreams.GRPC(f.cluster)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(s.Context(), f.timeout)
	defer cancel()
	return rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: f.domain, Descriptors: descs, HitsAddend: 1})
}

// xRateLimitHeaders are the draft RFC's headers for the status with the fewest
// requests left, as Envoy writes them.
func xRateLimitHeaders(resp *rlsv3.RateLimitResponse) []filter.HeaderValue {
	var min *rlsv3.RateLimitResponse_DescriptorStatus
	for _, st := range resp.GetStatuses() {
		if st.GetCurrentLimit() == nil {
			continue
		}
		if min == nil || st.GetLimitRemaining() < min.GetLimitRemaining() {
			min = st
		}
	}
	if min == nil {
		return nil
	}
	limit := strconv.FormatUint(uint64(min.GetCurrentLimit().GetRequestsPerUnit()), 10)
	window := unitSeconds(min.GetCurrentLimit().GetUnit())
	out := []filter.HeaderValue{
		{Name: "X-RateLimit-Limit", Value: limit + ", " + limit + ";w=" + strconv.FormatInt(window, 10)},
		{Name: "X-RateLimit-Remaining", Value: strconv.FormatUint(uint64(min.GetLimitRemaining()), 10)},
	}
	if d := min.GetDurationUntilReset(); d != nil {
		out = append(out, filter.HeaderValue{Name: "X-RateLimit-Reset", Value: strconv.FormatInt(int64(d.AsDuration().Seconds()), 10)})
	}
	return out
}

func unitSeconds(u rlsv3.RateLimitResponse_RateLimit_Unit) int64 {
	switch u {
	case rlsv3.RateLimitResponse_RateLimit_SECOND:
		return 1
	case rlsv3.RateLimitResponse_RateLimit_MINUTE:
		return 60
	case rlsv3.RateLimitResponse_RateLimit_HOUR:
		return 3600
	case rlsv3.RateLimitResponse_RateLimit_DAY:
		return 86400
	case rlsv3.RateLimitResponse_RateLimit_WEEK:
		return 7 * 86400
	case rlsv3.RateLimitResponse_RateLimit_MONTH:
		return 30 * 86400
	case rlsv3.RateLimitResponse_RateLimit_YEAR:
		return 365 * 86400
	}
	return 0
}
