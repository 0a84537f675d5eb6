package router

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"golang.org/x/net/http/httpguts"

	"github.com/portico-dev/portico/internal/proxy/accesslog"
	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/filters/ratelimit"
	"github.com/portico-dev/portico/internal/proxy/internal/layered"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// RouteConfigLevel is what the virtual hosts of a RouteConfiguration take
// from it: everything but their own fields that their converted form depends on.
type RouteConfigLevel struct {
	global           headerLevel
	mostSpecificWins bool
	MaxBody          uint32
	// ignorePort (ignore_port_in_host_matching) is the table's own, not its
	// virtual hosts': a Host's port is left out when choosing the virtual host.
	// It is here so that every table made from this one (patched, VHDS) keeps it.
	ignorePort bool
	// filters parses the per-filter configurations of routes and virtual hosts.
	filters *filter.Registry
}

// ConvertRouteConfig converts rc; filters parses its per-filter configurations.
func ConvertRouteConfig(rc *routev3.RouteConfiguration, filters *filter.Registry) (*RouteTable, error) {
	level, err := convertRouteConfigLevel(rc, filters)
	if err != nil {
		return nil, err
	}
	pvhs := rc.GetVirtualHosts()
	t, err := BuildRouteTable(rc.GetName(), level, len(pvhs), func(i int) (*VhostDef, bool, error) {
		def, err := level.ConvertVirtualHost(pvhs[i])
		return def, true, err
	})
	if err != nil {
		return nil, err
	}
	t.Vhds, t.Inline = rc.GetVhds() != nil, len(pvhs)
	return t, nil
}

// convertRouteConfigLevel converts the fields of rc other than its virtual hosts.
func convertRouteConfigLevel(rc *routev3.RouteConfiguration, filters *filter.Registry) (RouteConfigLevel, error) {
	if v := rc.GetVhds(); v != nil && v.GetConfigSource().GetAds() == nil {
		// The proxy has one stream, the ADS one, to receive virtual hosts on.
		return RouteConfigLevel{}, errors.New("vhds: only an ADS config source is supported")
	}
	if err := xdsconv.Unsupported(
		xdsconv.Set("internal_only_headers", len(rc.GetInternalOnlyHeaders()) > 0),
		xdsconv.Set("cluster_specifier_plugins", len(rc.GetClusterSpecifierPlugins()) > 0),
		xdsconv.Set("request_mirror_policies", len(rc.GetRequestMirrorPolicies()) > 0),
		xdsconv.Set("vhost_header", rc.GetVhostHeader() != ""),
		xdsconv.Set("typed_per_filter_config", len(rc.GetTypedPerFilterConfig()) > 0),
		xdsconv.Set("route_specifiers", len(rc.GetRouteSpecifiers()) > 0),
	); err != nil {
		return RouteConfigLevel{}, err
	}
	global, err := convertHeaderLevel(rc.GetRequestHeadersToAdd(), rc.GetRequestHeadersToRemove(),
		rc.GetResponseHeadersToAdd(), rc.GetResponseHeadersToRemove())
	if err != nil {
		return RouteConfigLevel{}, err
	}
	level := RouteConfigLevel{global: global, mostSpecificWins: rc.GetMostSpecificHeaderMutationsWins(),
		MaxBody: DefaultMaxDirectResponseBody, ignorePort: rc.GetIgnorePortInHostMatching(), filters: filters}
	if m := rc.GetMaxDirectResponseBodySizeBytes(); m != nil {
		level.MaxBody = m.GetValue()
	}
	return level, nil
}

