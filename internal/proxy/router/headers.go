package router

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Header mutations: the request_headers_to_add/remove and
// response_headers_to_add/remove of a RouteConfiguration, a VirtualHost, a
// Route and a WeightedCluster.ClusterWeight. They are resolved when the
// route configuration is converted: every route (and every weighted cluster
// that has its own) gets the ordered list of levels that apply to it, values
// are parsed into literal text and command operators, and header names are
// canonicalized, so that a request does no work for a route without them.

type appendAction uint8

// Envoy's HeaderValueOption.HeaderAppendAction.
const (
	appendIfExistsOrAdd appendAction = iota
	addIfAbsent
	overwriteIfExistsOrAdd
	overwriteIfExists
)

// headerAdd is one HeaderValueOption.
type headerAdd struct {
	name      string // canonical http.Header key
	action    appendAction
	keepEmpty bool // keep_empty_value: add the header even when its value is empty
	value     headerFormat
}

// headerMutation is what one level adds and removes, in one direction.
type headerMutation struct {
	remove []string // canonical http.Header keys
	add    []headerAdd
}

// headerLevel is one level's mutations; nil members mean none.
type headerLevel struct {
	request, response *headerMutation
}

func (l headerLevel) empty() bool { return l.request == nil && l.response == nil }

// mutationPlan is the ordered list of levels that apply to the requests (and
// responses) of one route, or of one weighted cluster of a route.
type mutationPlan struct {
	request, response []*headerMutation
}

// planMutations orders levels as Envoy does: a weighted cluster's own
// mutations first, then the route's, the virtual host's and the route
// configuration's; with most_specific_header_mutations_wins the route
// configuration's come first and the route's last (later levels win). It
// returns nil when no level mutates anything.
func planMutations(cluster, rt, vh, global headerLevel, mostSpecificWins bool) *mutationPlan {
	levels := []headerLevel{cluster, rt, vh, global}
	if mostSpecificWins {
		levels = []headerLevel{cluster, global, vh, rt}
	}
	var p mutationPlan
	for _, l := range levels {
		if l.request != nil {
			p.request = append(p.request, l.request)
		}
		if l.response != nil {
			p.response = append(p.response, l.response)
		}
	}
	if p.request == nil && p.response == nil {
		return nil
	}
	return &p
}

// convertHeaderLevel converts one level's four fields; field names errors
// as "<direction>_headers_to_<add|remove>".
func convertHeaderLevel(reqAdd []*corev3.HeaderValueOption, reqRemove []string,
	respAdd []*corev3.HeaderValueOption, respRemove []string) (headerLevel, error) {
	var l headerLevel
	var err error
	if l.request, err = convertHeaderMutation("request", reqAdd, reqRemove); err != nil {
		return l, err
	}
	l.response, err = convertHeaderMutation("response", respAdd, respRemove)
	return l, err
}

func convertHeaderMutation(direction string, adds []*corev3.HeaderValueOption, removes []string) (*headerMutation, error) {
	if len(adds) == 0 && len(removes) == 0 {
		return nil, nil
	}
	m := &headerMutation{}
	for _, name := range removes {
		if !modifiableHeader(name) {
			// Envoy's own words.
			return nil, fmt.Errorf("%s_headers_to_remove %q: :-prefixed or host headers may not be removed", direction, name)
		}
		m.remove = append(m.remove, textproto.CanonicalMIMEHeaderKey(name))
	}
	for _, o := range adds {
		a, err := convertHeaderValueOption(o)
		if err != nil {
			return nil, fmt.Errorf("%s_headers_to_add %q: %w", direction, o.GetHeader().GetKey(), err)
		}
		m.add = append(m.add, a)
	}
	return m, nil
}

// modifiableHeader is Envoy's HeaderUtility::isModifiableHeader: route
// header mutations may not touch pseudo-headers nor Host (host_rewrite_literal
// and prefix_rewrite are the ways to change them).
func modifiableHeader(name string) bool {
	return name != "" && name[0] != ':' && !strings.EqualFold(name, "host")
}

