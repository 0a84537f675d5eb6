package manifest

import "fmt"

// lastGood remembers, per file, the objects of its last version that decoded without a
// problem. While a file is broken (an edit saved half-way, a typo), its last good
// objects keep serving instead of vanishing, so a mistake in one file never takes
// routes down; deleting the file removes them.
type lastGood map[string]fileLoad

// retain returns files with each broken file replaced by its last good version, if it
// has one, and records the clean files as the new last good versions.
func (lg lastGood) retain(files []fileLoad) []fileLoad {
	present := make(map[string]bool, len(files))
	out := make([]fileLoad, 0, len(files))
	for _, f := range files {
		present[f.path] = true
		out = append(out, lg.record(f))
	}
	for path := range lg {
		if !present[path] {
			delete(lg, path)
		}
	}
	return out
}

// record records f as its file's last good version if it is clean, and returns the
// version in force.
func (lg lastGood) record(f fileLoad) fileLoad {
	if len(f.problems) == 0 {
		lg[f.path] = f
	}
	return lg.inForce(f)
}

// inForce returns f, or in its place its file's last good version if f is broken and
// there is one.
func (lg lastGood) inForce(f fileLoad) fileLoad {
	if len(f.problems) == 0 {
		return f
	}
	good, ok := lg[f.path]
	if !ok {
		return f
	}
	kept := good
	kept.shared = true
	kept.problems = append(append([]Problem(nil), f.problems...), Problem{
		File:   f.path,
		Reason: fmt.Sprintf("keeping this file's last good version (%d objects) until the problems above are fixed", len(good.objs)),
	})
	return kept
}

// standsIn reports whether f, as read, is broken and its last good version stands in.
func (lg lastGood) standsIn(f fileLoad) bool {
	if len(f.problems) == 0 {
		return false
	}
	_, ok := lg[f.path]
	return ok
}
