package manifest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
// as it would in a cluster: objects are ordered by their file's modification
// time, then by the order the files are read in, then by their order in the
// file, and no two objects get the same timestamp.
func LoadDir(dir string) (*Result, error) {
	return loadDir(dir, slog.Default())
}

func loadDir(dir string, log *slog.Logger) (*Result, error) {
	// A fresh reader remembers nothing: every broken file is reported as it is, and
	// every object is as old as its file.
	return newReader(time.Now).load(dir, log)
}

// readDir decodes every manifest file under dir, file by file, taking the files that
// did not change from cache. It returns the files in reading order, and what an update
// needs to know of the tree (see walkState).
func readDir(dir string, entries []fs.DirEntry, log *slog.Logger, cache *fileCache) ([]fileLoad, walkState) {
	l := loader{log: log, cache: cache, state: walkState{dirs: map[string]bool{filepath.Clean(dir): true}}}
	cache.begin()
	l.walk(dir, entries)
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
}

// fileLoad is what one file decoded to.
type fileLoad struct {
	path     string
	modTime  time.Time
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
	f, err := l.cache.file(path, l.log)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) { // else removed meanwhile
			l.fileProblem(path, err.Error())
		}
		return
	}
	l.files = append(l.files, f)
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
	modTime   time.Time
	shared    bool
}

// objRef is an object of a load: the index of its file, and its index in the file.
type objRef struct{ file, obj int }

// assemble joins the files' objects and problems into one Result. When the same object
// (kind, namespace, name) is defined more than once, one definition is kept: the one in
// the file that held the definition in force before (held reports that file), so a
// copy added elsewhere never replaces a working object; otherwise the first one.
// The placements are those of res.Objects, index for index.
func assemble(files []fileLoad, held func(objectKey) (string, bool)) (*Result, []placement) {
	total := 0
	for _, f := range files {
		total += len(f.objs)
	}
	first := make(map[objectKey]objRef, total)
	// dups has every definition of the keys defined more than once, a rare case.
	var dups map[objectKey][]objRef
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
				dups = map[objectKey][]objRef{}
			}
			if dups[key] == nil {
				dups[key] = []objRef{d}
			}
			dups[key] = append(dups[key], objRef{fi, i})
		}
	}
	winner := func(key objectKey) objRef {
		ds := dups[key]
		if path, ok := held(key); ok {
			for _, d := range ds {
				if files[d.file].path == path {
					return d
				}
			}
		}
		return ds[0]
	}

	res := &Result{Objects: make([]runtime.Object, 0, total)}
	places := make([]placement, 0, total)
	for fi, f := range files {
		res.Problems = append(res.Problems, f.problems...)
		for i, obj := range f.objs {
			key := f.keys[i]
			if key == (objectKey{}) {
				continue
			}
			if _, dup := dups[key]; dup {
				if w := winner(key); w != (objRef{fi, i}) {
					pos, kept := f.lines[i], files[w.file].lines[w.obj]
					res.Problems = append(res.Problems, Problem{
						File: pos.file, Line: pos.line, Document: pos.docIndx,
						Reason: fmt.Sprintf("%s is already defined at %s:%d (document %d); this definition is ignored",
							key, kept.file, kept.line, kept.docIndx),
					})
					continue
				}
			}
			res.Objects = append(res.Objects, obj)
			places = append(places, placement{key: key, file: f.path, fileIndex: fi, objIndex: i, modTime: f.modTime, shared: f.shared})
		}
	}
	return res, places
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