// BuildRouteTable files n virtual hosts, given in order by vhost, into a
// table. vhost reports whether the def is fresh: a def reused from a table
// converted at the same level has had its routes checked already.
func BuildRouteTable(name string, level RouteConfigLevel, n int, vhost func(i int) (def *VhostDef, fresh bool, err error)) (*RouteTable, error) {
	t := &RouteTable{Name: name, Level: level, id: new(tableID), Slots: n,
		Domains: domainIndex{Exact: layered.New[string, *VirtualHost](n)}, Vhosts: make([]*VirtualHost, 0, n)}
	wildcards := make(map[string]string) // domain -> virtual host, for exact ones t.domains.exact
	for i := range n {
		def, fresh, err := vhost(i)
		if err != nil {
			return nil, fmt.Errorf("virtual host %q: %w", def.Name, err)
		}
		// One allocation each, not one array for all: tables patched from this one
		// keep some of its virtual hosts, and an array would keep every replaced
		// def alive with them.
		vh := &VirtualHost{VhostDef: def, Slot: i}
		t.Vhosts = append(t.Vhosts, vh)
		if err := t.fileVirtualHost(vh, fresh, wildcards); err != nil {
			return nil, err
		}
	}
	sortWildcards(t.Domains.Suffixes)
	sortWildcards(t.Domains.Prefixes)
	return t, nil
}

// fileVirtualHost adds vh's domains to t's index, refusing those another
// virtual host has, and checks a fresh def's direct responses against t's
// level. wildcards is as for domainIndex.add.
func (t *RouteTable) fileVirtualHost(vh *VirtualHost, fresh bool, wildcards map[string]string) error {
	for _, d := range vh.domains {
		if err := t.Domains.add(d, vh, wildcards); err != nil {
			return &FilingError{Def: vh.VhostDef, err: err}
		}
	}
	if fresh {
		if err := t.Level.checkDirectBodies(vh.VhostDef); err != nil {
			return &FilingError{Def: vh.VhostDef, err: fmt.Errorf("virtual host %q: %w", vh.Name, err)}
		}
	}
	return nil
}

// FilingError is a table's refusal of def (its message is err's): it tells
// a caller that names virtual hosts otherwise (VHDS resources) which one.
type FilingError struct {
	Def *VhostDef
	err error
}

func (e *FilingError) Error() string { return e.err.Error() }
func (e *FilingError) Unwrap() error { return e.err }

// add files d, a domain of vh, unless another virtual host has it.
// wildcards, when not nil, has the wildcard domains filed so far (a
// full build's duplicate check); when nil the lists are searched, which
// costs in proportion to them (few, in a table that is patched).
func (x *domainIndex) add(d string, vh *VirtualHost, wildcards map[string]string) error {
	if !strings.Contains(d, "*") {
		// Most domains are exact names, which only the exact index can have.
		if o, dup := x.exactDomain(d); dup {
			return fmt.Errorf("domain %q is in virtual hosts %q and %q", d, o.Name, vh.Name)
		}
		x.Exact.Set(d, vh)
		return nil
	}
	var other string
	var dup bool
	if wildcards != nil {
		other, dup = wildcards[d]
		wildcards[d] = vh.Name
	} else if o := x.wildcard(d); o != nil {
		other, dup = o.Name, true
	}
	if dup {
		return fmt.Errorf("domain %q is in virtual hosts %q and %q", d, other, vh.Name)
	}
	if err := x.addWildcard(d, vh); err != nil {
		return fmt.Errorf("virtual host %q: %w", vh.Name, err)
	}
	return nil
}

// wildcard returns the virtual host filed under the wildcard domain d (nil: none).
func (x *domainIndex) wildcard(d string) *VirtualHost {
	list, affix := x.wildcardList(d)
	if list == nil {
		if d == "*" {
			return x.Any
		}
		return nil
	}
	for _, w := range *list {
		if w.Affix == affix {
			return w.Vhost
		}
	}
	return nil
}

// wildcardList returns the list a wildcard domain d belongs in and its affix
// there; nil for "*" and for a domain Envoy does not accept.
func (x *domainIndex) wildcardList(d string) (*[]WildcardDomain, string) {
	switch {
	case d == "*" || strings.Count(d, "*") > 1:
		return nil, ""
	case strings.HasPrefix(d, "*"):
		return &x.Suffixes, d[1:]
	case strings.HasSuffix(d, "*"):
		return &x.Prefixes, d[:len(d)-1]
	}
	return nil, ""
}

