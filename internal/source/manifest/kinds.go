package manifest

// Telling a mistake from a kind Portico merely has no use for. In the API groups
// Portico reads, a kind or version that does not exist is almost always a typo, and
// skipping it would leave the user wondering why a route is missing; a real kind of
// those groups that Portico does not use (a ConfigMap, a NetworkPolicy) is skipped as
// quietly as a Deployment is. The built-in kinds come from client-go's scheme, so the
// list follows the Kubernetes version Portico is built against.

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// readGroups are the API groups Portico reads; their value says whether Kubernetes
// itself serves the group (as opposed to a CustomResourceDefinition).
var readGroups = map[string]bool{
	"":                   true,
	"networking.k8s.io":  true,
	"discovery.k8s.io":   true,
	"extensions":         true,
	"contour.heptio.com": false,
	"projectcontour.io":  false,

	"gateway.networking.k8s.io": false,
}

// contourKinds are the kinds of projectcontour.io that Contour defines, so that those
// Portico does not read are recognised rather than reported as unknown.
var contourKinds = []schema.GroupVersionKind{
	{Group: "projectcontour.io", Version: "v1", Kind: "HTTPProxy"},
	{Group: "projectcontour.io", Version: "v1", Kind: "TLSCertificateDelegation"},
	{Group: "projectcontour.io", Version: "v1alpha1", Kind: "ExtensionService"},
	{Group: "projectcontour.io", Version: "v1alpha1", Kind: "ContourConfiguration"},
	{Group: "projectcontour.io", Version: "v1alpha1", Kind: "ContourDeployment"},
}

// notYetRead are kinds Portico will read but does not yet, with what to use meanwhile
// (Gateway API's TCPRoute and UDPRoute). Silently skipping them would look like a routing bug.
var notYetRead = gatewayNotYetRead

// kindIndex knows every kind of every version of the built-in API groups and of
// Contour's groups.
type kindIndex struct {
	known map[schema.GroupVersionKind]bool // including lists and API machinery kinds
	// versions are the versions each group serves.
	versions map[string]map[string]bool
	// kinds are the resource kinds (no lists, no options) with their versions, best first.
	kinds map[schema.GroupKind][]string
	// keptByKind maps the kinds Portico reads to the version it reads them as.
	keptByKind map[schema.GroupKind]schema.GroupVersionKind
}

var (
	kindIndexOnce sync.Once
	theKindIndex  *kindIndex
)

func kinds() *kindIndex {
	kindIndexOnce.Do(func() { theKindIndex = newKindIndex() })
	return theKindIndex
}

func newKindIndex() *kindIndex {
	ix := &kindIndex{
		known:      map[schema.GroupVersionKind]bool{},
		versions:   map[string]map[string]bool{},
		kinds:      map[schema.GroupKind][]string{},
		keptByKind: map[schema.GroupKind]schema.GroupVersionKind{},
	}
	metaPkg := reflect.TypeFor[metav1.Status]().PkgPath()
	add := func(gvk schema.GroupVersionKind, resource bool) {
		if ix.known[gvk] {
			return
		}
		ix.known[gvk] = true
		if ix.versions[gvk.Group] == nil {
			ix.versions[gvk.Group] = map[string]bool{}
		}
		ix.versions[gvk.Group][gvk.Version] = true
		if resource {
			gk := gvk.GroupKind()
			ix.kinds[gk] = append(ix.kinds[gk], gvk.Version)
		}
	}
	isResource := func(gvk schema.GroupVersionKind, t reflect.Type) bool {
		return t.PkgPath() != metaPkg && !strings.HasSuffix(gvk.Kind, "List") && !strings.HasSuffix(gvk.Kind, "Options")
	}
	for gvk, t := range clientgoscheme.Scheme.AllKnownTypes() {
		if gvk.Version != runtimeInternalVersion {
			add(gvk, isResource(gvk, t))
		}
	}
	for gvk, t := range Scheme().AllKnownTypes() {
		if gvk.Version != runtimeInternalVersion {
			add(gvk, isResource(gvk, t))
		}
	}
	for gvk, t := range gatewayAPIVersions().AllKnownTypes() {
		if gvk.Version != runtimeInternalVersion {
			add(gvk, isResource(gvk, t))
		}
	}
	for _, gvk := range contourKinds {
		add(gvk, true)
		add(gvk.GroupVersion().WithKind(gvk.Kind+"List"), false)
	}
	for gk, vs := range ix.kinds {
		slices.SortFunc(vs, func(a, b string) int { return version.CompareKubeAwareVersionStrings(b, a) })
		ix.kinds[gk] = vs
	}
	for gvk, info := range keptKinds {
		ix.keptByKind[gvk.GroupKind()] = info.target
	}
	return ix
}