func convertHeaderValueOption(o *corev3.HeaderValueOption) (headerAdd, error) {
	h := o.GetHeader()
	if !modifiableHeader(h.GetKey()) {
		return headerAdd{}, fmt.Errorf(":-prefixed or host headers may not be modified")
	}
	if len(h.GetRawValue()) > 0 {
		return headerAdd{}, fmt.Errorf("raw_value is not supported")
	}
	a := headerAdd{name: textproto.CanonicalMIMEHeaderKey(h.GetKey()), keepEmpty: o.GetKeepEmptyValue()}
	if ap := o.GetAppend(); ap != nil {
		// The deprecated field: true appends, false overwrites; it may not
		// be combined with a non-default append_action.
		if o.GetAppendAction() != corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD {
			return a, fmt.Errorf("both append and append_action are set")
		}
		a.action = overwriteIfExistsOrAdd
		if ap.GetValue() {
			a.action = appendIfExistsOrAdd
		}
	} else {
		switch o.GetAppendAction() {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			a.action = appendIfExistsOrAdd
		case corev3.HeaderValueOption_ADD_IF_ABSENT:
			a.action = addIfAbsent
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
			a.action = overwriteIfExistsOrAdd
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
			a.action = overwriteIfExists
		default:
			return a, fmt.Errorf("append_action %v is not supported", o.GetAppendAction())
		}
	}
	f, err := parseHeaderFormat(h.GetValue())
	if err != nil {
		return a, err
	}
	a.value = f
	return a, nil
}

// ---------------------------------------------------------------------------
// Values: literal text and Envoy's %COMMAND% operators.

type formatPartKind uint8

const (
	partLiteral       formatPartKind = iota
	partRequestHeader                // %REQ(name?alternative):N%
	partOperator                     // an operator without argument: value
)

type formatPart struct {
	kind   formatPartKind
	text   string                     // partLiteral
	value  func(*RouteHeaders) string // partOperator
	header string                     // partRequestHeader: canonical key, or a lower-case pseudo-header
	alt    string                     // partRequestHeader: used when header is absent; "" for none
	maxLen int                        // partRequestHeader: the value is cut to maxLen bytes; -1: no limit
}

// headerFormat is a parsed header value: literal when parts is nil.
type headerFormat struct {
	literal string
	parts   []formatPart
}

// commandRe is Envoy's substitution format command syntax:
// %COMMAND%, %COMMAND(argument)%, with an optional :maximum length.
var commandRe = regexp.MustCompile(`^%([A-Z0-9_]+)(?:\(([^)]*)\))?(?::([0-9]+))?%`)

// parseHeaderFormat parses a header value as Envoy's header formatter does:
// "%%" is a literal '%', and every other '%' must start a command operator.
// The operators the embedded proxy evaluates are REQ, HOSTNAME and those of
// operators (the dynamic header values HTTPProxy users have); any other one
// is an error rather than text sent as is.
func parseHeaderFormat(s string) (headerFormat, error) {
	if !strings.Contains(s, "%") {
		return headerFormat{literal: s}, nil
	}
	var parts []formatPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, formatPart{kind: partLiteral, text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		if s[i] != '%' {
			lit.WriteByte(s[i])
			i++
			continue
		}
		if strings.HasPrefix(s[i:], "%%") {
			lit.WriteByte('%')
			i += 2
			continue
		}
		m := commandRe.FindStringSubmatchIndex(s[i:])
		if m == nil {
			return headerFormat{}, fmt.Errorf("value %q: no valid command operator at position %d (a literal %% is written %%%%)", s, i)
		}
		group := func(n int) (string, bool) {
			if m[2*n] < 0 {
				return "", false
			}
			return s[i+m[2*n] : i+m[2*n+1]], true
		}
		cmd, _ := group(1)
		arg, hasArg := group(2)
		length, hasLen := group(3)
		i += m[1]
		if cmd == "REQ" {
			p, err := requestHeaderPart(arg, hasArg)
			if err != nil {
				return headerFormat{}, fmt.Errorf("value %q: %w", s, err)
			}
			if hasLen {
				n, err := maxLength(length)
				if err != nil {
					return headerFormat{}, fmt.Errorf("value %q: length of %%%s%%: %w", s, cmd, err)
				}
				p.maxLen = n
			}
			flush()
			parts = append(parts, p)
			continue
		}
		value, known := operators[cmd]
		if !known && cmd != "HOSTNAME" {
			return headerFormat{}, fmt.Errorf("value %q: command operator %%%s%% is not supported "+
				"(only %%REQ(...)%%, %%HOSTNAME%% and %%%s%%)", s, cmd, strings.Join(operatorNames(), "%%, %%"))
		}
		if hasArg || hasLen {
			// Envoy's syntax check refuses both on these operators.
			return headerFormat{}, fmt.Errorf("value %q: %%%s%% takes no argument nor length", s, cmd)
		}
		if !known {
			// HOSTNAME is known for the life of the process: resolved here, as
			// Envoy does once.
			lit.WriteString(hostname())
			continue
		}
		flush()
		parts = append(parts, formatPart{kind: partOperator, value: value})
	}
	if len(parts) == 0 {
		return headerFormat{literal: lit.String()}, nil
	}
	flush()
	return headerFormat{parts: parts}, nil
}

