package translate

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/parallel"
)

// httpRouteConfig translates the plain HTTP hosts, validating the configuration (its
// virtual hosts one by one, in parallel on a large graph).
func httpRouteConfig(hosts []*dag.VirtualHost, opts Options) (*routev3.RouteConfiguration, error) {
	fallback := catchAllVirtualHost(hosts)
	rc := routeConfiguration(RouteHTTP, nil, opts.Global)
	if err := validateAll(rc); err != nil {
		return nil, err
	}
	if len(hosts) == 0 {
		return rc, nil
	}
	var err error
	if rc.VirtualHosts, err = virtualHosts(hosts, fallback, opts); err != nil {
		return nil, err
	}
	return rc, nil
}

// virtualHosts translates and validates hosts, in parallel when they are many.
func virtualHosts(hosts []*dag.VirtualHost, fallback *dag.VirtualHost, opts Options) ([]*routev3.VirtualHost, error) {
	out := make([]*routev3.VirtualHost, len(hosts))
	err := parallel.Do(len(hosts), func(i int) error {
		out[i] = virtualHost(hosts[i], fallback, opts)
		return validateAll(out[i])
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func catchAllVirtualHost(hosts []*dag.VirtualHost) *dag.VirtualHost {
	for _, vh := range hosts {
		if vh.Name == "*" {
			return vh
		}
	}
	return nil
}

// routeConfiguration is a route configuration of Portico's, with its Server header as
// the installation's settings (g) say.
func routeConfiguration(name string, hosts []*routev3.VirtualHost, g Global) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{
		Name:                            name,
		VirtualHosts:                    hosts,
		ResponseHeadersToAdd:            g.serverHeader(),
		MostSpecificHeaderMutationsWins: true,
	}
}

// routeConfigurationFor is routeConfiguration for a listener translated with opts:
// where the Host keeps its port (keepHostPort), the virtual host is chosen by the name
// alone (ignore_port_in_host_matching), so that "foo.com:8080" is foo.com's.
func routeConfigurationFor(name string, hosts []*routev3.VirtualHost, opts Options) *routev3.RouteConfiguration {
	rc := routeConfiguration(name, hosts, opts.Global)
	rc.IgnorePortInHostMatching = opts.keepHostPort
	return rc
}

// serverHeader sets Portico's Server response header, replacing the upstream's, as a
// change of the whole route configuration, so that a route's responseHeadersPolicy can
// set or remove Server. The connection manager cannot do it: it writes its server_name
// while it encodes the response, after the router applied every route-level change
// (Envoy docs, "HTTP header manipulation": "server"), so OVERWRITE would undo a
// route's value and APPEND_IF_ABSENT its removal; it passes Server through instead
// (httpConnectionManager). Changes apply in the order weighted cluster, then route, then
// virtual host, then route configuration ("Custom request/response headers"), which
// most_specific_header_mutations_wins turns into weighted cluster, route configuration,
// virtual host, route: a route's Server comes after this one and wins. A weighted
// cluster's would come before and lose, so dag makes the services' changes of Server
// their route's. Responses to requests that match no route get no Server header: no
// route's changes apply to them.
func serverHeader() []*corev3.HeaderValueOption {
	return []*corev3.HeaderValueOption{{
		Header:       &corev3.HeaderValue{Key: "server", Value: ServerName},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}}
}

// MisdirectedVirtualHost names the last virtual host of every HTTPS route configuration.
const MisdirectedVirtualHost = "misdirected"

// httpsRouteConfig holds the virtual host of one server name, the precise hosts that a
// wildcard certificate covers, and finally a virtual host answering 421 Misdirected
// Request to every other Host: an HTTP/2 client that reuses a connection for a host this
// certificate does not serve retries on a new connection, and a TLS connection can never
// reach another host's routes.
//
// A Gateway listener without a hostname (server name "*") takes every Host: its virtual
// host is the catch-all, and there is no other to answer 421.
func httpsRouteConfig(name string, svh *dag.SecureVirtualHost, vhost vhostFunc, opts Options) *routev3.RouteConfiguration {
	rc := routeConfigurationFor(name, []*routev3.VirtualHost{vhost(&svh.VirtualHost, opts)}, opts)
	for _, vh := range svh.Also {
		rc.VirtualHosts = append(rc.VirtualHosts, vhost(vh, opts))
	}
	if svh.Name == "*" {
		// Envoy picks the most specific domain: "*" last whatever the order.
		return rc
	}
	rc.VirtualHosts = append(rc.VirtualHosts, &routev3.VirtualHost{
		Name:    MisdirectedVirtualHost,
		Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Name:   MisdirectedVirtualHost,
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 421}},
		}},
	})
	return rc
}

