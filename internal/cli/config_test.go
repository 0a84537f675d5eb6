package cli

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "portico.yaml")
	if err := os.WriteFile(path, []byte(`
xds-addr: 0.0.0.0:9001
watch-namespaces: [team-a, team-b]
leader-elect: false
ingress-class-name: from-file
`), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	xds := fs.String("xds-addr", "default", "")
	watch := fs.String("watch-namespaces", "", "")
	leader := fs.Bool("leader-elect", true, "")
	class := fs.String("ingress-class-name", "portico", "")
	if err := fs.Parse([]string{"--ingress-class-name", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	if err := applyConfigFile(fs, path); err != nil {
		t.Fatal(err)
	}
	if *xds != "0.0.0.0:9001" || *watch != "team-a,team-b" || *leader || *class != "from-flag" {
		t.Errorf("got xds=%q watch=%q leader=%v class=%q; the file must fill unset flags and the command line win", *xds, *watch, *leader, *class)
	}
	if err := os.WriteFile(path, []byte("xds-adr: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := applyConfigFile(fs, path); err == nil || !strings.Contains(err.Error(), `unknown setting "xds-adr"`) {
		t.Errorf("a misspelt setting: err = %v", err)
	}
}
