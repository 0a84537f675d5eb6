package manifest

import (
	"cmp"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
)

// A reload after an edit used to walk the whole tree and stat every file: at 10,000
// files, 40-75 ms of CPU for one file changed. The watcher knows which names changed, so
// update looks at those only, and takes everything else from the last walk. It gives up
// (and the watcher walks everything) whenever the names alone cannot tell what a walk
// would read: a directory, a symbolic link, a name in a directory holding links or their
// targets, a name outside the directories walked.

// walkState is what an update needs to know of the tree a full walk read.
type walkState struct {
	// dirs are the directories walked, root included, as the walk names them.
	dirs map[string]bool
	// links are the symbolic links to manifests met.
	links []string
	// linkDirs are the directories, free of symbolic links, holding the links or any
	// link or target on their way: a change there may change what a link leads to.
	linkDirs map[string]bool
}

// fileChange is what a path changed to: a file as a walk would read it, or nothing.
type fileChange struct {
	path    string
	present bool
	load    fileLoad
}

// pathKind is what a walk would do with a path.
type pathKind int

const (
	skipped    pathKind = iota // gone, ignored, or not a manifest
	notRegular                 // a manifest name on a device, fifo or socket
	regular                    // a manifest file to read
)

// update reloads dir after changes to paths only. It reports false, having changed
// nothing, when the paths cannot be accounted for precisely, or there was no complete
// walk to start from: a full load is needed then.
func (r *reader) update(dir string, paths []string, log *slog.Logger) (*Result, bool) {
	if r.state.dirs == nil {
		return nil, false
	}
	paths = slices.Clone(paths)
	for i, p := range paths {
		paths[i] = filepath.Clean(p)
	}
	slices.SortFunc(paths, walkOrder)
	paths = slices.Compact(paths)
	kinds := make([]pathKind, len(paths))
	for i, p := range paths {
		k, ok := r.state.kind(p)
		if !ok {
			return nil, false
		}
		kinds[i] = k
	}
	before := r.inForce(paths)
	r.cache.reads, r.cache.decodes = 0, 0
	changes := make([]fileChange, len(paths))
	for i, p := range paths {
		changes[i] = r.reread(p, kinds[i], log)
	}
	r.walked = mergeWalk(r.walked, changes)
	return r.refinish(dir, paths, before, log), true
}

// kind tells what a walk would do with path, or false when a full walk is needed.
func (s *walkState) kind(path string) (pathKind, bool) {
	dir := filepath.Dir(path)
	if s.dirs[path] || !s.dirs[dir] {
		return 0, false
	}
	if len(s.linkDirs) > 0 {
		real, err := filepath.EvalSymlinks(dir)
		if err == nil {
			real, err = filepath.Abs(real)
		}
		if err != nil || s.linkDirs[real] {
			return 0, false
		}
	}
	name := filepath.Base(path)
	if ignoredName(name) {
		return skipped, true
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return skipped, true
	case err != nil, fi.Mode()&fs.ModeSymlink != 0, fi.IsDir():
		return 0, false
	case !hasManifestExt(name):
		return skipped, true
	case !fi.Mode().IsRegular():
		return notRegular, true
	}
	return regular, true
}

// reread returns what a walk would read at path, which is of kind k.
func (r *reader) reread(path string, k pathKind, log *slog.Logger) fileChange {
	if k == regular {
		f, err := r.cache.file(path, log)
		switch {
		case err == nil:
			return fileChange{path: path, present: true, load: f}
		case !errors.Is(err, fs.ErrNotExist): // else removed meanwhile
			return fileChange{path: path, present: true, load: problemLoad(path, err.Error())}
		}
		return fileChange{path: path}
	}
	// The walk's cache forgets the files it does not read.
	delete(r.cache.entries, path)
	if k == notRegular {
		return fileChange{path: path, present: true, load: problemLoad(path, "not a regular file")}
	}
	return fileChange{path: path}
}

// linkDirsOf returns the directories holding links or their targets (see walkState).
func linkDirsOf(links []string) map[string]bool {
	if len(links) == 0 {
		return nil
	}
	dirs := map[string]bool{}
	for _, link := range links {
		for _, p := range linkPath(link) {
			dirs[filepath.Dir(p)] = true
		}
	}
	return dirs
}

// mergeWalk applies changes, sorted in reading order and one per path, to the files of
// a walk, which the reader alone holds. An edit replaces its file in place, and so does
// an addition or removal of a few files: moving the files after it by one costs a
// fraction of copying the whole list, which every edit of a large tree paid. A
// name that was not there and still is not, such as an editor's temporary file, changes
// nothing. Many additions or removals at once are merged into a new list in one pass.
func mergeWalk(walked []fileLoad, changes []fileChange) []fileLoad {
	at, found := make([]int, len(changes)), make([]bool, len(changes))
	moves := 0
	for i, c := range changes {
		at[i], found[i] = findFile(walked, c.path)
		if found[i] != c.present {
			moves++
		}
	}
	if moves > maxMovesInPlace {
		return mergeSorted(walked, changes)
	}
	// Back to front, so that each index found above stays right.
	for i := len(changes) - 1; i >= 0; i-- {
		c, j := changes[i], at[i]
		switch {
		case found[i] && c.present:
			walked[j] = c.load
		case found[i]:
			walked = slices.Delete(walked, j, j+1)
		case c.present:
			walked = slices.Insert(walked, j, c.load)
		}
	}
	return walked
}

// maxMovesInPlace is how many files mergeWalk adds or removes in place: each moves the
// files after it.
const maxMovesInPlace = 4

// mergeSorted merges changes, sorted in reading order, into walked.
func mergeSorted(walked []fileLoad, changes []fileChange) []fileLoad {
	out := make([]fileLoad, 0, len(walked)+len(changes))
	i := 0
	add := func(c fileChange) {
		if c.present {
			out = append(out, c.load)
		}
	}
	for _, f := range walked {
		for ; i < len(changes) && walkOrder(changes[i].path, f.path) < 0; i++ {
			add(changes[i])
		}
		if i < len(changes) && changes[i].path == f.path {
			add(changes[i])
			i++
			continue
		}
		out = append(out, f)
	}
	for _, c := range changes[i:] {
		add(c)
	}
	return out
}

// walkOrder compares two paths under one root in the order LoadDir reads them:
// directory entries sorted by name, depth first. That is comparing them name by name,
// which is comparing the strings with the separator below every other byte.
func walkOrder(a, b string) int {
	for i := range min(len(a), len(b)) {
		ca, cb := a[i], b[i]
		switch {
		case ca == cb:
			continue
		case ca == filepath.Separator:
			return -1
		case cb == filepath.Separator:
			return 1
		}
		return cmp.Compare(ca, cb)
	}
	return cmp.Compare(len(a), len(b))
}
