package extauthz

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// headersToRemoveHeader lists, in an OK answer of an HTTP server, request
// headers to remove before the request goes upstream (Envoy's
// x-envoy-auth-headers-to-remove).
const headersToRemoveHeader = "X-Envoy-Auth-Headers-To-Remove"

// maxAnswerBody bounds what is read of an HTTP server's answer: the body of a
// denial, which the client gets.
const maxAnswerBody = 1 << 20

// httpService is an http_service: each request is described to the server by
// a plain HTTP request with the same method, the path under path_prefix, the
// Host, Authorization and allowed headers, and the body when with_request_body
// asks for it. 200 allows it; a 5xx answer is an error, as a transport error
// is; any other status denies it, and the client gets that answer.
type httpService struct {
	cluster    string
	scheme     string
	host       string
	pathPrefix string
	// allowed are the client's headers sent besides the default ones.
	allowed xdsconv.StringMatchers
	// toUpstream (set) and toUpstreamAppend (added) are the headers of an OK
	// answer the upstream request gets; onSuccess, those the client's response
	// gets; toClient, those a denial sends (nil: all but Host).
	toUpstream, toUpstreamAppend, onSuccess, toClient xdsconv.StringMatchers
}

// newHTTPService converts an http_service; allowed is ExtAuthz.allowed_headers,
// which overrides the deprecated authorization_request.allowed_headers.
func newHTTPService(hs *extauthzv3.HttpService, allowed *matcherv3.ListStringMatcher) (*httpService, error) {
	const field = "ext_authz.http_service"
	req, resp := hs.GetAuthorizationRequest(), hs.GetAuthorizationResponse()
	for _, u := range []struct {
		field string
		set   bool
	}{
		{"path_override", hs.GetPathOverride() != ""},
		{"retry_policy", hs.GetRetryPolicy() != nil},
		{"authorization_request.headers_to_add", len(req.GetHeadersToAdd()) > 0},
		{"authorization_response.dynamic_metadata_from_headers", resp.GetDynamicMetadataFromHeaders() != nil},
	} {
		if u.set {
			return nil, fmt.Errorf("%s.%s is not supported by the embedded proxy", field, u.field)
		}
	}
	uri := hs.GetServerUri()
	s := &httpService{cluster: uri.GetCluster(), pathPrefix: hs.GetPathPrefix()}
	if s.cluster == "" {
		return nil, fmt.Errorf("%s.server_uri.cluster is required", field)
	}
	u, err := url.Parse(uri.GetUri())
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("%s.server_uri.uri %q: want an absolute http or https URL", field, uri.GetUri())
	}
	s.scheme, s.host = u.Scheme, u.Host
	if s.pathPrefix != "" && !strings.HasPrefix(s.pathPrefix, "/") {
		return nil, fmt.Errorf("%s.path_prefix %q must start with /", field, s.pathPrefix)
	}
	if allowed == nil {
		allowed = req.GetAllowedHeaders()
	}
	for _, l := range []struct {
		to    *xdsconv.StringMatchers
		list  *matcherv3.ListStringMatcher
		field string
	}{
		{&s.allowed, allowed, "ext_authz.allowed_headers"},
		{&s.toUpstream, resp.GetAllowedUpstreamHeaders(), field + ".authorization_response.allowed_upstream_headers"},
		{&s.toUpstreamAppend, resp.GetAllowedUpstreamHeadersToAppend(), field + ".authorization_response.allowed_upstream_headers_to_append"},
		{&s.onSuccess, resp.GetAllowedClientHeadersOnSuccess(), field + ".authorization_response.allowed_client_headers_on_success"},
		{&s.toClient, resp.GetAllowedClientHeaders(), field + ".authorization_response.allowed_client_headers"},
	} {
		if *l.to, err = xdsconv.NewStringMatchers(l.list.GetPatterns()); err != nil {
			return nil, fmt.Errorf("%s.%w", l.field, err)
		}
	}
	return s, nil
}

