package runstate

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultPath is where `portico run --manifests dir` keeps its state unless told
// otherwise: $XDG_STATE_HOME/portico/run/NAME-HASH.json, or ~/.local/state/... when
// XDG_STATE_HOME is not set, NAME being dir's base name and HASH a hash of its absolute
// path. Not in dir itself: a tree may be read-only (a mounted ConfigMap, a shared
// checkout), and a file there would show in `git status` and travel with copies.
// dir's path is not resolved through symbolic links, so that a link swapped to another
// checkout of the same manifests keeps the state.
func DefaultPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	base := os.Getenv("XDG_STATE_HOME")
	// The XDG specification says a relative path there is invalid, to be ignored.
	if base == "" || !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no directory for the state file (neither XDG_STATE_HOME nor HOME is set): %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(base, "portico", "run", fileName(filepath.Base(abs))+"-"+hex.EncodeToString(sum[:8])+".json"), nil
}

// fileName makes a directory's base name fit for a file name that people can read.
func fileName(base string) string {
	const maxLen = 40
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, base)
	name = strings.TrimLeft(name, ".")
	if len(name) > maxLen {
		name = name[:maxLen]
	}
	if name == "" {
		name = "manifests"
	}
	return name
}

// Load returns the state kept at path for the manifests in dir. It never fails: a
// missing file is a first start (an empty State); a file that cannot be read or used
// (corrupt, truncated, of another format version) is logged at WARN, moved aside to
// path+".bad" so that someone can look at it, and an empty State is returned, which
// the manifests rebuild.
func Load(path, dir string, log *slog.Logger) State {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		log.Info("no run state saved yet: objects are as old as their order in the manifests", "state_file", path)
		return State{}
	case err != nil:
		log.Warn("cannot read the run state; starting as on a first start, and writing it again: check the file's permissions, or pass --state-file",
			"state_file", path, "err", err)
		return State{}
	}
	s, err := decode(data, dir)
	if err != nil {
		aside := path + ".bad"
		attrs := []any{"state_file", path, "reason", err.Error()}
		if rerr := os.Rename(path, aside); rerr != nil {
			attrs = append(attrs, "move_aside_err", rerr.Error())
		} else {
			attrs = append(attrs, "moved_to", aside)
		}
		log.Warn("run state unusable; moved aside and rebuilt from the manifests as on a first start: a host that two objects claim goes to the one read first, and a broken file or object has no last good version to serve until fixed",
			attrs...)
		return State{}
	}
	log.Info("run state restored", "state_file", path, "objects", len(s.Ages), "last_good_files", len(s.LastGood), "last_valid_objects", len(s.LastValid))
	return s
}

// Write saves s, for the manifests in dir, at path, atomically: a reader of path, or a
// crash at any moment, finds the previous file or the new one, whole.
func Write(path string, s State, dir string) error {
	return writeAtomic(path, func(w io.Writer) error { return encode(w, s, dir, time.Now()) })
}

// writeAtomic writes a file at path with write: into a temporary file in the same
// directory, synced to disk, then renamed over path. On any error the temporary file
// is removed and path is left as it was.
func writeAtomic(path string, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	// Private: a last good version may hold a Secret.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 64<<10)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	// The rename is durable once the directory is; a failure here leaves a whole file
	// either way.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
