package helm

import "testing"

func TestChartVersionIsTheSourceVersion(t *testing.T) {
	meta := chartMeta(t)
	want := sourceVersion(t)
	if meta.AppVersion != want {
		t.Errorf("Chart.yaml appVersion %q, want %q (internal/version/VERSION): the image tag defaults to it", meta.AppVersion, want)
	}
	if "v"+meta.Version != want {
		t.Errorf("Chart.yaml version %q, want %q (internal/version/VERSION without the v)", meta.Version, want[1:])
	}
}