// addWildcard files a domain with a wildcard the way Envoy accepts them:
// "*", "*suffix" or "prefix*".
func (x *domainIndex) addWildcard(d string, vh *VirtualHost) error {
	switch list, affix := x.wildcardList(d); {
	case d == "*":
		x.Any = vh
	case strings.Count(d, "*") > 1:
		return fmt.Errorf("domain %q: only one wildcard is allowed", d)
	case list != nil:
		*list = append(*list, WildcardDomain{Affix: affix, Vhost: vh})
	default:
		return fmt.Errorf("domain %q: a wildcard must be the first or last character", d)
	}
	return nil
}

// checkDirectBodies rejects a direct response longer than the configuration allows.
func (l RouteConfigLevel) checkDirectBodies(def *VhostDef) error {
	for _, r := range def.Routes {
		if r.Direct != nil && len(r.Direct.Body) > int(l.MaxBody) {
			// Envoy refuses such a route configuration too.
			return fmt.Errorf("route #%d %q: direct_response body is %d bytes, more than max_direct_response_body_size_bytes (%d)",
				r.Index, r.Name, len(r.Direct.Body), l.MaxBody)
		}
	}
	return nil
}

// ConvertVirtualHost converts pvh and plans its routes' header mutations
// with the configuration's.
func (l RouteConfigLevel) ConvertVirtualHost(pvh *routev3.VirtualHost) (*VhostDef, error) {
	def, err := convertVirtualHost(pvh, l.filters)
	if err != nil {
		def = &VhostDef{}
		def.Rename(pvh.GetName())
		return def, err
	}
	for _, r := range def.Routes {
		r.Plan = planMutations(headerLevel{}, r.headers, def.headers, l.global, l.mostSpecificWins)
		if r.Forward == nil {
			continue
		}
		for i := range r.Forward.Clusters {
			c := &r.Forward.Clusters[i]
			if !c.headers.empty() {
				c.Plan = planMutations(c.headers, r.headers, def.headers, l.global, l.mostSpecificWins)
			}
			if !slices.Contains(def.Clusters, c.Name) {
				def.Clusters = append(def.Clusters, c.Name)
			}
		}
		for _, m := range r.Forward.Mirrors {
			if !slices.Contains(def.Clusters, m.Cluster) {
				def.Clusters = append(def.Clusters, m.Cluster)
			}
		}
	}
	for _, d := range pvh.GetDomains() {
		def.domains = append(def.domains, strings.ToLower(d))
	}
	return def, nil
}

