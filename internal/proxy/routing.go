package proxy

import (
	"math/rand/v2"
	"net/http"
	"net/textproto"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/filters/ratelimit"
	"github.com/portico-dev/portico/internal/proxy/internal/layered"
)

// defaultRouteTimeout is Envoy's route timeout when RouteAction.timeout is unset.
const defaultRouteTimeout = 15 * time.Second

// defaultMaxDirectResponseBody is Envoy's limit on a direct_response body
// when RouteConfiguration.max_direct_response_body_size_bytes is unset.
const defaultMaxDirectResponseBody = 4096

// routeTable is a compiled RouteConfiguration. It is immutable once built and
// shared by every snapshot that references it; the next version of the
// configuration may be patched from it (see patchRouteTable), sharing its
// virtual hosts and the bulk of its domain index.
type routeTable struct {
	name    string
	domains domainIndex
	vhosts  []*virtualHost // in order
	// slots is one more than the highest virtualHost.slot; freeSlots are
	// those below it that no virtual host of the table holds.
	slots     int
	freeSlots []int
	// id stands for this table in the patch of the tables patched from it,
	// which must not keep it alive; patch is how this one was patched from
	// another (nil: built in full).
	id    *tableID
	patch *tablePatch
	// level is what the virtual hosts' routes inherit from the configuration;
	// shell is the encoding of every field but virtual_hosts, set for a table
	// decoded from RDS ("" otherwise; see reuseRouteConfig): the next version
	// reuses this one's virtual hosts only if its shell is the same.
	level routeConfigLevel
	shell string
	// vhds is set for a configuration that takes virtual hosts from VHDS:
	// its first inline vhosts are its own, the others are the VirtualHost
	// resources of its namespace, sorted by name (see vhds.go).
	vhds   bool
	inline int
}

// tableID identifies a routeTable; it has a size so that each is distinct.
type tableID struct{ _ byte }

// tablePatch is the difference between a table and the one it was patched
// from: what a per-table structure indexed by slot (route stats, cluster
// uses) must update to follow it.
type tablePatch struct {
	from    *tableID
	removed []*virtualHost // of the table it was patched from
	added   []*virtualHost
}

// domainIndex finds a request host's virtual host. exact is shared with the
// tables patched from this one (see layered).
type domainIndex struct {
	exact    layered.Map[string, *virtualHost] // lower-cased domain -> vhost
	suffixes []wildcardDomain                  // "*<suffix>" domains, longest suffix first
	prefixes []wildcardDomain                  // "<prefix>*" domains, longest prefix first
	any      *virtualHost                      // the "*" domain
}

type wildcardDomain struct {
	affix string // the domain without its '*'
	vhost *virtualHost
}

// virtualHost is a vhostDef in a slot of a routeTable. Both are kept by the
// tables patched from that one while the def is unchanged, so that what is
// indexed by slot (metrics) stays valid.
type virtualHost struct {
	*vhostDef
	slot int // for per-configuration tables such as metrics
}

// vhostDef is a converted VirtualHost. It is immutable once its table is
// built, so that the next version of the route configuration can reuse it
// while the table in service still routes requests with it.
type vhostDef struct {
	name     string
	routes   []*route
	headers  headerLevel // its own header mutations (resolved into its routes' plans)
	domains  []string    // lower-cased
	clusters []string    // every cluster its routes name, each once
	// raw is the VirtualHost's encoding, when it was decoded from RDS: an
	// identical encoding in the next version stands for the same def.
	raw string
}

type route struct {
	name string
	// label and pathLabel are its route and path labels (routeLabel,
	// pathLabel): metrics and access log.
	label, pathLabel string
	index            int // in virtualHost.routes
	match            routeMatch
	// exactly one of the following is set
	forward  *forwardAction
	redirect *redirectAction
	direct   *directResponse
	headers  headerLevel   // its own header mutations
	plan     *mutationPlan // every level's that apply to it, in order; nil: none
	// perFilter is the HTTP filters' configuration for it: its own
	// typed_per_filter_config over its virtual host's.
	perFilter filter.PerFilter
	// rateLimits are its rate_limits and its virtual host's, for the rate
	// limit filter; nil: none.
	rateLimits *ratelimit.RouteLimits
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
	name                string // lower-case
	key                 string // canonical http.Header key
	present             bool   // for present_match
	isPresentMatch      bool
	str                 stringMatcher
	invert              bool
	treatMissingAsEmpty bool
}

