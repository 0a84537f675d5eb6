package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/portico-dev/portico/internal/version"
)

// versionCmd is `portico version` (and `portico --version`): version, commit and Go
// version, one line each.
func versionCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: portico version\n\nPrints the version, the commit it was built from and the Go version, one line each.")
	}
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "portico version: unexpected argument %q: the command takes none\n", fs.Arg(0))
		return 2
	}
	fmt.Fprint(stdout, version.Get())
	return 0
}
