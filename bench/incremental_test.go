package bench

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/admin"
	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/status"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/xds/server"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// BenchmarkOneChange is the rebuild path of one changed object at 10,000 Ingresses:
// build, translate and publish, incrementally and in full, in the same run. Each
// iteration edits one Ingress (its path flips) or one Service's endpoints, or adds an
// application.
func BenchmarkOneChange(b *testing.B) {
	const n = 10000
	ctx := context.Background()
	kinds := []struct {
		name string
		edit func(s *store.Store, i int)
	}{
		{"ingress", editIngress},
		{"endpoints", editEndpoints},
		{"ingress-added", addApp},
	}
	for _, k := range kinds {
		for _, publish := range []bool{true, false} {
			name := "incremental"
			if !publish {
				name = "incremental-unpublished"
			}
			b.Run(fmt.Sprintf("%s/%s/ingresses=%d", name, k.name, n), func(b *testing.B) {
				s := cluster(n)
				builder, _, rebuild := newRebuilder(b, dag.Options{}, publish)
				rebuild(s)
				loopChanges(b, s, k.edit, rebuild, builder, nil)
			})
		}
		b.Run(fmt.Sprintf("full/%s/ingresses=%d", k.name, n), func(b *testing.B) {
			s := cluster(n)
			srv := server.New(slog.New(slog.DiscardHandler), nil)
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				k.edit(s, i)
				i++
				res, err := translate.Translate(dag.Build(s, dag.Options{}), translate.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := srv.Publish(ctx, res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// newRebuilder returns a rebuild as the pipeline makes it: the incremental builder
// with opts, the incremental translator and, when publish is set, the xDS server's
// Publish (versions by identity, as the pipeline publishes with its incremental
// translator); with the builder and translator, for their statistics.
func newRebuilder(b *testing.B, opts dag.Options, publish bool) (*dag.Incremental, *translate.Incremental, func(*store.Store) *dag.Graph) {
	builder := dag.NewIncremental(opts)
	tr, err := translate.NewIncremental(translate.Options{})
	if err != nil {
		b.Fatal(err)
	}
	srv := server.New(slog.New(slog.DiscardHandler), nil)
	srv.VersionByIdentity()
	return builder, tr, func(s *store.Store) *dag.Graph {
		g := builder.Build(s)
		res, err := tr.Translate(g)
		if err != nil {
			b.Fatal(err)
		}
		if publish {
			if _, err := srv.Publish(context.Background(), res); err != nil {
				b.Fatal(err)
			}
		}
		return g
	}
}

// loopChanges times edit (its i-th change) and rebuild of s in b's loop, failing when
// builder built everything again or, with tr, when nothing was translated again.
func loopChanges(b *testing.B, s *store.Store, edit func(*store.Store, int), rebuild func(*store.Store) *dag.Graph,
	builder *dag.Incremental, tr *translate.Incremental) {
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	loopWithCPU(b, func() {
		edit(s, i)
		i++
		rebuild(s)
		if st := builder.LastStats; st.Full || st.ProcessorsFull != "" {
			b.Fatalf("a one-object change was built whole: %s%s", st.Reason, st.ProcessorsFull)
		}
		if tr != nil && tr.Retranslated == 0 {
			b.Fatal("the change was not translated")
		}
	})
}

// editIngress replaces Ingress i%n's first path with another one.
func editIngress(s *store.Store, i int) {
	key := types.NamespacedName{Namespace: fmt.Sprintf("team-%d", (i%100)/10), Name: fmt.Sprintf("app-%d", i%100)}
	ing := s.Ingresses[key].DeepCopy()
	path := &ing.Spec.Rules[0].HTTP.Paths[0].Path
	if *path == "/" {
		*path = "/v2"
	} else {
		*path = "/"
	}
	s.Upsert(ing)
}

// editEndpoints moves one endpoint of Service i%100.
func editEndpoints(s *store.Store, i int) {
	key := types.NamespacedName{Namespace: fmt.Sprintf("team-%d", (i%100)/10), Name: fmt.Sprintf("app-%d", i%100)}
	eps := s.Endpoints[key].DeepCopy()
	eps.Subsets[0].Addresses[0].IP = fmt.Sprintf("10.200.%d.%d", (i/250)%250, i%250)
	s.Upsert(eps)
}

// addApp adds the i-th new application (an Ingress with a new host, its Service and
// Endpoints); its cluster sorts in among the others ("team-1000" after "team-100").
func addApp(s *store.Store, i int) {
	for _, o := range clusterApp(10000+i, fmt.Sprintf("10.201.%d.", i%250), 8080) {
		s.Upsert(o)
	}
}

// BenchmarkRebuildOneChange is the whole rebuild of `portico run` for one edited
// Ingress at 10,000: LastValid, the incremental build and translation, the status log,
// the metrics and the publication, as Pipeline.Rebuild runs them.
func BenchmarkRebuildOneChange(b *testing.B) {
	const n = 10000
	ctx := context.Background()
	s := cluster(n)
	reg := admin.NewRegistry()
	discard := slog.New(slog.DiscardHandler)
	p := &app.Pipeline{
		Server:    server.New(discard, server.MetricsCallbacks(metrics.NewXDS(reg))),
		Metrics:   metrics.NewPipeline(reg),
		Status:    status.NewLogger(discard, nil),
		Logger:    discard,
		LastValid: app.NewLastValid(discard),
	}
	if _, err := p.Rebuild(ctx, s); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		editIngress(s, i)
		i++
		if _, err := p.Rebuild(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
}
