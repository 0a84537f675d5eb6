package manifest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/portico-dev/portico/internal/parallel"
)

// MaxFileSize is the largest manifest file read. A bigger file is refused with a
// Problem instead of being read into memory: it is far beyond any hand-written set of
// manifests, and more likely a log, a dump or a disk image given a .yaml name.
const MaxFileSize = 8 << 20

// LoadDir reads every *.yaml, *.yml and *.json file under dir, recursively,
// in sorted order (directory entries by name, depth first), skipping hidden
// files and directories (names starting with ".", such as .git, or the
// ..data directories of Kubernetes ConfigMap volumes) and editor temporary
// files (*~, .#*, #*#, *.swp, ...). Symbolic links to files are followed,
// symbolic links to directories are not. Only dir itself may be a symbolic
// link to a directory.
//
// A file or subdirectory that cannot be read, or a file larger than
// MaxFileSize, is a Problem; the error is only for dir itself not being a
// readable directory. When the same object (kind, namespace, name) is defined
// more than once, the first definition is kept and each later one is a
// Problem.
//
// Every object's metadata.creationTimestamp is set to its age, replacing any
// the manifest has, so that the oldest object keeps a contested host or path
// as it would in a cluster: objects are as old as the order they are read in
// (files in reading order, then documents in the file), and no two objects get
// the same timestamp. File modification times play no part.
func LoadDir(dir string) (*Result, error) {
	return loadDir(dir, slog.Default())
}

func loadDir(dir string, log *slog.Logger) (*Result, error) {
	// A fresh reader remembers nothing: every broken file is reported as it is, and
	// objects are as old as their order in the tree.
	return newReader(time.Now).load(dir, log)
}

// readDir decodes every manifest file under dir, file by file, taking the files that
// did not change from cache. It returns the files in reading order, and what an update
// needs to know of the tree (see walkState).
func readDir(dir string, entries []fs.DirEntry, log *slog.Logger, cache *fileCache) ([]fileLoad, walkState) {
	l := loader{log: log, cache: cache, state: walkState{dirs: map[string]bool{filepath.Clean(dir): true}}}
	cache.begin()
	l.walk(dir, entries)
	l.fetchPending()
	cache.end()
	return l.files, l.state
}

// objectKey identifies an object across loads. The group is part of it: contour.heptio.com
// and projectcontour.io both have a TLSCertificateDelegation.
type objectKey struct{ group, kind, namespace, name string }

func (k objectKey) String() string {
	kind := k.kind
	if kindInGroups(k.kind) > 1 {
		kind = schema.GroupKind{Group: k.group, Kind: k.kind}.String()
	}
	if k.namespace == "" {
		return kind + " " + k.name
	}
	return kind + " " + k.namespace + "/" + k.name
}

// kindInGroups returns the number of groups Portico reads kind from.
func kindInGroups(kind string) int {
	n := 0
	for gk := range kinds().keptByKind {
		if gk.Kind == kind {
			n++
		}
	}
	return n
}

type position struct {
	file          string
	line, docIndx int
}

type loader struct {
	log   *slog.Logger
	cache *fileCache
	files []fileLoad
	state walkState
	// pending are the indexes in files of the files the walk met, each a
	// placeholder with only its path until fetchPending.
	pending []int
}

// fileLoad is what one file decoded to.
type fileLoad struct {
	path     string
	objs     []runtime.Object
	keys     []objectKey // of objs, index for index; zero for an object without metadata
	lines    []position
	problems []Problem
	// shared is set when objs are a version kept from an earlier load, which
	// earlier Results handed out: they must not be modified any more.
	shared bool
}

func (l *loader) walk(dir string, entries []fs.DirEntry) {
	for _, e := range entries {
		name := e.Name()
		if ignoredName(name) {
			continue
		}
		path := filepath.Join(dir, name)
		mode := e.Type()
		if mode&fs.ModeSymlink != 0 {
			if hasManifestExt(name) {
				l.state.links = append(l.state.links, path)
			}
			fi, err := os.Stat(path)
			if err != nil {
				if hasManifestExt(name) {
					l.fileProblem(path, "cannot read: "+err.Error())
				}
				continue
			}
			if fi.IsDir() {
				l.log.Debug("manifest: not following symbolic link to a directory", "path", path)
				continue
			}
			mode = fi.Mode().Type()
		}
		switch {
		case mode.IsDir():
			l.state.dirs[path] = true
			sub, err := os.ReadDir(path)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) { // else removed meanwhile
					l.fileProblem(path, "cannot read directory: "+err.Error())
				}
				// os.ReadDir returns the entries it could read.
			}
			l.walk(path, sub)
		case !hasManifestExt(name):
			continue
		case !mode.IsRegular():
			l.fileProblem(path, "not a regular file")
		default:
			l.file(path)
		}
	}
}