func convertVirtualHost(pvh *routev3.VirtualHost, filters *filter.Registry) (*VhostDef, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("matcher", pvh.GetMatcher() != nil),
		xdsconv.Set("require_tls", pvh.GetRequireTls() != routev3.VirtualHost_NONE),
		xdsconv.Set("virtual_clusters", len(pvh.GetVirtualClusters()) > 0),
		xdsconv.Set("cors", pvh.GetCors() != nil),
		xdsconv.Set("retry_policy", pvh.GetRetryPolicy() != nil || pvh.GetRetryPolicyTypedConfig() != nil),
		xdsconv.Set("hedge_policy", pvh.GetHedgePolicy() != nil),
		xdsconv.Set("request_mirror_policies", len(pvh.GetRequestMirrorPolicies()) > 0),
		xdsconv.Set("route_specifiers", len(pvh.GetRouteSpecifiers()) > 0),
		// Buffer limits would change which request bodies retries replay.
		xdsconv.Set("per_request_buffer_limit_bytes", pvh.GetPerRequestBufferLimitBytes() != nil),
		xdsconv.Set("request_body_buffer_limit", pvh.GetRequestBodyBufferLimit() != nil),
		// Attempt-count headers are not generated.
		xdsconv.Set("include_request_attempt_count", pvh.GetIncludeRequestAttemptCount()),
		xdsconv.Set("include_attempt_count_in_response", pvh.GetIncludeAttemptCountInResponse()),
		xdsconv.Set("include_is_timeout_retry_header", pvh.GetIncludeIsTimeoutRetryHeader()),
	); err != nil {
		return nil, err
	}
	headers, err := convertHeaderLevel(pvh.GetRequestHeadersToAdd(), pvh.GetRequestHeadersToRemove(),
		pvh.GetResponseHeadersToAdd(), pvh.GetResponseHeadersToRemove())
	if err != nil {
		return nil, err
	}
	vhFilters, err := filters.ParsePerFilterAt(pvh.GetTypedPerFilterConfig(), filter.Place{VirtualHost: pvh.GetName()})
	if err != nil {
		return nil, err
	}
	vhLimits, err := ratelimit.ParseLimits(pvh.GetRateLimits())
	if err != nil {
		return nil, err
	}
	vh := &VhostDef{headers: headers}
	places := routePlaces(pvh)
	for i, pr := range pvh.GetRoutes() {
		var at filter.Place
		if places != nil {
			at = places[i]
		}
		r, err := convertRoute(pr, at, filters)
		if err == nil && r.Forward != nil {
			r.RateLimits, err = routeRateLimits(pr.GetRoute().GetRateLimits(), vhLimits)
		}
		if err != nil {
			return nil, fmt.Errorf("route #%d %q: %w", i, pr.GetName(), err)
		}
		r.PerFilter = filter.Merge(r.PerFilter, vhFilters)
		r.Index, r.Label, r.PathLabel = i, routeLabel(r.Name, i), pathLabel(&r.Match)
		vh.Routes = append(vh.Routes, r)
	}
	vh.Rename(pvh.GetName())
	return vh, nil
}

// Rename names the virtual host, as its requests' access log lines and
// metrics do: VHDS serves a virtual host under its resource's name and
// names it by its host.
func (vh *VhostDef) Rename(name string) {
	vh.Name, vh.Logged = name, accesslog.NewVhostRoute(name)
	for _, r := range vh.Routes {
		r.Logged = &accesslog.Route{Vhost: name, Route: r.Label, Path: r.PathLabel, Name: r.Name}
	}
}

// routeRateLimits are a forwarding route's rate_limits with its virtual
// host's, for the rate limit filter (Envoy's applies to routes that forward
// only); nil when neither has any.
func routeRateLimits(own []*routev3.RateLimit, vhost []ratelimit.Limit) (*ratelimit.RouteLimits, error) {
	if len(own) == 0 && len(vhost) == 0 {
		return nil, nil
	}
	limits, err := ratelimit.ParseLimits(own)
	if err != nil {
		return nil, err
	}
	return &ratelimit.RouteLimits{Route: limits, VirtualHost: vhost}, nil
}

// routePlaces are where the routes of pvh are, for the filters that keep
// state across configuration swaps: the route's name, and among routes of
// the same name, which one it is, so that routes added or removed elsewhere
// in the virtual host do not move the others. nil when no route has
// typed_per_filter_config (nothing to place: the usual virtual host pays
// nothing).
func routePlaces(pvh *routev3.VirtualHost) []filter.Place {
	if !slices.ContainsFunc(pvh.GetRoutes(), func(r *routev3.Route) bool { return len(r.GetTypedPerFilterConfig()) > 0 }) {
		return nil
	}
	out := make([]filter.Place, len(pvh.GetRoutes()))
	seen := map[string]int{}
	for i, pr := range pvh.GetRoutes() {
		name := pr.GetName()
		if n := seen[name]; n > 0 || name == "" {
			name += "#" + strconv.Itoa(n)
		}
		seen[pr.GetName()]++
		out[i] = filter.Place{VirtualHost: pvh.GetName(), Route: name}
	}
	return out
}

