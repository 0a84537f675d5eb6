package router

import (
	"math/rand/v2"
	"net/http"
	"net/textproto"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/portico-dev/portico/internal/proxy/accesslog"
	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/filters/ratelimit"
	"github.com/portico-dev/portico/internal/proxy/internal/layered"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// DefaultRouteTimeout is Envoy's route timeout when RouteAction.timeout is unset.
const DefaultRouteTimeout = 15 * time.Second

// DefaultMaxDirectResponseBody is Envoy's limit on a direct_response body
// when RouteConfiguration.max_direct_response_body_size_bytes is unset.
const DefaultMaxDirectResponseBody = 4096

// RouteTable is a compiled RouteConfiguration. It is immutable once built and
// shared by every snapshot that references it; the next version of the
// configuration may be patched from it (see patchRouteTable), sharing its
// virtual hosts and the bulk of its domain index.
type RouteTable struct {
	Name    string
	Domains domainIndex
	Vhosts  []*VirtualHost // in order
	// Slots is one more than the highest virtualHost.slot; freeSlots are
	// those below it that no virtual host of the table holds.
	Slots     int
	freeSlots []int
	// id stands for this table in the patch of the tables patched from it,
	// which must not keep it alive; patch is how this one was patched from
	// another (nil: built in full).
	id    *tableID
	Patch *tablePatch
	// Level is what the virtual hosts' routes inherit from the configuration;
	// shell is the encoding of every field but virtual_hosts, set for a table
	// decoded from RDS ("" otherwise; see reuseRouteConfig): the next version
	// reuses this one's virtual hosts only if its shell is the same.
	Level RouteConfigLevel
	Shell string
	// Vhds is set for a configuration that takes virtual hosts from VHDS:
	// its first inline vhosts are its own, the others are the VirtualHost
	// resources of its namespace, sorted by name (see vhds.go).
	Vhds   bool
	Inline int
}

// tableID identifies a routeTable; it has a size so that each is distinct.
type tableID struct{ _ byte }

// tablePatch is the difference between a table and the one it was patched
// from: what a per-table structure indexed by slot (route stats, cluster
// uses) must update to follow it.
type tablePatch struct {
	from    *tableID
	Removed []*VirtualHost // of the table it was patched from
	Added   []*VirtualHost
}

// domainIndex finds a request host's virtual host. exact is shared with the
// tables patched from this one (see layered).
type domainIndex struct {
	Exact    layered.Map[string, *VirtualHost] // lower-cased domain -> vhost
	Suffixes []WildcardDomain                  // "*<suffix>" domains, longest suffix first
	Prefixes []WildcardDomain                  // "<prefix>*" domains, longest prefix first
	Any      *VirtualHost                      // the "*" domain
}

// WildcardDomain is a "*suffix" or "prefix*" domain of a virtual host.
type WildcardDomain struct {
	Affix string // the domain without its '*'
	Vhost *VirtualHost
}

// VirtualHost is a vhostDef in a slot of a routeTable. Both are kept by the
// tables patched from that one while the def is unchanged, so that what is
// indexed by slot (metrics) stays valid.
type VirtualHost struct {
	*VhostDef
	Slot int // for per-configuration tables such as metrics
}

// VhostDef is a converted VirtualHost. It is immutable once its table is
// built, so that the next version of the route configuration can reuse it
// while the table in service still routes requests with it.
type VhostDef struct {
	Name     string
	Routes   []*Route
	headers  headerLevel // its own header mutations (resolved into its routes' plans)
	domains  []string    // lower-cased
	Clusters []string    // every cluster its routes name, each once
	// Raw is the VirtualHost's encoding, when it was decoded from RDS: an
	// identical encoding in the next version stands for the same def.
	Raw string
	// Logged is where the access log says its requests that match none of
	// its routes were routed.
	Logged *accesslog.Route
}

// Route is a compiled route: its match, its action and policies, and the
// labels of its metrics.
type Route struct {
	Name string
	// label and pathLabel are its route and path labels (routeLabel,
	// pathLabel): metrics and access log.
	Label, PathLabel string
	Logged           *accesslog.Route // the access log's vhost, route, route_path and route_name
	Index            int              // in virtualHost.routes
	Match            routeMatch
	// exactly one of the following is set
	Forward  *ForwardAction
	Redirect *redirectAction
	Direct   *directResponse
	headers  headerLevel   // its own header mutations
	Plan     *mutationPlan // every level's that apply to it, in order; nil: none
	// PerFilter is the HTTP filters' configuration for it: its own
	// typed_per_filter_config over its virtual host's.
	PerFilter filter.PerFilter
	// RateLimits are its rate_limits and its virtual host's, for the rate
	// limit filter; nil: none.
	RateLimits *ratelimit.RouteLimits
}

type pathMatchKind int

const (
	pathPrefix pathMatchKind = iota
	pathExact
	pathSeparatedPrefix
	pathRegex
)

type routeMatch struct {
	kind          pathMatchKind
	value         string // prefix / path / separated prefix
	re            *regexp.Regexp
	regex         string // re as configured
	caseSensitive bool
	headers       []headerMatcher
	queries       []queryMatcher
	// fraction out of fractionOf is the share of the requests matching the rest that
	// it matches (runtime_fraction), drawn per request; fractionOf 0: all of them.
	fraction, fractionOf uint64
}

// headerMatcher is an Envoy HeaderMatcher restricted to string and present matches.
type headerMatcher struct {
	name  string // lower-case
	key   string // canonical http.Header key
	match xdsconv.HeaderMatcher
}

// queryMatcher is an Envoy QueryParameterMatcher: the first value of the
// parameter in the raw (not percent-decoded) query string is matched.
type queryMatcher struct {
	name   string
	str    *xdsconv.StringMatcher // nil: a presence match
	absent bool                   // present_match: false: the parameter must be absent
}

// ForwardAction is a RouteAction: proxy to one of its clusters.
type ForwardAction struct {
	Clusters []weightedCluster
	total    uint64
	// Timeout runs from the end of the downstream request (its body) to the
	// end of the response, as Envoy's route timeout; 0 means none.
	Timeout          time.Duration
	PrefixRewrite    string
	HasPrefixRewrite bool
	RegexRewrite     *pathRewrite // nil: none; never with a prefix rewrite
	// NotFoundStatus is returned when the picked cluster is not in the snapshot.
	NotFoundStatus int
	Retry          *RetryPolicy // never nil (noRetries)
	// IdleTimeout overrides the HCM's stream_idle_timeout when
	// hasIdleTimeout; 0 disables the idle timeout.
	IdleTimeout    time.Duration
	HasIdleTimeout bool
	HashPolicies   []HashPolicy // for RING_HASH and MAGLEV clusters
	HostRewrite    string       // host_rewrite_literal; "" keeps the request's host
	// HostRewriteHeader (host_rewrite_header, canonical): the first value of this
	// request header, after the header mutations, becomes the Host; absent or
	// empty, the Host stays. "" for none.
	HostRewriteHeader string
	Upgrades          []routeUpgrade
	Mirrors           []MirrorPolicy // request_mirror_policies
	// InternalRedirect, when set, follows upstream redirects in the proxy.
	InternalRedirect *internalRedirectSpec
}

// routeUpgrade is a per-route upgrade_configs entry: it allows or refuses an
// upgrade type whatever the HCM says.
type routeUpgrade struct {
	UpgradeType string // lower-case
	Enabled     bool
}

type weightedCluster struct {
	Name        string
	weight      uint64
	HostRewrite string        // host_rewrite_literal of the ClusterWeight; the route's wins
	headers     headerLevel   // its own header mutations
	Plan        *mutationPlan // when it has its own: every level's, its own first
	// PerFilter is its typed_per_filter_config, over the route's (encoders).
	PerFilter filter.PerFilter
}

type redirectAction struct {
	Scheme           string // "" keeps the request's scheme
	Host             string // "" keeps the request's host
	Port             uint32 // 0 keeps the request's port
	Path             string
	HasPath          bool
	PrefixRewrite    string
	HasPrefixRewrite bool
	RegexRewrite     *pathRewrite
	StripQuery       bool
	Status           int
}

type directResponse struct {
	Status int
	Body   []byte
}

// RequestInfo is what route matching looks at.
type RequestInfo struct {
	Method    string
	Scheme    string
	Authority string // Host as forwarded (requestHost): not lower-cased
	Path      string // normalized path without the query string
	RawQuery  string
	Header    http.Header
	// Client decides the client's address (source IP hashing); nil: the peer.
	Client *ClientAddressing
}

// SelectVirtualHost follows Envoy: exact domain, then the longest "*suffix"
// wildcard (which may cover several labels), then the longest "prefix*"
// wildcard, then "*". Matching is case-insensitive. A port in host is part of
// what the domains are matched against ("foo.com" does not match
// "foo.com:8080") unless the configuration ignores it.
func (t *RouteTable) SelectVirtualHost(host string) *VirtualHost {
	if t.Level.ignorePort {
		host = StripPort(host)
	}
	h, d := strings.ToLower(host), &t.Domains
	if vh, ok := d.exactDomain(h); ok {
		return vh
	}
	for _, w := range d.Suffixes {
		// The wildcard must stand for at least one character.
		if len(h) > len(w.Affix) && strings.HasSuffix(h, w.Affix) {
			return w.Vhost
		}
	}
	for _, w := range d.Prefixes {
		if len(h) > len(w.Affix) && strings.HasPrefix(h, w.Affix) {
			return w.Vhost
		}
	}
	return d.Any
}

// exactDomain returns the virtual host of the exact domain h.
func (d *domainIndex) exactDomain(h string) (*VirtualHost, bool) { return d.Exact.Get(h) }

// SelectRoute returns the first route that matches: the translator orders
// routes, so the proxy never reorders them.
func (vh *VirtualHost) SelectRoute(ri *RequestInfo) *Route {
	for _, r := range vh.Routes {
		if r.Match.Matches(ri) {
			return r
		}
	}
	return nil
}

func (m *routeMatch) Matches(ri *RequestInfo) bool {
	if !m.PathMatches(ri.Path) {
		return false
	}
	for i := range m.headers {
		if !m.headers[i].matches(ri) {
			return false
		}
	}
	for i := range m.queries {
		if !m.queries[i].matches(ri.RawQuery) {
			return false
		}
	}
	return m.fractionOf == 0 || rand.Uint64N(m.fractionOf) < m.fraction
}

// matches follows Envoy's QueryParameterMatcher: present_match: false
// matches a missing parameter; otherwise a missing parameter never matches,
// a presence match matches any value, and a string match looks at the
// parameter's first value.
func (qm *queryMatcher) matches(rawQuery string) bool {
	v, ok := firstQueryValue(rawQuery, qm.name)
	switch {
	case qm.absent:
		return !ok
	case !ok:
		return false
	}
	return qm.str == nil || qm.str.Match(v)
}

// firstQueryValue returns the first value of a parameter in a raw query
// string, parsed as Envoy does: "&"-separated, the name up to the first "=",
// no percent-decoding; a parameter without "=" has the value "".
func firstQueryValue(q, name string) (string, bool) {
	for q != "" {
		var param string
		param, q, _ = strings.Cut(q, "&")
		if k, v, _ := strings.Cut(param, "="); k == name {
			return v, true
		}
	}
	return "", false
}

// PathMatches reports whether path matches the route's path condition.
func (m *routeMatch) PathMatches(path string) bool {
	switch m.kind {
	case pathExact:
		if m.caseSensitive {
			return path == m.value
		}
		return strings.EqualFold(path, m.value)
	case pathPrefix:
		return hasPrefixFold(path, m.value, !m.caseSensitive)
	case pathSeparatedPrefix:
		if !hasPrefixFold(path, m.value, !m.caseSensitive) {
			return false
		}
		return len(path) == len(m.value) || path[len(m.value)] == '/'
	case pathRegex:
		// case_sensitive does not apply to regexes, as in Envoy.
		return m.re.MatchString(path)
	}
	return false
}

// MatchedPrefixLen is the length of the path portion that prefix_rewrite
// replaces: the prefix for prefix matches, the whole path otherwise.
func (m *routeMatch) MatchedPrefixLen(path string) int {
	switch m.kind {
	case pathPrefix, pathSeparatedPrefix:
		return len(m.value)
	}
	return len(path)
}

func hasPrefixFold(s, prefix string, fold bool) bool {
	if len(s) < len(prefix) {
		return false
	}
	if fold {
		return strings.EqualFold(s[:len(prefix)], prefix)
	}
	return s[:len(prefix)] == prefix
}

// matches follows Envoy's HeaderUtility::matchHeaders. An absent header (without
// treat_missing_header_as_empty) fails every string match, inverted or not: only a
// presence check can hold, present_match: false as written, present_match: true
// when inverted. With treat_missing_header_as_empty it is the value "".
func (hm *headerMatcher) matches(ri *RequestInfo) bool {
	value, ok := ri.headerValueKey(hm.name, hm.key)
	return hm.match.Match(value, ok)
}

// headerValue returns a header as Envoy sees it: pseudo-headers map to the
// request line, and repeated headers are joined with "," (Cookie with "; ",
// as Envoy's codecs coalesce it).
func (ri *RequestInfo) headerValue(name string) (string, bool) {
	return ri.headerValueKey(name, textproto.CanonicalMIMEHeaderKey(name))
}

// headerValueKey is headerValue with the canonical key already known.
func (ri *RequestInfo) headerValueKey(name, key string) (string, bool) {
	switch name {
	case ":authority", "host":
		return ri.Authority, true
	case ":path":
		if ri.RawQuery != "" {
			return ri.Path + "?" + ri.RawQuery, true
		}
		return ri.Path, true
	case ":method":
		return ri.Method, true
	case ":scheme":
		return ri.Scheme, true
	}
	switch values := ri.Header[key]; {
	case len(values) == 0:
		return "", false
	case len(values) == 1:
		return values[0], true
	case key == "Cookie":
		return strings.Join(values, "; "), true
	default:
		return strings.Join(values, ","), true
	}
}

// sortWildcards orders wildcard domains longest first so that the most
// specific one wins.
func sortWildcards(ws []WildcardDomain) {
	sort.SliceStable(ws, func(i, j int) bool { return len(ws[i].Affix) > len(ws[j].Affix) })
}

// PickCluster chooses a cluster by weight, per request.
func (fa *ForwardAction) PickCluster() *weightedCluster {
	if len(fa.Clusters) == 1 {
		return &fa.Clusters[0]
	}
	n := RandUint64N(fa.total)
	for i := range fa.Clusters {
		if n < fa.Clusters[i].weight {
			return &fa.Clusters[i]
		}
		n -= fa.Clusters[i].weight
	}
	return &fa.Clusters[len(fa.Clusters)-1]
}
