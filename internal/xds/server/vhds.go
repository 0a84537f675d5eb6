package server

import (
	"maps"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// VHDS (Envoy's Virtual Host Discovery Service) serves the virtual hosts of a route
// configuration as resources of their own, so that a one-host change sends that host
// rather than the route configuration holding every host, which the server would
// marshal, and every data plane decode, on every edit.
//
// Only clients that ask for it are served so (vhdsMetadataKey): VHDS exists only over
// delta xDS, and Envoy accepts it over ADS only in recent versions (envoy#34122), so the
// bootstrap does not ask for it; state-of-the-world clients and delta clients that do
// not ask are served the route configurations whole, as the translator made them.

// vhdsMetadataKey is the node metadata field (a bool) by which a delta client asks for
// VHDS. The embedded proxy sets it (its own copy of the key: internal/proxy).
const vhdsMetadataKey = "portico.io/vhds"

// wantsVHDS reports whether a client presenting node asks for VHDS.
func wantsVHDS(node *corev3.Node) bool {
	return node.GetMetadata().GetFields()[vhdsMetadataKey].GetBoolValue()
}

// splitByVHDS reports whether the route configuration name is served by VHDS to the
// clients that ask for it: those that hold every plain-HTTP host of a listener, the
// shared one's and each Gateway HTTP port's. An HTTPS route configuration holds one
// host (and its aliases) already; splitting it would only add a VHDS subscription per
// TLS host to each Envoy.
func splitByVHDS(name string) bool {
	return name == translate.RouteHTTP || translate.GatewayHTTPRoutes(name)
}

// vhdsNamespace is the namespace of a VirtualHost resource name: the route
// configuration it belongs to. A host cannot contain '/', a route configuration name
// can, so the namespace ends at the last one.
func vhdsNamespace(name string) (string, bool) {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return "", false
	}
	return name[:i], true
}

// vhdsRouteConfig is the route configuration rc as a VHDS client receives it: its
// virtual hosts are VirtualHost resources named "<rc name>/<host name>" (Envoy's
// naming convention, which on-demand lookups would rely on), whose message name is the
// resource name too, since Envoy keys its VHDS table, and the removals it applies, by
// the message name. Never modified once made.
type vhdsRouteConfig struct {
	source *routev3.RouteConfiguration
	shell  *routev3.RouteConfiguration
	hosts  []*routev3.VirtualHost // source's, in order
	named  []*vhdsResource        // hosts as resources, by position
}

// vhdsResource is a virtual host as VHDS serves it: the translator's, under its
// resource name, which its encoding carries as the message's name too (see
// encodeRenamed). Not a renamed copy, which would double the memory the hosts take.
type vhdsResource struct {
	*routev3.VirtualHost
	name string
}

// GetName is the resource name, for go-control-plane's GetResourceName.
func (h *vhdsResource) GetName() string { return h.name }

// vhdsView is what VHDS clients were served from the route configurations of the last
// publish: the split route configurations by name. A host passed as the same pointer
// as before keeps its derived resource (the same pointer), so that what a publish
// changes in the VirtualHost resources costs in proportion to the hosts that changed.
// Never modified once made: a publish that fails keeps the previous view.
type vhdsView struct {
	split map[string]*vhdsRouteConfig
}

func newVHDSView() *vhdsView { return &vhdsView{split: map[string]*vhdsRouteConfig{}} }

// vhostDiff is what a publish changes in the VirtualHost resources.
type vhostDiff struct {
	changed []types.Resource
	removed []string
}

// derive returns the view of routes, the route configurations as VHDS clients see
// them, and what changed in the VirtualHost resources since v.
func (v *vhdsView) derive(routes []types.Resource) (next *vhdsView, shells []types.Resource, d vhostDiff) {
	next = v
	shells = make([]types.Resource, 0, len(routes))
	seen := 0
	for _, r := range routes {
		rc, ok := r.(*routev3.RouteConfiguration)
		if !ok || !splitByVHDS(rc.GetName()) {
			shells = append(shells, r)
			continue
		}
		seen++
		prev := v.split[rc.GetName()]
		if prev == nil {
			prev = &vhdsRouteConfig{}
		}
		sp := prev
		if prev.source != rc {
			sp = prev.next(rc, &d)
			if next == v {
				next = &vhdsView{split: maps.Clone(v.split)}
			}
			next.split[rc.GetName()] = sp
		}
		shells = append(shells, sp.shell)
	}
	if seen != len(next.split) {
		next = next.without(routes, v, &d)
	}
	return next, shells, d
}

