package proxy

import (
	"context"
	"errors"
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/portico-dev/portico/internal/proxy/listener"
	"github.com/portico-dev/portico/internal/proxy/router"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"github.com/portico-dev/portico/internal/proxy/xdsclient"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// validatable is implemented by every generated Envoy message (protoc-gen-validate).
type validatable interface {
	proto.Message
	ValidateAll() error
}

// resourceStore holds the resources in force per type, already converted to
// the proxy's specs. Owned by the ADS goroutine.
type resourceStore struct {
	byType map[string]map[string]any // type URL -> resource name -> spec
	// version is the system version of the last accepted response: with delta
	// xDS, a response carries only the types (and resources) that changed.
	version string
	// revisions counts the accepted responses of each type: a compilation
	// at the same revisions of a type as the applied one had the same specs.
	revisions map[string]uint64
	// changes are the clusters and endpoints updated or removed since the
	// store was at the revisions of changesBase (see clusterChanges).
	changes     [2]map[string]struct{}
	changesBase [2]uint64
	// edsUsers are the clusters in the store by the ClusterLoadAssignment
	// they take their endpoints from: a changed assignment changes them.
	edsUsers map[string]map[string]struct{}
	// vhosts are the VirtualHost resources in the store by namespace (the
	// route configuration they belong to) and name.
	vhosts map[string]map[string]*storedVirtualHost
}

func newResourceStore() *resourceStore {
	return &resourceStore{byType: make(map[string]map[string]any), revisions: make(map[string]uint64),
		changes:  [2]map[string]struct{}{make(map[string]struct{}), make(map[string]struct{})},
		edsUsers: make(map[string]map[string]struct{}), vhosts: make(map[string]map[string]*storedVirtualHost)}
}

// update applies an accepted delta response to its type.
func (s *resourceStore) update(typeURL, version string, updated map[string]any, removed []string) {
	m := s.byType[typeURL]
	if m == nil {
		m = make(map[string]any, len(updated))
		s.byType[typeURL] = m
	}
	changes := s.changesOf(typeURL)
	for name, spec := range updated {
		s.noteChange(typeURL, name, m[name], spec, changes)
		m[name] = spec
	}
	for _, name := range removed {
		s.noteChange(typeURL, name, m[name], nil, changes)
		delete(m, name)
	}
	if typeURL == resourcev3.VirtualHostType {
		s.indexVirtualHosts(updated, removed)
	}
	s.version = version
	s.revisions[typeURL]++
}

// changesOf returns the set that records the changed names of typeURL, nil
// for the types whose changes are not tracked.
func (s *resourceStore) changesOf(typeURL string) map[string]struct{} {
	switch typeURL {
	case resourcev3.ClusterType:
		return s.changes[0]
	case resourcev3.EndpointType:
		return s.changes[1]
	}
	return nil
}

// noteChange records that the resource name of typeURL goes from old to
// spec (nil: absent), keeping edsUsers in line with the clusters.
func (s *resourceStore) noteChange(typeURL, name string, old, spec any, changes map[string]struct{}) {
	if changes == nil {
		return
	}
	changes[name] = struct{}{}
	if typeURL != resourcev3.ClusterType {
		return
	}
	if c, ok := old.(*upstream.ClusterSpec); ok && c.Kind == upstream.ClusterEDS {
		users := s.edsUsers[c.ServiceName]
		delete(users, name)
		if len(users) == 0 {
			delete(s.edsUsers, c.ServiceName)
		}
	}
	if c, ok := spec.(*upstream.ClusterSpec); ok && c.Kind == upstream.ClusterEDS {
		users := s.edsUsers[c.ServiceName]
		if users == nil {
			users = make(map[string]struct{}, 1)
			s.edsUsers[c.ServiceName] = users
		}
		users[name] = struct{}{}
	}
}

// clusterChanges returns the names of the clusters whose spec or endpoints
// changed since the store was at revs (the cluster and endpoint revisions
// of a compilation); ok is false when the store does not know, as it
// recorded changes since other revisions.
func (s *resourceStore) clusterChanges(revs [2]uint64) (names map[string]struct{}, ok bool) {
	if revs != s.changesBase {
		return nil, false
	}
	names = make(map[string]struct{}, len(s.changes[0])+len(s.changes[1]))
	for name := range s.changes[0] {
		names[name] = struct{}{}
	}
	for service := range s.changes[1] {
		for name := range s.edsUsers[service] {
			names[name] = struct{}{}
		}
	}
	return names, true
}

// changesApplied starts recording changes anew from revs, the revisions of
// the compilation being applied, which is the store's current state.
func (s *resourceStore) changesApplied(revs [2]uint64) {
	if revs == s.changesBase {
		return
	}
	clear(s.changes[0])
	clear(s.changes[1])
	s.changesBase = revs
}

func (s *resourceStore) received(typeURL string) bool {
	_, ok := s.byType[typeURL]
	return ok
}

func lookup[T any](s *resourceStore, typeURL, name string) (T, bool) {
	v, ok := s.byType[typeURL][name]
	if !ok {
		var zero T
		return zero, false
	}
	return v.(T), true
}

// settled reports whether every subscribed type has been received: from then
// on a missing reference is not expected to arrive with the next response.
func (s *resourceStore) settled() bool {
	for _, t := range xdsclient.SubscribedTypes {
		if !s.received(t) {
			return false
		}
	}
	return true
}

// decode implements Sink: it unpacks, validates and converts every
// resource of one response. Any error rejects the whole response.
func (p *Proxy) decode(typeURL string, resources []*discoveryv3.Resource, removed []string) (map[string]any, error) {
	p.vhdsPending = nil
	newMsg, convert, ok := converterFor(typeURL)
	if !ok {
		return nil, fmt.Errorf("unsupported resource type %q", typeURL)
	}
	out := make(map[string]any, len(resources))
	for i, r := range resources {
		if t, ok := p.reuseRoutes(typeURL, r); ok && !has(out, r.GetName()) {
			out[r.GetName()] = t
			continue
		}
		msg, err := unpack(r.GetResource(), typeURL, newMsg)
		if err != nil {
			return nil, fmt.Errorf("%s #%d %q: %w", xdsclient.ShortTypeName(typeURL), i, r.GetName(), err)
		}
		name := resourceName(msg)
		if name == "" {
			return nil, fmt.Errorf("%s #%d: empty name", xdsclient.ShortTypeName(typeURL), i)
		}
		if name != r.GetName() {
			return nil, fmt.Errorf("%s %q: sent under the name %q", xdsclient.ShortTypeName(typeURL), name, r.GetName())
		}
		if err := msg.ValidateAll(); err != nil {
			return nil, fmt.Errorf("%s %q: invalid: %w", xdsclient.ShortTypeName(typeURL), name, err)
		}
		if has(out, name) {
			return nil, fmt.Errorf("%s %q: duplicate name in response", xdsclient.ShortTypeName(typeURL), name)
		}
		spec, err := convert(msg)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", xdsclient.ShortTypeName(typeURL), name, err)
		}
		switch s := spec.(type) {
		case *router.RouteTable:
			router.RecordEncoding(s, r.GetResource())
			if s.Vhds {
				if spec, err = p.store.vhdsTable(s); err != nil {
					return nil, fmt.Errorf("%s %q: %w", xdsclient.ShortTypeName(typeURL), name, err)
				}
			}
		case *storedVirtualHost:
			s.raw = string(r.GetResource().GetValue())
		}
		out[name] = spec
	}
	if typeURL == resourcev3.VirtualHostType {
		tables, err := p.vhdsTables(out, removed)
		if err != nil {
			return nil, err
		}
		// decode runs just before accept, on the ADS goroutine: the store
		// these tables were computed from is the one accept updates.
		p.vhdsPending = tables
	}
	return out, nil
}

