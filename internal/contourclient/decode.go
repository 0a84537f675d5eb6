package contourclient

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// DecodeErrorAnnotation marks an IngressRoute or an HTTPProxy that the API server stored
// but that cannot be decoded into the Go type; its value says why.
//
// For an IngressRoute only a route's "service" field can do that: it is one service or
// a list of them, so its schema is left open (x-kubernetes-preserve-unknown-fields) and
// the API server accepts anything there. For an HTTPProxy, the schema admits values that
// a Go field cannot hold (a negative retriableStatusCodes entry, a rate above 2^32), and
// a cluster may run another version of the CRD than Portico's.
//
// Failing the decode would fail the whole list (and a watch would replay the same event
// forever), so that one bad object would stop every object of its kind from being seen.
// Such an object is returned instead with its metadata and status, no spec, and this
// annotation; readers must treat it as unusable. The annotation is removed from objects
// that decode, so a user cannot set it.
const DecodeErrorAnnotation = v1beta1.DecodeErrorAnnotation

// tolerantKind is a kind whose undecodable objects are returned marked rather than
// failing the decode.
type tolerantKind struct {
	gvk, listGVK schema.GroupVersionKind
	newObj       func() runtime.Object
	newList      func() runtime.Object
	// mark makes obj, a new object, the marked form of data, which failed to decode
	// with err. It reports false if data has no metadata: there is no object to mark.
	mark func(data []byte, err error, obj runtime.Object) bool
}

var tolerantKinds = []tolerantKind{
	{
		gvk:     v1beta1.SchemeGroupVersion.WithKind("IngressRoute"),
		listGVK: v1beta1.SchemeGroupVersion.WithKind("IngressRouteList"),
		newObj:  func() runtime.Object { return &v1beta1.IngressRoute{} },
		newList: func() runtime.Object { return &v1beta1.IngressRouteList{} },
		mark:    markIngressRoute,
	},
	{
		gvk:     contourv1.SchemeGroupVersion.WithKind("HTTPProxy"),
		listGVK: contourv1.SchemeGroupVersion.WithKind("HTTPProxyList"),
		newObj:  func() runtime.Object { return &contourv1.HTTPProxy{} },
		newList: func() runtime.Object { return &contourv1.HTTPProxyList{} },
		mark:    markHTTPProxy,
	},
}

// tolerantSerializer is a NegotiatedSerializer whose decoders are tolerantDecoders.
type tolerantSerializer struct {
	runtime.NegotiatedSerializer
}

func (s tolerantSerializer) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return tolerantDecoder{s.NegotiatedSerializer.DecoderToVersion(d, gv)}
}

// tolerantDecoder decodes like its embedded decoder, except that an IngressRoute or an
// HTTPProxy (alone, or in a list) that cannot be decoded is returned marked with
// DecodeErrorAnnotation.
type tolerantDecoder struct {
	runtime.Decoder
}

func (d tolerantDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := d.Decoder.Decode(data, defaults, into)
	if err == nil {
		dropForgedMarks(obj)
		return obj, gvk, nil
	}
	var probe struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if json.Unmarshal(data, &probe) != nil {
		return obj, gvk, err
	}
	for _, k := range tolerantKinds {
		if probe.APIVersion != "" && probe.APIVersion != k.gvk.GroupVersion().String() {
			continue
		}
		switch probe.Kind {
		case k.gvk.Kind:
			out, ok := target(into, k.newObj)
			if !ok || !k.mark(data, err, out) {
				return obj, gvk, err
			}
			return out, &k.gvk, nil
		case k.listGVK.Kind:
			list, ok := target(into, k.newList)
			if !ok || !d.decodeItemByItem(data, k, list) {
				return obj, gvk, err
			}
			return list, &k.listGVK, nil
		}
	}
	return obj, gvk, err
}

// target returns into when it is of the type newObj makes, or a new object when into is
// nil; it reports false when into is of another type.
func target(into runtime.Object, newObj func() runtime.Object) (runtime.Object, bool) {
	fresh := newObj()
	if into == nil {
		return fresh, true
	}
	return into, reflect.TypeOf(into) == reflect.TypeOf(fresh)
}

// decodeItemByItem decodes into list (of k's list type) a list whose items could not
// all be decoded, marking the items that cannot. It reports false if even the list's
// shape is wrong.
func (d tolerantDecoder) decodeItemByItem(data []byte, k tolerantKind, list runtime.Object) bool {
	var raw struct {
		Metadata metav1.ListMeta   `json:"metadata"`
		Items    []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return false
	}
	items := make([]runtime.Object, len(raw.Items))
	for i, item := range raw.Items {
		obj := k.newObj()
		if _, _, err := d.Decoder.Decode(item, &k.gvk, obj); err != nil {
			obj = k.newObj()
			if !k.mark(item, err, obj) {
				return false
			}
		} else {
			dropForgedMark(obj)
		}
		items[i] = obj
	}
	if err := meta.SetList(list, items); err != nil {
		return false
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return false
	}
	lm.SetResourceVersion(raw.Metadata.ResourceVersion)
	lm.SetContinue(raw.Metadata.Continue)
	lm.SetRemainingItemCount(raw.Metadata.RemainingItemCount)
	lm.SetSelfLink(raw.Metadata.SelfLink)
	return true
}