type stringMatchKind int

const (
	strExact stringMatchKind = iota
	strPrefix
	strSuffix
	strContains
	strRegex
)

type stringMatcher struct {
	kind       stringMatchKind
	value      string
	re         *regexp.Regexp
	ignoreCase bool // ASCII case folding, as Envoy's; not for regexes
}

// queryMatcher is an Envoy QueryParameterMatcher: the first value of the
// parameter in the raw (not percent-decoded) query string is matched.
type queryMatcher struct {
	name   string
	str    *stringMatcher // nil: a presence match
	absent bool           // present_match: false: the parameter must be absent
}

// forwardAction is a RouteAction: proxy to one of its clusters.
type forwardAction struct {
	clusters []weightedCluster
	total    uint64
	// timeout runs from the end of the downstream request (its body) to the
	// end of the response, as Envoy's route timeout; 0 means none.
	timeout          time.Duration
	prefixRewrite    string
	hasPrefixRewrite bool
	regexRewrite     *pathRewrite // nil: none; never with a prefix rewrite
	// notFoundStatus is returned when the picked cluster is not in the snapshot.
	notFoundStatus int
	retry          *retryPolicy // never nil (noRetries)
	// idleTimeout overrides the HCM's stream_idle_timeout when
	// hasIdleTimeout; 0 disables the idle timeout.
	idleTimeout    time.Duration
	hasIdleTimeout bool
	hashPolicies   []hashPolicy // for RING_HASH and MAGLEV clusters
	hostRewrite    string       // host_rewrite_literal; "" keeps the request's host
	upgrades       []routeUpgrade
	mirrors        []mirrorPolicy // request_mirror_policies
	// internalRedirect, when set, follows upstream redirects in the proxy.
	internalRedirect *internalRedirectSpec
}

// routeUpgrade is a per-route upgrade_configs entry: it allows or refuses an
// upgrade type whatever the HCM says.
type routeUpgrade struct {
	upgradeType string // lower-case
	enabled     bool
}

type weightedCluster struct {
	name        string
	weight      uint64
	hostRewrite string        // host_rewrite_literal of the ClusterWeight; the route's wins
	headers     headerLevel   // its own header mutations
	plan        *mutationPlan // when it has its own: every level's, its own first
	// perFilter is its typed_per_filter_config, over the route's (encoders).
	perFilter filter.PerFilter
}

type redirectAction struct {
	scheme           string // "" keeps the request's scheme
	host             string // "" keeps the request's host
	port             uint32 // 0 keeps the request's port
	path             string
	hasPath          bool
	prefixRewrite    string
	hasPrefixRewrite bool
	regexRewrite     *pathRewrite
	stripQuery       bool
	status           int
}

type directResponse struct {
	status int
	body   []byte
}

// requestInfo is what route matching looks at.
type requestInfo struct {
	method    string
	scheme    string
	authority string // Host as forwarded (requestHost): not lower-cased
	path      string // normalized path without the query string
	rawQuery  string
	header    http.Header
	// client decides the client's address (source IP hashing); nil: the peer.
	client *clientAddressing
}

// selectVirtualHost follows Envoy: exact domain, then the longest "*suffix"
// wildcard (which may cover several labels), then the longest "prefix*"
// wildcard, then "*". Matching is case-insensitive. A port in host is part of
// what the domains are matched against ("foo.com" does not match
// "foo.com:8080") unless the configuration ignores it.
func (t *routeTable) selectVirtualHost(host string) *virtualHost {
	if t.level.ignorePort {
		host = stripPort(host)
	}
	h, d := strings.ToLower(host), &t.domains
	if vh, ok := d.exactDomain(h); ok {
		return vh
	}
	for _, w := range d.suffixes {
		// The wildcard must stand for at least one character.
		if len(h) > len(w.affix) && strings.HasSuffix(h, w.affix) {
			return w.vhost
		}
	}
	for _, w := range d.prefixes {
		if len(h) > len(w.affix) && strings.HasPrefix(h, w.affix) {
			return w.vhost
		}
	}
	return d.any
}

// exactDomain returns the virtual host of the exact domain h.
func (d *domainIndex) exactDomain(h string) (*virtualHost, bool) { return d.exact.Get(h) }

// selectRoute returns the first route that matches: the translator orders
// routes, so the proxy never reorders them.
func (vh *virtualHost) selectRoute(ri *requestInfo) *route {
	for _, r := range vh.routes {
		if r.match.matches(ri) {
			return r
		}
	}
	return nil
}

