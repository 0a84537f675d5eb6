package helm

import (
	"os"
	"testing"

	"github.com/portico-dev/portico/internal/kubetest"
)

var env *kubetest.Env

// TestMain starts a kube-apiserver for the tests that apply the chart's objects (none
// under -short, where only the rendering tests run).
func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &env)) }
