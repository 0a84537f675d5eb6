package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// subscribedTypes are the types the proxy subscribes to, in the order Envoy
// (and the snapshot cache) use for ADS: clusters and their endpoints before
// listeners and their routes, secrets last.
var subscribedTypes = []string{
	resourcev3.ClusterType,
	resourcev3.EndpointType,
	resourcev3.ListenerType,
	resourcev3.RouteType,
	resourcev3.SecretType,
}

func shortTypeName(typeURL string) string {
	return typeURL[strings.LastIndex(typeURL, ".")+1:]
}

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
}

func newResourceStore() *resourceStore {
	return &resourceStore{byType: make(map[string]map[string]any), revisions: make(map[string]uint64)}
}

// update applies an accepted delta response to its type.
func (s *resourceStore) update(typeURL, version string, updated map[string]any, removed []string) {
	m := s.byType[typeURL]
	if m == nil {
		m = make(map[string]any, len(updated))
		s.byType[typeURL] = m
	}
	for name, spec := range updated {
		m[name] = spec
	}
	for _, name := range removed {
		delete(m, name)
	}
	s.version = version
	s.revisions[typeURL]++
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
	for _, t := range subscribedTypes {
		if !s.received(t) {
			return false
		}
	}
	return true
}

// decode implements configSink: it unpacks, validates and converts every
// resource of one response. Any error rejects the whole response.
func (p *Proxy) decode(typeURL string, resources []*discoveryv3.Resource) (map[string]any, error) {
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
			return nil, fmt.Errorf("%s #%d %q: %w", shortTypeName(typeURL), i, r.GetName(), err)
		}
		name := resourceName(msg)
		if name == "" {
			return nil, fmt.Errorf("%s #%d: empty name", shortTypeName(typeURL), i)
		}
		if name != r.GetName() {
			return nil, fmt.Errorf("%s %q: sent under the name %q", shortTypeName(typeURL), name, r.GetName())
		}
		if err := msg.ValidateAll(); err != nil {
			return nil, fmt.Errorf("%s %q: invalid: %w", shortTypeName(typeURL), name, err)
		}
		if has(out, name) {
			return nil, fmt.Errorf("%s %q: duplicate name in response", shortTypeName(typeURL), name)
		}
		spec, err := convert(msg)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", shortTypeName(typeURL), name, err)
		}
		if t, ok := spec.(*routeTable); ok {
			recordEncoding(t, r.GetResource())
		}
		out[name] = spec
	}
	return out, nil
}

func has(m map[string]any, name string) bool {
	_, ok := m[name]
	return ok
}

// reuseRoutes converts r, if it is a route configuration, reusing what it
// shares with the version in force (see reuseRouteConfig).
func (p *Proxy) reuseRoutes(typeURL string, r *discoveryv3.Resource) (*routeTable, bool) {
	if typeURL != resourcev3.RouteType || r.GetResource().GetTypeUrl() != typeURL {
		return nil, false
	}
	prev, _ := lookup[*routeTable](p.store, typeURL, r.GetName())
	return reuseRouteConfig(r.GetResource(), prev)
}

// accept implements configSink.
func (p *Proxy) accept(ctx context.Context, typeURL, version string, updated map[string]any, removed []string) {
	p.store.update(typeURL, version, updated, removed)
	p.metrics.xdsUpdate(typeURL, "ack")
	p.reconcile(ctx)
}

// rejected implements configSink.
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
			func(m validatable) (any, error) { return convertRouteConfig(m.(*routev3.RouteConfiguration)) }, true
	case resourcev3.ClusterType:
		return func() validatable { return &clusterv3.Cluster{} },
			func(m validatable) (any, error) { return convertCluster(m.(*clusterv3.Cluster)) }, true
	case resourcev3.EndpointType:
		return func() validatable { return &endpointv3.ClusterLoadAssignment{} },
			func(m validatable) (any, error) {
				return convertEDSAssignment(m.(*endpointv3.ClusterLoadAssignment))
			}, true
	case resourcev3.SecretType:
		return func() validatable { return &tlsv3.Secret{} },
			func(m validatable) (any, error) { return convertSecret(m.(*tlsv3.Secret)) }, true
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
	}
	return ""
}