func (m *routeMatch) matches(ri *requestInfo) bool {
	if !m.pathMatches(ri.path) {
		return false
	}
	for i := range m.headers {
		if !m.headers[i].matches(ri) {
			return false
		}
	}
	for i := range m.queries {
		if !m.queries[i].matches(ri.rawQuery) {
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
	return qm.str == nil || qm.str.matches(v)
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

func (m *routeMatch) pathMatches(path string) bool {
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

// matchedPrefixLen is the length of the path portion that prefix_rewrite
// replaces: the prefix for prefix matches, the whole path otherwise.
func (m *routeMatch) matchedPrefixLen(path string) int {
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

// matches implements Envoy's HeaderUtility::matchHeaders semantics, including
// its handling of absent headers with invert_match.
func (hm *headerMatcher) matches(ri *requestInfo) bool {
	value, ok := ri.headerValueKey(hm.name, hm.key)
	if !ok {
		if !hm.treatMissingAsEmpty {
			if hm.invert {
				return !hm.isPresentMatch
			}
			return hm.isPresentMatch && !hm.present
		}
		value = ""
	}
	var match bool
	if hm.isPresentMatch {
		match = hm.present
	} else {
		match = hm.str.matches(value)
	}
	return match != hm.invert
}

// matches compares as Envoy's StringMatcher: ignore_case folds ASCII letters
// only, and a regex must match the whole value.
func (sm *stringMatcher) matches(v string) bool {
	switch sm.kind {
	case strRegex:
		return sm.re.MatchString(v)
	case strExact:
		return len(v) == len(sm.value) && hasPrefixASCII(v, sm.value, sm.ignoreCase)
	case strPrefix:
		return hasPrefixASCII(v, sm.value, sm.ignoreCase)
	case strSuffix:
		return len(v) >= len(sm.value) && hasPrefixASCII(v[len(v)-len(sm.value):], sm.value, sm.ignoreCase)
	case strContains:
		if !sm.ignoreCase {
			return strings.Contains(v, sm.value)
		}
		for i := 0; i+len(sm.value) <= len(v); i++ {
			if hasPrefixASCII(v[i:], sm.value, true) {
				return true
			}
		}
	}
	return false
}

// hasPrefixASCII reports whether s starts with prefix, folding ASCII letters
// when fold is set.
func hasPrefixASCII(s, prefix string, fold bool) bool {
	if len(s) < len(prefix) {
		return false
	}
	if !fold {
		return s[:len(prefix)] == prefix
	}
	for i := 0; i < len(prefix); i++ {
		a, b := s[i], prefix[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// headerValue returns a header as Envoy sees it: pseudo-headers map to the
// request line, and repeated headers are joined with "," (Cookie with "; ",
// as Envoy's codecs coalesce it).
func (ri *requestInfo) headerValue(name string) (string, bool) {
	return ri.headerValueKey(name, textproto.CanonicalMIMEHeaderKey(name))
}

// headerValueKey is headerValue with the canonical key already known.
func (ri *requestInfo) headerValueKey(name, key string) (string, bool) {
	switch name {
	case ":authority", "host":
		return ri.authority, true
	case ":path":
		if ri.rawQuery != "" {
			return ri.path + "?" + ri.rawQuery, true
		}
		return ri.path, true
	case ":method":
		return ri.method, true
	case ":scheme":
		return ri.scheme, true
	}
	switch values := ri.header[key]; {
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

// fullMatchRegexp compiles an RE2 pattern anchored at both ends, since Envoy's
// safe_regex matchers require a full match.
func fullMatchRegexp(pattern string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + pattern + `)$`)
}

// sortWildcards orders wildcard domains longest first so that the most
// specific one wins.
func sortWildcards(ws []wildcardDomain) {
	sort.SliceStable(ws, func(i, j int) bool { return len(ws[i].affix) > len(ws[j].affix) })
}

// pickCluster chooses a cluster by weight, per request.
func (fa *forwardAction) pickCluster() *weightedCluster {
	if len(fa.clusters) == 1 {
		return &fa.clusters[0]
	}
	n := randUint64N(fa.total)
	for i := range fa.clusters {
		if n < fa.clusters[i].weight {
			return &fa.clusters[i]
		}
		n -= fa.clusters[i].weight
	}
	return &fa.clusters[len(fa.clusters)-1]
}
