// Package compressor is Envoy's envoy.filters.http.compressor in the
// embedded proxy: responses compressed with gzip, brotli or zstd when the
// client accepts the encoding and the response qualifies (content type,
// length, status, no Content-Encoding or Cache-Control: no-transform), with
// Envoy's negotiation (Accept-Encoding q-values, identity and *, choose_first
// among the chain's compressors), ETag, Vary and Content-Length rules.
// Streamed responses are flushed compressed as the upstream flushes.
package compressor

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	compressorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/compressor/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.http.compressor"

// defaultMinLength is Envoy's default min_content_length.
const defaultMinLength = 30

// defaultContentTypes are the types Envoy compresses when the configuration
// names none.
var defaultContentTypes = []string{
	"text/html", "text/plain", "text/css", "application/javascript", "application/x-javascript",
	"text/javascript", "text/x-javascript", "text/ecmascript", "text/js", "text/jscript", "text/x-js",
	"application/ecmascript", "application/x-json", "application/xml", "application/json",
	"image/svg+xml", "text/xml", "application/xhtml+xml", "application/grpc-web", "application/grpc-web+proto",
}

// Factory makes the filter.
type Factory struct{}

// Name is the filter's Envoy name.
func (Factory) Name() string { return Name }

// ConfigType is the listener-level configuration.
func (Factory) ConfigType() proto.Message { return &compressorv3.Compressor{} }

// PerRouteType is the per-route configuration.
func (Factory) PerRouteType() proto.Message { return &compressorv3.CompressorPerRoute{} }

// New converts a Compressor.
func (Factory) New(a *anypb.Any) (filter.Filter, error) {
	var c compressorv3.Compressor
	if err := a.UnmarshalTo(&c); err != nil {
		return nil, err
	}
	return newConfig(&c)
}

// ParsePerRoute converts a CompressorPerRoute.
func (Factory) ParsePerRoute(a *anypb.Any) (any, error) {
	var pr compressorv3.CompressorPerRoute
	if err := a.UnmarshalTo(&pr); err != nil {
		return nil, err
	}
	if pr.GetDisabled() {
		return routeConfig{disabled: true}, nil
	}
	o := pr.GetOverrides()
	if o == nil {
		return nil, errors.New("CompressorPerRoute: disabled or overrides is required")
	}
	if o.GetCompressorLibrary() != nil {
		return nil, errors.New("CompressorPerRoute.overrides.compressor_library is not supported")
	}
	rc := routeConfig{}
	if rd := o.GetResponseDirectionConfig(); rd != nil {
		// Present, even empty, it turns response compression on.
		rc.enable = true
		if v := rd.GetRemoveAcceptEncodingHeader(); v != nil {
			rc.removeAcceptEncoding = &v.Value
		}
	}
	return rc, nil
}

// routeConfig is a CompressorPerRoute.
type routeConfig struct {
	disabled             bool
	enable               bool  // response compression on, whatever the listener's says
	removeAcceptEncoding *bool // nil: the listener's
}

// DisablesFilter lets the chain skip the filter on the route.
func (rc routeConfig) DisablesFilter() bool { return rc.disabled }

// config is one compressor filter: one encoding and its rules.
type config struct {
	lib                  *library
	enabled              bool
	minLength            uint64
	types                map[string]bool // lower-case; nil with matchers
	matchers             xdsconv.StringMatchers
	disableOnEtag        bool
	weakenEtag           bool
	removeAcceptEncoding bool
	uncompressible       []uint32
	chooseFirst          bool
}

func newConfig(c *compressorv3.Compressor) (*config, error) {
	lib, err := newLibrary(c.GetCompressorLibrary())
	if err != nil {
		return nil, fmt.Errorf("compressor_library: %w", err)
	}
	if c.GetRequestDirectionConfig() != nil {
		return nil, errors.New("request_direction_config: request compression is not supported")
	}
	cfg := &config{lib: lib, chooseFirst: c.GetChooseFirst(), minLength: defaultMinLength, enabled: true}
	common := &compressorv3.Compressor_CommonDirectionConfig{
		// The deprecated fields, used without a response_direction_config.
		MinContentLength: c.GetContentLength(), ContentType: c.GetContentType(), Enabled: c.GetRuntimeEnabled(),
	}
	cfg.disableOnEtag, cfg.removeAcceptEncoding = c.GetDisableOnEtagHeader(), c.GetRemoveAcceptEncodingHeader()
	if rd := c.GetResponseDirectionConfig(); rd != nil {
		if rd.GetStatusHeaderEnabled() {
			return nil, errors.New("response_direction_config.status_header_enabled is not supported")
		}
		common = rd.GetCommonConfig()
		cfg.disableOnEtag, cfg.removeAcceptEncoding = rd.GetDisableOnEtagHeader(), rd.GetRemoveAcceptEncodingHeader()
		cfg.weakenEtag, cfg.uncompressible = rd.GetWeakenEtagOnCompress(), rd.GetUncompressibleResponseCodes()
	}
	if v := common.GetEnabled(); v != nil && v.GetDefaultValue() != nil {
		cfg.enabled = v.GetDefaultValue().GetValue()
	}
	if v := common.GetMinContentLength().GetValue(); v > 0 {
		cfg.minLength = uint64(v)
	}
	switch {
	case len(common.GetContentTypeMatcher()) > 0:
		if cfg.matchers, err = xdsconv.NewStringMatchers(common.GetContentTypeMatcher()); err != nil {
			return nil, fmt.Errorf("content_type_matcher: %w", err)
		}
	case len(common.GetContentType()) > 0:
		cfg.types = typeSet(common.GetContentType())
	default:
		cfg.types = typeSet(defaultContentTypes)
	}
	return cfg, nil
}