// vhostFunc translates a virtual host: sharedVirtualHost for the shared listeners'
// hosts, gatewayVirtualHost for a Gateway's.
type vhostFunc func(*dag.VirtualHost, Options) *routev3.VirtualHost

// sharedVirtualHost is virtualHost without a fallback (a secure host's).
func sharedVirtualHost(vh *dag.VirtualHost, opts Options) *routev3.VirtualHost {
	return virtualHost(vh, nil, opts)
}

// virtualHost translates vh. Envoy's "*.foo.com" domain matches any number of labels,
// while an Ingress wildcard matches exactly one. A wildcard host's routes therefore also
// require the host to be one label deep; they are followed by the catch-all host's routes
// (fallback) for hosts that are NOT one label deep, which the wildcard does not really
// match. A one-label host that matches no wildcard route gets 404, as for any known host.
func virtualHost(vh *dag.VirtualHost, fallback *dag.VirtualHost, opts Options) *routev3.VirtualHost {
	out := &routev3.VirtualHost{Name: vh.Name, Domains: []string{vh.Name}, TypedPerFilterConfig: vhostFilterConfig(vh, opts), RateLimits: globalRateLimits(vh.RateLimit)}
	if !vh.IsWildcard() {
		out.Routes = routes(vh, nil, opts)
		uniqueRouteNames(out.Routes)
		return out
	}
	oneLabel := singleLabelHost(vh.Name)
	out.Routes = routes(vh, oneLabel, opts)
	if fallback != nil {
		deeper := proto.Clone(oneLabel).(*routev3.HeaderMatcher)
		deeper.InvertMatch = true
		out.Routes = append(out.Routes, routes(fallback, deeper, opts)...)
	}
	uniqueRouteNames(out.Routes)
	return out
}

// maxRouteNameLen bounds route names, which data planes use as metric labels and in
// access logs: a longer name keeps its start and gets a hash of the whole. The object's
// part is never cut (Kubernetes bounds it to about 330 bytes): the embedded proxy labels
// a route with it.
const maxRouteNameLen = 200

