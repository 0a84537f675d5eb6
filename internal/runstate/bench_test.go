package runstate

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/source/manifest"
)

// app is TestRunScale's application i: an Ingress, a Service and an Endpoints.
func app(i int, at time.Time) []runtime.Object {
	meta := metav1.ObjectMeta{Namespace: fmt.Sprintf("team-%d", i/10), Name: fmt.Sprintf("app-%d", i), CreationTimestamp: metav1.NewTime(at)}
	ing := &networkingv1.Ingress{ObjectMeta: meta}
	ing.SetGroupVersionKind(networkingv1.SchemeGroupVersion.WithKind("Ingress"))
	svc := &corev1.Service{ObjectMeta: meta}
	svc.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Service"))
	eps := &corev1.Endpoints{ObjectMeta: meta}
	eps.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Endpoints"))
	return []runtime.Object{ing, svc, eps}
}

// BenchmarkSaveAfterAdd is what one application added to TestRunScale's 10,000 costs
// the Saver, in its own goroutine (never on the reload path): its ages in the table,
// and the file written (at most once per HoldOff, however many are added).
func BenchmarkSaveAfterAdd(b *testing.B) {
	path := filepath.Join(b.TempDir(), "run.json")
	s := NewSaver(path, "/m", quietLog())
	at := time.Now()
	var first []manifest.Change
	for i := range 10000 {
		first = append(first, added(app(i, at.Add(time.Duration(i)))...)...)
	}
	s.Note(first, nil, nil)
	s.Flush()
	b.ReportAllocs()
	i := 10000
	for b.Loop() {
		objs := app(i, at.Add(time.Duration(i)))
		s.Note(added(objs...), nil, nil)
		s.Flush()
		// Removed again, unmeasured, so that every round adds to the same tree.
		b.StopTimer()
		var gone []manifest.Change
		for _, o := range objs {
			gone = append(gone, manifest.Change{Old: o})
		}
		s.Note(gone, nil, nil)
		s.Flush()
		b.StartTimer()
		i++
	}
	fi, _ := os.Stat(path)
	b.ReportMetric(float64(fi.Size()), "bytes/file")
}
