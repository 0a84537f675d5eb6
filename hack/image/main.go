// Command image builds Portico's container image without a container runtime: it
// compiles a static linux binary and writes a one-layer OCI image archive.
//
//	go run ./hack/image -o portico-image.tar [-tag v0.7.0] [-arch arm64]
//
// The archive is an OCI image layout in a tar: `skopeo copy oci-archive:portico-image.tar
// docker://REGISTRY/portico:TAG` pushes it, `podman load -i` loads it, and crane pushes
// the unpacked layout (see docs/install.md, "Building the image").
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/portico-dev/portico/internal/version"
)

func main() {
	var o options
	flag.StringVar(&o.Output, "o", "portico-image.tar", "the OCI image archive to write")
	flag.StringVar(&o.Repository, "repository", "ghcr.io/portico-dev/portico", "the image's repository (named in the archive for containerd)")
	flag.StringVar(&o.Tag, "tag", version.Version(), "the image's tag (the default is internal/version/VERSION)")
	flag.StringVar(&o.GOARCH, "arch", "amd64", "the architecture to build for (a GOARCH: amd64, arm64, ...)")
	flag.StringVar(&o.BuildVCS, "buildvcs", "auto", "go build -buildvcs: auto records the commit when git can read the checkout, false never does")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "Usage: go run ./hack/image [-o portico-image.tar] [-tag TAG] [-arch GOARCH]\n\nBuilds Portico's OCI image archive without a container runtime.\n\nFlags:")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "image: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	o.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r, err := build(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (%.1f MB): %s:%s for %s, manifest %s\n",
		o.Output, float64(r.Size)/1e6, o.Repository, o.Tag, r.Platform, r.Manifest)
}
