// Package cli implements Portico's command line. Each command parses its flags and hands
// over to the package that does the work; the contract of names and flags is in
// DESIGN.md and must stay stable.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/portico-dev/portico/internal/logbatch"
	"github.com/portico-dev/portico/internal/proxy/accesslog"
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() map[string]command {
	return map[string]command{
		"run":       {"serve the manifests in a directory with the embedded proxy", runCmd},
		"check":     {"print the status every object in a directory would get", checkCmd},
		"echo":      {"run a test backend that answers with what it received", echoCmd},
		"authz":     {"run an external authorization server (ext_authz gRPC v3, htpasswd users)", authzCmd},
		"proxy":     {"run the embedded proxy against an xDS server", proxyCmd},
		"serve":     {"run the controller against a Kubernetes API server", serveCmd},
		"bootstrap": {"write an Envoy bootstrap file pointing at the xDS server", bootstrapCmd},
		"certgen":   {"generate a CA and certificates for mutual TLS between data planes and xDS", certgenCmd},
		"version":   {"print the version, the commit it was built from and the Go version", versionCmd},
	}
}

// Main runs the command named by args[0] and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		return versionCmd(ctx, args[1:], stdout, stderr)
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "portico: unknown command %q\n\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	return cmd.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "Usage: portico COMMAND [flags]")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'portico COMMAND -h' for a command's flags.")
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("portico "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// withUsage makes -h print "Usage: portico SYNOPSIS" before the flags.
func withUsage(fs *flag.FlagSet, synopsis string) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: portico %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
}

// parse parses args of a command that takes no positional arguments and returns the
// exit code to use when parsing ended the command. A stray argument is an error rather
// than ignored: "portico run manifests/" would otherwise run without the manifests.
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if code, ok := parseFlags(fs, args); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q (this command takes flags only; see -h)\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}

// parseFlags parses args, leaving positional arguments in fs.Args().
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// parseInterspersed parses args allowing flags before and after positional arguments
// ("portico check DIR -o json"), and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, int, bool) {
	var positional []string
	for {
		if code, ok := parseFlags(fs, args); !ok {
			return nil, code, false
		}
		if fs.NArg() == 0 {
			return positional, 0, true
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// logFlags adds --log-level and --log-format to fs and returns what makes the command's loggers.
func logFlags(fs *flag.FlagSet) *logSettings {
	return &logSettings{
		level:  fs.String("log-level", "info", "debug, info, warn or error"),
		format: fs.String("log-format", "text", "text or json"),
	}
}

// logSettings are the flags' values, read once the flags are parsed.
type logSettings struct {
	level, format *string
}

// parse checks the flags: the level, and whether the format is JSON.
func (s *logSettings) parse() (lv slog.Level, json bool, err error) {
	if err := lv.UnmarshalText([]byte(*s.level)); err != nil {
		return 0, false, fmt.Errorf("--log-level %q: use debug, info, warn or error", *s.level)
	}
	switch strings.ToLower(*s.format) {
	case "text":
		return lv, false, nil
	case "json":
		return lv, true, nil
	}
	return 0, false, fmt.Errorf("--log-format %q: use text or json", *s.format)
}

// logger returns the command's logger, writing to w.
func (s *logSettings) logger(w io.Writer) (*slog.Logger, error) {
	lv, json, err := s.parse()
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lv}
	if json {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// newLoggers returns the loggers of a command that runs the embedded proxy, both
// writing to stderr: the process's, whose lines go out at once, and the access
// log's, whose lines the proxy writes in batches through sink, formatting its
// request lines itself (accesslog.NewLogger) in the same format.
func newLoggers(s *logSettings, stderr io.Writer) (logger, accessLogger *slog.Logger, sink *logbatch.Writer, err error) {
	sink = logbatch.New(stderr)
	if logger, err = s.logger(sink.Immediate()); err != nil {
		return nil, nil, nil, err
	}
	lv, json, _ := s.parse()
	return logger, accesslog.NewLogger(sink, json, lv), sink, nil
}

func fail(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "portico: "+format+"\n", args...)
	return 1
}

// validGatewayName checks a --gateway value: empty, or the NAMESPACE/NAME of a Gateway.
func validGatewayName(v string) error {
	if v == "" {
		return nil
	}
	ns, name, ok := strings.Cut(v, "/")
	if !ok {
		return fmt.Errorf("%q is not NAMESPACE/NAME", v)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}