func (l *loader) file(path string) {
	l.pending = append(l.pending, len(l.files))
	l.files = append(l.files, fileLoad{path: path})
}

// fetchPending reads and decodes the files the walk met, on every core when there are
// many: reading and decoding them was most of the time `portico run` takes to be ready
// at 10,000 files, on one core. The cache is only read meanwhile, and updated after.
func (l *loader) fetchPending() {
	results := make([]fetched, len(l.pending))
	paths := make([]string, len(l.pending))
	_ = parallel.Do(len(l.pending), func(i int) error {
		at := l.pending[i]
		paths[i] = l.files[at].path
		l.files[at], results[i] = fetch(paths[i], l.cache.entries[paths[i]], l.log)
		return nil
	})
	gone := false
	for i, at := range l.pending {
		path, r := paths[i], results[i]
		l.cache.commit(path, r)
		switch {
		case r.err == nil:
		case errors.Is(r.err, fs.ErrNotExist): // removed meanwhile
			l.files[at], gone = fileLoad{}, true
		default:
			l.files[at] = problemLoad(path, r.err.Error())
		}
	}
	if gone {
		l.files = slices.DeleteFunc(l.files, func(f fileLoad) bool { return f.path == "" })
	}
	l.pending = nil
}

// readManifest reads a regular file of at most MaxFileSize bytes, and returns its
// stat. Errors say what went wrong in words fit for a Problem.
func readManifest(path string) ([]byte, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read: %w", err)
	}
	defer f.Close()
	// Stat the opened file, not the path: that is the file read below even if the
	// path is swapped meanwhile.
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read: %w", err)
	}
	if fi.Size() > MaxFileSize {
		return nil, nil, fmt.Errorf("file is %s, over the %s limit for one manifest file; split it into smaller files", sizeString(fi.Size()), sizeString(MaxFileSize))
	}
	// The file may grow after the stat: never read more than the limit allows.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, nil, fmt.Errorf("file grew over the %s limit for one manifest file while being read; split it into smaller files", sizeString(MaxFileSize))
	}
	return data, fi, nil
}

