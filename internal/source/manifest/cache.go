package manifest

import (
	"crypto/sha256"
	"log/slog"
	"os"
	"time"
)

// racyWindow is how long after a file's modification time its size and modification
// time alone cannot tell that it did not change since it was read: a second write in
// the same tick of the file system's clock (a second on some file systems, two on FAT)
// leaves both as they were. Within it, the file is read again and its hash compared.
const racyWindow = 2 * time.Second

// fileCache remembers, per file, what it held when last read, so that a reload reads
// only the files that changed and decodes only those whose content changed: at 10,000
// files, reading and decoding them all took seconds per edit.
type fileCache struct {
	entries map[string]*cachedFile
	// walks counts walks, to tell the files met by the current one.
	walks uint64
	// reads and decodes count files read and decoded by the last walk, for tests and
	// the debug log.
	reads, decodes int
}

type cachedFile struct {
	// info is the stat of the file read: size, modification time, mode and identity.
	info os.FileInfo
	// readAt is when the read started, for racyWindow.
	readAt time.Time
	sum    [sha256.Size]byte
	load   fileLoad
	seen   uint64 // the last walk that met the file
}

func newFileCache() *fileCache {
	return &fileCache{entries: map[string]*cachedFile{}}
}

// begin starts a walk.
func (c *fileCache) begin() {
	c.walks++
	c.reads, c.decodes = 0, 0
}

// end forgets the files the walk did not meet.
func (c *fileCache) end() {
	for path, e := range c.entries {
		if e.seen != c.walks {
			delete(c.entries, path)
		}
	}
}

// file returns what the file at path holds: the cached version when the file did not
// change since it was read, or its content did not. A version from the cache is shared:
// earlier Results may hold its objects. The error says why the file cannot be read.
func (c *fileCache) file(path string, log *slog.Logger) (fileLoad, error) {
	f, r := fetch(path, c.entries[path], log)
	c.commit(path, r)
	return f, r.err
}

// fetched is what fetch found for one file, besides the load, for commit to record.
type fetched struct {
	err   error
	entry *cachedFile // what to keep for the file; nil to forget it
	read  bool
	// decoded: the content was not the cached version's.
	decoded bool
}

// fetch reads the file at path unless prev, its cache entry (nil if none), shows it
// unchanged, and decodes it unless its content is prev's. It modifies nothing, so that
// the files of a walk can be fetched in parallel (see loader.fetchPending).
func fetch(path string, prev *cachedFile, log *slog.Logger) (fileLoad, fetched) {
	if prev != nil {
		// Stat the path, following links: a link pointed elsewhere leads to another file.
		if fi, err := os.Stat(path); err == nil && prev.unchanged(fi) {
			return prev.load.reused(), fetched{entry: prev}
		}
	}
	readAt := time.Now()
	data, fi, err := readManifest(path)
	if err != nil {
		return fileLoad{}, fetched{err: err, read: true}
	}
	sum := sha256.Sum256(data)
	if prev != nil && sum == prev.sum {
		e := *prev
		e.info, e.readAt = fi, readAt
		return e.load.reused(), fetched{entry: &e, read: true}
	}
	f := decodeLoad(path, data, log)
	return f, fetched{entry: &cachedFile{info: fi, readAt: readAt, sum: sum, load: f}, read: true, decoded: true}
}

// commit records in the cache what fetch found for path during the current walk.
func (c *fileCache) commit(path string, r fetched) {
	if r.read {
		c.reads++
	}
	if r.decoded {
		c.decodes++
	}
	if r.entry == nil {
		delete(c.entries, path)
		return
	}
	r.entry.seen = c.walks
	c.entries[path] = r.entry
}

// unchanged reports whether fi shows the very file read, untouched since.
func (e *cachedFile) unchanged(fi os.FileInfo) bool {
	return fi.Size() == e.info.Size() && fi.ModTime().Equal(e.info.ModTime()) && fi.Mode() == e.info.Mode() &&
		os.SameFile(fi, e.info) && e.readAt.Sub(fi.ModTime()) > racyWindow
}

// reused returns f as a version read before, whose objects must not be modified.
func (f fileLoad) reused() fileLoad {
	f.shared = true
	return f
}

// decodeLoad decodes one file's bytes.
func decodeLoad(path string, data []byte, log *slog.Logger) fileLoad {
	d := decoder{file: path, log: log}
	d.decodeFile(data)
	f := fileLoad{path: path, objs: d.objs, problems: d.probs}
	if len(d.objs) == 0 {
		return f
	}
	// Of exactly the right size: the cache keeps them for as long as the file stays.
	f.keys, f.lines = make([]objectKey, len(d.objs)), make([]position, len(d.objs))
	for i, obj := range d.objs {
		f.keys[i] = keyOf(obj)
		f.lines[i] = position{file: path, line: d.objLines[i].line, docIndx: d.objLines[i].index}
	}
	return f
}
