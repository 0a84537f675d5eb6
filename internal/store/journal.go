package store

import "k8s.io/apimachinery/pkg/types"

// journalSize is how many recent changes a store remembers. A builder more changes
// behind than that compares whole maps instead.
const journalSize = 512

// Change is one object added, replaced or removed through Upsert or Delete.
type Change struct {
	// Gen is unique within a lineage of stores (see Generations).
	Gen  uint64
	Kind Kind
	// Key is the object's namespace and name (the name alone for cluster-scoped kinds;
	// an EndpointSlice's is its Service's).
	Key types.NamespacedName
}

// Journal holds the most recent changes of a store's history. It is a value, copied
// whole with the store (Clone, or a plain copy of the struct), so that stores that
// change apart never write into each other's.
type Journal struct {
	n       uint64 // changes ever recorded
	entries [journalSize]Change
}

func (j *Journal) record(c Change) {
	j.entries[j.n%journalSize] = c
	j.n++
}

// oldest is the index of the oldest change still held.
func (j *Journal) oldest() uint64 {
	if j.n < journalSize {
		return 0
	}
	return j.n - journalSize
}

func (j *Journal) at(i uint64) Change { return j.entries[i%journalSize] }

// Journal returns a copy of s's journal.
func (s *Store) Journal() *Journal {
	j := s.journal
	return &j
}

// ChangesSince returns the changes that can make a store whose journal is j differ from
// one whose journal was prev, when both are of one lineage (a change's Gen is recorded
// once and only copied, so two journals holding the same change at the same index share
// all history up to it): those after the last change they share, in either. ok is false
// when the journals cannot tell (no shared change is still held); compare everything then.
func (j *Journal) ChangesSince(prev *Journal) (changes []Change, ok bool) {
	lo := max(j.oldest(), prev.oldest())
	hi := min(j.n, prev.n)
	fork := lo // index of the first change not shared
	switch {
	case hi == 0:
		fork = 0
	case hi > lo:
		// The newest shared index: scan down from the newest index both hold.
		found := false
		for i := hi; i > lo; i-- {
			if j.at(i-1).Gen == prev.at(i-1).Gen {
				fork, found = i, true
				break
			}
		}
		if !found {
			return nil, false
		}
	default:
		return nil, false
	}
	if fork < j.oldest() || fork < prev.oldest() {
		return nil, false
	}
	for i := fork; i < prev.n; i++ {
		changes = append(changes, prev.at(i))
	}
	for i := fork; i < j.n; i++ {
		changes = append(changes, j.at(i))
	}
	return changes, true
}
