package server

import (
	"sync"
	"sync/atomic"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/runtime/protoiface"
)

// go-control-plane marshals every resource of every response it sends, once per
// response, so per client: at 10,000 virtual hosts a one-host change costs each delta
// client the marshalling of the whole 2 MB HTTP route configuration. An encoded is
// what the server hands go-control-plane instead of the published message: the same
// message, whose marshalling (go-control-plane's MarshalResource) returns an encoding
// made once for the resource and shared by every response that carries it, whatever
// the client and the protocol.
type encoded struct {
	// Resource is the published message, for everything but marshalling.
	types.Resource
	name     string
	encoding func() ([]byte, error)
	// For a RouteConfiguration: hosts are its virtual hosts and their encodings, in
	// order, once it has been encoded; until then base are the host encodings of the
	// latest version of the same name that was, which the encoding reuses for the
	// hosts passed as the same pointers, so that it encodes only the hosts that
	// changed. Encoding on first use keeps a Publish no client asks for from copying
	// the 2 MB of the HTTP route configuration; base, rather than the previous
	// version itself, keeps versions nobody encoded from making a chain.
	hosts atomic.Pointer[[]hostEncoding]
	base  []hostEncoding
}

type hostEncoding struct {
	host     *routev3.VirtualHost
	encoding []byte
}

// encode returns r with its encoding, made when first asked for; prev is the
// resource of the same name that r replaces, nil for a new name.
func encode(r types.Resource, prev *encoded) *encoded {
	e := &encoded{Resource: r, name: cachev3.GetResourceName(r)}
	if rc, ok := r.(*routev3.RouteConfiguration); ok {
		if prev != nil {
			e.base = prev.knownHosts()
		}
		e.encoding = sync.OnceValues(func() ([]byte, error) {
			b, hosts, err := encodeRouteConfig(rc, e.base)
			e.hosts.Store(&hosts)
			return b, err
		})
		return e
	}
	if h, ok := r.(*vhdsResource); ok {
		e.encoding = sync.OnceValues(func() ([]byte, error) { return encodeRenamed(h.VirtualHost, h.name) })
		return e
	}
	e.encoding = sync.OnceValues(func() ([]byte, error) { return cachev3.MarshalResource(r) })
	return e
}

// virtualHostNameField is VirtualHost.name's field number.
const virtualHostNameField protowire.Number = 1

// encodeRenamed encodes vh under another name: its name field replaced, every other
// field as vh's deterministic marshalling has it. The name field comes first, as in a
// deterministic marshalling.
func encodeRenamed(vh *routev3.VirtualHost, name string) ([]byte, error) {
	b, err := cachev3.MarshalResource(vh)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b)+len(name)+8)
	out = protowire.AppendTag(out, virtualHostNameField, protowire.BytesType)
	out = protowire.AppendString(out, name)
	for pos := 0; pos < len(b); {
		num, typ, n := protowire.ConsumeTag(b[pos:])
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[pos+n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		if num != virtualHostNameField {
			out = append(out, b[pos:pos+n+m]...)
		}
		pos += n + m
	}
	return out, nil
}

// knownHosts returns the latest host encodings e knows: its own once encoded, else
// those it would start from.
func (e *encoded) knownHosts() []hostEncoding {
	if h := e.hosts.Load(); h != nil {
		return *h
	}
	return e.base
}

// GetName gives go-control-plane's GetResourceName the name of the resource.
func (e *encoded) GetName() string { return e.name }

// ProtoReflect is the published message's, but for its marshalling methods.
func (e *encoded) ProtoReflect() protoreflect.Message {
	return encodedMessage{Message: e.Resource.ProtoReflect(), e: e}
}

type encodedMessage struct {
	protoreflect.Message
	e *encoded
}

func (m encodedMessage) Interface() protoreflect.ProtoMessage { return m.e }

// ProtoMethods makes proto.Marshal take the encoding: the protobuf runtime calls a
// message's own methods when it has them. Without a Size method, proto.Marshal does
// not allocate a buffer of the size for Marshal to fill, and Marshal returns the
// encoding itself rather than a 2 MB copy of it per response (capped, so that an
// append by the caller copies instead of writing into it); proto.Size takes the
// length of what Marshal returns.
func (m encodedMessage) ProtoMethods() *protoiface.Methods { return &encodedMethods }

var encodedMethods = protoiface.Methods{
	Flags: protoiface.SupportMarshalDeterministic,
	Marshal: func(in protoiface.MarshalInput) (protoiface.MarshalOutput, error) {
		b, err := in.Message.(encodedMessage).e.encoding()
		if len(in.Buf) == 0 {
			return protoiface.MarshalOutput{Buf: b[:len(b):len(b)]}, err
		}
		return protoiface.MarshalOutput{Buf: append(in.Buf, b...)}, err
	},
	CheckInitialized: func(in protoiface.CheckInitializedInput) (protoiface.CheckInitializedOutput, error) {
		return protoiface.CheckInitializedOutput{}, proto.CheckInitialized(in.Message.(encodedMessage).e.Resource)
	},
}

// virtualHostsField is RouteConfiguration.virtual_hosts's field number.
const virtualHostsField protowire.Number = 2

// encodeRouteConfig encodes rc as its fields other than virtual_hosts followed by its
// virtual hosts: an encoding is a sequence of fields in any order, and a repeated
// field's elements are its occurrences in order, so this decodes to rc. A host of prev
// (by pointer) keeps its encoding: unchanged hosts keep the same bytes, which the
// embedded proxy relies on to keep their converted form.
func encodeRouteConfig(rc *routev3.RouteConfiguration, prev []hostEncoding) ([]byte, []hostEncoding, error) {
	shell, err := cachev3.MarshalResource(withoutVirtualHosts(rc))
	if err != nil {
		return nil, nil, err
	}
	var byHost map[*routev3.VirtualHost][]byte // made when a host is not at its position in prev
	hosts := make([]hostEncoding, len(rc.GetVirtualHosts()))
	size := len(shell)
	for i, h := range rc.GetVirtualHosts() {
		var b []byte
		if i < len(prev) && prev[i].host == h {
			b = prev[i].encoding
		} else {
			if byHost == nil {
				byHost = make(map[*routev3.VirtualHost][]byte, len(prev))
				for _, p := range prev {
					byHost[p.host] = p.encoding
				}
			}
			var known bool
			if b, known = byHost[h]; !known {
				if b, err = cachev3.MarshalResource(h); err != nil {
					return nil, nil, err
				}
			}
		}
		hosts[i] = hostEncoding{host: h, encoding: b}
		size += protowire.SizeTag(virtualHostsField) + protowire.SizeBytes(len(b))
	}
	out := make([]byte, 0, size)
	out = append(out, shell...)
	for _, h := range hosts {
		out = protowire.AppendTag(out, virtualHostsField, protowire.BytesType)
		out = protowire.AppendBytes(out, h.encoding)
	}
	return out, hosts, nil
}

// withoutVirtualHosts returns a RouteConfiguration sharing every field of rc but its
// virtual hosts: the published messages are never modified, so their parts can be
// shared.
func withoutVirtualHosts(rc *routev3.RouteConfiguration) proto.Message {
	src := rc.ProtoReflect()
	dst := src.Type().New()
	src.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if f.Number() != virtualHostsField {
			dst.Set(f, v)
		}
		return true
	})
	dst.SetUnknown(src.GetUnknown())
	return dst.Interface()
}
