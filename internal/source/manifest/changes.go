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

// diff replaces each object of res that equals the version handed out under its key
// (ents are res.Objects' entries) by that version, sets res.Changes, and forgets the
// objects no longer present.
func (b *book) diff(res *Result, ents []*entry) {
	var changed []Change
	for i, obj := range res.Objects {
		e := ents[i]
		switch {
		case e.obj == nil:
			changed = append(changed, Change{New: obj})
		case e.obj == obj:
		case equality.Semantic.DeepEqual(e.obj, obj):
			// Decoded again (its file was edited elsewhere, renamed, or touched), or
			// moved to another file, but the same object, age included.
			res.Objects[i] = e.obj
		default:
			changed = append(changed, Change{Old: e.obj, New: obj})
		}
		e.obj = res.Objects[i]
	}
	for _, e := range b.handed {
		if e.seen != b.loads {
			res.Changes = append(res.Changes, Change{Old: e.obj})
			delete(b.entries, e.key)
		}
	}
	res.Changes = append(res.Changes, changed...)
	b.handed = ents
}
