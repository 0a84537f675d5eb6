package proxy

import (
	"context"
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

// discoveryResourceType wraps a resource with a name and TTL; servers use it
// for TTL'd or heartbeat resources.
var discoveryResourceType = resourcev3.APITypePrefix + string((&discoveryv3.Resource{}).ProtoReflect().Descriptor().FullName())

func shortTypeName(typeURL string) string {
	return typeURL[strings.LastIndex(typeURL, ".")+1:]
}

// validatable is implemented by every generated Envoy message (protoc-gen-validate).
type validatable interface {
	proto.Message
	ValidateAll() error
}

// resourceStore holds the last accepted state-of-the-world per type, already
// converted to the proxy's specs. Owned by the ADS goroutine.
type resourceStore struct {
	byType   map[string]map[string]any // type URL -> resource name -> spec
	versions map[string]string         // type URL -> accepted version
}

func newResourceStore() *resourceStore {
	return &resourceStore{byType: make(map[string]map[string]any), versions: make(map[string]string)}
}

func (s *resourceStore) replace(typeURL, version string, resources map[string]any) {
	s.byType[typeURL] = resources
	s.versions[typeURL] = version
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

// sharedVersion returns the version all received types agree on, or "" when
// they differ. Types answered with an empty version (absent from the server's
// snapshot) do not count.
func (s *resourceStore) sharedVersion() string {
	shared := ""
	for _, v := range s.versions {
		if v == "" {
			continue
		}
		if shared != "" && v != shared {
			return ""
		}
		shared = v
	}
	return shared
}

// settled reports whether every subscribed type has been received and all
// agree on one version: no further response of the current update is due.
func (s *resourceStore) settled() bool {
	for _, t := range subscribedTypes {
		if !s.received(t) {
			return false
		}
	}
	return s.sharedVersion() != ""
}

// decode implements configSink: it unpacks, validates and converts every
// resource of one response. Any error rejects the whole response, as SotW
// requires.
func (p *Proxy) decode(typeURL string, resources []*anypb.Any) (map[string]any, error) {
	newMsg, convert, ok := converterFor(typeURL)
	if !ok {
		return nil, fmt.Errorf("unsupported resource type %q", typeURL)
	}
	out := make(map[string]any, len(resources))
	for i, a := range resources {
		msg, err := unpack(a, typeURL, newMsg)
		if err != nil {
			return nil, fmt.Errorf("%s #%d: %w", shortTypeName(typeURL), i, err)
		}
		name := resourceName(msg)
		if name == "" {
			return nil, fmt.Errorf("%s #%d: empty name", shortTypeName(typeURL), i)
		}
		if err := msg.ValidateAll(); err != nil {
			return nil, fmt.Errorf("%s %q: invalid: %w", shortTypeName(typeURL), name, err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s %q: duplicate name in response", shortTypeName(typeURL), name)
		}
		spec, err := convert(msg)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", shortTypeName(typeURL), name, err)
		}
		out[name] = spec
	}
	return out, nil
}

// accept implements configSink.
func (p *Proxy) accept(ctx context.Context, typeURL, version string, resources map[string]any) {
	p.store.replace(typeURL, version, resources)
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

// unpack decodes a, unwrapping a discovery Resource envelope if present.
func unpack(a *anypb.Any, typeURL string, newMsg func() validatable) (validatable, error) {
	if a.GetTypeUrl() == discoveryResourceType {
		var wrapped discoveryv3.Resource
		if err := a.UnmarshalTo(&wrapped); err != nil {
			return nil, fmt.Errorf("decode Resource envelope: %w", err)
		}
		if wrapped.GetResource() == nil {
			return nil, fmt.Errorf("resource %q: envelope without a resource (removal by TTL is not supported)", wrapped.GetName())
		}
		a = wrapped.GetResource()
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