// check asks the server about the request of s. It returns the reply of a
// denial, nil when the request is allowed (and changed as the answer says),
// or an error when the server could not be asked or failed (5xx).
func (h *httpService) check(ctx context.Context, s *filter.Stream, b checkBody) (*filter.LocalReply, error) {
	client, err := s.Env.Upstreams.HTTP(h.cluster)
	if err != nil {
		return nil, err
	}
	req, err := h.request(ctx, &s.Request, b)
	if err != nil {
		return nil, err
	}
	// A redirect is the server's answer for the client (a login page), never
	// followed: the client's copy of the shared client says so.
	noRedirect := *client
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noRedirect.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBody))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	switch {
	case resp.StatusCode >= 500:
		return nil, fmt.Errorf("the authorization server answered %d", resp.StatusCode)
	case resp.StatusCode == http.StatusOK:
		h.allow(s, resp.Header)
		return nil, nil
	}
	return h.deny(resp, body), nil
}

// request is the check request: the client's method, the path (with its
// query) under path_prefix, its Host and Authorization, the allowed headers
// (repeated values joined by ","), Content-Length, and the body when it is
// sent, with PartialBodyHeader.
func (h *httpService) request(ctx context.Context, r *filter.Request, b checkBody) (*http.Request, error) {
	u, err := url.Parse(h.scheme + "://" + h.host + h.pathPrefix + pathWithQuery(r))
	if err != nil {
		return nil, fmt.Errorf("check request path: %w", err)
	}
	var body io.Reader = http.NoBody
	if len(b.data) > 0 {
		body = bytes.NewReader(b.data)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, "", body)
	if err != nil {
		return nil, err
	}
	req.URL, req.Host = u, r.Authority
	req.ContentLength = int64(len(b.data))
	r.Headers.Range(func(name, value string) bool {
		lower := strings.ToLower(name)
		if !settable(lower) || lower == PartialBodyHeader {
			return true // the check's own Host, framing and partial-body mark; hop-by-hop ones are the client's connection's
		}
		if lower == "authorization" || h.allowed.Match(lower) {
			if prev := req.Header.Get(name); prev != "" {
				req.Header.Set(name, prev+","+value)
			} else {
				req.Header.Set(name, value)
			}
		}
		return true
	})
	if b.sent {
		req.Header.Set(PartialBodyHeader, partialValue(b.partial))
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // none unless the client's is allowed: not Go's own
	}
	return req, nil
}

// allow applies an OK answer: allowed_upstream_headers replace the request's
// headers of that name, allowed_upstream_headers_to_append add to them, the
// headers x-envoy-auth-headers-to-remove names are removed, and
// allowed_client_headers_on_success go to the client's response.
func (h *httpService) allow(s *filter.Stream, answer http.Header) {
	rh := s.Request.Headers
	for name, values := range answer {
		lower := strings.ToLower(name)
		if name == headersToRemoveHeader || !settable(lower) {
			continue
		}
		for _, v := range values {
			if h.toUpstream.Match(lower) {
				rh.Set(name, v) // each value replaces the last, as Envoy's setCopy does
			}
			if h.toUpstreamAppend.Match(lower) {
				rh.Add(name, v)
			}
			if h.onSuccess.Match(lower) {
				s.AddResponseHeader(name, v)
			}
		}
	}
	for _, list := range answer.Values(headersToRemoveHeader) {
		for name := range strings.SplitSeq(list, ",") {
			name = strings.TrimSpace(name)
			if name != "" && !strings.HasPrefix(name, ":") && !strings.EqualFold(name, "host") {
				rh.Del(name)
			}
		}
	}
}

// deny is the client's answer to a denial: the server's status and body, and
// its headers (all but Host, or those allowed_client_headers names with
// WWW-Authenticate and Location).
func (h *httpService) deny(resp *http.Response, body []byte) *filter.LocalReply {
	lr := &filter.LocalReply{Status: resp.StatusCode, Body: string(body), Details: detailsDenied}
	for name, values := range resp.Header {
		lower := strings.ToLower(name)
		if !settable(lower) || !h.sentToClient(lower) {
			continue
		}
		for i, v := range values {
			lr.Headers = append(lr.Headers, filter.HeaderValue{Name: name, Value: v, Overwrite: i == 0})
		}
	}
	return lr
}

func (h *httpService) sentToClient(lower string) bool {
	if len(h.toClient) == 0 {
		return lower != "host"
	}
	return lower == "www-authenticate" || lower == "location" || h.toClient.Match(lower)
}