// runtimeInternalVersion is the version of the API server's internal types, which no
// manifest can name.
const runtimeInternalVersion = "__internal"

// unreadKind says what is wrong with a document of a kind Portico does not read, or
// returns "" when the kind exists and Portico simply has no use for it (or it belongs to
// an API group Portico does not read at all): such documents are skipped quietly.
// field is the manifest field to fix, "apiVersion" or "kind".
func unreadKind(gvk schema.GroupVersionKind) (reason, field string) {
	builtin, ours := readGroups[gvk.Group]
	if _, kept := keptKinds[gvk]; kept || !ours {
		return "", ""
	}
	ix := kinds()
	gv := gvk.GroupVersion()
	// A list of a kind is judged as that kind.
	elem := gvk
	if k, ok := strings.CutSuffix(gvk.Kind, "List"); ok && k != "" {
		elem = gv.WithKind(k)
	}
	if advice, ok := notYetRead[elem]; ok {
		return fmt.Sprintf("%s %s is not supported by Portico yet, so this document is ignored; %s", gv, gvk.Kind, advice), "kind"
	}
	served := ix.versions[gvk.Group][gvk.Version]
	if target, ok := ix.keptByKind[elem.GroupKind()]; ok {
		if !served {
			return fmt.Sprintf("%s; %s is %s", unservedVersion(gv, builtin), gvk.Kind, target.GroupVersion()), "apiVersion"
		}
		return fmt.Sprintf("Portico does not read %s %s; %s is %s (change apiVersion)", gv, gvk.Kind, gvk.Kind, target.GroupVersion()), "apiVersion"
	}
	if ix.known[gvk] {
		return "", ""
	}
	if vs := ix.kinds[elem.GroupKind()]; len(vs) > 0 {
		best := schema.GroupVersion{Group: gvk.Group, Version: vs[0]}
		if !served {
			return fmt.Sprintf("%s; %s is %s", unservedVersion(gv, builtin), gvk.Kind, best), "apiVersion"
		}
		return fmt.Sprintf("%s is not served in %s; %s is %s", gvk.Kind, gv, gvk.Kind, best), "apiVersion"
	}

	msg := fmt.Sprintf("unknown kind %q in %s", gvk.Kind, gv)
	if !served {
		msg += " (" + unservedVersion(gv, builtin) + " either)"
	}
	if where := ix.exactElsewhere(gvk.Kind); where != "" {
		return fmt.Sprintf("%s; %s is %s", msg, gvk.Kind, where), "apiVersion"
	}
	if s, ok := ix.suggest(gvk); ok {
		if s.Group == gvk.Group && s.Version == gvk.Version {
			return fmt.Sprintf("%s; did you mean %q?", msg, s.Kind), "kind"
		}
		return fmt.Sprintf("%s; did you mean %q (%s)?", msg, s.Kind, s.GroupVersion()), "kind"
	}
	if read := ix.readFrom(gvk.Group); len(read) > 0 {
		return fmt.Sprintf("%s; the kinds Portico reads from %s are %s", msg, groupName(gvk.Group), joinAnd(read)), "kind"
	}
	return fmt.Sprintf("%s; the kinds of %s are %s", msg, groupName(gvk.Group), joinAnd(ix.kindsOf(gvk.Group))), "kind"
}

func unservedVersion(gv schema.GroupVersion, builtin bool) string {
	if builtin {
		return fmt.Sprintf("%s is not a version Kubernetes serves", gv)
	}
	return fmt.Sprintf("%s is not a version of the %s API", gv, gv.Group)
}

func groupName(group string) string {
	if group == "" {
		return "the core API group (v1)"
	}
	return group
}