// routeName names a route after the object that declared it and its path condition:
// "ingress/default/web:prefix:/api", "ingressroute/team/app:exact:/health",
// "httpproxy/team/app:regex:/v[0-9]+/.*". A route with header or query conditions gets a
// hash of them ("httpproxy/team/app:prefix:/api?h=1a2b3c4d"), so that two routes of one
// path that differ only in their conditions have different names. It is stable across
// rebuilds and bounded by the number of routes the objects declare, so it can label
// metrics: the embedded proxy's route label is the part before the first ':', the
// object.
func routeName(r *dag.Route) string {
	kind := "prefix"
	switch r.Path.Kind {
	case dag.PathExact:
		kind = "exact"
	case dag.PathRegex:
		kind = "regex"
	}
	// Written in one buffer: a build names every route, and fmt would allocate several
	// times for each.
	var b strings.Builder
	src := r.Source
	b.Grow(len(src.Kind) + len(src.Namespace) + len(src.Name) + len(kind) + len(r.Path.Value) + 16)
	object := 0 // the object's part's length, with its ':'
	if src.Kind != "" {
		for i := 0; i < len(src.Kind); i++ {
			c := src.Kind[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b.WriteByte(c)
		}
		b.WriteByte('/')
		b.WriteString(src.Namespace)
		b.WriteByte('/')
		b.WriteString(src.Name)
		b.WriteByte(':')
		object = b.Len()
	}
	b.WriteString(kind)
	b.WriteByte(':')
	b.WriteString(r.Path.Value)
	if len(r.Headers) > 0 || len(r.Query) > 0 {
		b.WriteString("?h=")
		writeHex8(&b, conditionsHash(r))
	}
	name := b.String()
	if len(name) > maxRouteNameLen {
		h := fnv.New32a()
		_, _ = h.Write([]byte(name))
		// Cut on a character boundary: a name that is not valid UTF-8 cannot be marshalled,
		// and one such route would stop every update to every data plane.
		// What follows the object's ':' is ASCII, so the loop never enters the object.
		cut := max(maxRouteNameLen-9, object)
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = fmt.Sprintf("%s~%08x", name[:cut], h.Sum32())
	}
	return name
}

// writeHex8 writes v as fmt's %08x does.
func writeHex8(b *strings.Builder, v uint32) {
	const digits = "0123456789abcdef"
	for shift := 28; shift >= 0; shift -= 4 {
		b.WriteByte(digits[v>>uint(shift)&0xf])
	}
}

// conditionsHash is a short hash of a route's header and query conditions. They all must
// hold, so their order does not matter: each is written out unambiguously (quoted
// strings), one line each, and the lines are sorted before hashing (FNV-1a, 32 bits).
func conditionsHash(r *dag.Route) uint32 {
	var buf [160]byte
	if len(r.Headers)+len(r.Query) == 1 { // most routes: nothing to sort
		var line []byte
		if len(r.Headers) == 1 {
			line = appendHeaderLine(buf[:0], &r.Headers[0])
		} else {
			line = appendQueryLine(buf[:0], &r.Query[0])
		}
		return fnv32a(fnv32a(fnvOffset32, line), newline)
	}
	lines := make([]string, 0, len(r.Headers)+len(r.Query))
	for i := range r.Headers {
		lines = append(lines, string(appendHeaderLine(buf[:0], &r.Headers[i])))
	}
	for i := range r.Query {
		lines = append(lines, string(appendQueryLine(buf[:0], &r.Query[i])))
	}
	slices.Sort(lines)
	h := uint32(fnvOffset32)
	for _, l := range lines {
		h = fnv32a(fnv32a(h, []byte(l)), newline)
	}
	return h
}

// appendHeaderLine and appendQueryLine write a condition as conditionsHash hashes it
// (the route name depends on these bytes: they must not change):
//
//	header "x-a" exact "1" invert=false ignorecase=false missingempty=false
//	query "q" exact "1" ignorecase=false
func appendHeaderLine(b []byte, m *dag.HeaderMatch) []byte {
	b = append(b, "header "...)
	b = strconv.AppendQuote(b, m.Name)
	b = append(b, ' ')
	b = append(b, matchKindName(m.Kind)...)
	b = append(b, ' ')
	b = strconv.AppendQuote(b, m.Value)
	b = append(b, " invert="...)
	b = strconv.AppendBool(b, m.Invert)
	b = append(b, " ignorecase="...)
	b = strconv.AppendBool(b, m.IgnoreCase)
	b = append(b, " missingempty="...)
	return strconv.AppendBool(b, m.TreatMissingAsEmpty)
}

func appendQueryLine(b []byte, m *dag.QueryMatch) []byte {
	b = append(b, "query "...)
	b = strconv.AppendQuote(b, m.Name)
	b = append(b, ' ')
	b = append(b, matchKindName(m.Kind)...)
	b = append(b, ' ')
	b = strconv.AppendQuote(b, m.Value)
	b = append(b, " ignorecase="...)
	return strconv.AppendBool(b, m.IgnoreCase)
}

const fnvOffset32, fnvPrime32 = 2166136261, 16777619

var newline = []byte{'\n'}

// fnv32a continues the FNV-1a hash h over p, as hash/fnv's New32a does.
func fnv32a(h uint32, p []byte) uint32 {
	for _, c := range p {
		h ^= uint32(c)
		h *= fnvPrime32
	}
	return h
}

// matchKindName spells a string match kind out, so that route names do not depend on
// the order of the constants.
func matchKindName(k dag.StringMatchKind) string {
	switch k {
	case dag.MatchPresent:
		return "present"
	case dag.MatchExact:
		return "exact"
	case dag.MatchPrefix:
		return "prefix"
	case dag.MatchSuffix:
		return "suffix"
	case dag.MatchContains:
		return "contains"
	case dag.MatchRegex:
		return "regex"
	}
	return "kind" + strconv.Itoa(int(k))
}

// uniqueRouteNames suffixes "#2", "#3"... to a name already used in the same virtual
// host (the same object and path reached twice, e.g. a wildcard's route and the
// catch-all route it falls back to).
func uniqueRouteNames(rs []*routev3.Route) {
	if len(rs) <= 16 && !duplicateNames(rs) {
		return // the common case, without a map per virtual host
	}
	seen := make(map[string]int, len(rs))
	for _, r := range rs {
		seen[r.Name]++
		if n := seen[r.Name]; n > 1 {
			r.Name = r.Name + "#" + strconv.Itoa(n)
		}
	}
}

func duplicateNames(rs []*routev3.Route) bool {
	for i, r := range rs {
		for _, o := range rs[:i] {
			if o.Name == r.Name {
				return true
			}
		}
	}
	return false
}

// singleLabelHost matches a Host of exactly one label followed by the wildcard's suffix.
func singleLabelHost(wildcard string) *routev3.HeaderMatcher {
	suffix := strings.TrimPrefix(wildcard, "*")
	return &routev3.HeaderMatcher{
		Name: ":authority",
		HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{
				Regex: "(?i)^[^.]+" + regexp.QuoteMeta(suffix) + "$",
			}},
		}},
	}
}