// splitObject returns the metadata and the raw status of an object, or false if it has
// no metadata.
func splitObject(data []byte) (*metav1.ObjectMeta, json.RawMessage, bool) {
	var parts struct {
		Metadata *metav1.ObjectMeta `json:"metadata"`
		Status   json.RawMessage    `json:"status"`
	}
	if json.Unmarshal(data, &parts) != nil || parts.Metadata == nil {
		return nil, nil, false
	}
	return parts.Metadata, parts.Status, true
}

// setMark records reason on m, which has no other copy.
func setMark(m *metav1.ObjectMeta, reason string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[DecodeErrorAnnotation] = reason
}

// markIngressRoute is tolerantKind.mark for IngressRoutes.
func markIngressRoute(data []byte, decodeErr error, obj runtime.Object) bool {
	m, status, ok := splitObject(data)
	if !ok {
		return false
	}
	ir := obj.(*v1beta1.IngressRoute)
	*ir = v1beta1.IngressRoute{ObjectMeta: *m}
	// The status is the controller's own; one that does not decode is simply dropped.
	if len(status) > 0 && json.Unmarshal(status, &ir.Status) != nil {
		ir.Status = v1beta1.Status{}
	}
	reason := decodeReason(decodeErr)
	if i, ok := badServiceField(data); ok {
		// The "service" field decodes itself, so its error cannot say where it is.
		reason = fmt.Sprintf("spec.routes[%d].%s", i, reason)
	}
	setMark(&ir.ObjectMeta, reason)
	return true
}

// markHTTPProxy is tolerantKind.mark for HTTPProxies.
func markHTTPProxy(data []byte, decodeErr error, obj runtime.Object) bool {
	m, status, ok := splitObject(data)
	if !ok {
		return false
	}
	p := obj.(*contourv1.HTTPProxy)
	*p = contourv1.HTTPProxy{ObjectMeta: *m}
	// Other controllers may add conditions; if something there does not decode, the
	// status is dropped rather than the object.
	if len(status) > 0 && json.Unmarshal(status, &p.Status) != nil {
		p.Status = contourv1.HTTPProxyStatus{}
	}
	setMark(&p.ObjectMeta, decodeReason(decodeErr))
	return true
}

// badServiceField returns the index of the first route whose "service" field does not
// decode.
func badServiceField(data []byte) (int, bool) {
	var obj struct {
		Spec struct {
			Routes []struct {
				Service json.RawMessage `json:"service"`
			} `json:"routes"`
		} `json:"spec"`
	}
	if json.Unmarshal(data, &obj) != nil {
		return 0, false
	}
	for i, r := range obj.Spec.Routes {
		var l v1beta1.ServiceList
		if len(r.Service) > 0 && l.UnmarshalJSON(r.Service) != nil {
			return i, true
		}
	}
	return 0, false
}

var unmarshalTypeRE = regexp.MustCompile(`^cannot unmarshal (\w+)(?: (\S+))? into Go struct field \w+\.(\S+) of type (\S+)$`)

// decodeReason drops the serializer's preamble ("... cannot be handled as a
// IngressRoute: ") and Go's "json: " prefix from a decoding error, and says what a
// value of the wrong type should have been without naming Go types.
func decodeReason(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, " cannot be handled as a"); i >= 0 {
		if j := strings.Index(msg[i:], ": "); j >= 0 {
			msg = msg[i+j+2:]
		}
	}
	msg = strings.ReplaceAll(msg, "json: ", "")
	if m := unmarshalTypeRE.FindStringSubmatch(msg); m != nil {
		if want, ok := expected[m[4]]; ok {
			got := m[1]
			if m[2] != "" {
				got += " " + m[2]
			}
			return fmt.Sprintf("%s: %s is not %s", m[3], got, want)
		}
	}
	return msg
}

// expected describes the values the Go types of the API fields can hold, for those
// whose range is narrower than the schema's (integer, string, boolean).
var expected = map[string]string{
	"uint32": "an integer from 0 to 4294967295",
	"int32":  "an integer from -2147483648 to 2147483647",
	"int":    "a 64-bit integer",
	"int64":  "a 64-bit integer",
	"string": "a string",
	"bool":   "a boolean",
}

func dropForgedMarks(obj runtime.Object) {
	switch o := obj.(type) {
	case *v1beta1.IngressRoute, *contourv1.HTTPProxy:
		dropForgedMark(o)
	case *v1beta1.IngressRouteList, *contourv1.HTTPProxyList:
		_ = meta.EachListItem(o, func(item runtime.Object) error {
			dropForgedMark(item)
			return nil
		})
	}
}

func dropForgedMark(obj runtime.Object) {
	if m, err := meta.Accessor(obj); err == nil {
		if a := m.GetAnnotations(); a != nil {
			delete(a, DecodeErrorAnnotation)
		}
	}
}

// Undecodable returns why obj (an IngressRoute or an HTTPProxy from this package's
// clients) could not be decoded, if it could not (see DecodeErrorAnnotation).
func Undecodable(obj metav1.Object) (string, bool) {
	reason, ok := obj.GetAnnotations()[DecodeErrorAnnotation]
	return reason, ok
}
