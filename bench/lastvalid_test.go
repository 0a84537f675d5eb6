package bench

import (
	"fmt"
	"log/slog"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/dag"
)

// BenchmarkRunModeBuild is the build step of `portico run`: dag.Build alone (serve),
// through LastValid with nothing to keep (every run-mode rebuild), and with one object
// whose invalid edit keeps its previous version (two builds).
func BenchmarkRunModeBuild(b *testing.B) {
	const n = 10000
	s := cluster(n)
	b.Run(fmt.Sprintf("dag.Build/ingresses=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dag.Build(s, dag.Options{})
		}
	})
	b.Run(fmt.Sprintf("LastValid/ingresses=%d", n), func(b *testing.B) {
		k := app.NewLastValid(slog.New(slog.DiscardHandler))
		k.Build(s, app.FullBuilder{})
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			k.Build(s, app.FullBuilder{})
		}
	})
	b.Run(fmt.Sprintf("LastValid-one-kept/ingresses=%d", n), func(b *testing.B) {
		k := app.NewLastValid(slog.New(slog.DiscardHandler))
		k.Build(s, app.FullBuilder{})
		edited := cluster(n)
		key := types.NamespacedName{Namespace: "team-0", Name: "app-0"}
		bad := edited.Ingresses[key].DeepCopy()
		pt := networkingv1.PathType("prefix")
		bad.Spec.Rules[0].HTTP.Paths[0].PathType = &pt
		edited.Ingresses[key] = bad
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			k.Build(edited, app.FullBuilder{})
		}
	})
}
