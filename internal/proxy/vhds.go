package proxy

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/proxy/internal/sorted"
	"github.com/portico-dev/portico/internal/proxy/router"
)

// VHDS: a route configuration with vhds set takes, besides its inline
// virtual hosts, the VirtualHost resources named "<its name>/<host>" (its
// namespace), each sent on its own. A one-host edit then sends one
// VirtualHost, and the table in force is patched with it rather than the
// whole configuration being sent, decoded and compared.

// storedVirtualHost is a VirtualHost resource as the store keeps it: its encoding,
// from which the table of its route configuration converts it again when
// the table is built in full, at the configuration's level then.
type storedVirtualHost struct {
	namespace, host string // its name split at the last '/'
	raw             string
	// pvh is the decoded message, until decode has converted it.
	pvh *routev3.VirtualHost
}

// splitVHDSName splits a VirtualHost resource's name into its namespace and
// host. The namespace ends at the last '/': a host name has none, a route
// configuration's name may ("https/foo.com").
func splitVHDSName(name string) (namespace, host string, ok bool) {
	i := strings.LastIndexByte(name, '/')
	if i <= 0 || i == len(name)-1 {
		return "", "", false
	}
	return name[:i], name[i+1:], true
}

func newStoredVirtualHost(pvh *routev3.VirtualHost) (*storedVirtualHost, error) {
	ns, host, ok := splitVHDSName(pvh.GetName())
	if !ok {
		return nil, errors.New("the name is not <route configuration>/<virtual host>")
	}
	return &storedVirtualHost{namespace: ns, host: host, pvh: pvh}, nil
}

// indexVirtualHosts keeps s.vhosts in line with an accepted VirtualHost delta.
func (s *resourceStore) indexVirtualHosts(updated map[string]any, removed []string) {
	for name, spec := range updated {
		h := spec.(*storedVirtualHost)
		hosts := s.vhosts[h.namespace]
		if hosts == nil {
			hosts = make(map[string]*storedVirtualHost)
			s.vhosts[h.namespace] = hosts
		}
		hosts[name] = h
	}
	for _, name := range removed {
		ns, _, ok := splitVHDSName(name)
		if !ok {
			continue
		}
		delete(s.vhosts[ns], name)
		if len(s.vhosts[ns]) == 0 {
			delete(s.vhosts, ns)
		}
	}
}

// vhdsTableOf returns the table in force of the route configuration
// namespace, if it takes virtual hosts from VHDS.
func (s *resourceStore) vhdsTableOf(namespace string) *router.RouteTable {
	t, _ := lookup[*router.RouteTable](s, resourcev3.RouteType, namespace)
	if t == nil || !t.Vhds {
		return nil
	}
	return t
}

// vhdsTable returns the table of a VHDS route configuration, given the
// table of its inline virtual hosts: those, then the VirtualHosts of its
// namespace in the store, converted at its level (the level they were
// converted at, if any, may not be this one).
func (s *resourceStore) vhdsTable(inline *router.RouteTable) (*router.RouteTable, error) {
	hosts := s.vhosts[inline.Name]
	if len(hosts) == 0 {
		return inline, nil
	}
	names := sorted.Keys(hosts) // by host: they share the namespace
	defs := make([]*router.VhostDef, len(names))
	for i, name := range names {
		def, err := router.DecodeVirtualHost(hosts[name].raw, inline.Level)
		if err != nil {
			return nil, fmt.Errorf("VirtualHost %q: %w", name, err)
		}
		def.Rename(hosts[name].host)
		defs[i] = def
	}
	t, err := router.BuildRouteTable(inline.Name, inline.Level, inline.Inline+len(defs), func(i int) (*router.VhostDef, bool, error) {
		if i < inline.Inline {
			return inline.Vhosts[i].VhostDef, false, nil
		}
		return defs[i-inline.Inline], true, nil
	})
	if err != nil {
		return nil, vhdsError(inline.Name, err)
	}
	t.Shell, t.Vhds, t.Inline = inline.Shell, true, inline.Inline
	return t, nil
}