// without returns the view without the split route configurations that routes no
// longer has, noting their hosts' removal in d.
func (v *vhdsView) without(routes []types.Resource, prev *vhdsView, d *vhostDiff) *vhdsView {
	present := make(map[string]bool, len(v.split))
	for _, r := range routes {
		if rc, ok := r.(*routev3.RouteConfiguration); ok {
			present[rc.GetName()] = true
		}
	}
	out := v
	if out == prev {
		out = &vhdsView{split: maps.Clone(v.split)}
	}
	for name, sp := range out.split {
		if present[name] {
			continue
		}
		for _, h := range sp.named {
			d.removed = append(d.removed, h.GetName())
		}
		delete(out.split, name)
	}
	return out
}

// next derives the VHDS form of rc, a new version of sp's route configuration,
// reusing what it shares with sp, and notes in d the hosts added, changed and removed.
func (sp *vhdsRouteConfig) next(rc *routev3.RouteConfiguration, d *vhostDiff) *vhdsRouteConfig {
	out := &vhdsRouteConfig{source: rc, shell: sp.shell, hosts: rc.GetVirtualHosts()}
	if shell := vhdsShell(rc); sp.shell == nil || !proto.Equal(sp.shell, shell) {
		out.shell = shell
	}
	out.named = make([]*vhdsResource, len(out.hosts))
	var missed []int
	var left map[*routev3.VirtualHost]int // sp's hosts not found yet, by their position
	if len(out.hosts) == len(sp.hosts) {
		missed, left = sp.samePlaces(out)
	} else {
		missed, left = sp.matchShifted(out)
	}
	added := make(map[string]bool, len(missed))
	for _, i := range missed {
		h := out.hosts[i]
		if j, ok := left[h]; ok {
			out.named[i] = sp.named[j]
			delete(left, h)
			continue
		}
		out.named[i] = &vhdsResource{VirtualHost: h, name: rc.GetName() + "/" + h.GetName()}
		d.changed = append(d.changed, out.named[i])
		added[out.named[i].name] = true
	}
	for _, j := range left {
		// A host replaced under the same name is changed, not removed.
		if name := sp.named[j].name; !added[name] {
			d.removed = append(d.removed, name)
		}
	}
	return out
}

// samePlaces fills out.named for a version with as many hosts as sp, which an edit
// changes in place: the hosts at their previous positions keep their resources (one
// copy of the slice), the others are missed, to be found among left, sp's hosts at
// the missed positions.
func (sp *vhdsRouteConfig) samePlaces(out *vhdsRouteConfig) (missed []int, left map[*routev3.VirtualHost]int) {
	copy(out.named, sp.named)
	for i, h := range out.hosts {
		if sp.hosts[i] != h {
			missed = append(missed, i)
		}
	}
	left = make(map[*routev3.VirtualHost]int, len(missed))
	for _, i := range missed {
		left[sp.hosts[i]] = i
	}
	return missed, left
}

// matchShifted fills out.named for a version with hosts added or removed, which shift
// the others: hostMatcher finds most of them; the rest are missed, to be found among
// left, sp's hosts not matched.
func (sp *vhdsRouteConfig) matchShifted(out *vhdsRouteConfig) (missed []int, left map[*routev3.VirtualHost]int) {
	reused := make([]bool, len(sp.hosts))
	match := hostMatcher{prev: sp.hosts}
	for i, h := range out.hosts {
		if j, ok := match.find(h); ok {
			out.named[i], reused[j] = sp.named[j], true
		} else {
			missed = append(missed, i)
		}
	}
	left = make(map[*routev3.VirtualHost]int)
	for j, ok := range reused {
		if !ok {
			left[sp.hosts[j]] = j
		}
	}
	return missed, left
}

// vhdsShell is rc without its virtual hosts, which VHDS serves over ADS.
func vhdsShell(rc *routev3.RouteConfiguration) *routev3.RouteConfiguration {
	shell := withoutVirtualHosts(rc).(*routev3.RouteConfiguration)
	shell.Vhds = &routev3.Vhds{ConfigSource: &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}}
	return shell
}

// hostMatcher finds, for most hosts of a new version of a route configuration, the
// same host among those of the previous one without indexing them: a publish adds,
// removes or replaces a few hosts and keeps the others in order (the translator sorts
// them), so the position after the last match, and its neighbours, are tried.
type hostMatcher struct {
	prev []*routev3.VirtualHost
	next int // the position after the last match, or after the last miss
}

func (m *hostMatcher) find(h *routev3.VirtualHost) (int, bool) {
	for _, j := range [...]int{m.next, m.next + 1, m.next - 1} {
		if j >= 0 && j < len(m.prev) && m.prev[j] == h {
			m.next = j + 1
			return j, true
		}
	}
	m.next++ // a replaced host: the next one is at the position after it
	return 0, false
}
