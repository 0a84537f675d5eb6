// Package runstate keeps what `portico run` must remember across restarts in a small
// file: when each object was first seen (its age, which decides who owns a contested
// host or path), the last good version of each file that is broken, and the last valid
// version of each object whose edit made it invalid. Without it, a restart served a
// broken file or object as it was (its routes gone), and ages came from file times, so
// that a `touch` could hand a host to another object.
//
// The file is written atomically, off the reload path and coalesced (Saver); a file
// that is missing, unreadable, corrupt or of another format version is reported and
// rebuilt from the manifests, never fatal (Load).
package runstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/portico-dev/portico/internal/source/manifest"
)

// formatVersion is the version of the file's layout. A file of another version is not
// read (it is moved aside and rebuilt): bump it when a change would make an older
// Portico misread a newer file.
const formatVersion = 1

// formatName marks the file as what it is, for someone who finds it.
const formatName = "portico run state"

// State is what `portico run` remembers across restarts.
type State struct {
	// Ages are the ages of the objects in the manifests, by identity.
	Ages map[manifest.Identity]time.Time
	// LastGood are the last good versions standing in for files that are broken, with
	// paths as the manifest walk names them (the directory joined with the path
	// under it).
	LastGood []manifest.LastGoodFile
	// LastValid are the previous versions served in place of objects whose edit made
	// them invalid.
	LastValid []runtime.Object
}

// Memory is the part of s the manifest source starts from.
func (s State) Memory() manifest.Memory {
	return manifest.Memory{Ages: s.Ages, LastGood: s.LastGood}
}

// document is the file's layout. Paths are relative to the manifest directory, with
// slashes, so that the file stays valid for a copy of the tree.
type document struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Manifests is the directory the file was last written for; only for people: a
	// copy of the tree may be pointed at the same file.
	Manifests string    `json:"manifests"`
	Written   time.Time `json:"written"`
	// Ages are first-seen times by kind ("HTTPProxy.projectcontour.io"), namespace ("" for
	// cluster-wide kinds, such as IngressClass) and name; see ageTable.writeJSON.
	Ages             map[string]map[string]map[string]time.Time `json:"ages"`
	LastGoodFiles    []fileRecord                               `json:"lastGoodFiles,omitempty"`
	LastValidObjects []json.RawMessage                          `json:"lastValidObjects,omitempty"`
}

type fileRecord struct {
	Path    string         `json:"path"`
	Objects []objectRecord `json:"objects"`
}

type objectRecord struct {
	Line     int             `json:"line,omitempty"`
	Document int             `json:"document,omitempty"`
	Object   json.RawMessage `json:"object"`
}

// encode writes s, for the manifests in dir, to w.
func encode(w io.Writer, s State, dir string, now time.Time) error {
	return encodeTable(w, tableOf(s.Ages), s.LastGood, s.LastValid, dir, now)
}

// encodeTable writes a state whose ages are in ages. They are formatted by hand:
// encoding/json spent 35 ms of CPU on 30,000 of them, with its nested maps, sorted keys
// and indentation.
func encodeTable(w io.Writer, ages *ageTable, lastGood []manifest.LastGoodFile, lastValid []runtime.Object, dir string, now time.Time) error {
	head, err := json.Marshal(struct {
		Format    string    `json:"format"`
		Version   int       `json:"version"`
		Manifests string    `json:"manifests"`
		Written   time.Time `json:"written"`
	}{formatName, formatVersion, dir, now.UTC()})
	if err != nil {
		return err
	}
	var files []fileRecord
	for _, f := range lastGood {
		rel, err := filepath.Rel(dir, f.Path)
		if err != nil || !filepath.IsLocal(rel) {
			continue // not under dir: nothing a restart would read
		}
		rec := fileRecord{Path: filepath.ToSlash(rel), Objects: make([]objectRecord, len(f.Objects))}
		for i, o := range f.Objects {
			raw, err := json.Marshal(o.Object)
			if err != nil {
				return fmt.Errorf("%s: %w", manifest.IdentityOf(o.Object), err)
			}
			rec.Objects[i] = objectRecord{Line: o.Line, Document: o.Document, Object: raw}
		}
		files = append(files, rec)
	}
	var tail []byte
	if len(files) > 0 {
		raw, err := json.Marshal(files)
		if err != nil {
			return err
		}
		tail = append(append(tail, ",\n\"lastGoodFiles\":"...), raw...)
	}
	if len(lastValid) > 0 {
		raw, err := json.Marshal(lastValid)
		if err != nil {
			return err
		}
		tail = append(append(tail, ",\n\"lastValidObjects\":"...), raw...)
	}
	tail = append(tail, "}\n"...)

	head = append(head[:len(head)-1], `,"ages":`...) // the object stays open
	if _, err := w.Write(head); err != nil {
		return err
	}
	if err := ages.writeJSON(w); err != nil {
		return err
	}
	_, err = w.Write(tail)
	return err
}