func routes(vh *dag.VirtualHost, host *routev3.HeaderMatcher, opts Options) []*routev3.Route {
	out := make([]*routev3.Route, 0, len(vh.Routes))
	// The messages of each route are allocated together, in one array for the host: a
	// build translates tens of thousands of routes.
	parts := make([]routeParts, len(vh.Routes))
	for i, r := range vh.Routes {
		p := &parts[i]
		m := &p.match
		p.setRouteMatch(r.Path)
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, headerMatcher(h))
		}
		for _, q := range r.Query {
			m.QueryParameters = append(m.QueryParameters, queryMatcher(q))
		}
		if host != nil {
			m.Headers = append(m.Headers, host)
		}
		rt := &p.route
		rt.Name, rt.Match = routeName(r), m
		rt.RequestHeadersToAdd, rt.RequestHeadersToRemove, _ = headersPolicy(r.RequestHeaders, true)
		rt.ResponseHeadersToAdd, rt.ResponseHeadersToRemove, _ = headersPolicy(r.ResponseHeaders, false)
		rt.TypedPerFilterConfig = routeFilterConfig(r, vh, opts)
		switch {
		case r.HTTPSRedirect:
			rt.Action = &routev3.Route_Redirect{Redirect: httpsRedirect(opts)}
		case r.Redirect != nil:
			rt.Action = &routev3.Route_Redirect{Redirect: redirect(r)}
		case r.DirectStatus != 0:
			rt.Action = &routev3.Route_DirectResponse{DirectResponse: directResponse(r)}
		default:
			p.action.Route = p.routeAction(r)
			rt.Action = &p.action
		}
		if r.InvalidBackendWeight > 0 && len(r.Clusters) > 0 {
			out = append(out, invalidBackendShare(r, rt))
		}
		if needsSlashTwin(r) {
			out = append(out, slashTwin(r, rt))
		}
		out = append(out, rt)
	}
	return out
}

// headerMatcher translates a header condition. Envoy refuses ignore_case on a safe_regex
// string matcher (it would have no effect), so a case-insensitive regex gets the RE2 flag
// "(?i)" instead.
func headerMatcher(h dag.HeaderMatch) *routev3.HeaderMatcher {
	out := &routev3.HeaderMatcher{Name: h.Name, InvertMatch: h.Invert, TreatMissingHeaderAsEmpty: h.TreatMissingAsEmpty}
	if h.Kind == dag.MatchPresent {
		// "Not present" is present_match false: Envoy does not apply invert_match to a
		// presence check the way one would expect, so the inversion is spelled out.
		out.InvertMatch = false
		out.HeaderMatchSpecifier = &routev3.HeaderMatcher_PresentMatch{PresentMatch: !h.Invert}
	} else {
		out.HeaderMatchSpecifier = &routev3.HeaderMatcher_StringMatch{StringMatch: stringMatcher(h.Kind, h.Value, h.IgnoreCase)}
	}
	return out
}

// queryMatcher translates a query parameter condition, as headerMatcher does.
func queryMatcher(q dag.QueryMatch) *routev3.QueryParameterMatcher {
	out := &routev3.QueryParameterMatcher{Name: q.Name}
	if q.Kind == dag.MatchPresent {
		out.QueryParameterMatchSpecifier = &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}
	} else {
		out.QueryParameterMatchSpecifier = &routev3.QueryParameterMatcher_StringMatch{StringMatch: stringMatcher(q.Kind, q.Value, q.IgnoreCase)}
	}
	return out
}

func stringMatcher(kind dag.StringMatchKind, value string, ignoreCase bool) *matcherv3.StringMatcher {
	out := &matcherv3.StringMatcher{IgnoreCase: ignoreCase}
	switch kind {
	case dag.MatchPrefix:
		out.MatchPattern = &matcherv3.StringMatcher_Prefix{Prefix: value}
	case dag.MatchSuffix:
		out.MatchPattern = &matcherv3.StringMatcher_Suffix{Suffix: value}
	case dag.MatchContains:
		out.MatchPattern = &matcherv3.StringMatcher_Contains{Contains: value}
	case dag.MatchRegex:
		if ignoreCase {
			value = "(?i)" + value
		}
		out.IgnoreCase = false
		out.MatchPattern = &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: value}}
	default:
		out.MatchPattern = &matcherv3.StringMatcher_Exact{Exact: value}
	}
	return out
}

