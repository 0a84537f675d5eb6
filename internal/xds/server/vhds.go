package server

import (
	"maps"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// VHDS (Envoy's Virtual Host Discovery Service) serves the virtual hosts of a route
// configuration as resources of their own, so that a one-host change sends that host
// rather than the route configuration holding every host: at 10,000 plain-HTTP hosts,
// 2.1 MB per edit, marshalled by the server and decoded by every data plane.
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
// clients that ask for it: the one that holds every plain-HTTP host. An HTTPS route
// configuration holds one host (and its aliases) already; splitting it would only add
// a VHDS subscription per TLS host to each Envoy.
func splitByVHDS(name string) bool { return name == translate.RouteHTTP }

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
// the message name.
type vhdsRouteConfig struct {
	source *routev3.RouteConfiguration
	shell  *routev3.RouteConfiguration
	hosts  []*routev3.VirtualHost // source's, in order
	named  []*routev3.VirtualHost // hosts renamed, by position
}

// vhdsView derives, from each publish's route configurations, the sets VHDS clients are
// served: the route configurations with the split ones' hosts taken out, and the
// VirtualHost resources. A host passed as the same pointer as before keeps its derived
// resource (the same pointer), so unchanged hosts are unchanged for the typeSet too,
// without marshalling them. It belongs to the Server, under its lock.
type vhdsView struct {
	split map[string]*vhdsRouteConfig
	// vhosts is the last VirtualHost list returned, reused while the split route
	// configurations are the same.
	vhosts []types.Resource
}

func newVHDSView() *vhdsView { return &vhdsView{split: map[string]*vhdsRouteConfig{}} }

// derive returns routes as VHDS clients see them, and the VirtualHost resources.
func (v *vhdsView) derive(routes []types.Resource) (shells, vhosts []types.Resource) {
	shells = make([]types.Resource, 0, len(routes))
	changed := false
	seen := 0
	for _, r := range routes {
		rc, ok := r.(*routev3.RouteConfiguration)
		if !ok || !splitByVHDS(rc.GetName()) {
			shells = append(shells, r)
			continue
		}
		seen++
		sp := v.split[rc.GetName()]
		if sp == nil {
			sp = &vhdsRouteConfig{}
			v.split[rc.GetName()] = sp
		}
		if sp.source != rc {
			sp.update(rc)
			changed = true
		}
		shells = append(shells, sp.shell)
	}
	if seen != len(v.split) {
		v.forgetAbsent(routes)
		changed = true
	}
	if changed || v.vhosts == nil {
		v.vhosts = v.allHosts()
	}
	return shells, v.vhosts
}

// forgetAbsent drops the split route configurations that routes no longer has.
func (v *vhdsView) forgetAbsent(routes []types.Resource) {
	present := make(map[string]bool, len(v.split))
	for _, r := range routes {
		if rc, ok := r.(*routev3.RouteConfiguration); ok {
			present[rc.GetName()] = true
		}
	}
	for name := range v.split {
		if !present[name] {
			delete(v.split, name)
		}
	}
}

// allHosts lists the VirtualHost resources of every split route configuration.
func (v *vhdsView) allHosts() []types.Resource {
	n := 0
	for _, sp := range v.split {
		n += len(sp.named)
	}
	out := make([]types.Resource, 0, n)
	for _, name := range slices.Sorted(maps.Keys(v.split)) {
		for _, h := range v.split[name].named {
			out = append(out, h)
		}
	}
	return out
}

// update derives sp from rc, a new version of its route configuration, reusing what
// derives from the hosts and fields it shares with the previous one.
func (sp *vhdsRouteConfig) update(rc *routev3.RouteConfiguration) {
	shell := withoutVirtualHosts(rc).(*routev3.RouteConfiguration)
	shell.Vhds = &routev3.Vhds{ConfigSource: &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}}
	if sp.shell == nil || !proto.Equal(sp.shell, shell) {
		sp.shell = shell
	}
	hosts := rc.GetVirtualHosts()
	named := make([]*routev3.VirtualHost, len(hosts))
	var byHost map[*routev3.VirtualHost]*routev3.VirtualHost // made at the first host out of place
	for i, h := range hosts {
		if i < len(sp.hosts) && sp.hosts[i] == h {
			named[i] = sp.named[i]
			continue
		}
		if byHost == nil {
			byHost = make(map[*routev3.VirtualHost]*routev3.VirtualHost, len(sp.hosts))
			for j, old := range sp.hosts {
				byHost[old] = sp.named[j]
			}
		}
		if known, ok := byHost[h]; ok {
			named[i] = known
			continue
		}
		named[i] = renamedVirtualHost(h, rc.GetName()+"/"+h.GetName())
	}
	sp.source, sp.hosts, sp.named = rc, hosts, named
}

// renamedVirtualHost returns a VirtualHost sharing every field of h but its name.
func renamedVirtualHost(h *routev3.VirtualHost, name string) *routev3.VirtualHost {
	out := shallowCopy(h, nil).(*routev3.VirtualHost)
	out.Name = name
	return out
}
