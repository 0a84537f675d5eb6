package contourdiff

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/source/manifest"
)

// Finding is a field of one object that would behave differently in Portico.
type Finding struct {
	File   string // as found under the directory checked
	Object string // "HTTPProxy namespace/name"
	Field  string
	*Difference
}

// String is the finding on one line: where, then what Contour does, what Portico
// does, and what to do.
func (f Finding) String() string {
	return fmt.Sprintf("%s: %s: %s: Contour: %s; Portico: %s; do: %s", f.File, f.Object, f.Field, f.Contour, f.Portico, f.Do)
}

// Find returns the findings of objs, read from file, in object and list order; in
// holds every object checked with them.
func Find(file string, objs []runtime.Object, in *Objects) []Finding {
	var out []Finding
	for _, o := range objs {
		for i := range Differences {
			d := &Differences[i]
			var fields []string
			var object string
			switch o := o.(type) {
			case *contourv1.HTTPProxy:
				if d.proxy != nil {
					fields, object = d.proxy(o, in), "HTTPProxy "+o.Namespace+"/"+o.Name
				}
			case *corev1.Service:
				if d.service != nil {
					fields, object = d.service(o), "Service "+o.Namespace+"/"+o.Name
				}
			}
			for _, f := range fields {
				out = append(out, Finding{File: file, Object: object, Field: f, Difference: d})
			}
		}
	}
	return out
}

// CheckDir returns the findings of every manifest under dir (*.yaml, *.yml, *.json,
// hidden files and directories skipped, as `portico run` reads them), files in path
// order, with the documents that could not be read.
func CheckDir(dir string) ([]Finding, []manifest.Problem, error) {
	type file struct {
		path string
		objs []runtime.Object
	}
	var files []file
	var all []runtime.Object
	var problems []manifest.Problem
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !isManifest(path) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		objs, probs := manifest.Decode(path, data)
		problems = append(problems, probs...)
		files = append(files, file{path, objs})
		all = append(all, objs...)
		return nil
	})
	in := NewObjects(all)
	var out []Finding
	for _, f := range files {
		out = append(out, Find(f.path, f.objs, in)...)
	}
	return out, problems, err
}

func isManifest(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// Table is docs/contour.md's table of the differences, in Markdown.
func Table() string {
	var b strings.Builder
	b.WriteString("| field | Contour | Portico | what to do | now |\n|---|---|---|---|---|\n")
	for _, d := range Differences {
		field := "(every object)"
		if d.Field != "" {
			field = "`" + d.Field + "`"
		}
		do := d.Do
		if do == "" {
			do = "nothing"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", field, d.Contour, d.Portico, do, d.Status)
	}
	return b.String()
}
