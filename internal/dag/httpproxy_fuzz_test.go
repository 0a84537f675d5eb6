package dag

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/store"
)

// FuzzHTTPProxyConditions feeds arbitrary condition strings, regexes and cookie specs
// through parseConditions, and a root including a child including a grandchild through
// Build. Whatever the input: no panic; every regex the graph holds compiles (as the proxy
// uses it, matching the whole value); and every route of an included object matches only
// requests its includes let through: a path under every include's prefix, and a superset
// of their header and query conditions.
//
// The seeds run with the other tests; go test -fuzz=FuzzHTTPProxyConditions explores.
func FuzzHTTPProxyConditions(f *testing.F) {
	for _, s := range []struct {
		incPrefix, path, header, value, cookie, ua, sub string
		mode                                            uint16
	}{
		{"/blog", "/a|/b", "x-a", "v", "user=test", "Chrome", "/posts", 0},
		{"/blog", "/a|/b", "x-a", "v", "user=test", "Chrome", "/posts", 2},
		{"/blog/", "/p/[0-9]+", "X-Tenant", "org-a", "a.b=c", "iPhone", "/", 2 | 4<<4},
		{"/", "/x", "cookie", "", "=", "", "//", 1 | 3<<4},
		{"", "/?x", "x", "(a", "user", "a", "/b/", 2 | 6<<4 | 1<<8},
		{"/a", `/a\Q`, "x-b", ".*", "n=v;", "%", "/c", 2 | 7<<4},
		{"/a//b", "/[a-z]{50}", ":path", "v", "x=y z", "ua", "/d", 2 | 2<<4},
		{"/a//b", "/[a-z]{5}", "x-c", "v", "x=y", "ua", "//d/", 1 | 2<<4},
		{"/" + strings.Repeat("p", 90), "/[0-9]+", "x", "1", "a=1", "b", "/q", 2 | 1<<8},
		{"/api", "/v1", "x-h", "present", "k=v", "Mozilla", "/v2", 1 | 5<<4 | 2<<8},
		{"/blog", "(/a)|(/b)", "h", "v", "c=d", "e", "/f", 2 | 1<<12},
		{"/x", "/x|.*", "h", "v", "c=d", "e", "/f", 2},
	} {
		f.Add(s.incPrefix, s.path, s.header, s.value, s.cookie, s.ua, s.sub, s.mode)
	}
	f.Fuzz(func(t *testing.T, incPrefix, path, header, value, cookie, ua, sub string, mode uint16) {
		for _, s := range []string{incPrefix, path, header, value, cookie, ua, sub} {
			if len(s) > 200 {
				t.Skip("inputs are bounded")
			}
		}
		routeConds := fuzzRouteConditions(path, header, value, cookie, ua, mode)

		// parseConditions on its own, as a route's and as an include's conditions.
		for _, forInclude := range []bool{false, true} {
			c, errs := parseConditions("f", routeConds, forInclude)
			if len(errs) == 0 {
				checkConditionRegexes(t, c.path, c.headers, c.query)
			}
		}

		incConds := []contourv1.MatchCondition{{Prefix: incPrefix}, {Header: &contourv1.HeaderMatchCondition{Name: header, Exact: value}}}
		if mode&(1<<12) != 0 {
			incConds = append(incConds, contourv1.MatchCondition{QueryParameter: &contourv1.QueryParameterMatchCondition{Name: "v", Exact: value}})
		}
		subConds := []contourv1.MatchCondition{{Prefix: sub}, {QueryParameter: &contourv1.QueryParameterMatchCondition{Name: "q", Present: true}}}
		objs := []runtime.Object{
			&contourv1.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "root"}, Spec: contourv1.HTTPProxySpec{
				VirtualHost: &contourv1.VirtualHost{Fqdn: "f.example.com"},
				Includes:    []contourv1.Include{{Name: "child", Namespace: "team", Conditions: incConds, PermitInsecure: mode&(1<<13) != 0}},
				Routes:      []contourv1.Route{{Services: []contourv1.Service{{Name: "web", Port: 80}}}},
			}},
			&contourv1.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "child"}, Spec: contourv1.HTTPProxySpec{
				Includes: []contourv1.Include{{Name: "grandchild", Namespace: "sub", Conditions: subConds}},
				Routes: []contourv1.Route{
					{Conditions: routeConds, Services: []contourv1.Service{{Name: "web", Port: 80}}},
					{Services: []contourv1.Service{{Name: "web", Port: 80}}, PermitInsecure: true},
				},
			}},
			&contourv1.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "sub", Name: "grandchild"}, Spec: contourv1.HTTPProxySpec{
				Routes: []contourv1.Route{
					{Conditions: routeConds, Services: []contourv1.Service{{Name: "web", Port: 80}}},
					{Conditions: []contourv1.MatchCondition{{Prefix: sub}}, Services: []contourv1.Service{{Name: "web", Port: 80}}},
				},
			}},
		}
		g := Build(store.FromObjects(objs), Options{})

		rootInc := prefixMatchForTest(joinForTest("/", incPrefix))
		incHeader := HeaderMatch{Name: strings.ToLower(header), Kind: MatchExact, Value: value}
		subInc := prefixMatchForTest(joinForTest(rootInc.Value, sub))
		probes := []string{"/", "/x", incPrefix, incPrefix + "x", incPrefix + "/", incPrefix + "/x", path, incPrefix + path, sub, incPrefix + sub,
			subInc.Value, subInc.Value + "x", subInc.Value + "/x", "/a", "/b", "/blog/a", "/blogb", "/blogx"}
		for _, vh := range g.HTTP {
			for _, r := range vh.Routes {
				checkConditionRegexes(t, r.Path, r.Headers, r.Query)
				var under PathMatch
				switch r.Source.Name {
				case "child":
					under = rootInc
				case "grandchild":
					under = subInc
					if !slices.ContainsFunc(r.Query, func(q QueryMatch) bool { return q.Name == "q" && q.Kind == MatchPresent }) {
						t.Errorf("route %s of the grandchild lacks its include's query condition", viewProxyRoute(r))
					}
				default:
					continue
				}
				if !slices.Contains(r.Headers, incHeader) {
					t.Errorf("route %s of %s lacks the root include's header condition %+v", viewProxyRoute(r), r.Source.Name, incHeader)
				}
				if mode&(1<<12) != 0 && !slices.Contains(r.Query, QueryMatch{Name: "v", Kind: MatchExact, Value: value}) {
					t.Errorf("route %s of %s lacks the root include's query condition", viewProxyRoute(r), r.Source.Name)
				}
				checkPathUnder(t, r, under, probes)
				if r.Source.Name == "grandchild" {
					checkPathUnder(t, r, rootInc, probes)
				}
			}
		}
	})
}