// headersPolicy translates header changes. Set values replace any existing value
// (OVERWRITE_IF_EXISTS_OR_ADD), Add values are appended to it (APPEND_IF_EXISTS_OR_ADD).
// Envoy refuses to add or remove Host or a pseudo-header (":path") in these lists
// (":-prefixed or host headers may not be modified"), which would refuse the whole route
// configuration: a request Host that is set is returned as the host to rewrite to
// (host_rewrite_literal) instead, and the others are left out (the builder is expected to
// refuse them).
func headersPolicy(p *dag.HeadersPolicy, request bool) (add []*corev3.HeaderValueOption, remove []string, host string) {
	if p == nil {
		return nil, nil, ""
	}
	for _, h := range p.Set {
		if strings.EqualFold(h.Name, "host") {
			if request {
				host = h.Value
			}
			continue
		}
		add = appendHeader(add, h, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD)
	}
	for _, h := range p.Add {
		add = appendHeader(add, h, corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD)
	}
	for _, name := range p.Remove {
		if modifiable(name) {
			remove = append(remove, name)
		}
	}
	return add, remove, host
}

// appendHeader appends the change of h to add, unless Envoy refuses to make it.
func appendHeader(add []*corev3.HeaderValueOption, h dag.HeaderValue, action corev3.HeaderValueOption_HeaderAppendAction) []*corev3.HeaderValueOption {
	if !modifiable(h.Name) {
		return add
	}
	return append(add, &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: h.Name, Value: h.Value},
		AppendAction: action,
	})
}

// modifiable reports whether Envoy lets a route change the header name: not Host, not a
// pseudo-header.
func modifiable(name string) bool {
	return !strings.EqualFold(name, "host") && !strings.HasPrefix(name, ":")
}

// hasHeadersPolicy reports whether a destination changes headers of its own.
func hasHeadersPolicy(wc *dag.WeightedCluster) bool {
	nonEmpty := func(p *dag.HeadersPolicy) bool {
		return p != nil && (len(p.Set) > 0 || len(p.Add) > 0 || len(p.Remove) > 0)
	}
	return nonEmpty(wc.RequestHeaders) || nonEmpty(wc.ResponseHeaders)
}

// redirect answers with r's redirect; an empty field keeps the request's value. Envoy
// writes port_redirect as ":port" whatever the scheme, and on the shared listeners the
// request's Host has no port left (strip_any_host_port): a Location without a port is
// one on the scheme's default port, so that port is left out (a Gateway's listeners,
// where the Host keeps its port: gatewayHostsOn).
func redirect(r *dag.Route) *routev3.RedirectAction {
	rd := r.Redirect
	out := &routev3.RedirectAction{
		HostRedirect: rd.Hostname,
		ResponseCode: redirectCode(rd.StatusCode),
	}
	if rd.Port != 0 && rd.Port != defaultPort(rd.Scheme) {
		out.PortRedirect = rd.Port
	}
	switch rd.Scheme {
	case "":
	case "https":
		out.SchemeRewriteSpecifier = &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true}
	default:
		out.SchemeRewriteSpecifier = &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: rd.Scheme}
	}
	switch {
	case rd.Path != "":
		out.PathRewriteSpecifier = &routev3.RedirectAction_PathRedirect{PathRedirect: rd.Path}
	case rd.Prefix != "":
		if prefix, rw := segmentRewrite(r.Path, rd.Prefix); rw != nil {
			out.PathRewriteSpecifier = &routev3.RedirectAction_RegexRewrite{RegexRewrite: rw}
		} else {
			out.PathRewriteSpecifier = &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: prefix}
		}
	}
	return out
}

// redirectCode is Envoy's response code of a redirect status; 0 (unset) is 301.
func redirectCode(status uint32) routev3.RedirectAction_RedirectResponseCode {
	switch status {
	case 302:
		return routev3.RedirectAction_FOUND
	case 303:
		return routev3.RedirectAction_SEE_OTHER
	case 307:
		return routev3.RedirectAction_TEMPORARY_REDIRECT
	case 308:
		return routev3.RedirectAction_PERMANENT_REDIRECT
	}
	return routev3.RedirectAction_MOVED_PERMANENTLY
}

// defaultPort is the port a URL of scheme has when it names none; 0 when unknown.
func defaultPort(scheme string) uint32 {
	switch scheme {
	case "http":
		return 80
	case "https":
		return 443
	}
	return 0
}

