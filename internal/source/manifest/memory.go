package manifest

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// What a reader remembers from one load to the next used to live in memory only: after
// a restart, a file saved broken lost its last good version (its routes went), and ages
// came from file times (a `touch` could hand a host to another object). A Memory is the
// part of it that decides what is served and who owns what, for a Watch to start from;
// `portico run` keeps it in its state file.

// Identity names an object across loads and restarts: its API group, kind, namespace
// and name. It is what ages are kept by.
type Identity struct{ Group, Kind, Namespace, Name string }

// IdentityOf returns obj's identity; the zero Identity for an object without metadata.
func IdentityOf(obj runtime.Object) Identity {
	k := keyOf(obj)
	return Identity{Group: k.group, Kind: k.kind, Namespace: k.namespace, Name: k.name}
}

func (id Identity) key() objectKey { return objectKey{id.Group, id.Kind, id.Namespace, id.Name} }

// String names the object as problems do ("HTTPProxy team-a/app").
func (id Identity) String() string { return id.key().String() }

// Memory is what a Watch starts from instead of nothing.
type Memory struct {
	// Ages are the ages objects were given before. An object found at the first load
	// keeps its age from here; any other object is newer than all of them.
	Ages map[Identity]time.Time
	// LastGood are last good versions of files (by path, as the walk names it: the
	// directory joined with the path under it). One stands in for its file at the first
	// load if the file is broken then; a clean file replaces it.
	LastGood []LastGoodFile
}

// LastGoodFile is the last good version of a file that is now broken, which stands in
// for it (see Result.LastGood).
type LastGoodFile struct {
	Path    string
	Objects []LastGoodObject
}

// LastGoodObject is one object of a LastGoodFile, with where its file had it.
type LastGoodObject struct {
	Object         runtime.Object
	Line, Document int
}

// remember seeds r with mem, before its first load.
func (r *reader) remember(mem Memory) {
	if len(mem.Ages) > 0 {
		r.book.seeds = make(map[objectKey]time.Time, len(mem.Ages))
		for id, at := range mem.Ages {
			r.book.seeds[id.key()] = at
		}
	}
	for _, f := range mem.LastGood {
		load := fileLoad{path: f.Path}
		for _, o := range f.Objects {
			load.objs = append(load.objs, o.Object)
			load.keys = append(load.keys, keyOf(o.Object))
			load.lines = append(load.lines, position{file: f.Path, line: o.Line, docIndx: o.Document})
		}
		r.good[f.Path] = load
	}
}

// standIn records whether the version in force of the file at path is its last good
// version (the file is broken), for Result.LastGood.
func (r *reader) standIn(path string, yes bool) {
	switch {
	case yes:
		if r.standing == nil {
			r.standing = map[string]bool{}
		}
		r.standing[path] = true
	case r.standing != nil:
		delete(r.standing, path)
	}
}

// lastGoodFiles returns the last good versions standing in for broken files, in reading
// order; nil when no file is broken.
func (r *reader) lastGoodFiles() []LastGoodFile {
	if len(r.standing) == 0 {
		return nil
	}
	out := make([]LastGoodFile, 0, len(r.standing))
	for path := range r.standing {
		good := r.good[path]
		f := LastGoodFile{Path: path, Objects: make([]LastGoodObject, len(good.objs))}
		for i, obj := range good.objs {
			f.Objects[i] = LastGoodObject{Object: obj, Line: good.lines[i].line, Document: good.lines[i].docIndx}
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b LastGoodFile) int { return walkOrder(a.Path, b.Path) })
	return out
}