// requestHeaderPart parses the argument of %REQ(name?alternative)%.
func requestHeaderPart(arg string, hasArg bool) (formatPart, error) {
	if !hasArg || arg == "" {
		return formatPart{}, fmt.Errorf("%%REQ%% needs a header name: %%REQ(name)%%")
	}
	main, alt, _ := strings.Cut(arg, "?")
	if main == "" || strings.Contains(alt, "?") {
		return formatPart{}, fmt.Errorf("%%REQ(%s)%%: want %%REQ(name)%% or %%REQ(name?alternative)%%", arg)
	}
	p := formatPart{kind: partRequestHeader, header: requestHeaderKey(main), maxLen: -1}
	if alt != "" {
		p.alt = requestHeaderKey(alt)
	}
	return p, nil
}

// requestHeaderKey is the lookup key of a request header name: a
// lower-cased pseudo-header, or a canonical http.Header key. Host is
// :authority: Envoy's header map keeps the Host of HTTP/1 requests there and
// finds it under "host" too.
func requestHeaderKey(name string) string {
	switch {
	case strings.EqualFold(name, "host"):
		return ":authority"
	case strings.HasPrefix(name, ":"):
		return strings.ToLower(name)
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

var hostnameOnce = sync.OnceValue(func() string {
	h, err := os.Hostname()
	if err != nil {
		return "" // Envoy's formatter yields no value, i.e. an empty one in headers
	}
	return h
})

func hostname() string { return hostnameOnce() }

// maxLength reads an operator's maximum length as Envoy does, into a size_t: any
// length up to 2^64-1 is accepted, and one beyond what a value can be cut to is no
// limit at all.
func maxLength(digits string) (int, error) {
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, err
	}
	return int(min(n, math.MaxInt)), nil
}

func truncate(s string, maxLen int) string {
	if maxLen >= 0 && len(s) > maxLen {
		return s[:maxLen]
	}
	return s
}

// ---------------------------------------------------------------------------
// Applying mutations to a request.

// RouteHeaders is one request's header work: the mutations of its route
// (and picked cluster) and the cookies its hash policies generated. A request
// whose route has neither carries none.
type RouteHeaders struct {
	Plan    *mutationPlan // nil when only cookies are to be set
	Cookies []string      // Set-Cookie values for the upstream's response
	r       *http.Request
	ri      *RequestInfo
	client  *ClientAddressing
	// request is the request's header map for %REQ()%: the downstream one
	// until the upstream request has been built, that one afterwards.
	request http.Header
	// Stream is what the connection manager knows of the exchange (the
	// upstream, the response's flags and details, the listener's
	// certificate); nil: nothing.
	Stream *StreamInfo
	// responding: response headers are being evaluated (the upstream and the
	// response are known then, not for request headers).
	responding bool
	// fromUpstream: the response being evaluated is the upstream's.
	fromUpstream bool
	// Responded: the upstream response's headers were mutated, so the
	// response head written for it needs nothing more.
	Responded bool
}

// NewRouteHeaders returns the header work of a request routed by plan (nil:
// cookies only); client decides its client address for %DOWNSTREAM_REMOTE_ADDRESS%.
func NewRouteHeaders(plan *mutationPlan, r *http.Request, ri *RequestInfo, client *ClientAddressing) *RouteHeaders {
	return &RouteHeaders{Plan: plan, r: r, ri: ri, client: client, request: r.Header}
}

// ApplyRequest mutates the upstream request's headers, after the edge headers
// (X-Forwarded-For, X-Forwarded-Proto, X-Request-Id) were set, as Envoy's
// router does after its connection manager.
func (rh *RouteHeaders) ApplyRequest(h http.Header) {
	rh.request, rh.responding = h, false
	if rh.Plan == nil {
		return
	}
	for _, m := range rh.Plan.request {
		m.apply(h, rh)
	}
}

// ApplyResponse mutates a response's headers: an upstream response gets
// the generated cookies first, then every response the route's mutations.
func (rh *RouteHeaders) ApplyResponse(h http.Header, upstream bool) {
	if upstream {
		for _, c := range rh.Cookies {
			h.Add("Set-Cookie", c)
		}
	}
	if rh.Plan == nil {
		return
	}
	rh.responding, rh.fromUpstream = true, upstream
	for _, m := range rh.Plan.response {
		m.apply(h, rh)
	}
}

// apply is Envoy's HeaderParser::evaluateHeaders: removals first, then every
// value is computed and every condition checked against the headers as they
// are after the removals, then overwrites are applied, then additions.
func (m *headerMutation) apply(h http.Header, rh *RouteHeaders) {
	for _, name := range m.remove {
		delete(h, name)
	}
	type write struct {
		name  string
		value string
	}
	var buf [8]write
	overwrites, appends := buf[:0:4], buf[4:4]
	for i := range m.add {
		a := &m.add[i]
		v := a.value.eval(rh)
		if v == "" && !a.keepEmpty {
			continue
		}
		present := len(h[a.name]) > 0
		switch a.action {
		case appendIfExistsOrAdd:
			appends = append(appends, write{a.name, v})
		case addIfAbsent:
			if !present {
				appends = append(appends, write{a.name, v})
			}
		case overwriteIfExists:
			if present {
				overwrites = append(overwrites, write{a.name, v})
			}
		case overwriteIfExistsOrAdd:
			overwrites = append(overwrites, write{a.name, v})
		}
	}
	for _, w := range overwrites {
		h[w.name] = []string{w.value}
	}
	for _, w := range appends {
		h[w.name] = append(h[w.name], w.value)
	}
}

func (f *headerFormat) eval(rh *RouteHeaders) string {
	if f.parts == nil {
		return f.literal
	}
	var b strings.Builder
	for i := range f.parts {
		switch p := &f.parts[i]; p.kind {
		case partLiteral:
			b.WriteString(p.text)
		case partOperator:
			b.WriteString(p.value(rh))
		case partRequestHeader:
			v, ok := rh.requestHeader(p.header)
			if !ok && p.alt != "" {
				v, _ = rh.requestHeader(p.alt)
			}
			b.WriteString(truncate(v, p.maxLen))
		}
	}
	return b.String()
}

// requestHeader is %REQ(name)%: the first value of a request header (Cookie
// lines joined by "; ", as Envoy's codecs coalesce them), and the
// pseudo-headers from the request line. Host is no header in Envoy's map:
// it is :authority.
func (rh *RouteHeaders) requestHeader(key string) (string, bool) {
	if key[0] == ':' {
		if key == ":authority" || key == ":path" || key == ":method" || key == ":scheme" {
			return rh.ri.headerValue(key)
		}
		return "", false
	}
	vs := rh.request[key]
	switch {
	case len(vs) == 0:
		return "", false
	case key == "Cookie" && len(vs) > 1:
		return strings.Join(vs, "; "), true
	}
	return vs[0], true
}

// DownstreamRemoteIP is Envoy's downstream remote address without its port: the
// peer, or the client X-Forwarded-For names when the connection manager trusts it
// (forwardedClient).
func DownstreamRemoteIP(c *ClientAddressing, r *http.Request) string {
	if a, ok := c.ForwardedClient(r.Header.Values("X-Forwarded-For")); ok {
		return a.String()
	}
	if a, ok := addrPort(r.RemoteAddr); ok {
		return a.Addr().String()
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