// segmentRewrite is how the prefix of a route is rewritten: by whole path elements on a
// PathPrefix route (dag.Route.PrefixRewrite), where Envoy's prefix_rewrite replaces the
// prefix's characters. It returns the prefix_rewrite to use, or a regex_rewrite where
// that cannot do it. On the prefix "/", "/bar" would send "/x" as "/barx": it becomes
// "/bar/". On the prefix "/foo", "/" would send "/foo/x" as "//x": the expression takes
// the prefix with the "/" after it, when there is one, so "/foo/x" goes as "/x" and
// "/foo" as "/". An expression over Envoy's program size limit would make it refuse the
// whole route configuration: such a route keeps its prefix_rewrite and gets a twin on
// the prefix with its "/" (slashTwin).
func segmentRewrite(p dag.PathMatch, replacement string) (string, *matcherv3.RegexMatchAndSubstitute) {
	if p.Kind != dag.PathPrefix {
		return replacement, nil
	}
	slash := strings.HasSuffix(replacement, "/")
	switch {
	case p.Value == "/" && !slash:
		return replacement + "/", nil
	case p.Value != "/" && slash:
		if pattern := prefixPattern(p.Value); pattern != "" {
			return "", regexRewrite(pattern, replacement)
		}
	}
	return replacement, nil
}

// prefixPatternMargin is room below Envoy's program size limit for the instructions
// RE2 may count around a program where Go's compiler does not: the twin route that
// stands in for a refused expression is as good, so nothing is lost by leaving room.
const prefixPatternMargin = 10

// prefixPattern is the expression of a prefix and the "/" after it, "" when it could be
// over Envoy's program size limit (a prefix of more than 85 characters). Go's program
// has an instruction per character where RE2's has one per byte: the bytes beyond the
// first of each character are counted too.
func prefixPattern(prefix string) string {
	pattern := "^" + regexp.QuoteMeta(prefix) + "/?"
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return ""
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil || len(prog.Inst)+len(prefix)-utf8.RuneCountInString(prefix) > dag.MaxRegexProgramSize-prefixPatternMargin {
		return ""
	}
	return pattern
}

// needsSlashTwin reports whether r rewrites a long prefix to a replacement ending in
// "/" with prefix_rewrite (segmentRewrite), which needs a twin route.
func needsSlashTwin(r *dag.Route) bool {
	rewrite := r.PrefixRewrite
	switch {
	case r.Redirect != nil:
		rewrite = r.Redirect.Prefix
	case r.HTTPSRedirect || r.DirectStatus != 0 || r.PathRewrite != "":
		return false
	}
	return r.Path.Kind == dag.PathPrefix && r.Path.Value != "/" && strings.HasSuffix(rewrite, "/") &&
		prefixPattern(r.Path.Value) == ""
}

// slashTwin is rt on the string prefix of r's prefix with its "/", to go before rt: it
// takes the requests under the prefix, whose prefix and "/" its prefix_rewrite replaces
// ("/foo/x" to "/bar/x" for "/bar/"), and leaves rt the prefix alone ("/foo" to "/bar/").
// It matches a part of what rt matches, at rt's place, so nothing else changes.
func slashTwin(r *dag.Route, rt *routev3.Route) *routev3.Route {
	twin := proto.Clone(rt).(*routev3.Route)
	twin.Match.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: r.Path.Value + "/"}
	named := *r
	named.Path = dag.PathMatch{Kind: dag.PathStringPrefix, Value: r.Path.Value + "/"}
	twin.Name = routeName(&named)
	return twin
}

// invalidBackendShare is rt answering 500 to the share of its requests that
// r.InvalidBackendWeight stands for, to go before rt: a runtime_fraction of the same
// match (which the data planes draw per request), so that the requests it leaves go on
// to rt and its clusters. The share is in millionths.
func invalidBackendShare(r *dag.Route, rt *routev3.Route) *routev3.Route {
	total := uint64(r.InvalidBackendWeight)
	for _, c := range r.Clusters {
		total += uint64(c.Weight)
	}
	share := &routev3.Route{
		Name:   rt.Name,
		Match:  proto.Clone(rt.Match).(*routev3.RouteMatch),
		Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 500}},
	}
	share.Match.RuntimeFraction = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{
		Numerator:   uint32((uint64(r.InvalidBackendWeight)*1_000_000 + total/2) / total),
		Denominator: typev3.FractionalPercent_MILLION,
	}}
	return share
}

// fullPathRewrite replaces the whole path (Envoy keeps the query string).
func fullPathRewrite(path string) *matcherv3.RegexMatchAndSubstitute {
	return regexRewrite("^/.*$", path)
}