func has(m map[string]any, name string) bool {
	_, ok := m[name]
	return ok
}

// reuseRoutes converts r, if it is a route configuration, reusing what it
// shares with the version in force (see reuseRouteConfig).
func (p *Proxy) reuseRoutes(typeURL string, r *discoveryv3.Resource) (*router.RouteTable, bool) {
	if typeURL != resourcev3.RouteType || r.GetResource().GetTypeUrl() != typeURL {
		return nil, false
	}
	prev, _ := lookup[*router.RouteTable](p.store, typeURL, r.GetName())
	if prev != nil && prev.Vhds {
		return sameVHDSConfig(r.GetResource(), prev)
	}
	return router.ReuseRouteConfig(r.GetResource(), prev)
}

// accept implements Sink.
func (p *Proxy) accept(ctx context.Context, typeURL, version string, updated map[string]any, removed []string) {
	p.store.update(typeURL, version, updated, removed)
	if tables := p.vhdsPending; typeURL == resourcev3.VirtualHostType && len(tables) > 0 {
		// The tables decode patched with these virtual hosts: a new
		// revision of the route configurations, which compile sees.
		p.store.update(resourcev3.RouteType, version, tables, nil)
	}
	p.vhdsPending = nil
	p.metrics.xdsUpdate(typeURL, "ack")
	p.reconcile(ctx)
}

