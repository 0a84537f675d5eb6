package hcm

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/internal/proxy/accesslog"
	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
	"github.com/portico-dev/portico/internal/proxy/router"
)

// Convert converts an HttpConnectionManager; filters builds its HTTP filter
// chain and parses the per-filter configurations of its inline routes.
func Convert(h *hcmv3.HttpConnectionManager, filters *filter.Registry) (*Spec, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("codec_type "+h.GetCodecType().String()+" (only AUTO, HTTP1 or HTTP2)", h.GetCodecType() != hcmv3.HttpConnectionManager_AUTO &&
			h.GetCodecType() != hcmv3.HttpConnectionManager_HTTP1 && h.GetCodecType() != hcmv3.HttpConnectionManager_HTTP2),
		xdsconv.Set("tracing", h.GetTracing() != nil),
		xdsconv.Set("http2_protocol_options", h.GetHttp2ProtocolOptions() != nil),
		xdsconv.Set("http3_protocol_options", h.GetHttp3ProtocolOptions() != nil),
		xdsconv.Set("scheme_header_transformation", h.GetSchemeHeaderTransformation() != nil),
		xdsconv.Set("access_log_options", h.GetAccessLogOptions() != nil),
		xdsconv.Set("original_ip_detection_extensions", len(h.GetOriginalIpDetectionExtensions()) > 0),
		xdsconv.Set("early_header_mutation_extensions", len(h.GetEarlyHeaderMutationExtensions()) > 0),
		xdsconv.Set("via", h.GetVia() != ""),
		xdsconv.Set("path_with_escaped_slashes_action "+h.GetPathWithEscapedSlashesAction().String(),
			h.GetPathWithEscapedSlashesAction() != hcmv3.HttpConnectionManager_IMPLEMENTATION_SPECIFIC_DEFAULT &&
				h.GetPathWithEscapedSlashesAction() != hcmv3.HttpConnectionManager_KEEP_UNCHANGED),
		xdsconv.Set("path_normalization_options", h.GetPathNormalizationOptions() != nil),
		xdsconv.Set("local_reply_config", h.GetLocalReplyConfig() != nil),
		xdsconv.Set("typed_header_validation_config", h.GetTypedHeaderValidationConfig() != nil),
		xdsconv.Set("append_x_forwarded_port", h.GetAppendXForwardedPort()),
		xdsconv.Set("proxy_status_config", h.GetProxyStatusConfig() != nil),
		xdsconv.Set("forward_proto_config", h.GetForwardProtoConfig() != nil),
		// It strips only the listener's own port, which the proxy does not know
		// when it binds the listener elsewhere (ListenerAddrs).
		xdsconv.Set("strip_matching_host_port", h.GetStripMatchingHostPort()),
	); err != nil {
		return nil, err
	}
	spec := &Spec{
		ProtoMajor: codecProtoMajor(h.GetCodecType()),
		StatPrefix: h.GetStatPrefix(),
		ServerName: h.GetServerName(),
		Client: router.ClientAddressing{
			UseRemoteAddress: h.GetUseRemoteAddress().GetValue(),
			XFFTrustedHops:   h.GetXffNumTrustedHops(),
		},
		SkipXFFAppend:         h.GetSkipXffAppend(),
		NormalizePath:         h.GetNormalizePath().GetValue(),
		mergeSlashes:          h.GetMergeSlashes(),
		stripTrailingDot:      h.GetStripTrailingHostDot(),
		StripAnyHostPort:      h.GetStripAnyHostPort(),
		GenerateRequestID:     h.GetGenerateRequestId() == nil || h.GetGenerateRequestId().GetValue(),
		PreserveRequestID:     h.GetPreserveExternalRequestId(),
		ReturnRequestID:       h.GetAlwaysSetRequestIdInResponse(),
		StreamIdleTimeout:     defaultStreamIdleTimeout,
		MaxRequestHeaderBytes: DefaultMaxRequestHeadersKB * 1024,
		MaxRequestHeaders:     DefaultMaxRequestHeaders,
	}
	if o := h.GetHttpProtocolOptions(); o != nil {
		h1, err := convertHTTP1Options(o)
		if err != nil {
			return nil, fmt.Errorf("http_protocol_options: %w", err)
		}
		spec.http1 = h1
	}
	spec.Conn = ConnLimits{
		Idle:         defaultConnIdleTimeout,
		Drain:        durationOr(h.GetDrainTimeout(), defaultDrainTimeout),
		DelayedClose: durationOr(h.GetDelayedCloseTimeout(), defaultDelayedCloseTimeout),
		Headers:      h.GetRequestHeadersTimeout().AsDuration(),
	}
	spec.RequestTimeout = h.GetRequestTimeout().AsDuration()
	if d := h.GetStreamIdleTimeout(); d != nil {
		spec.StreamIdleTimeout = d.AsDuration()
	}
	if kb := h.GetMaxRequestHeadersKb(); kb != nil {
		spec.MaxRequestHeaderBytes = int(kb.GetValue()) * 1024
	}
	if o := h.GetCommonHttpProtocolOptions(); o != nil {
		if err := convertCommonHTTPOptions(o, spec); err != nil {
			return nil, fmt.Errorf("common_http_protocol_options: %w", err)
		}
	}
	if spec.ServerName == "" {
		spec.ServerName = "envoy" // Envoy's default, for configs that do not set it
	}
	switch h.GetServerHeaderTransformation() {
	case hcmv3.HttpConnectionManager_OVERWRITE:
		spec.ServerHeader = ServerHeaderOverwrite
	case hcmv3.HttpConnectionManager_APPEND_IF_ABSENT:
		spec.ServerHeader = ServerHeaderAppendIfAbsent
	case hcmv3.HttpConnectionManager_PASS_THROUGH:
		spec.ServerHeader = ServerHeaderPassThrough
	default:
		return nil, fmt.Errorf("server_header_transformation %v is not supported", h.GetServerHeaderTransformation())
	}
	switch rs := h.GetRouteSpecifier().(type) {
	case *hcmv3.HttpConnectionManager_Rds:
		if err := xdsconv.CheckADSConfigSource(rs.Rds.GetConfigSource()); err != nil {
			return nil, fmt.Errorf("rds.config_source: %w", err)
		}
		spec.RdsName = rs.Rds.GetRouteConfigName()
	case *hcmv3.HttpConnectionManager_RouteConfig:
		t, err := router.ConvertRouteConfig(rs.RouteConfig, filters)
		if err != nil {
			return nil, fmt.Errorf("route_config: %w", err)
		}
		spec.InlineRoutes = t
	default:
		return nil, fmt.Errorf("route specifier %T is not supported", h.GetRouteSpecifier())
	}
	chain, err := filters.BuildChain(h.GetHttpFilters())
	if err != nil {
		return nil, err
	}
	spec.Filters = chain
	if spec.Xfcc, err = convertXFCC(h); err != nil {
		return nil, err
	}
	for _, al := range h.GetAccessLog() {
		if err := accesslog.Check(al); err != nil {
			return nil, err
		}
		spec.AccessLog = true
	}
	for _, u := range h.GetUpgradeConfigs() {
		if len(u.GetFilters()) > 0 {
			return nil, fmt.Errorf("upgrade_configs %q: filters are not supported", u.GetUpgradeType())
		}
		if u.GetEnabled() == nil || u.GetEnabled().GetValue() {
			spec.Upgrades = append(spec.Upgrades, strings.ToLower(u.GetUpgradeType()))
		}
	}
	return spec, nil
}