func typeSet(types []string) map[string]bool {
	m := make(map[string]bool, len(types))
	for _, t := range types {
		m[strings.ToLower(t)] = true
	}
	return m
}

// DecodeHeaders notes the request's Accept-Encoding for the response, and
// removes it when configured to (so that the upstream does not compress).
func (c *config) DecodeHeaders(s *filter.Stream, perRoute any) *filter.LocalReply {
	values := s.Request.Headers.Values("Accept-Encoding")
	if len(values) == 0 {
		return nil // nothing will be compressed
	}
	rc, _ := perRoute.(routeConfig)
	remove := c.enabledOn(rc) && c.removesAcceptEncoding(rc)
	register(s, c, values, remove)
	if remove {
		s.Request.Headers.Del("Accept-Encoding")
	}
	return nil
}

func (c *config) enabledOn(rc routeConfig) bool { return rc.enable || c.enabled }

func (c *config) removesAcceptEncoding(rc routeConfig) bool {
	if rc.removeAcceptEncoding != nil {
		return *rc.removeAcceptEncoding
	}
	return c.removeAcceptEncoding
}

// EncodeResponse decides, as Envoy's encodeHeaders, whether the response is
// compressed, and wraps its body when it is.
func (c *config) EncodeResponse(s *filter.Stream, perRoute any, head *filter.ResponseHead, next filter.BodyWriter) filter.BodyWriter {
	rc, _ := perRoute.(routeConfig)
	h := head.Headers
	bigEnough := c.enabledOn(rc) && c.longEnough(h)
	compressible := bigEnough && c.typeAllowed(h) && !noTransform(h) && c.etagAllowed(h) &&
		h.Get("Content-Encoding") == "" && c.statusAllowed(head.Status)
	var compress bool
	if !head.EndStream && compressible && transferEncodingAllowed(h, c.lib.encoding) {
		compress = chosen(s, c, h)
	}
	if compressible {
		// Caches in front learn that the response depends on Accept-Encoding
		// even when this client did not get it compressed.
		addVary(h)
	}
	if !compress {
		return nil
	}
	c.sanitizeEtag(h)
	h.Del("Content-Length")
	h.Set("Content-Encoding", c.lib.encoding)
	return c.lib.writer(next)
}

func (c *config) longEnough(h filter.Headers) bool {
	v := h.Get("Content-Length")
	if v == "" {
		return true
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return err == nil && n >= c.minLength
}

// mediaType is a Content-Type without its parameters.
func mediaType(h filter.Headers) (string, bool) {
	v := h.Values("Content-Type")
	if len(v) == 0 {
		return "", false
	}
	t, _, _ := strings.Cut(v[0], ";")
	return strings.TrimSpace(t), true
}

// typeAllowed: a response without a Content-Type qualifies, as in Envoy.
func (c *config) typeAllowed(h filter.Headers) bool {
	t, ok := mediaType(h)
	if !ok {
		return true
	}
	return c.typeListed(t)
}

func (c *config) typeListed(t string) bool {
	if c.matchers != nil {
		return c.matchers.Match(t)
	}
	return c.types[strings.ToLower(t)]
}

func (c *config) etagAllowed(h filter.Headers) bool {
	return c.weakenEtag || !c.disableOnEtag || h.Get("Etag") == ""
}

func (c *config) statusAllowed(status int) bool {
	for _, code := range c.uncompressible {
		if int(code) == status {
			return false
		}
	}
	return true
}

// sanitizeEtag weakens (weaken_etag_on_compress) or removes a strong ETag:
// the compressed body is not the byte-for-byte entity it names.
func (c *config) sanitizeEtag(h filter.Headers) {
	v := h.Get("Etag")
	if len(v) <= 2 || v[1] == '/' && (v[0] == 'W' || v[0] == 'w') {
		return
	}
	if c.weakenEtag {
		h.Set("Etag", "W/"+v)
		return
	}
	h.Del("Etag")
}

func noTransform(h filter.Headers) bool {
	for _, v := range h.Values("Cache-Control") {
		if hasToken(v, "no-transform") {
			return true
		}
	}
	return false
}

// transferEncodingAllowed: a body already compressed in transfer is left.
func transferEncodingAllowed(h filter.Headers, encoding string) bool {
	for _, v := range h.Values("Transfer-Encoding") {
		for _, enc := range []string{"gzip", "br", "deflate", "compress", "zstd", encoding} {
			if hasToken(v, enc) {
				return false
			}
		}
	}
	return true
}

// addVary adds Accept-Encoding to Vary unless it is there.
func addVary(h filter.Headers) {
	v := h.Get("Vary")
	switch {
	case v == "":
		h.Set("Vary", "Accept-Encoding")
	case !hasToken(v, "accept-encoding"):
		h.Set("Vary", v+", Accept-Encoding")
	}
}

// hasToken reports whether a comma-separated list holds token, ignoring case.
func hasToken(list, token string) bool {
	for t := range strings.SplitSeq(list, ",") {
		if strings.EqualFold(strings.TrimSpace(t), token) {
			return true
		}
	}
	return false
}

var _ filter.BodyEncoder = (*config)(nil)