func convertRoute(pr *routev3.Route, at filter.Place, filters *filter.Registry) (*Route, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("route_specifiers", len(pr.GetRouteSpecifiers()) > 0),
		xdsconv.Set("per_request_buffer_limit_bytes", pr.GetPerRequestBufferLimitBytes() != nil),
		xdsconv.Set("request_body_buffer_limit", pr.GetRequestBodyBufferLimit() != nil),
	); err != nil {
		return nil, err
	}
	m, err := ConvertRouteMatch(pr.GetMatch())
	if err != nil {
		return nil, fmt.Errorf("match: %w", err)
	}
	r := &Route{Name: pr.GetName(), Match: m}
	if r.PerFilter, err = filters.ParsePerFilterAt(pr.GetTypedPerFilterConfig(), at); err != nil {
		return nil, err
	}
	r.headers, err = convertHeaderLevel(pr.GetRequestHeadersToAdd(), pr.GetRequestHeadersToRemove(),
		pr.GetResponseHeadersToAdd(), pr.GetResponseHeadersToRemove())
	if err != nil {
		return nil, err
	}
	switch a := pr.GetAction().(type) {
	case *routev3.Route_Route:
		r.Forward, err = ConvertRouteAction(a.Route, filters)
	case *routev3.Route_Redirect:
		r.Redirect, err = convertRedirect(a.Redirect)
	case *routev3.Route_DirectResponse:
		r.Direct, err = convertDirectResponse(a.DirectResponse)
	default:
		err = fmt.Errorf("action %T is not supported", pr.GetAction())
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ConvertRouteMatch converts a route's match.
func ConvertRouteMatch(pm *routev3.RouteMatch) (routeMatch, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("cookies", len(pm.GetCookies()) > 0),
		xdsconv.Set("grpc", pm.GetGrpc() != nil),
		xdsconv.Set("tls_context", pm.GetTlsContext() != nil),
		xdsconv.Set("dynamic_metadata", len(pm.GetDynamicMetadata()) > 0),
		xdsconv.Set("filter_state", len(pm.GetFilterState()) > 0),
	); err != nil {
		return routeMatch{}, err
	}
	m := routeMatch{caseSensitive: pm.GetCaseSensitive() == nil || pm.GetCaseSensitive().GetValue()}
	switch ps := pm.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		m.kind, m.value = pathPrefix, ps.Prefix
	case *routev3.RouteMatch_Path:
		m.kind, m.value = pathExact, ps.Path
	case *routev3.RouteMatch_PathSeparatedPrefix:
		m.kind, m.value = pathSeparatedPrefix, ps.PathSeparatedPrefix
	case *routev3.RouteMatch_SafeRegex:
		re, err := xdsconv.FullMatchRegexp(ps.SafeRegex.GetRegex())
		if err != nil {
			return routeMatch{}, fmt.Errorf("safe_regex %q: %w", ps.SafeRegex.GetRegex(), err)
		}
		m.kind, m.re, m.regex = pathRegex, re, ps.SafeRegex.GetRegex()
	default:
		return routeMatch{}, fmt.Errorf("path specifier %T is not supported", pm.GetPathSpecifier())
	}
	for _, ph := range pm.GetHeaders() {
		hm, err := convertHeaderMatcher(ph)
		if err != nil {
			return routeMatch{}, fmt.Errorf("header %q: %w", ph.GetName(), err)
		}
		m.headers = append(m.headers, hm)
	}
	for _, pq := range pm.GetQueryParameters() {
		qm, err := convertQueryParameterMatcher(pq)
		if err != nil {
			return routeMatch{}, fmt.Errorf("query_parameters %q: %w", pq.GetName(), err)
		}
		m.queries = append(m.queries, qm)
	}
	if rf := pm.GetRuntimeFraction(); rf != nil {
		m.fraction, m.fractionOf = fractionOf(rf.GetDefaultValue())
	}
	return m, nil
}

