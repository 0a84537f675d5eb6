package contourclient

import (
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/portico-dev/portico/apis/contour/v1beta1"
)

// DecodeErrorAnnotation marks an IngressRoute that the API server stored but that cannot
// be decoded into the Go type; its value says why. Only a route's "service" field can do
// that: it is one service or a list of them, so its schema is left open
// (x-kubernetes-preserve-unknown-fields) and the API server accepts anything there.
//
// Failing the decode would fail the whole list (and a watch would replay the same event
// forever), so that one bad object would stop every IngressRoute from being seen. Such
// an object is returned instead with its metadata and status, no spec, and this
// annotation; readers must treat it as unusable. The annotation is removed from objects
// that decode, so a user cannot set it.
const DecodeErrorAnnotation = v1beta1.DecodeErrorAnnotation

var (
	gvkIngressRoute     = v1beta1.SchemeGroupVersion.WithKind("IngressRoute")
	gvkIngressRouteList = v1beta1.SchemeGroupVersion.WithKind("IngressRouteList")
)

// tolerantSerializer is a NegotiatedSerializer whose decoders are tolerantDecoders.
type tolerantSerializer struct {
	runtime.NegotiatedSerializer
}

func (s tolerantSerializer) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return tolerantDecoder{s.NegotiatedSerializer.DecoderToVersion(d, gv)}
}

// tolerantDecoder decodes like its embedded decoder, except that an IngressRoute (alone,
// or in a list) that cannot be decoded is returned marked with DecodeErrorAnnotation.
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
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &probe) != nil {
		return obj, gvk, err
	}
	switch probe.Kind {
	case gvkIngressRoute.Kind:
		ir, ok := into.(*v1beta1.IngressRoute)
		if into == nil {
			ir, ok = &v1beta1.IngressRoute{}, true
		}
		if !ok || !markUndecodable(data, err, ir) {
			return obj, gvk, err
		}
		return ir, &gvkIngressRoute, nil
	case gvkIngressRouteList.Kind:
		list, ok := into.(*v1beta1.IngressRouteList)
		if into == nil {
			list, ok = &v1beta1.IngressRouteList{}, true
		}
		if !ok || !d.decodeItemByItem(data, list) {
			return obj, gvk, err
		}
		return list, &gvkIngressRouteList, nil
	}
	return obj, gvk, err
}

// decodeItemByItem decodes a list whose items could not all be decoded, marking the
// items that cannot. It reports false if even the list's shape is wrong.
func (d tolerantDecoder) decodeItemByItem(data []byte, list *v1beta1.IngressRouteList) bool {
	var raw struct {
		Metadata metav1.ListMeta   `json:"metadata"`
		Items    []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return false
	}
	*list = v1beta1.IngressRouteList{ListMeta: raw.Metadata, Items: make([]v1beta1.IngressRoute, len(raw.Items))}
	for i, item := range raw.Items {
		ir := &list.Items[i]
		if _, _, err := d.Decoder.Decode(item, &gvkIngressRoute, ir); err != nil {
			*ir = v1beta1.IngressRoute{}
			if !markUndecodable(item, err, ir) {
				return false
			}
			continue
		}
		dropForgedMark(ir)
	}
	return true
}

// markUndecodable fills ir with the metadata and status of data, no spec, and
// DecodeErrorAnnotation saying why decoding failed. It reports false if data is not an
// object with metadata.
func markUndecodable(data []byte, decodeErr error, ir *v1beta1.IngressRoute) bool {
	var meta struct {
		Metadata *metav1.ObjectMeta `json:"metadata"`
		Status   v1beta1.Status     `json:"status"`
	}
	if json.Unmarshal(data, &meta) != nil || meta.Metadata == nil {
		// The status is the controller's own and always decodes; without metadata
		// there is no object to mark.
		return false
	}
	*ir = v1beta1.IngressRoute{ObjectMeta: *meta.Metadata, Status: meta.Status}
	if ir.Annotations == nil {
		ir.Annotations = map[string]string{}
	}
	reason := decodeReason(decodeErr)
	if i, ok := badServiceField(data); ok {
		// The "service" field decodes itself, so its error cannot say where it is.
		reason = fmt.Sprintf("spec.routes[%d].%s", i, reason)
	}
	ir.Annotations[DecodeErrorAnnotation] = reason
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

// decodeReason drops the serializer's preamble ("... cannot be handled as a
// IngressRoute: ") and Go's "json: " prefix from a decoding error.
func decodeReason(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, " cannot be handled as a"); i >= 0 {
		if j := strings.Index(msg[i:], ": "); j >= 0 {
			msg = msg[i+j+2:]
		}
	}
	return strings.ReplaceAll(msg, "json: ", "")
}

func dropForgedMarks(obj runtime.Object) {
	switch o := obj.(type) {
	case *v1beta1.IngressRoute:
		dropForgedMark(o)
	case *v1beta1.IngressRouteList:
		for i := range o.Items {
			dropForgedMark(&o.Items[i])
		}
	}
}

func dropForgedMark(ir *v1beta1.IngressRoute) {
	delete(ir.Annotations, DecodeErrorAnnotation)
}

// Undecodable returns why ir could not be decoded, if it could not (see
// DecodeErrorAnnotation).
func Undecodable(ir *v1beta1.IngressRoute) (string, bool) {
	reason, ok := ir.Annotations[DecodeErrorAnnotation]
	return reason, ok
}
