package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"k8s.io/apimachinery/pkg/runtime"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
)

// LoadDir reads every *.yaml, *.yml and *.json file under dir, recursively,
// in sorted order (directory entries by name, depth first), skipping hidden
// files and directories (names starting with ".", such as .git, or the
// ..data directories of Kubernetes ConfigMap volumes) and editor temporary
// files (*~, .#*, #*#, *.swp, ...). Symbolic links to files are followed,
// symbolic links to directories are not. Only dir itself may be a symbolic
// link to a directory.
//
// A file or subdirectory that cannot be read is a Problem; the error is
// only for dir itself not being a readable directory. When the same object
// (kind, namespace, name) is defined more than once, the first definition is
// kept and each later one is a Problem.
func LoadDir(dir string) (*Result, error) {
	return loadDir(dir, slog.Default())
}

func loadDir(dir string, log *slog.Logger) (*Result, error) {
	// A fresh lastGood remembers nothing, so every broken file is reported as it is.
	return lastGood{}.load(dir, log)
}

// readDir decodes every manifest file under dir, file by file.
func readDir(dir string, entries []fs.DirEntry, log *slog.Logger) []fileLoad {
	l := loader{log: log}
	l.walk(dir, entries)
	return l.files
}

type objectKey struct{ kind, namespace, name string }

type position struct {
	file          string
	line, docIndx int
}

type loader struct {
	log   *slog.Logger
	files []fileLoad
}

// fileLoad is what one file decoded to.
type fileLoad struct {
	path     string
	objs     []runtime.Object
	lines    []position
	problems []Problem
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
	data, err := os.ReadFile(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) { // else removed meanwhile
			l.fileProblem(path, "cannot read: "+err.Error())
		}
		return
	}
	d := decoder{file: path, log: l.log}
	d.decodeFile(data)
	f := fileLoad{path: path, objs: d.objs, problems: d.probs}
	for i := range d.objs {
		f.lines = append(f.lines, position{file: path, line: d.objLines[i].line, docIndx: d.objLines[i].index})
	}
	l.files = append(l.files, f)
}

// assemble joins the files' objects and problems into one Result. When the same object
// (kind, namespace, name) is defined more than once, the first definition is kept.
func assemble(files []fileLoad) *Result {
	res := &Result{}
	seen := map[objectKey]position{}
	for _, f := range files {
		res.Problems = append(res.Problems, f.problems...)
		for i, obj := range f.objs {
			acc, err := meta.Accessor(obj)
			if err != nil { // cannot happen for the kept kinds
				continue
			}
			key := objectKey{obj.GetObjectKind().GroupVersionKind().Kind, acc.GetNamespace(), acc.GetName()}
			pos := f.lines[i]
			if first, dup := seen[key]; dup {
				what := key.kind + " " + key.name
				if key.namespace != "" {
					what = key.kind + " " + key.namespace + "/" + key.name
				}
				res.Problems = append(res.Problems, Problem{
					File: pos.file, Line: pos.line, Document: pos.docIndx,
					Reason: fmt.Sprintf("%s is already defined at %s:%d (document %d); this definition is ignored",
						what, first.file, first.line, first.docIndx),
				})
				continue
			}
			seen[key] = pos
			res.Objects = append(res.Objects, obj)
		}
	}
	return res
}

func (l *loader) fileProblem(path, reason string) {
	l.files = append(l.files, fileLoad{path: path, problems: []Problem{{File: path, Reason: reason}}})
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