// fractionOf returns a FractionalPercent as numerator and denominator. The proxy has
// no runtime layer: a runtime_fraction is its default_value (runtime_key is ignored).
func fractionOf(fp *typev3.FractionalPercent) (uint64, uint64) {
	denominator := uint64(100)
	switch fp.GetDenominator() {
	case typev3.FractionalPercent_TEN_THOUSAND:
		denominator = 10_000
	case typev3.FractionalPercent_MILLION:
		denominator = 1_000_000
	}
	return uint64(fp.GetNumerator()), denominator
}

// convertQueryParameterMatcher follows Envoy (1.34 and later): a
// string_match is matched against the parameter's first value, present_match
// requires the parameter to be present (true) or absent (false), and a
// matcher without a specifier requires it to be present.
func convertQueryParameterMatcher(pq *routev3.QueryParameterMatcher) (queryMatcher, error) {
	qm := queryMatcher{name: pq.GetName()}
	switch s := pq.GetQueryParameterMatchSpecifier().(type) {
	case *routev3.QueryParameterMatcher_StringMatch:
		sm, err := xdsconv.NewStringMatcher(s.StringMatch)
		if err != nil {
			return qm, err
		}
		qm.str = &sm
	case *routev3.QueryParameterMatcher_PresentMatch:
		qm.absent = !s.PresentMatch
	case nil:
	default:
		return qm, fmt.Errorf("match %T is not supported", pq.GetQueryParameterMatchSpecifier())
	}
	return qm, nil
}

func convertHeaderMatcher(ph *routev3.HeaderMatcher) (headerMatcher, error) {
	m, err := xdsconv.NewHeaderMatcher(ph)
	return headerMatcher{
		name:  strings.ToLower(ph.GetName()),
		key:   textproto.CanonicalMIMEHeaderKey(ph.GetName()),
		match: m,
	}, err
}