// sizeString formats a size in bytes for people: "8 MiB", "12.5 MiB", "900 bytes".
func sizeString(n int64) string {
	const mib = 1 << 20
	switch {
	case n >= mib && n%mib == 0:
		return fmt.Sprintf("%d MiB", n/mib)
	case n >= mib:
		return fmt.Sprintf("%.1f MiB", float64(n)/mib)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// placement is where a kept object of a Result comes from, for giving it its age.
type placement struct {
	key       objectKey
	file      string
	fileIndex int // in reading order
	objIndex  int // in the file
	shared    bool
}

// defRef is one definition of an object: the file, and the object's index there.
type defRef struct {
	path string
	obj  int
}

// assemble joins the files' objects and problems into one Result. When the same object
// (kind, namespace, name) is defined more than once, one definition is kept: the one in
// the file that held the definition in force before (held reports that file), so a
// copy added elsewhere never replaces a working object; otherwise the first one.
// The placements are those of res.Objects, index for index; dups has every definition,
// in reading order, of the keys defined more than once.
func assemble(files []fileLoad, held func(objectKey) (string, bool)) (res *Result, places []placement, dups map[objectKey][]defRef) {
	total := 0
	for _, f := range files {
		total += len(f.objs)
	}
	a := assembler{dups: duplicates(files, total), held: held, file: func(path string) fileLoad {
		i, _ := findFile(files, path)
		return files[i]
	}}
	res = &Result{Objects: make([]runtime.Object, 0, total)}
	places = make([]placement, 0, total)
	for fi, f := range files {
		places = a.add(res, places, f, fi)
	}
	return res, places, a.dups
}

// duplicates returns every definition, in reading order, of the keys the files define
// more than once: a rare case, kept out of the map of all keys.
func duplicates(files []fileLoad, total int) map[objectKey][]defRef {
	type objRef struct{ file, obj int }
	first := make(map[objectKey]objRef, total)
	var dups map[objectKey][]defRef
	for fi, f := range files {
		for i, key := range f.keys {
			if key == (objectKey{}) {
				continue
			}
			d, ok := first[key]
			if !ok {
				first[key] = objRef{fi, i}
				continue
			}
			if dups == nil {
				dups = map[objectKey][]defRef{}
			}
			if dups[key] == nil {
				dups[key] = []defRef{{files[d.file].path, d.obj}}
			}
			dups[key] = append(dups[key], defRef{f.path, i})
		}
	}
	return dups
}

// assembler adds files, in reading order, to a Result.
type assembler struct {
	// dups has every definition, in reading order, of the keys defined more than once
	// in the whole tree.
	dups map[objectKey][]defRef
	held func(objectKey) (string, bool)
	// file returns the version in force of the file at path, which is in the tree.
	file func(path string) fileLoad
}

// add appends f's problems to res, and its objects with their placements, f being the
// fi-th file of those placements; of an object defined more than once, only the
// definition in force is added, and every other one is a problem.
func (a *assembler) add(res *Result, places []placement, f fileLoad, fi int) []placement {
	res.Problems = append(res.Problems, f.problems...)
	for i, obj := range f.objs {
		key := f.keys[i]
		if key == (objectKey{}) {
			continue
		}
		if ds, dup := a.dups[key]; dup {
			if w := winner(ds, key, a.held); w != (defRef{f.path, i}) {
				pos, kept := f.lines[i], a.file(w.path).lines[w.obj]
				res.Problems = append(res.Problems, Problem{
					File: pos.file, Line: pos.line, Document: pos.docIndx,
					Reason: fmt.Sprintf("%s is already defined at %s:%d (document %d); this definition is ignored",
						key, kept.file, kept.line, kept.docIndx),
				})
				continue
			}
		}
		res.Objects = append(res.Objects, obj)
		places = append(places, placement{key: key, file: f.path, fileIndex: fi, objIndex: i, shared: f.shared})
	}
	return places
}

// winner returns which of key's definitions ds is in force: the first one in the file
// that held it before, or else the first one.
func winner(ds []defRef, key objectKey, held func(objectKey) (string, bool)) defRef {
	if path, ok := held(key); ok {
		for _, d := range ds {
			if d.path == path {
				return d
			}
		}
	}
	return ds[0]
}

// findFile returns the index of the file at path in files, sorted in reading order, or
// where it would be, and whether it is there.
func findFile(files []fileLoad, path string) (int, bool) {
	return slices.BinarySearchFunc(files, path, func(f fileLoad, p string) int { return walkOrder(f.path, p) })
}

// keyOf returns obj's key, or the zero key when obj has no metadata.
func keyOf(obj runtime.Object) objectKey {
	acc, err := meta.Accessor(obj)
	if err != nil { // cannot happen for the kept kinds
		return objectKey{}
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	return objectKey{gvk.Group, gvk.Kind, acc.GetNamespace(), acc.GetName()}
}

func (l *loader) fileProblem(path, reason string) {
	l.files = append(l.files, problemLoad(path, reason))
}

// problemLoad is a file that could not be read.
func problemLoad(path, reason string) fileLoad {
	return fileLoad{path: path, problems: []Problem{{File: path, Reason: reason}}}
}

// hasManifestExt reports whether name ends in .yaml, .yml or .json (in any
// case).
func hasManifestExt(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// ignoredName reports hidden files and directories and editor temporary
// files.
func ignoredName(name string) bool {
	switch {
	case strings.HasPrefix(name, "."), // hidden, .#lock files, .foo.swp
		strings.HasSuffix(name, "~"),                                 // backups
		strings.HasPrefix(name, "#") && strings.HasSuffix(name, "#"), // emacs auto-save
		name == "4913": // vim's write test file
		return true
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".swp", ".swo", ".swx", ".tmp", ".bak", ".orig", ".kate-swp":
		return true
	}
	return false
}
