package app

import (
	"github.com/portico-dev/portico/internal/runstate"
	"github.com/portico-dev/portico/internal/source/manifest"
)

// openState reads the state kept at RunOptions.StateFile, hands the last valid versions
// to the pipeline, and returns what the manifest source starts from and the Saver that
// keeps the file up to date (nil when no state is kept).
func (r *Runner) openState() (manifest.Memory, *runstate.Saver) {
	if r.opts.StateFile == "" {
		return manifest.Memory{}, nil
	}
	log := r.opts.Logger.With("component", "state")
	st := runstate.Load(r.opts.StateFile, r.opts.ManifestDir, log)
	r.pipeline.LastValid.Restore(st.LastValid)
	return st.Memory(), runstate.NewSaver(r.opts.StateFile, r.opts.ManifestDir, log)
}

// noteState hands saver (if any) what a reload changed, once it is applied.
func (r *Runner) noteState(saver *runstate.Saver, res *manifest.Result) {
	if saver != nil {
		saver.Note(res.Changes, res.LastGood, r.pipeline.LastValid.Served())
	}
}