// vhdsError names the VirtualHost resource of namespace that a table
// refused. Inline virtual hosts are filed first, and were filed together
// before: the one refused is a VirtualHost's.
func vhdsError(namespace string, err error) error {
	var fe *router.FilingError
	if errors.As(err, &fe) {
		return fmt.Errorf("VirtualHost %q: %w", namespace+"/"+fe.Def.Name, err)
	}
	return fmt.Errorf("route configuration %q: %w", namespace, err)
}

// sameVHDSConfig returns prev, the table in force of a VHDS route
// configuration, if a is the configuration it was built from. Any other a
// is converted in full and its table built anew from the stored
// VirtualHosts (see vhdsTable): its shell, or its level, changed.
func sameVHDSConfig(a *anypb.Any, prev *router.RouteTable) (*router.RouteTable, bool) {
	value := a.GetValue()
	shell, spans, ok := router.SplitRouteConfig(value, prev.Inline)
	if !ok || prev.Shell == "" || string(shell) != prev.Shell || len(spans) != prev.Inline {
		return nil, false
	}
	for i, sp := range spans {
		if string(value[sp.Start:sp.End]) != prev.Vhosts[i].Raw {
			return nil, false
		}
	}
	return prev, true
}

// vhdsTables converts the VirtualHosts of a response (updated, by name)
// and returns, by name, the next tables of the VHDS route configurations
// in force whose namespaces the response changes, removed included. A
// VirtualHost of a namespace without such a configuration is converted to
// check it, and kept for when its configuration arrives.
func (p *Proxy) vhdsTables(updated map[string]any, removed []string) (map[string]any, error) {
	changes := make(map[string]map[string]*router.VhostDef) // namespace -> host -> def (nil: removed)
	change := func(ns, host string, def *router.VhostDef) {
		if changes[ns] == nil {
			changes[ns] = make(map[string]*router.VhostDef)
		}
		changes[ns][host] = def
	}
	for _, name := range sorted.Keys(updated) {
		h := updated[name].(*storedVirtualHost)
		t := p.store.vhdsTableOf(h.namespace)
		level := router.RouteConfigLevel{MaxBody: router.DefaultMaxDirectResponseBody}
		if t != nil {
			level = t.Level
		}
		def, err := level.ConvertVirtualHost(h.pvh)
		h.pvh = nil
		if err != nil {
			return nil, fmt.Errorf("VirtualHost %q: %w", name, err)
		}
		if t != nil {
			def.Rename(h.host)
			change(h.namespace, h.host, def)
		}
	}
	for _, name := range removed {
		ns, host, ok := splitVHDSName(name)
		if ok && p.store.vhdsTableOf(ns) != nil && (p.store.vhosts[ns][name] != nil || updated[name] != nil) {
			change(ns, host, nil)
		}
	}
	tables := make(map[string]any, len(changes))
	for ns, hosts := range changes {
		t := p.store.vhdsTableOf(ns)
		next, err := router.NextTable(t, vhdsEntries(t, hosts))
		if err != nil {
			return nil, vhdsError(ns, err)
		}
		tables[ns] = next
	}
	return tables, nil
}

// vhdsEntries returns the virtual hosts of the next version of t, a VHDS
// table, with changes (by host; a nil def: removed): its inline ones, then
// its VirtualHosts, still sorted. The changed hosts are found by binary
// search, and the others between them are runs: the entries cost in
// proportion to the changes.
func vhdsEntries(t *router.RouteTable, changes map[string]*router.VhostDef) []router.TableEntry {
	hosts := sorted.Keys(changes)
	entries := make([]router.TableEntry, 0, 2*len(hosts)+2)
	keep := func(from, to int) {
		if to > from {
			entries = append(entries, router.TableEntry{Prev: int32(from), Run: int32(to - from)})
		}
	}
	keep(0, t.Inline)
	i := t.Inline
	for _, host := range hosts {
		j := i + sort.Search(len(t.Vhosts)-i, func(k int) bool { return t.Vhosts[i+k].Name >= host })
		keep(i, j)
		i = j
		if i < len(t.Vhosts) && t.Vhosts[i].Name == host {
			i++ // replaced or removed
		}
		if def := changes[host]; def != nil {
			entries = append(entries, router.TableEntry{Prev: -1, Def: def})
		}
	}
	keep(i, len(t.Vhosts))
	return entries
}