// fuzzRouteConditions makes a route's conditions from the inputs; mode picks the path
// condition (bits 0-3: none, prefix, regex, exact), the header operator (bits 4-7), and
// the query operator (bits 8-11).
func fuzzRouteConditions(path, header, value, cookie, ua string, mode uint16) []contourv1.MatchCondition {
	var conds []contourv1.MatchCondition
	switch mode & 0xf {
	case 1:
		conds = append(conds, contourv1.MatchCondition{Prefix: path})
	case 2:
		conds = append(conds, contourv1.MatchCondition{Regex: path})
	case 3:
		conds = append(conds, contourv1.MatchCondition{Exact: path})
	case 4:
		conds = append(conds, contourv1.MatchCondition{Prefix: path}, contourv1.MatchCondition{Regex: path})
	}
	h := &contourv1.HeaderMatchCondition{Name: header + "-r"}
	switch (mode >> 4) & 0xf {
	case 1:
		h.Present = true
	case 2:
		h.Regex = value
	case 3:
		h.NotExact, h.TreatMissingAsEmpty = value, true
	case 4:
		h.Contains, h.IgnoreCase = value, true
	case 5:
		h.NotContains = value
	case 6:
		h.Exact, h.Regex = value, value
	case 7:
		h.NotPresent = true
	default:
		h = nil
	}
	if h != nil {
		conds = append(conds, contourv1.MatchCondition{Header: h})
	}
	q := &contourv1.QueryParameterMatchCondition{Name: header}
	switch (mode >> 8) & 0xf {
	case 1:
		q.Regex = value
	case 2:
		q.Prefix, q.IgnoreCase = value, true
	case 3:
		q.Present = true
	default:
		q = nil
	}
	if q != nil {
		conds = append(conds, contourv1.MatchCondition{QueryParameter: q})
	}
	if cookie != "" {
		conds = append(conds, contourv1.MatchCondition{Cookie: cookie})
	}
	if ua != "" {
		conds = append(conds, contourv1.MatchCondition{UserAgent: ua})
	}
	return conds
}

// checkConditionRegexes compiles every regex of a route's conditions as the proxy uses it.
func checkConditionRegexes(t *testing.T, p PathMatch, headers []HeaderMatch, query []QueryMatch) {
	t.Helper()
	var res []string
	if p.Kind == PathRegex {
		res = append(res, p.Value)
	}
	for _, h := range headers {
		if h.Kind == MatchRegex {
			res = append(res, h.Value)
		}
	}
	for _, q := range query {
		if q.Kind == MatchRegex {
			res = append(res, q.Value)
		}
	}
	for _, re := range res {
		if _, err := regexp.Compile("^(?:" + re + ")$"); err != nil {
			t.Errorf("regex %q does not compile: %v", re, err)
		}
		if p := checkRegex(re); p != "" {
			t.Errorf("a regex over the bound reached the graph: %s", p)
		}
	}
}

// checkPathUnder checks that every probe path r matches, and every path r's prefix
// stands for, is matched by the include's path condition.
func checkPathUnder(t *testing.T, r *Route, inc PathMatch, probes []string) {
	t.Helper()
	candidates := slices.Clone(probes)
	if r.Path.Kind != PathRegex {
		v := r.Path.Value
		candidates = append(candidates, v, v+"x", v+"/", v+"/x")
	} else if base := regexp.QuoteMeta(strings.TrimSuffix(inc.Value, "/")); base != "" && !strings.HasPrefix(r.Path.Value, base+"(?:") && !strings.HasPrefix(r.Path.Value, base+"/") {
		t.Errorf("regex route %s is not anchored under its include's prefix %q", viewProxyRoute(r), inc.Value)
	}
	for _, p := range candidates {
		if !strings.HasPrefix(p, "/") {
			continue
		}
		if pathMatches(t, r.Path, p) && !pathMatches(t, inc, p) {
			t.Errorf("route %s of %s matches %q, outside its include's %s %q", viewProxyRoute(r), r.Source.Name, p, inc.Kind, inc.Value)
		}
	}
}

// prefixMatchForTest and joinForTest restate the include rules independently of the
// code under test: "/x/" is a string prefix, "/x" a segment prefix; prefixes
// concatenate with doubled slashes collapsed.
func prefixMatchForTest(p string) PathMatch {
	if p != "/" && strings.HasSuffix(p, "/") {
		return PathMatch{Kind: PathStringPrefix, Value: p}
	}
	return PathMatch{Kind: PathPrefix, Value: p}
}

func joinForTest(parent, child string) string {
	if child == "" || child == "/" {
		return parent
	}
	p := parent + "/" + child
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	return p
}
