// Package app wires the pipeline stages into Portico's modes: `run` (manifests and the
// embedded proxy in one process) and `check` (offline status). Each stage stays in its
// own package; this one only connects them.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/status"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/xds/server"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// Pipeline runs one rebuild: store → graph → xDS resources → published snapshot.
type Pipeline struct {
	DAG       dag.Options
	Translate translate.Options
	Server    *server.Server
	Metrics   *metrics.Pipeline
	Status    *status.Logger
	Logger    *slog.Logger
	// LastValid, when set (run mode), keeps serving the last valid version of an object
	// whose edit made it invalid.
	LastValid *LastValid

	// builder and translator are made on the first Rebuild: they remember the previous
	// build, so that a change costs in proportion to what it touches.
	builder    *dag.Incremental
	translator *translate.Incremental
	// latest is the latest build, whose statuses the admin endpoint's /statuses serves.
	latest atomic.Pointer[dag.Graph]
	// clientCert is the installation's client certificate for backends, checked.
	clientCert clientCertificate
}

// Statuses returns every object's status in the latest build, or false before the
// first. Safe to call while Rebuild runs.
func (p *Pipeline) Statuses() ([]*dag.Status, bool) {
	g := p.latest.Load()
	if g == nil {
		return nil, false
	}
	return g.Statuses, true
}

// Rebuild compiles s and publishes the result. When translation fails (a translator bug)
// nothing is published and the data planes keep the last good configuration.
func (p *Pipeline) Rebuild(ctx context.Context, s *store.Store) (*dag.Graph, error) {
	start := time.Now()
	if p.builder == nil {
		p.builder = dag.NewIncremental(withGatewayAPI(p.DAG))
	}
	rec := &touchRecorder{Incremental: p.builder}
	var g *dag.Graph
	if p.LastValid != nil {
		g = p.LastValid.Build(s, rec)
	} else {
		g = rec.Build(s)
	}
	if key := p.Translate.UpstreamClientCertificate; key != nil {
		g = dag.WithClientCertificate(g, p.clientCert.resolve(ctx, s, *key, p.Logger))
	}
	if rec.all {
		p.Status.Observe(g.Statuses)
	} else {
		p.Status.ObserveTouched(g.Statuses, rec.refs)
	}
	p.latest.Store(g)
	res, err := p.translate(g)
	if err == nil {
		var version string
		version, err = p.Server.Publish(ctx, res)
		if err == nil {
			p.Logger.Info("configuration published", "version", version, "virtual_hosts", len(g.HTTP),
				"secure_virtual_hosts", len(g.HTTPS), "clusters", len(res.Clusters), "duration", time.Since(start).String())
		}
	}
	p.Metrics.ObserveRebuild(start, g.Statuses, err)
	if err != nil {
		if !p.Server.Published() {
			return g, fmt.Errorf("configuration not published, and none has been served yet: %w", err)
		}
		return g, fmt.Errorf("configuration not published, the last good one keeps serving: %w", err)
	}
	return g, nil
}

// translate converts g with the incremental translator, made on first use.
func (p *Pipeline) translate(g *dag.Graph) (*translate.Resources, error) {
	if p.translator == nil {
		t, err := translate.NewIncremental(p.Translate)
		if err != nil {
			return nil, err
		}
		p.translator = t
		// The incremental translator passes unchanged resources as the same pointers.
		p.Server.VersionByIdentity()
	}
	return p.translator.Translate(g)
}

// touchRecorder gathers what the builds of one rebuild touched (LastValid may build twice).
type touchRecorder struct {
	*dag.Incremental
	refs []dag.ObjectRef
	all  bool
}

func (r *touchRecorder) Build(s *store.Store) *dag.Graph {
	g := r.Incremental.Build(s)
	refs, all := r.Incremental.Touched()
	r.refs = append(r.refs, refs...)
	r.all = r.all || all
	return g
}
