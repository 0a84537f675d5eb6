package manifest

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Objects read from files have no creationTimestamp set by an API server, yet the
// graph gives a contested host or path to the older object, and falls back to names
// when ages are equal: a new file whose Ingress sorts first by name would take traffic
// from a working one. So every object gets an age here, and no two the same.
//
// An object that was seen before keeps the age it was given then: across edits, moves
// to another file, and (with a Memory, which `portico run` keeps in its state file)
// restarts. Any other object is newer than every object seen before. Objects new at
// the same load are ordered as they are read: files in reading order, then documents
// in the file. File modification times play no part: a `touch`, a `git checkout` or a
// copy of the tree rewrites them, and would hand a contested host to another object.

// book remembers, for each object of the last load: its age, the file that held its
// definition in force, and the version handed out. Its entries are updated in place, so
// that a reload at 10,000 files costs one map lookup per object here.
type book struct {
	entries map[objectKey]*entry
	// handed are the entries of the last Result's objects, in order.
	handed []*entry
	// last is the latest age given, which every new age must be after.
	last time.Time
	// loads counts loads, to tell the entries of objects seen by the current one.
	loads uint64
	now   func() time.Time
	// seeds are the ages of objects seen before this book (see Memory), for the first
	// load; nil after it.
	seeds map[objectKey]time.Time
}

type entry struct {
	at time.Time
	// file holds the definition in force, which wins over copies added elsewhere, at
	// index in the file.
	file  string
	index int
	// obj is the version handed out; nil until the end of the load that added it.
	obj  runtime.Object
	seen uint64 // the last load that had the object
}

func newBook(now func() time.Time) book {
	return book{entries: map[objectKey]*entry{}, now: now}
}

// held reports the file that held key's definition at the previous load.
func (b *book) held(key objectKey) (string, bool) {
	e, ok := b.entries[key]
	if !ok {
		return "", false
	}
	return e.file, true
}

// stamp sets the creationTimestamp of objs (placed as places, index for index),
// replacing an object that earlier Results handed out by a copy rather than
// modifying it, and returns their entries, index for index. Objects no longer present
// are forgotten by diff: if they come back, they are new.
func (b *book) stamp(objs []runtime.Object, places []placement) []*entry {
	b.loads++
	ents := make([]*entry, len(objs))
	// In reading order, since places are.
	var fresh []int
	for i, p := range places {
		e, ok := b.entries[p.key]
		if !ok {
			fresh = append(fresh, i)
			continue
		}
		e.file, e.index, e.seen = p.file, p.objIndex, b.loads
		ents[i] = e
	}
	fresh = b.reseed(places, fresh, ents)
	// Wall clock only: the monotonic reading would make comparisons of ages restored
	// from a Memory and of new ones use different clocks.
	now := b.now().Round(0)
	for _, i := range fresh {
		b.enter(places[i], now, ents, i)
	}

	for i, obj := range objs {
		at := ents[i].at
		acc, err := meta.Accessor(obj)
		if err != nil || acc.GetCreationTimestamp().Time.Equal(at) {
			continue
		}
		if places[i].shared {
			obj = obj.DeepCopyObject()
			objs[i] = obj
			acc, _ = meta.Accessor(obj)
		}
		acc.SetCreationTimestamp(metav1.NewTime(at))
	}
	return ents
}

// reseed gives the objects of fresh (indexes in places) that the seeds know their
// ages, oldest first, and returns the others. It runs once, at the first load: seeds
// are forgotten after it, so that an object removed and added back later is new.
func (b *book) reseed(places []placement, fresh []int, ents []*entry) []int {
	if b.seeds == nil {
		return fresh
	}
	seeds := b.seeds
	b.seeds = nil
	var known, unknown []int
	for _, i := range fresh {
		if _, ok := seeds[places[i].key]; ok {
			known = append(known, i)
		} else {
			unknown = append(unknown, i)
		}
	}
	// Oldest first, so that enter keeps their order and makes equal ages (a state file
	// edited by hand) distinct in reading order.
	slices.SortStableFunc(known, func(i, j int) int { return seeds[places[i].key].Compare(seeds[places[j].key]) })
	for _, i := range known {
		b.enter(places[i], seeds[places[i].key], ents, i)
	}
	return unknown
}

// enter records the object placed at p, new to the book, as ents[i], with the age at
// or, if that is not after the latest age given, just after that.
func (b *book) enter(p placement, at time.Time, ents []*entry, i int) {
	if !at.After(b.last) {
		at = b.last.Add(time.Nanosecond)
	}
	b.last = at
	e := &entry{at: at, file: p.file, index: p.objIndex, seen: b.loads}
	b.entries[p.key] = e
	ents[i] = e
}

// reader loads a directory again and again, remembering what it needs to from one
// load to the next: each file's last good version, what each file held when last
// read, each object's age, the objects handed out, and the files of the last walk.
type reader struct {
	good  lastGood
	cache *fileCache
	book  book
	// walked are the files read, in reading order, as read (before last good versions
	// stand in for broken ones); state is the tree they were read from. state.dirs is
	// nil until a load succeeds, and after one fails.
	walked []fileLoad
	state  walkState
	// dups has every definition, in reading order, of the keys defined more than once
	// at the last load.
	dups map[objectKey][]defRef
	// noObjects leaves Objects out of Results (see WatchChanges), and objects nil.
	noObjects bool
	// objects and problems are the last Result's, which an update patches (see
	// refinish): book.handed are the objects' entries.
	objects  []runtime.Object
	problems []Problem
	// standing are the paths of the broken files whose last good version is in force.
	standing map[string]bool
}

func newReader(now func() time.Time) *reader {
	return &reader{good: lastGood{}, cache: newFileCache(), book: newBook(now)}
}

// load reads dir like LoadDir, substituting last good versions for broken files.
func (r *reader) load(dir string, log *slog.Logger) (*Result, error) {
	r.walked, r.state = nil, walkState{}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	walked, state := readDir(dir, entries, log, r.cache)
	state.linkDirs = linkDirsOf(state.links)
	r.walked, r.state = walked, state
	return r.finish(dir, log), nil
}

// finish turns the files of r.walked into a Result.
func (r *reader) finish(dir string, log *slog.Logger) *Result {
	files := r.good.retain(r.walked)
	clear(r.standing)
	for _, f := range r.walked {
		r.standIn(f.path, r.good.standsIn(f))
	}
	res, places, dups := assemble(files, r.book.held)
	ents := r.book.stamp(res.Objects, places)
	res.Changes = r.book.diff(res.Objects, ents, r.book.handed)
	keep(files, places, res.Objects)
	for i := range r.walked {
		r.walked[i].shared = true
	}
	r.book.handed, r.dups, r.objects, r.problems = ents, dups, res.Objects, res.Problems
	if r.noObjects {
		res.Objects, r.objects = nil, nil
	}
	res.LastGood = r.lastGoodFiles()
	log.Debug("manifest: loaded", "dir", dir, "files", len(files), "read", r.cache.reads, "decoded", r.cache.decodes,
		"objects", len(r.book.handed), "changes", len(res.Changes))
	return res
}

// keep makes files (placed as places, index for index with objs) hold the objects handed
// out, for the next load: their versions are kept (walk, cache, last good), so that an
// object whose file does not change is neither copied again to be stamped nor compared
// again. The caller marks the files shared: from then on, Results hold their objects.
func keep(files []fileLoad, places []placement, objs []runtime.Object) {
	for i, p := range places {
		files[p.fileIndex].objs[p.objIndex] = objs[i]
	}
}
