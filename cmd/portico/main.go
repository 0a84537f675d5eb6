// Command portico is a Kubernetes ingress controller. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/portico-dev/portico/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
