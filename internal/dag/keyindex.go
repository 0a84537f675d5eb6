package dag

import "iter"

// keyIndex maps a key to the routing objects holding it. Nearly every key is held by
// one object (a host, a Service, its endpoints), so a key's set keeps its first object
// inline and needs a map only from the second on: a map per key, most of them of one
// element, was a tenth of the live heap of a large configuration.
type keyIndex map[string]refSet

// refSet is a non-empty set of objects: first, and the others in more.
type refSet struct {
	first ObjectRef
	more  map[ObjectRef]struct{}
}

// add adds ref to key's set, reporting whether the key is new.
func (ix keyIndex) add(key string, ref ObjectRef) bool {
	set, ok := ix[key]
	switch {
	case !ok:
		ix[key] = refSet{first: ref}
		return true
	case set.first == ref:
	case set.more == nil:
		set.more = map[ObjectRef]struct{}{ref: {}}
		ix[key] = set
	default:
		set.more[ref] = struct{}{}
	}
	return false
}

// remove removes ref from key's set, reporting whether that removed the key.
func (ix keyIndex) remove(key string, ref ObjectRef) bool {
	set, ok := ix[key]
	switch {
	case !ok:
		return false
	case set.first != ref:
		delete(set.more, ref)
		return false
	case len(set.more) == 0:
		delete(ix, key)
		return true
	}
	for other := range set.more {
		delete(set.more, other)
		set.first = other
		break
	}
	if len(set.more) == 0 {
		set.more = nil
	}
	ix[key] = set
	return false
}

// has reports whether any object holds key.
func (ix keyIndex) has(key string) bool {
	_, ok := ix[key]
	return ok
}

// refs yields the objects holding key, in no particular order.
func (ix keyIndex) refs(key string) iter.Seq[ObjectRef] {
	return func(yield func(ObjectRef) bool) {
		set, ok := ix[key]
		if !ok || !yield(set.first) {
			return
		}
		for ref := range set.more {
			if !yield(ref) {
				return
			}
		}
	}
}
