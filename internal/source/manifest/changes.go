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

// diff replaces each of objs that equals the version handed out under its key (ents
// are objs' entries, index for index) by that version, and returns the changes: first
// the removals of the objects of before (entries handed out, in the order they were)
// that this load did not see, which it forgets, then the additions and updates in the
// order of objs.
func (b *book) diff(objs []runtime.Object, ents, before []*entry) []Change {
	var changes, changed []Change
	for i, obj := range objs {
		e := ents[i]
		switch {
		case e.obj == nil:
			changed = append(changed, Change{New: obj})
		case e.obj == obj:
		case equality.Semantic.DeepEqual(e.obj, obj):
			// Decoded again (its file was edited elsewhere, renamed, or touched), or
			// moved to another file, but the same object, age included.
			objs[i] = e.obj
		default:
			changed = append(changed, Change{Old: e.obj, New: obj})
		}
		e.obj = objs[i]
	}
	for _, e := range before {
		if e.seen != b.loads {
			changes = append(changes, Change{Old: e.obj})
			// The entry does not keep its key, which the object it handed out tells
			// (handed-out objects are never modified): only removals need it.
			delete(b.entries, keyOf(e.obj))
		}
	}
	return append(changes, changed...)
}