// ConvertRouteAction converts a route's route action (forwarding); filters
// parses the per-filter configurations of its weighted clusters.
func ConvertRouteAction(ra *routev3.RouteAction, filters *filter.Registry) (*ForwardAction, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("metadata_match", ra.GetMetadataMatch() != nil),
		xdsconv.Set("path_rewrite_policy", ra.GetPathRewritePolicy() != nil),
		xdsconv.Set("path_rewrite", ra.GetPathRewrite() != ""),
		xdsconv.Set("auto_host_rewrite", ra.GetAutoHostRewrite() != nil),
		xdsconv.Set("host_rewrite_path_regex", ra.GetHostRewritePathRegex() != nil),
		xdsconv.Set("host_rewrite", ra.GetHostRewrite() != ""),
		xdsconv.Set("append_x_forwarded_host", ra.GetAppendXForwardedHost()),
		xdsconv.Set("flush_timeout", ra.GetFlushTimeout() != nil),
		xdsconv.Set("early_data_policy", ra.GetEarlyDataPolicy() != nil),
		xdsconv.Set("retry_policy_typed_config", ra.GetRetryPolicyTypedConfig() != nil),
		xdsconv.Set("cors", ra.GetCors() != nil),
		xdsconv.Set("max_grpc_timeout", ra.GetMaxGrpcTimeout() != nil),
		xdsconv.Set("grpc_timeout_offset", ra.GetGrpcTimeoutOffset() != nil),
		xdsconv.Set("internal_redirect_action", ra.GetInternalRedirectAction() != routev3.RouteAction_PASS_THROUGH_INTERNAL_REDIRECT),
		xdsconv.Set("hedge_policy", ra.GetHedgePolicy() != nil),
		xdsconv.Set("max_stream_duration", ra.GetMaxStreamDuration() != nil),
	); err != nil {
		return nil, err
	}
	fa := &ForwardAction{
		Timeout:          DefaultRouteTimeout,
		PrefixRewrite:    ra.GetPrefixRewrite(),
		HasPrefixRewrite: ra.GetPrefixRewrite() != "",
		HostRewrite:      ra.GetHostRewriteLiteral(),
		Retry:            noRetries,
	}
	if name := ra.GetHostRewriteHeader(); name != "" {
		if !httpguts.ValidHeaderFieldName(name) {
			return nil, fmt.Errorf("host_rewrite_header %q is not a header name", name)
		}
		fa.HostRewriteHeader = textproto.CanonicalMIMEHeaderKey(name)
	}
	if rs := ra.GetRegexRewrite(); rs != nil {
		if fa.HasPrefixRewrite {
			// Envoy refuses the route configuration too.
			return nil, errors.New("prefix_rewrite and regex_rewrite are exclusive")
		}
		rw, err := ConvertPathRewrite(rs)
		if err != nil {
			return nil, fmt.Errorf("regex_rewrite: %w", err)
		}
		fa.RegexRewrite = rw
	}
	for _, u := range ra.GetUpgradeConfigs() {
		if u.GetConnectConfig() != nil {
			return nil, fmt.Errorf("upgrade_configs %q: connect_config is not supported", u.GetUpgradeType())
		}
		// Enabled unless enabled is false: it overrides the HCM's setting for this upgrade type.
		fa.Upgrades = append(fa.Upgrades, routeUpgrade{
			UpgradeType: strings.ToLower(u.GetUpgradeType()),
			Enabled:     u.GetEnabled() == nil || u.GetEnabled().GetValue(),
		})
	}
	if ra.GetTimeout() != nil {
		fa.Timeout = ra.GetTimeout().AsDuration()
	}
	if d := ra.GetIdleTimeout(); d != nil {
		fa.IdleTimeout, fa.HasIdleTimeout = d.AsDuration(), true
	}
	if rp := ra.GetRetryPolicy(); rp != nil {
		p, err := convertRetryPolicy(rp)
		if err != nil {
			return nil, fmt.Errorf("retry_policy: %w", err)
		}
		fa.Retry = p
	}
	hps, err := convertHashPolicies(ra.GetHashPolicy())
	if err != nil {
		return nil, err
	}
	fa.HashPolicies = hps
	if fa.Mirrors, err = convertMirrorPolicies(ra.GetRequestMirrorPolicies()); err != nil {
		return nil, err
	}
	if fa.InternalRedirect, err = convertInternalRedirect(ra.GetInternalRedirectPolicy()); err != nil {
		return nil, fmt.Errorf("internal_redirect_policy: %w", err)
	}
	switch ra.GetClusterNotFoundResponseCode() {
	case routev3.RouteAction_SERVICE_UNAVAILABLE:
		fa.NotFoundStatus = http.StatusServiceUnavailable
	case routev3.RouteAction_NOT_FOUND:
		fa.NotFoundStatus = http.StatusNotFound
	case routev3.RouteAction_INTERNAL_SERVER_ERROR:
		fa.NotFoundStatus = http.StatusInternalServerError
	default:
		return nil, fmt.Errorf("cluster_not_found_response_code %v is not supported", ra.GetClusterNotFoundResponseCode())
	}
	switch cs := ra.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_Cluster:
		fa.Clusters = []weightedCluster{{Name: cs.Cluster, weight: 1}}
		fa.total = 1
	case *routev3.RouteAction_WeightedClusters:
		if err := fa.setWeightedClusters(cs.WeightedClusters, filters); err != nil {
			return nil, fmt.Errorf("weighted_clusters: %w", err)
		}
	default:
		return nil, fmt.Errorf("cluster specifier %T is not supported", ra.GetClusterSpecifier())
	}
	return fa, nil
}

