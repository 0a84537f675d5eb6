package dag

import (
	"slices"
	"strings"

	"github.com/portico-dev/portico/internal/store"
)

// processorRun is one processor of an incremental builder and what it made last.
type processorRun struct {
	proc Processor
	// state is the memory of an IncrementalProcessor; nil for a plain Processor, which
	// runs again whole when a change reaches it.
	state ProcessorState
	out   processed
	kinds KindSet
}

func newProcessorRuns(procs []Processor) []*processorRun {
	runs := make([]*processorRun, len(procs))
	for i, p := range procs {
		r := &processorRun{proc: p}
		for _, k := range p.Kinds() {
			r.kinds |= 1 << k
		}
		if ip, ok := p.(IncrementalProcessor); ok {
			r.state = ip.NewState()
		}
		runs[i] = r
	}
	return runs
}

// reaches reports whether ch can change what the run's processor makes: a kind it reads,
// or a Service or Secret it used (an incremental processor keeps track of its own: any).
func (r *processorRun) reaches(ch changes) bool {
	if ch.kinds&r.kinds != 0 {
		return true
	}
	if r.state != nil {
		return len(ch.deps) > 0
	}
	for _, d := range ch.deps {
		if _, ok := r.out.deps[d]; ok {
			return true
		}
	}
	return false
}

// withProcessors returns core (the routing objects' graph) with the processors' part:
// each processor that ch reaches (every one when all is set) runs again, a plain one
// whole, an incremental one on what changed. The objects whose status they may have
// changed are added to Touched.
func (inc *Incremental) withProcessors(s *store.Store, core *Graph, ch changes, all bool) *Graph {
	if len(inc.runs) == 0 {
		inc.out = core
		return core
	}
	changed := false
	for _, r := range inc.runs {
		if !all && !r.reaches(ch) {
			continue
		}
		touched, full, moved := r.run(s, inc.opts, ch, all)
		changed = changed || moved
		if full != "" {
			inc.LastStats.ProcessorsFull = full
		}
		if !inc.LastStats.Full {
			inc.touched = append(inc.touched, touched...)
		}
	}
	if changed {
		inc.processed = mergeProcessed(inc.runs)
	}
	if !changed && inc.out != nil && inc.outCore == core {
		return inc.out
	}
	inc.out, inc.outCore = withProcessed(core, inc.processed), core
	return inc.out
}

// run runs the processor again, returning the objects whose status may have changed,
// why it built everything ("" when in part) and whether what it made changed.
func (r *processorRun) run(s *store.Store, opts Options, ch changes, all bool) (touched []ObjectRef, full string, changed bool) {
	before := r.out
	if r.state == nil {
		r.out = runProcessors(s, opts, r.proc)
		return statusObjects(before.statuses, r.out.statuses), "processed whole", true
	}
	p := newProcessing(s, opts)
	p.tracked = true
	pch := ProcessorChanges{All: all, Kinds: ch.kinds & r.kinds, ObjectsKnown: ch.procKnown}
	if !all {
		for _, c := range ch.procObjects {
			if pch.Kinds.Has(c.Kind) {
				pch.Objects = append(pch.Objects, c)
			}
		}
		pch.Deps = make([]Dep, len(ch.deps))
		for i, d := range ch.deps {
			pch.Deps[i] = Dep(d)
		}
	}
	o := r.state.Update(p, pch)
	r.out = processed{gateways: o.Gateways, statuses: o.Statuses}
	changed = !sameSlice(before.gateways, o.Gateways) || !sameSlice(before.statuses, o.Statuses)
	if o.Full != "" {
		return statusObjects(before.statuses, o.Statuses), o.Full, changed
	}
	return o.Touched, "", changed
}

// statusObjects are the objects of two lists of statuses.
func statusObjects(a, b []*Status) []ObjectRef {
	out := make([]ObjectRef, 0, len(a)+len(b))
	for _, sts := range [][]*Status{a, b} {
		for _, st := range sts {
			out = append(out, st.Object)
		}
	}
	return out
}

// sameSlice reports whether a and b are the same slice (not only equal elements).
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// mergeProcessed is what the runs made together.
func mergeProcessed(runs []*processorRun) processed {
	if len(runs) == 1 {
		return runs[0].out
	}
	var out processed
	for _, r := range runs {
		out.gateways = append(out.gateways, r.out.gateways...)
		out.statuses = mergeSorted(out.statuses, r.out.statuses)
	}
	slices.SortStableFunc(out.gateways, func(a, c *Gateway) int { return strings.Compare(a.Name.String(), c.Name.String()) })
	return out
}
