package runstate

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/coalesce"
	"github.com/portico-dev/portico/internal/source/manifest"
)

// Default coalescing of writes: a reload's state is written once no other reload came
// for HoldOff, and at the latest MaxDelay after the first unwritten one, so that a
// `git checkout` of many files, applied in steps, writes the file once or twice rather
// than once per step. What a crash can lose is the last MaxDelay: objects added then
// come back newer than all others (as they were), and a file broken then is served
// as it is until fixed.
const (
	HoldOff  = 200 * time.Millisecond
	MaxDelay = 2 * time.Second
)

// Saver writes the state of a running `portico run` to its file, off the reload path:
// Note records what a reload changed in a few operations, and Run writes, coalesced,
// from its own goroutine.
type Saver struct {
	path, dir string
	log       *slog.Logger
	// HoldOff and MaxDelay coalesce writes (see the constants of the same names); set
	// them before Run.
	HoldOff, MaxDelay time.Duration

	mu sync.Mutex
	// pending are the change sets noted and not yet applied to ages, in order.
	pending   [][]manifest.Change
	lastGood  []manifest.LastGoodFile
	lastValid []runtime.Object
	dirty     bool
	wake      chan struct{}

	// write serialises writes (Run's and Flush's) and guards what follows.
	write sync.Mutex
	// ages are the ages of the objects of the manifests, as of the last write.
	ages    *ageTable
	failing bool // the last write failed, and that was logged
	// writes and failures count the files written and the writes that failed.
	writes, failures int
}

// NewSaver returns a Saver of the state of the manifests in dir, kept at path.
func NewSaver(path, dir string, log *slog.Logger) *Saver {
	return &Saver{path: path, dir: dir, log: log, HoldOff: HoldOff, MaxDelay: MaxDelay,
		wake: make(chan struct{}, 1), ages: &ageTable{}}
}

// Note records a reload: its changes (an added object brings its age, a removed one
// takes its age away), the last good versions standing in for broken files, and the
// last valid versions served in place of invalid objects. It costs a few operations
// per change, whatever the size of the tree, and never waits for a write. changes and
// the objects must never be modified afterwards, as a Result's are not.
func (s *Saver) Note(changes []manifest.Change, lastGood []manifest.LastGoodFile, lastValid []runtime.Object) {
	// An edit keeps the object's age: only additions and removals change ages, and an
	// edit of a file or object that is served writes nothing.
	moved := slices.ContainsFunc(changes, agesChange)
	s.mu.Lock()
	changed := moved || !sameFiles(lastGood, s.lastGood) || !slices.Equal(lastValid, s.lastValid)
	if changed {
		if moved {
			s.pending = append(s.pending, changes)
		}
		s.lastGood, s.lastValid, s.dirty = lastGood, lastValid, true
	}
	s.mu.Unlock()
	if changed {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Run writes what is noted, coalesced, until ctx is done. It does not write what is
// pending then: call Flush once nothing notes any more.
func (s *Saver) Run(ctx context.Context) {
	coalesce.Trailing(ctx, s.wake, s.HoldOff, s.MaxDelay, s.save)
}

// Flush writes what is noted and not yet written.
func (s *Saver) Flush() { s.save() }

func (s *Saver) save() {
	s.write.Lock()
	defer s.write.Unlock()
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return
	}
	pending, lastGood, lastValid := s.pending, s.lastGood, s.lastValid
	s.pending, s.dirty = nil, false
	s.mu.Unlock()

	for _, cs := range pending {
		s.ages.apply(cs)
	}
	err := writeAtomic(s.path, func(w io.Writer) error {
		return encodeTable(w, s.ages, lastGood, lastValid, s.dir, time.Now())
	})
	if err != nil {
		s.failures++
		s.mu.Lock()
		s.dirty = true // the next note that changes something, or Flush, tries again
		s.mu.Unlock()
		if !s.failing {
			s.log.Warn("cannot save the run state; a restart would start as on a first start (objects as old as their order in the manifests, no last good versions): make its directory writable, or pass --state-file",
				"state_file", s.path, "err", err)
			s.failing = true
		}
		return
	}
	s.writes++
	if s.failing {
		s.log.Info("run state saved again", "state_file", s.path)
		s.failing = false
	}
	s.log.Debug("run state saved", "state_file", s.path, "ages", len(s.ages.entries), "last_good_files", len(lastGood), "last_valid_objects", len(lastValid))
}

// agesChange reports whether c changes an age that is kept: an addition or removal.
func agesChange(c manifest.Change) bool {
	switch {
	case c.Old == nil && c.New != nil:
		return aged(manifest.IdentityOf(c.New))
	case c.New == nil && c.Old != nil:
		return aged(manifest.IdentityOf(c.Old))
	}
	return false
}
