package status

import (
	"context"
	"log/slog"
	"slices"

	"github.com/portico-dev/portico/internal/dag"
)

// MaxLogged bounds the status lines one build logs. A first build of 17,588 objects, or
// a change that touches thousands, would otherwise write a line per object (megabytes)
// and bury the few that need attention.
const MaxLogged = 20

// Logger logs statuses as builds change them, so that a `portico run` user sees at once
// why an edit did not take effect. Each object's status is logged when it appears and
// when it changes, at WARN when something in it is not served (invalid, orphaned, or
// valid with remarks such as a missing Service), else at INFO. A build logs at most
// MaxLogged of them, invalid ones first, then orphaned ones, then the other WARN ones;
// after the first build, and after any that leaves some out, one summary line counts
// every object by status and says where to read them all.
type Logger struct {
	logger *slog.Logger
	// seeAll says where every status can be read (`portico check DIR`, the admin
	// endpoint's /statuses); nil when nowhere.
	seeAll func() string
	// last are the statuses of the previous call, ordered by object.
	last    []*dag.Status
	started bool
}

// NewLogger returns a Logger that has seen no status yet. seeAll, when not nil, names
// where every status can be read, for the summary line.
func NewLogger(l *slog.Logger, seeAll func() string) *Logger {
	return &Logger{logger: l, seeAll: seeAll}
}

// Observe logs the statuses that differ from the previous call. It walks both lists in
// object order, as Graph.Statuses comes, without a map: a rebuild at 10,000 objects
// should not cost a 10,000-entry map to find the one status that changed.
func (l *Logger) Observe(statuses []*dag.Status) {
	if !slices.IsSortedFunc(statuses, byObject) {
		statuses = slices.Clone(statuses)
		slices.SortStableFunc(statuses, byObject)
	}
	var changed []*dag.Status
	prev := l.last
	for _, s := range statuses {
		for len(prev) > 0 && dag.CompareObjectRefs(prev[0].Object, s.Object) < 0 {
			prev = prev[1:]
		}
		if len(prev) > 0 && prev[0].Object == s.Object && prev[0].Same(s) {
			continue
		}
		changed = append(changed, s)
	}
	l.report(statuses, changed)
	l.last = statuses
}

// ObserveTouched is Observe for a build that says which objects it may have changed
// (dag.Incremental.Touched): only their statuses are compared. An object touched twice
// (LastValid builds twice) is logged once.
func (l *Logger) ObserveTouched(statuses []*dag.Status, touched []dag.ObjectRef) {
	if !slices.IsSortedFunc(statuses, byObject) {
		l.Observe(statuses)
		return
	}
	refs := slices.Clone(touched)
	slices.SortFunc(refs, dag.CompareObjectRefs)
	refs = slices.Compact(refs)
	var changed []*dag.Status
	for _, ref := range refs {
		before := dag.StatusesOf(l.last, ref)
		for _, s := range dag.StatusesOf(statuses, ref) {
			if !slices.ContainsFunc(before, s.Same) {
				changed = append(changed, s)
			}
		}
	}
	l.report(statuses, changed)
	l.last = statuses
}

// report logs the changed statuses of a build of all, within MaxLogged lines.
func (l *Logger) report(all, changed []*dag.Status) {
	first := !l.started
	l.started = true
	if !first && len(changed) <= MaxLogged {
		for _, s := range changed {
			l.log(s)
		}
		return
	}
	shown := changed
	if len(changed) > MaxLogged {
		shown = needingAttentionFirst(changed)
		if first {
			// At start-up every object is new; the ones to read are those with a problem.
			shown = shown[:countAtWarn(shown)]
		}
		shown = shown[:min(len(shown), MaxLogged)]
	}
	for _, s := range shown {
		l.log(s)
	}
	l.summarize(all, changed, shown, first)
}

// summarize logs one line counting all by status, and what the build's lines left out.
func (l *Logger) summarize(all, changed, shown []*dag.Status, first bool) {
	var c struct{ valid, withWarnings, invalid, orphaned, ignored int }
	for _, s := range all {
		switch s.Status {
		case dag.StatusValid:
			c.valid++
			if s.Noted {
				c.withWarnings++
			}
		case dag.StatusInvalid:
			c.invalid++
		case dag.StatusOrphaned:
			c.orphaned++
		case dag.StatusIgnored:
			c.ignored++
		}
	}
	attrs := []any{"objects", len(all), "valid", c.valid, "with_warnings", c.withWarnings,
		"invalid", c.invalid, "orphaned", c.orphaned, "ignored", c.ignored}
	if !first {
		attrs = append(attrs, "changed", len(changed))
	}
	attrs = append(attrs, "logged", len(shown))
	if len(shown) < len(all) && l.seeAll != nil {
		attrs = append(attrs, "see_all", l.seeAll())
	}
	// A summary that stands for WARN lines left out is itself at WARN, so that
	// --log-level warn still shows that there are more.
	level := slog.LevelInfo
	if countAtWarn(changed) > countAtWarn(shown) {
		level = slog.LevelWarn
	}
	l.logger.Log(context.Background(), level, "status summary", attrs...)
}

// needingAttentionFirst returns statuses ordered by what they need: invalid objects
// (not served at all) first, then orphaned ones, then valid ones with remarks, then the
// rest, each group in its order.
func needingAttentionFirst(statuses []*dag.Status) []*dag.Status {
	out := slices.Clone(statuses)
	slices.SortStableFunc(out, func(a, b *dag.Status) int { return attention(a) - attention(b) })
	return out
}

// attention ranks a status by how much it needs attention, 0 the most.
func attention(s *dag.Status) int {
	switch {
	case s.Status == dag.StatusInvalid:
		return 0
	case s.Status == dag.StatusOrphaned:
		return 1
	case levelOf(s) == slog.LevelWarn:
		return 2
	}
	return 3
}

func countAtWarn(statuses []*dag.Status) int {
	n := 0
	for _, s := range statuses {
		if levelOf(s) == slog.LevelWarn {
			n++
		}
	}
	return n
}

// levelOf is WARN for a status that means some requests fail or are not served as
// written: an invalid or orphaned object, or a valid one with remarks (a missing
// Service, an include or delegation not followed, a field ignored).
func levelOf(s *dag.Status) slog.Level {
	if s.Status == dag.StatusInvalid || s.Status == dag.StatusOrphaned || (s.Status == dag.StatusValid && s.Noted) {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

func (l *Logger) log(s *dag.Status) {
	l.logger.Log(context.Background(), levelOf(s), "status", "kind", s.Object.Kind, "namespace", s.Object.Namespace,
		"name", s.Object.Name, "status", string(s.Status), "description", s.Description)
}