// rejected implements Sink.
func (p *Proxy) rejected(typeURL string) { p.metrics.xdsUpdate(typeURL, "nack") }

// converterFor returns a constructor for the type's message and the function
// turning a validated message into the proxy's spec for it.
func converterFor(typeURL string) (func() validatable, func(validatable) (any, error), bool) {
	switch typeURL {
	case resourcev3.ListenerType:
		return func() validatable { return &listenerv3.Listener{} },
			func(m validatable) (any, error) { return convertListener(m.(*listenerv3.Listener)) }, true
	case resourcev3.RouteType:
		return func() validatable { return &routev3.RouteConfiguration{} },
			func(m validatable) (any, error) {
				return router.ConvertRouteConfig(m.(*routev3.RouteConfiguration), httpFilters)
			}, true
	case resourcev3.ClusterType:
		return func() validatable { return &clusterv3.Cluster{} },
			func(m validatable) (any, error) { return upstream.ConvertCluster(m.(*clusterv3.Cluster)) }, true
	case resourcev3.EndpointType:
		return func() validatable { return &endpointv3.ClusterLoadAssignment{} },
			func(m validatable) (any, error) {
				return upstream.ConvertEDSAssignment(m.(*endpointv3.ClusterLoadAssignment))
			}, true
	case resourcev3.SecretType:
		return func() validatable { return &tlsv3.Secret{} },
			func(m validatable) (any, error) { return listener.ConvertSecret(m.(*tlsv3.Secret)) }, true
	case resourcev3.VirtualHostType:
		return func() validatable { return &routev3.VirtualHost{} },
			func(m validatable) (any, error) { return newStoredVirtualHost(m.(*routev3.VirtualHost)) }, true
	}
	return nil, nil, false
}

// unpack decodes a, a resource of typeURL.
func unpack(a *anypb.Any, typeURL string, newMsg func() validatable) (validatable, error) {
	if a == nil {
		return nil, errors.New("no resource (removal by TTL is not supported)")
	}
	if a.GetTypeUrl() != typeURL {
		return nil, fmt.Errorf("type %q in a response for %q", a.GetTypeUrl(), typeURL)
	}
	msg := newMsg()
	if err := a.UnmarshalTo(msg); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return msg, nil
}

func resourceName(m proto.Message) string {
	switch r := m.(type) {
	case *listenerv3.Listener:
		return r.GetName()
	case *routev3.RouteConfiguration:
		return r.GetName()
	case *clusterv3.Cluster:
		return r.GetName()
	case *endpointv3.ClusterLoadAssignment:
		return r.GetClusterName()
	case *tlsv3.Secret:
		return r.GetName()
	case *routev3.VirtualHost:
		return r.GetName()
	}
	return ""
}

// xdsSink is the proxy as the ADS client sees it: where validated
// resources go (xdsclient.Sink).
type xdsSink struct{ p *Proxy }

func (s xdsSink) Decode(typeURL string, resources []*discoveryv3.Resource, removed []string) (map[string]any, error) {
	return s.p.decode(typeURL, resources, removed)
}

func (s xdsSink) Accept(ctx context.Context, typeURL, version string, updated map[string]any, removed []string) {
	s.p.accept(ctx, typeURL, version, updated, removed)
}

func (s xdsSink) Rejected(typeURL string) { s.p.rejected(typeURL) }
