package manifest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

const (
	// defaultDebounce is used when Watch is given a debounce <= 0.
	defaultDebounce = 100 * time.Millisecond
	// maxWaitFactor bounds how long a steady stream of events can postpone
	// a reload: at most maxWaitFactor*debounce after the first event.
	maxWaitFactor = 4
	// rootPollInterval is how often the directory itself is checked for
	// having been removed, re-created or replaced (e.g. a symbolic link
	// swapped to another directory), which no event on it can tell.
	rootPollInterval = 500 * time.Millisecond
)

// Watch calls onChange with a freshly loaded Result once at start and then
// after every change under dir (files created, written, removed or renamed,
// subdirectories created or removed), coalescing bursts: a reload happens
// once no event arrived for debounce (default 100ms when <= 0), and at the
// latest 4×debounce after the first event of a burst.
//
// It watches dir and every subdirectory LoadDir reads with fsnotify, and
// re-synchronises those watches before each reload, so new subdirectories
// are picked up and editors that save by writing a temporary file and
// renaming it over the original are handled. If dir itself disappears, the
// last Result stays in force (onChange is not called) and a warning is
// logged; loading resumes when it reappears.
//
// onChange is called from Watch's goroutine, never concurrently. Watch
// returns nil when ctx is done, or an error when dir cannot be watched or
// loaded at start (in which case onChange is never called). logger may be
// nil (slog.Default()).
func Watch(ctx context.Context, dir string, debounce time.Duration, logger *slog.Logger, onChange func(*Result)) error {
	if debounce <= 0 {
		debounce = defaultDebounce
	}
	if logger == nil {
		logger = slog.Default()
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	defer fw.Close()

	w := &dirWatcher{root: filepath.Clean(dir), fw: fw, log: logger, dirs: map[string]os.FileInfo{}}
	if err := w.sync(); err != nil {
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	good := lastGood{}
	res, err := good.load(dir, logger)
	if err != nil {
		return fmt.Errorf("loading %s: %w", dir, err)
	}
	onChange(res)

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	poll := time.NewTicker(rootPollInterval)
	defer poll.Stop()

	var (
		pending    bool
		burstStart time.Time
		available  = true // whether dir could be loaded last time
	)
	schedule := func() {
		now := time.Now()
		if !pending {
			pending, burstStart = true, now
		}
		delay := debounce
		if limit := burstStart.Add(maxWaitFactor * debounce).Sub(now); limit < delay {
			delay = max(limit, 0)
		}
		timer.Reset(delay)
	}

	for {
		select {
		case <-ctx.Done():
			return nil

		case ev, ok := <-fw.Events:
			if !ok {
				return errors.New("manifest watcher: fsnotify closed its event channel")
			}
			if relevantEvent(ev) {
				logger.Debug("manifest: change", "event", ev.String())
				schedule()
			}

		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("manifest watcher: fsnotify closed its error channel")
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				logger.Warn("manifest: too many file system events; reloading everything", "dir", dir)
				schedule()
			} else {
				logger.Warn("manifest: file system watch error", "dir", dir, "err", err)
			}

		case <-poll.C:
			if w.rootChanged() {
				schedule()
			}

		case <-timer.C:
			pending = false
			err := w.sync()
			if err == nil {
				res, err = good.load(dir, logger)
			}
			if err != nil {
				if available {
					logger.Warn("manifest: directory unavailable; keeping the manifests loaded last", "dir", dir, "err", err)
					available = false
				}
				continue
			}
			if !available {
				logger.Info("manifest: directory available again", "dir", dir)
				available = true
			}
			onChange(res)
		}
	}
}

// dirWatcher keeps fsnotify watches on the root and every directory
// LoadDir reads.
type dirWatcher struct {
	root string
	fw   *fsnotify.Watcher
	log  *slog.Logger
	// dirs are the watched directories with their identity when the watch
	// was added, to notice a directory replaced by another at the same path.
	dirs map[string]os.FileInfo
}

// sync adds watches for new directories, replaces those whose directory was
// replaced and drops those of removed directories. It fails only when the
// root cannot be read or watched.
func (w *dirWatcher) sync() error {
	found := map[string]os.FileInfo{}
	rootInfo, err := os.Stat(w.root)
	if err == nil && !rootInfo.IsDir() {
		err = fmt.Errorf("%s: not a directory", w.root)
	}
	if err != nil {
		w.drop(found)
		return err
	}
	found[w.root] = rootInfo
	w.collect(w.root, found)

	// Drop stale watches first: a directory moved within the tree keeps its
	// inotify watch under its old path, and adding the new path would only
	// return that same watch, which dropping the old path would then remove.
	active := map[string]bool{}
	for _, p := range w.fw.WatchList() {
		active[p] = true
	}
	for p, prev := range w.dirs {
		if fi, ok := found[p]; !ok || !active[p] || !os.SameFile(prev, fi) {
			_ = w.fw.Remove(p) // may be gone already
			delete(w.dirs, p)
		}
	}
	for p, fi := range found {
		if _, ok := w.dirs[p]; ok {
			continue
		}
		if err := w.fw.Add(p); err != nil {
			if p == w.root {
				w.drop(nil)
				return err
			}
			w.log.Warn("manifest: cannot watch directory; changes under it will be missed", "dir", p, "err", err)
			continue
		}
		w.dirs[p] = fi
	}
	return nil
}

// drop removes the watches of directories not in keep.
func (w *dirWatcher) drop(keep map[string]os.FileInfo) {
	for p := range w.dirs {
		if _, ok := keep[p]; !ok {
			_ = w.fw.Remove(p) // may be gone already
			delete(w.dirs, p)
		}
	}
}

// collect adds the directories under dir that LoadDir reads.
func (w *dirWatcher) collect(dir string, found map[string]os.FileInfo) {
	entries, _ := os.ReadDir(dir) // unreadable ones are reported by LoadDir
	for _, e := range entries {
		if !e.IsDir() || ignoredName(e.Name()) { // symbolic links are not followed
			continue
		}
		p := filepath.Join(dir, e.Name())
		fi, err := e.Info()
		if err != nil {
			continue
		}
		found[p] = fi
		w.collect(p, found)
	}
}

// rootChanged reports whether the root appeared, disappeared or is now
// another directory than the one watched.
func (w *dirWatcher) rootChanged() bool {
	prev, watched := w.dirs[w.root]
	fi, err := os.Stat(w.root)
	if err != nil {
		return watched
	}
	return !watched || !os.SameFile(prev, fi)
}

// relevantEvent filters out attribute changes and editor scratch files.
// Anything else may change what LoadDir reads, including events on hidden
// names (Kubernetes ConfigMap volumes update by swapping a ..data link).
func relevantEvent(ev fsnotify.Event) bool {
	if ev.Op&^fsnotify.Chmod == 0 {
		return false
	}
	name := filepath.Base(ev.Name)
	switch {
	case strings.HasSuffix(name, "~"),
		strings.HasPrefix(name, ".#"),
		strings.HasPrefix(name, "#") && strings.HasSuffix(name, "#"),
		name == "4913":
		return false
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".swp", ".swo", ".swx", ".kate-swp":
		return false
	}
	return true
}