// regexRewrite replaces what pattern matches with the literal text replacement: RE2
// substitutions read "\1" as a capture group, so backslashes are escaped.
func regexRewrite(pattern, replacement string) *matcherv3.RegexMatchAndSubstitute {
	return &matcherv3.RegexMatchAndSubstitute{
		Pattern:      &matcherv3.RegexMatcher{Regex: pattern},
		Substitution: strings.ReplaceAll(replacement, `\`, `\\`),
	}
}

func directResponse(r *dag.Route) *routev3.DirectResponseAction {
	out := &routev3.DirectResponseAction{Status: r.DirectStatus}
	if r.DirectBody != "" {
		out.Body = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: r.DirectBody}}
	}
	return out
}

// httpsRedirect answers 301 with the request's URL on https. The port is dropped (443)
// unless the HTTPS listener is reached on another port.
func httpsRedirect(opts Options) *routev3.RedirectAction {
	return &routev3.RedirectAction{
		SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true},
		PortRedirect:           opts.HTTPSRedirectPort,
		ResponseCode:           routev3.RedirectAction_MOVED_PERMANENTLY,
	}
}

// setRouteMatch sets the route's match to a path condition. Element-wise prefixes use Envoy's
// path_separated_prefix, which matches the value itself or the value followed by "/";
// the prefix "/" matches everything and is a plain prefix. String prefixes (IngressRoute)
// are Envoy's plain prefix of the same value; regular expressions are safe_regex (RE2,
// matching the whole path).
func (rp *routeParts) setRouteMatch(p dag.PathMatch) {
	m := &rp.match
	switch {
	case p.Kind == dag.PathRegex:
		m.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: p.Value}}
	case p.Kind == dag.PathExact:
		rp.path.Path = p.Value
		m.PathSpecifier = &rp.path
	case p.Kind == dag.PathStringPrefix || p.Value == "/":
		rp.prefix.Prefix = p.Value
		m.PathSpecifier = &rp.prefix
	default:
		rp.separated.PathSeparatedPrefix = p.Value
		m.PathSpecifier = &rp.separated
	}
}

// routeParts are the messages of one route that forwards to one cluster, with the path
// condition of each kind but regexes (one is used).
type routeParts struct {
	route     routev3.Route
	match     routev3.RouteMatch
	action    routev3.Route_Route
	ra        routev3.RouteAction
	cluster   routev3.RouteAction_Cluster
	path      routev3.RouteMatch_Path
	prefix    routev3.RouteMatch_Prefix
	separated routev3.RouteMatch_PathSeparatedPrefix
}

// routeAction forwards, in p, to the route's clusters. A single cluster is named directly unless
// it changes headers of its own: those live on a weighted cluster entry, so it is then a
// weighted_clusters of one (weight 1 if its weight is 0).
func (p *routeParts) routeAction(r *dag.Route) *routev3.RouteAction {
	ra := &p.ra
	switch {
	case r.PathRewrite != "":
		ra.RegexRewrite = fullPathRewrite(r.PathRewrite)
	case r.PrefixRewrite != "":
		ra.PrefixRewrite, ra.RegexRewrite = segmentRewrite(r.Path, r.PrefixRewrite)
	}
	if len(r.Clusters) == 1 && !hasHeadersPolicy(r.Clusters[0]) && len(r.Clusters[0].CookieRewrites) == 0 {
		p.cluster.Cluster = r.Clusters[0].Cluster.Name
		ra.ClusterSpecifier = &p.cluster
	} else {
		wc := &routev3.WeightedCluster{}
		for _, c := range r.Clusters {
			weight := c.Weight
			if len(r.Clusters) == 1 && weight == 0 {
				weight = 1
			}
			cw := &routev3.WeightedCluster_ClusterWeight{Name: c.Cluster.Name, Weight: wrapperspb.UInt32(weight)}
			var host string
			cw.RequestHeadersToAdd, cw.RequestHeadersToRemove, host = headersPolicy(c.RequestHeaders, true)
			cw.ResponseHeadersToAdd, cw.ResponseHeadersToRemove, _ = headersPolicy(c.ResponseHeaders, false)
			if host != "" {
				cw.HostRewriteSpecifier = &routev3.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: host}
			}
			if cfg := cookieRewriteConfig(clusterCookieRewrites(c, r)); cfg != nil {
				cw.TypedPerFilterConfig = map[string]*anypb.Any{luaFilter.name: cfg}
			}
			wc.Clusters = append(wc.Clusters, cw)
		}
		ra.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	// HostRewrite wins over a Host set among the route's request headers.
	host := r.HostRewrite
	if host == "" {
		_, _, host = headersPolicy(r.RequestHeaders, true)
	}
	switch {
	case host != "":
		ra.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: host}
	case r.HostRewriteHeader != "":
		ra.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteHeader{HostRewriteHeader: r.HostRewriteHeader}
	}
	if t := r.Timeouts; t != nil {
		if t.Request != nil {
			ra.Timeout = durationpb.New(*t.Request)
		}
		if t.Idle != nil {
			ra.IdleTimeout = durationpb.New(*t.Idle)
		}
	}
	ra.RetryPolicy = retryPolicy(r.Retry)
	ra.RequestMirrorPolicies = mirrorPolicies(r.Mirrors)
	ra.RateLimits = globalRateLimits(r.RateLimit)
	ra.InternalRedirectPolicy = internalRedirectPolicy(r.InternalRedirect)
	if r.Websocket {
		ra.UpgradeConfigs = []*routev3.RouteAction_UpgradeConfig{{UpgradeType: "websocket"}}
	}
	switch {
	case len(r.HashPolicies) > 0:
		ra.HashPolicy = hashPolicies(r.HashPolicies)
	case hashesClient(r):
		ra.HashPolicy = []*routev3.RouteAction_HashPolicy{{
			PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{
				ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true},
			},
		}}
	}
	return ra
}

// hashPolicies translates a route's own hash policies, in order. They replace the
// client-address hash that consistent-hashing clusters otherwise get.
func hashPolicies(hps []dag.HashPolicy) []*routev3.RouteAction_HashPolicy {
	out := make([]*routev3.RouteAction_HashPolicy, 0, len(hps))
	for _, hp := range hps {
		p := &routev3.RouteAction_HashPolicy{Terminal: hp.Terminal}
		switch {
		case hp.Header != "":
			p.PolicySpecifier = &routev3.RouteAction_HashPolicy_Header_{Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: hp.Header}}
		case hp.QueryParameter != "":
			p.PolicySpecifier = &routev3.RouteAction_HashPolicy_QueryParameter_{QueryParameter: &routev3.RouteAction_HashPolicy_QueryParameter{Name: hp.QueryParameter}}
		case hp.SourceIP:
			p.PolicySpecifier = &routev3.RouteAction_HashPolicy_ConnectionProperties_{ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}
		case hp.Cookie != "":
			c := &routev3.RouteAction_HashPolicy_Cookie{Name: hp.Cookie, Path: hp.CookiePath}
			// A ttl, even 0s (a session cookie), is what makes Envoy create the cookie
			// for a client that has none.
			if hp.CookieGenerate || hp.CookieTTL > 0 {
				c.Ttl = durationpb.New(hp.CookieTTL)
			}
			p.PolicySpecifier = &routev3.RouteAction_HashPolicy_Cookie_{Cookie: c}
		default:
			// A policy with nothing to hash on would be refused (policy_specifier is
			// required): the builder sets exactly one field, so this is never reached.
			continue
		}
		out = append(out, p)
	}
	return out
}

// retryPolicy retries the listed status codes. When 502, 503 and 504 are all listed,
// "gateway-error" also retries what the proxy itself would answer with them: connection
// failures, resets and per-try timeouts. Explicit conditions (RetryOn, HTTPProxy) are used
// as they are instead, with "retriable-status-codes" added when status codes are listed.
func retryPolicy(rp *dag.RetryPolicy) *routev3.RetryPolicy {
	if rp == nil {
		return nil
	}
	retryOn := "retriable-status-codes"
	switch {
	case len(rp.RetryOn) > 0:
		retryOn = strings.Join(rp.RetryOn, ",")
		if len(rp.OnStatusCodes) > 0 && !slices.Contains(rp.RetryOn, "retriable-status-codes") {
			retryOn += ",retriable-status-codes"
		}
	case slices.Contains(rp.OnStatusCodes, 502) && slices.Contains(rp.OnStatusCodes, 503) && slices.Contains(rp.OnStatusCodes, 504):
		retryOn = "gateway-error," + retryOn
	}
	out := &routev3.RetryPolicy{
		RetryOn:              retryOn,
		NumRetries:           wrapperspb.UInt32(rp.NumRetries),
		RetriableStatusCodes: slices.Clone(rp.OnStatusCodes),
	}
	if rp.PerTryTimeout > 0 {
		out.PerTryTimeout = durationpb.New(rp.PerTryTimeout)
	}
	if rp.Backoff > 0 {
		out.RetryBackOff = &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(rp.Backoff)}
	}
	return out
}

// hashesClient reports whether a route sends to a consistent-hashing cluster: those hash
// the client's address, so that a client keeps reaching the same endpoint.
func hashesClient(r *dag.Route) bool {
	for _, wc := range r.Clusters {
		if lb := wc.Cluster.LoadBalancer; lb == dag.LBRingHash || lb == dag.LBMaglev {
			return true
		}
	}
	return false
}
