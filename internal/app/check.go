package app

import (
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/source/manifest"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// CheckResult is what `portico check` reports.
type CheckResult struct {
	Statuses []*dag.Status
	Problems []manifest.Problem
	// TranslateErr is set if the graph could not be translated (a Portico bug).
	TranslateErr error
}

// Check computes, offline, the status every object in dir would get.
func Check(dir string, opts dag.Options) (*CheckResult, error) {
	res, err := manifest.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	g := dag.Build(store.FromObjects(res.Objects), withGatewayAPI(opts))
	_, terr := translate.Translate(g, translate.Options{})
	return &CheckResult{Statuses: g.Statuses, Problems: res.Problems, TranslateErr: terr}, nil
}
