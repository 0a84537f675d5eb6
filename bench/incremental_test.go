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
				builder := dag.NewIncremental(dag.Options{})
				tr, err := translate.NewIncremental(translate.Options{})
				if err != nil {
					b.Fatal(err)
				}
				srv := server.New(slog.New(slog.DiscardHandler), nil)
				srv.VersionByIdentity() // as the pipeline does with its incremental translator
				rebuild := func() {
					res, err := tr.Translate(builder.Build(s))
					if err != nil {
						b.Fatal(err)
					}
					if publish {
						if _, err := srv.Publish(ctx, res); err != nil {
							b.Fatal(err)
						}
					}
				}
				rebuild()
				b.ReportAllocs()
				b.ResetTimer()
				i := 0
				loopWithCPU(b, func() {
					k.edit(s, i)
					i++
					rebuild()
					if builder.LastStats.Full {
						b.Fatalf("a one-object change was built whole: %s", builder.LastStats.Reason)
					}
				})
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
