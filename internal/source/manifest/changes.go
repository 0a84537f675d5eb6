package manifest

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

// Change is one object's change between two Results: Old is nil for an object added,
// New is nil for one removed, and both are set for one updated.
type Change struct {
	Old, New runtime.Object
}

// handedOut remembers the objects of the last Result, by key, so that the next Result
// hands out the same pointer for each object that did not change, and says what did.
type handedOut struct {
	objs  map[objectKey]runtime.Object
	order []objectKey // of the last Result's objects
}

// diff replaces each object of res that equals the one handed out under its key by
// that one, sets res.Changes, and remembers res. places are res.Objects' placements.
func (h *handedOut) diff(res *Result, places []placement) {
	next := make(map[objectKey]runtime.Object, len(res.Objects))
	order := make([]objectKey, len(places))
	var changed []Change
	for i, obj := range res.Objects {
		key := places[i].key
		order[i] = key
		old, ok := h.objs[key]
		switch {
		case !ok:
			changed = append(changed, Change{New: obj})
		case old == obj:
		case equality.Semantic.DeepEqual(old, obj):
			// Decoded again (its file was edited elsewhere, renamed, or touched), or
			// moved to another file, but the same object, age included.
			res.Objects[i] = old
		default:
			changed = append(changed, Change{Old: old, New: obj})
		}
		next[key] = res.Objects[i]
	}
	for _, key := range h.order {
		if _, ok := next[key]; !ok {
			res.Changes = append(res.Changes, Change{Old: h.objs[key]})
		}
	}
	res.Changes = append(res.Changes, changed...)
	h.objs, h.order = next, order
}