// codecProtoMajor is the HTTP major version a codec_type limits a connection
// manager to; 0 for AUTO.
func codecProtoMajor(c hcmv3.HttpConnectionManager_CodecType) int {
	switch c {
	case hcmv3.HttpConnectionManager_HTTP1:
		return 1
	case hcmv3.HttpConnectionManager_HTTP2:
		return 2
	}
	return 0
}

// durationOr is d, or def when d is not set.
func durationOr(d *durationpb.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.AsDuration()
}

// convertCommonHTTPOptions honours the downstream protocol options the
// translator sets: max_headers_count, idle_timeout and max_connection_duration.
func convertCommonHTTPOptions(o *corev3.HttpProtocolOptions, spec *Spec) error {
	if err := xdsconv.Unsupported(
		xdsconv.Set("max_connection_duration_jitter", o.GetMaxConnectionDurationJitter() != nil),
		xdsconv.Set("max_response_headers_kb", o.GetMaxResponseHeadersKb() != nil),
		xdsconv.Set("max_stream_duration", o.GetMaxStreamDuration() != nil),
		xdsconv.Set("headers_with_underscores_action "+o.GetHeadersWithUnderscoresAction().String(),
			o.GetHeadersWithUnderscoresAction() != corev3.HttpProtocolOptions_ALLOW),
		xdsconv.Set("max_requests_per_connection", o.GetMaxRequestsPerConnection() != nil),
	); err != nil {
		return err
	}
	if n := o.GetMaxHeadersCount(); n != nil {
		spec.MaxRequestHeaders = int(n.GetValue())
	}
	spec.Conn.Idle = durationOr(o.GetIdleTimeout(), defaultConnIdleTimeout)
	spec.Conn.MaxDuration = o.GetMaxConnectionDuration().AsDuration()
	return nil
}

// convertXFCC converts forward_client_cert_details and set_current_client_cert_details.
func convertXFCC(h *hcmv3.HttpConnectionManager) (*xfccDetails, error) {
	switch h.GetForwardClientCertDetails() {
	case hcmv3.HttpConnectionManager_SANITIZE:
		if h.GetSetCurrentClientCertDetails() != nil {
			return nil, errors.New("set_current_client_cert_details needs forward_client_cert_details SANITIZE_SET")
		}
		return nil, nil
	case hcmv3.HttpConnectionManager_SANITIZE_SET:
	default:
		return nil, fmt.Errorf("forward_client_cert_details %v is not supported (SANITIZE or SANITIZE_SET)", h.GetForwardClientCertDetails())
	}
	d := h.GetSetCurrentClientCertDetails()
	return &xfccDetails{
		Subject: d.GetSubject().GetValue(),
		Cert:    d.GetCert(),
		Chain:   d.GetChain(),
		Dns:     d.GetDns(),
		Uri:     d.GetUri(),
	}, nil
}