// exactElsewhere returns the apiVersion of kind when it is a kind of another group:
// apiVersion: v1 with kind: Ingress, say. A kind Portico reads wins over others of the
// same name (Ingress is read as networking.k8s.io/v1, not extensions/v1beta1); among
// several it reads (TLSCertificateDelegation), the GA one.
func (ix *kindIndex) exactElsewhere(kind string) string {
	var groups, kept []string
	for gk := range ix.kinds {
		if gk.Kind == kind {
			if _, ok := ix.keptByKind[gk]; ok {
				kept = append(kept, gk.Group)
			}
			groups = append(groups, gk.Group)
		}
	}
	if len(kept) > 0 {
		groups = kept
	}
	if len(groups) == 0 {
		return ""
	}
	slices.SortFunc(groups, func(a, b string) int {
		// Prefer a group whose best version is GA, then by name, for a stable answer.
		va, vb := ix.kinds[schema.GroupKind{Group: a, Kind: kind}][0], ix.kinds[schema.GroupKind{Group: b, Kind: kind}][0]
		if c := version.CompareKubeAwareVersionStrings(vb, va); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	g := groups[0]
	if target, ok := ix.keptByKind[schema.GroupKind{Group: g, Kind: kind}]; ok {
		return target.GroupVersion().String()
	}
	return schema.GroupVersion{Group: g, Version: ix.kinds[schema.GroupKind{Group: g, Kind: kind}][0]}.String()
}

// suggest finds the kind closest in spelling to gvk's among every known resource kind,
// if one is close enough to be what was meant.
func (ix *kindIndex) suggest(gvk schema.GroupVersionKind) (schema.GroupVersionKind, bool) {
	type cand struct {
		gvk  schema.GroupVersionKind
		dist int
		rank int // 0: same group and version, 1: same group, 2: a kind Portico reads, 3: other
	}
	want := strings.ToLower(gvk.Kind)
	limit := min(2, max(1, len(want)/4))
	// Resource names are plural (ingresses, httpproxies), and sometimes written as the kind.
	spellings := []string{want}
	if stem, ok := strings.CutSuffix(want, "ies"); ok {
		spellings = append(spellings, stem+"y")
	}
	if stem, ok := strings.CutSuffix(want, "es"); ok {
		spellings = append(spellings, stem)
	}
	if stem, ok := strings.CutSuffix(want, "s"); ok {
		spellings = append(spellings, stem)
	}
	var best *cand
	for gk, vs := range ix.kinds {
		d := limit + 1
		for _, w := range spellings {
			d = min(d, editDistance(w, strings.ToLower(gk.Kind)))
		}
		if d > limit {
			continue
		}
		c := cand{gvk: gk.WithVersion(vs[0]), dist: d, rank: 3}
		if target, ok := ix.keptByKind[gk]; ok {
			c.gvk, c.rank = target, 2
		}
		if gk.Group == gvk.Group {
			c.rank = 1
			if slices.Contains(vs, gvk.Version) {
				c.gvk, c.rank = gk.WithVersion(gvk.Version), 0
			}
		}
		if best == nil || cmp.Or(cmp.Compare(c.dist, best.dist), cmp.Compare(c.rank, best.rank),
			strings.Compare(c.gvk.String(), best.gvk.String())) < 0 {
			best = &c
		}
	}
	if best == nil {
		return schema.GroupVersionKind{}, false
	}
	return best.gvk, true
}

// readFrom lists the kinds Portico reads from group, sorted.
func (ix *kindIndex) readFrom(group string) []string { return kindsIn(ix.keptByKind, group) }

// kindsOf lists the resource kinds of group, sorted.
func (ix *kindIndex) kindsOf(group string) []string { return kindsIn(ix.kinds, group) }

// kindsIn lists the kinds of group among the keys of m, sorted.
func kindsIn[V any](m map[schema.GroupKind]V, group string) []string {
	var out []string
	for gk := range m {
		if gk.Group == group {
			out = append(out, gk.Kind)
		}
	}
	slices.Sort(out)
	return out
}

func joinAnd(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// editDistance is the optimal string alignment distance between a and b: insertions,
// deletions, substitutions and transpositions of adjacent characters each count one,
// which catches the usual typos (Ingres, Ingerss, Servcie).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows suffice: the transposition looks two rows back.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
