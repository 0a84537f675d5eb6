package manifest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

const (
	// defaultDebounce is used when Watch is given a debounce <= 0.
	defaultDebounce = 10 * time.Millisecond
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
// once no event arrived for debounce (default 10ms when <= 0), and at the
// latest 4×debounce after the first event of a burst.
//
// It watches dir and every subdirectory LoadDir reads with fsnotify, and
// re-synchronises those watches before each reload, so new subdirectories
// are picked up and editors that save by writing a temporary file and
// renaming it over the original are handled. A manifest that is a symbolic
// link is followed to its target wherever that is: the directories of the
// target and of every link on the way are watched too, for events on those
// names only, so editing the target or swapping a link (as Kubernetes
// ConfigMap volumes do with ..data) reloads. A reload after events that name
// files only looks at those files, and takes the rest from the last one; any
// event it cannot attribute that way (on a directory, near a symbolic link,
// an event queue overflow, dir replaced) makes it walk the whole tree again,
// with the same result. If dir itself disappears, the
// last Result stays in force (onChange is not called) and a warning is
// logged; loading resumes when it reappears.
//
// Objects in the first Result are as old as their order in the tree (see
// LoadDir); an object that appears later is as old as the reload that first saw
// it, so it is always newer than the objects already there, and an object keeps
// its age for as long as it stays, through edits and moves between files.
//
// onChange is called from Watch's goroutine, never concurrently. It must not
// modify a Result's slices, which the next Result is built from. Watch returns
// nil when ctx is done, or an error when dir cannot be watched or loaded at
// start (in which case onChange is never called). logger may be nil
// (slog.Default()).
func Watch(ctx context.Context, dir string, debounce time.Duration, logger *slog.Logger, onChange func(*Result)) error {
	return watch(ctx, dir, debounce, logger, newReader(time.Now), onChange)
}

// WatchChanges is Watch for a caller that needs each reload's Changes and Problems
// only, as one keeping a store up to date does: the Results it passes have no
// Objects. That saves a copy of the list of every object on every reload.
func WatchChanges(ctx context.Context, dir string, debounce time.Duration, logger *slog.Logger, onChange func(*Result)) error {
	return WatchChangesFrom(ctx, dir, debounce, logger, Memory{}, onChange)
}

// WatchChangesFrom is WatchChanges starting from what an earlier Watch of dir
// remembered (its Results' ages and LastGood): an object it knows keeps its age, any
// other is newer than all of them, and a file broken at start is served from its last
// good version there.
func WatchChangesFrom(ctx context.Context, dir string, debounce time.Duration, logger *slog.Logger, mem Memory, onChange func(*Result)) error {
	rd := newReader(time.Now)
	rd.noObjects = true
	rd.remember(mem)
	return watch(ctx, dir, debounce, logger, rd, onChange)
}

func watch(ctx context.Context, dir string, debounce time.Duration, logger *slog.Logger, rd *reader, onChange func(*Result)) error {
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

	w := &dirWatcher{root: filepath.Clean(dir), fw: fw, log: logger, dirs: map[string]watchedDir{}}
	if err := w.sync(); err != nil {
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	res, err := rd.load(dir, logger)
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
		// changed are the names events reported since the last reload, which is enough
		// to reload unless everything must be looked at again (walkAll).
		changed = map[string]bool{}
		walkAll bool
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
			if w.relevant(ev) {
				logger.Debug("manifest: change", "event", ev.String())
				changed[filepath.Clean(ev.Name)] = true
				schedule()
			}

		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("manifest watcher: fsnotify closed its error channel")
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				logger.Warn("manifest: too many file system events; reloading everything", "dir", dir)
				walkAll = true
				schedule()
			} else {
				logger.Warn("manifest: file system watch error", "dir", dir, "err", err)
			}

		case <-poll.C:
			if w.rootChanged() {
				walkAll = true
				schedule()
			}

		case <-timer.C:
			pending = false
			var updated bool
			if !walkAll && available {
				res, updated = rd.update(dir, slices.Collect(maps.Keys(changed)), logger)
			}
			clear(changed)
			walkAll = false
			if updated {
				onChange(res)
				continue
			}
			err := w.sync()
			if err == nil {
				res, err = rd.load(dir, logger)
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

// dirWatcher keeps fsnotify watches on the root, every directory LoadDir
// reads, and the directories that symbolic links to manifests lead to.
type dirWatcher struct {
	root string
	fw   *fsnotify.Watcher
	log  *slog.Logger
	dirs map[string]watchedDir
}

type watchedDir struct {
	// info is the directory's identity when the watch was added, to notice a
	// directory replaced by another at the same path.
	info os.FileInfo
	// names, for a directory watched only because links lead into it, are the
	// paths in it that matter; every other event there is unrelated. nil for the
	// directories LoadDir reads.
	names map[string]bool
}

// relevant reports whether ev may change what LoadDir reads.
func (w *dirWatcher) relevant(ev fsnotify.Event) bool {
	if !relevantEvent(ev) {
		return false
	}
	if d, ok := w.dirs[filepath.Dir(ev.Name)]; ok && d.names != nil {
		return d.names[ev.Name]
	}
	return true
}

// sync adds watches for new directories, replaces those whose directory was
// replaced and drops those of removed directories. It fails only when the
// root cannot be read or watched.
func (w *dirWatcher) sync() error {
	found := map[string]watchedDir{}
	rootInfo, err := os.Stat(w.root)
	if err == nil && !rootInfo.IsDir() {
		err = fmt.Errorf("%s: not a directory", w.root)
	}
	if err != nil {
		w.drop(found)
		return err
	}
	found[w.root] = watchedDir{info: rootInfo}
	var links []string
	w.collect(w.root, found, &links)
	w.addLinkTargets(links, found)

	// Drop stale watches first: a directory moved within the tree keeps its
	// inotify watch under its old path, and adding the new path would only
	// return that same watch, which dropping the old path would then remove.
	active := map[string]bool{}
	for _, p := range w.fw.WatchList() {
		active[p] = true
	}
	for p, prev := range w.dirs {
		if d, ok := found[p]; !ok || !active[p] || !os.SameFile(prev.info, d.info) {
			_ = w.fw.Remove(p) // may be gone already
			delete(w.dirs, p)
		}
	}
	for p, d := range found {
		if prev, ok := w.dirs[p]; ok {
			prev.names = d.names
			w.dirs[p] = prev
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
		w.dirs[p] = d
	}
	return nil
}

// drop removes the watches of directories not in keep.
func (w *dirWatcher) drop(keep map[string]watchedDir) {
	for p := range w.dirs {
		if _, ok := keep[p]; !ok {
			_ = w.fw.Remove(p) // may be gone already
			delete(w.dirs, p)
		}
	}
}

// collect adds the directories under dir that LoadDir reads, and lists the
// symbolic links among the manifest files.
func (w *dirWatcher) collect(dir string, found map[string]watchedDir, links *[]string) {
	entries, _ := os.ReadDir(dir) // unreadable ones are reported by LoadDir
	for _, e := range entries {
		if ignoredName(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if e.Type()&fs.ModeSymlink != 0 && hasManifestExt(e.Name()) {
			*links = append(*links, p)
			continue
		}
		if !e.IsDir() { // symbolic links to directories are not followed
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		found[p] = watchedDir{info: fi}
		w.collect(p, found, links)
	}
}

// addLinkTargets adds, for each symbolic link, the directories holding its target and
// the links on the way, with the names to watch in them. A directory that is already
// watched as part of the tree is not added again under another path: inotify would
// give both paths one watch, which removing either would end.
func (w *dirWatcher) addLinkTargets(links []string, found map[string]watchedDir) {
	tree := make([]os.FileInfo, 0, len(found))
	for _, d := range found {
		tree = append(tree, d.info)
	}
	inTree := func(fi os.FileInfo) bool {
		for _, t := range tree {
			if os.SameFile(t, fi) {
				return true
			}
		}
		return false
	}
	skip := map[string]bool{}
	for _, link := range links {
		for _, p := range linkPath(link) {
			dir := filepath.Dir(p)
			if skip[dir] {
				continue
			}
			if d, ok := found[dir]; ok {
				if d.names != nil {
					d.names[p] = true
				}
				continue
			}
			fi, err := os.Stat(dir)
			if err != nil || !fi.IsDir() || inTree(fi) {
				skip[dir] = true
				continue
			}
			found[dir] = watchedDir{info: fi, names: map[string]bool{p: true}}
		}
	}
}

// maxLinkHops bounds how many symbolic links are followed for one path, as the
// kernel does (ELOOP).
const maxLinkHops = 40

// linkPath follows the symbolic link at path and returns every link met on the way
// (path itself included) and, last, the target. When the target is missing, the last
// path is the first one missing, whose appearance is worth an event. All paths are
// free of symbolic links, so that they are the names fsnotify reports in the
// directories watched for them.
func linkPath(path string) []string {
	parent, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return nil
	}
	if parent, err = filepath.Abs(parent); err != nil {
		return nil
	}
	var out []string
	cur := parent
	rest := []string{filepath.Base(path)}
	for hops := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if err != nil {
			return append(out, next)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > maxLinkHops {
			return out
		}
		dest, err := os.Readlink(next)
		if err != nil {
			return append(out, next)
		}
		out = append(out, next)
		if filepath.IsAbs(dest) {
			cur = filepath.VolumeName(dest) + string(filepath.Separator)
			dest = dest[len(cur):]
		}
		rest = append(strings.Split(filepath.ToSlash(dest), "/"), rest...)
	}
	return append(out, cur)
}

// rootChanged reports whether the root appeared, disappeared or is now
// another directory than the one watched.
func (w *dirWatcher) rootChanged() bool {
	prev, watched := w.dirs[w.root]
	fi, err := os.Stat(w.root)
	if err != nil {
		return watched
	}
	return !watched || !os.SameFile(prev.info, fi)
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