func (fa *ForwardAction) setWeightedClusters(wc *routev3.WeightedCluster, filters *filter.Registry) error {
	if wc.GetRandomValueSpecifier() != nil {
		return errors.New("header_name is not supported")
	}
	for _, c := range wc.GetClusters() {
		if err := xdsconv.Unsupported(
			xdsconv.Set("cluster_header", c.GetClusterHeader() != ""),
			xdsconv.Set("metadata_match", c.GetMetadataMatch() != nil),
		); err != nil {
			return fmt.Errorf("cluster %q: %w", c.GetName(), err)
		}
		if c.GetName() == "" {
			return errors.New("cluster without a name")
		}
		headers, err := convertHeaderLevel(c.GetRequestHeadersToAdd(), c.GetRequestHeadersToRemove(),
			c.GetResponseHeadersToAdd(), c.GetResponseHeadersToRemove())
		if err != nil {
			return fmt.Errorf("cluster %q: %w", c.GetName(), err)
		}
		perFilter, err := filters.ParsePerFilter(c.GetTypedPerFilterConfig())
		if err != nil {
			return fmt.Errorf("cluster %q: %w", c.GetName(), err)
		}
		w := uint64(c.GetWeight().GetValue())
		fa.Clusters = append(fa.Clusters, weightedCluster{Name: c.GetName(), weight: w, headers: headers,
			HostRewrite: c.GetHostRewriteLiteral(), PerFilter: perFilter})
		fa.total += w
	}
	if fa.total == 0 {
		return errors.New("the sum of the weights is 0")
	}
	return nil
}

func convertRedirect(pr *routev3.RedirectAction) (*redirectAction, error) {
	ra := &redirectAction{Host: pr.GetHostRedirect(), Port: pr.GetPortRedirect(), StripQuery: pr.GetStripQuery()}
	switch s := pr.GetSchemeRewriteSpecifier().(type) {
	case *routev3.RedirectAction_HttpsRedirect:
		if s.HttpsRedirect {
			ra.Scheme = "https"
		}
	case *routev3.RedirectAction_SchemeRedirect:
		ra.Scheme = strings.ToLower(s.SchemeRedirect)
	}
	switch s := pr.GetPathRewriteSpecifier().(type) {
	case *routev3.RedirectAction_PathRedirect:
		ra.Path, ra.HasPath = s.PathRedirect, true
	case *routev3.RedirectAction_PrefixRewrite:
		ra.PrefixRewrite, ra.HasPrefixRewrite = s.PrefixRewrite, true
	case *routev3.RedirectAction_RegexRewrite:
		rw, err := ConvertPathRewrite(s.RegexRewrite)
		if err != nil {
			return nil, fmt.Errorf("redirect regex_rewrite: %w", err)
		}
		ra.RegexRewrite = rw
	case nil:
	default:
		return nil, fmt.Errorf("redirect path rewrite %T is not supported", pr.GetPathRewriteSpecifier())
	}
	switch pr.GetResponseCode() {
	case routev3.RedirectAction_MOVED_PERMANENTLY:
		ra.Status = http.StatusMovedPermanently
	case routev3.RedirectAction_FOUND:
		ra.Status = http.StatusFound
	case routev3.RedirectAction_SEE_OTHER:
		ra.Status = http.StatusSeeOther
	case routev3.RedirectAction_TEMPORARY_REDIRECT:
		ra.Status = http.StatusTemporaryRedirect
	case routev3.RedirectAction_PERMANENT_REDIRECT:
		ra.Status = http.StatusPermanentRedirect
	default:
		return nil, fmt.Errorf("redirect response_code %v is not supported", pr.GetResponseCode())
	}
	return ra, nil
}

func convertDirectResponse(pd *routev3.DirectResponseAction) (*directResponse, error) {
	if pd.GetBodyFormat() != nil {
		return nil, errors.New("direct_response body_format is not supported")
	}
	dr := &directResponse{Status: int(pd.GetStatus())}
	if pd.GetBody() != nil {
		body, err := xdsconv.InlineData(pd.GetBody())
		if err != nil {
			return nil, fmt.Errorf("direct_response body: %w", err)
		}
		dr.Body = body
	}
	return dr, nil
}
