package app

import (
	"log/slog"

	"github.com/portico-dev/portico/internal/source/manifest"
)

// problemLog logs the manifest problems of each reload that the previous reload did not
// have: a reload's Result lists every problem of the directory, and a broken file would
// otherwise be reported again at every edit of another file.
type problemLog struct {
	log  *slog.Logger
	last map[manifest.Problem]bool
}

func (p *problemLog) observe(problems []manifest.Problem) {
	seen := make(map[manifest.Problem]bool, len(problems))
	for _, pr := range problems {
		if !p.last[pr] && !seen[pr] {
			p.log.Warn("manifest skipped", pr.LogAttrs()...)
		}
		seen[pr] = true
	}
	p.last = seen
}