// decode reads a state for the manifests in dir from data. Its errors say what is wrong
// with the file, in words for a log line.
func decode(data []byte, dir string) (State, error) {
	var head struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return State{}, fmt.Errorf("not a state file: %w", err)
	}
	switch {
	case head.Format != formatName:
		return State{}, fmt.Errorf("not a state file: format %q, want %q", head.Format, formatName)
	case head.Version > formatVersion:
		return State{}, fmt.Errorf("written by a newer Portico (format version %d; this one reads %d)", head.Version, formatVersion)
	case head.Version != formatVersion:
		return State{}, fmt.Errorf("format version %d, which this Portico does not read (it reads %d)", head.Version, formatVersion)
	}
	var doc document
	// Fields this version does not know are ignored: a later Portico may add some
	// (raising formatVersion only when what it writes cannot be read as this), and a
	// downgrade must not throw away the state.
	if err := json.Unmarshal(data, &doc); err != nil {
		return State{}, fmt.Errorf("unreadable: %w", err)
	}
	s := State{Ages: map[manifest.Identity]time.Time{}}
	for kind, byNS := range doc.Ages {
		gk := schema.ParseGroupKind(kind)
		if gk.Kind == "" {
			return State{}, fmt.Errorf("ages: %q is not a kind", kind)
		}
		for ns, byName := range byNS {
			for name, at := range byName {
				if name == "" || at.IsZero() {
					return State{}, fmt.Errorf("ages: %s %s/%q: no name or no time", kind, ns, name)
				}
				s.Ages[manifest.Identity{Group: gk.Group, Kind: gk.Kind, Namespace: ns, Name: name}] = at
			}
		}
	}
	for _, rec := range doc.LastGoodFiles {
		rel := filepath.FromSlash(rec.Path)
		if !filepath.IsLocal(rel) {
			return State{}, fmt.Errorf("lastGoodFiles: %q is not a path under the manifest directory", rec.Path)
		}
		f := manifest.LastGoodFile{Path: filepath.Join(dir, rel)}
		for i, o := range rec.Objects {
			obj, err := decodeObject(o.Object, s.Ages)
			if err != nil {
				return State{}, fmt.Errorf("lastGoodFiles: %s, object %d: %w", rec.Path, i+1, err)
			}
			f.Objects = append(f.Objects, manifest.LastGoodObject{Object: obj, Line: o.Line, Document: o.Document})
		}
		s.LastGood = append(s.LastGood, f)
	}
	for i, raw := range doc.LastValidObjects {
		obj, err := decodeObject(raw, s.Ages)
		if err != nil {
			return State{}, fmt.Errorf("lastValidObjects: object %d: %w", i+1, err)
		}
		s.LastValid = append(s.LastValid, obj)
	}
	return s, nil
}

// decodeObject decodes one object as a manifest would be, and gives it its age from
// ages: a creationTimestamp in JSON keeps whole seconds only, and ages must stay exact
// to keep their order.
func decodeObject(raw json.RawMessage, ages map[manifest.Identity]time.Time) (runtime.Object, error) {
	objs, probs := manifest.Decode("state.json", raw)
	if len(probs) > 0 {
		reasons := make([]string, len(probs))
		for i, p := range probs {
			reasons[i] = p.Reason
		}
		return nil, errors.New(strings.Join(reasons, "; "))
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("%d objects, want one", len(objs))
	}
	obj := objs[0]
	if at, ok := ages[manifest.IdentityOf(obj)]; ok {
		acc, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		acc.SetCreationTimestamp(metav1.NewTime(at))
	}
	return obj, nil
}

// sameFiles reports whether a and b are the same last good versions: the same paths and
// the very same objects, which are never modified once handed out.
func sameFiles(a, b []manifest.LastGoodFile) bool {
	return slices.EqualFunc(a, b, func(x, y manifest.LastGoodFile) bool {
		return x.Path == y.Path && slices.Equal(x.Objects, y.Objects)
	})
}
