package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/buildinfo"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/portico-dev/portico/internal/version"
)

const (
	// binaryPath is where the image holds the binary, and its entrypoint.
	binaryPath = "/portico"
	// pathLink puts the binary on PATH too: deploy/ runs it as `command: [portico]`.
	pathLink = "/usr/local/bin/portico"
	// imagePATH is the PATH the container starts with (the image's Env).
	imagePATH = "/usr/local/bin:/usr/bin:/bin"
	// nonroot is the uid and gid the container runs as; deploy/ sets the same.
	nonroot = 65532

	sourceURL = "https://github.com/portico-dev/portico"

	annotationRefName   = "org.opencontainers.image.ref.name"
	annotationContainer = "io.containerd.image.name"
	labelVersion        = "org.opencontainers.image.version"
	labelRevision       = "org.opencontainers.image.revision"
	labelSource         = "org.opencontainers.image.source"
	labelCreated        = "org.opencontainers.image.created"
)

// options says what image to build.
type options struct {
	// Output is the OCI image archive to write.
	Output string
	// Repository and Tag name the image: Tag is the index's ref.name annotation (what
	// `skopeo copy oci-archive:FILE:TAG` selects), Repository:Tag the name containerd
	// (`ctr images import`, `kind load image-archive`) gives it.
	Repository, Tag string
	// GOARCH is the architecture to build for (the OS is always linux).
	GOARCH string
	// BuildVCS is go build's -buildvcs: "auto" records the commit in a git checkout.
	BuildVCS string
	// Dir is where go build runs; any directory inside the module.
	Dir string
	// Log receives progress.
	Log io.Writer
}

// result describes a written image.
type result struct {
	Manifest v1.Hash      // digest of the image manifest
	Size     int64        // bytes of the archive
	Build    version.Info // what the binary reports
	Platform v1.Platform
}

// build compiles cmd/portico as a static linux binary, makes a one-layer image of it and
// writes it to o.Output as an OCI image layout in a tar (an "oci-archive").
func build(ctx context.Context, o options) (result, error) {
	tmp, err := os.MkdirTemp("", "portico-image")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(tmp)

	platform := v1.Platform{OS: "linux", Architecture: o.GOARCH}
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.GOARCH)
	if o.GOARCH == "arm" {
		env = append(env, "GOARM=7")
		platform.Variant = "v7"
	}
	bin := filepath.Join(tmp, "portico")
	fmt.Fprintf(o.Log, "building cmd/portico for linux/%s\n", o.GOARCH)
	ldflags := "-s -w"
	var rev string
	if o.BuildVCS != "false" {
		if rev = gitRevision(ctx, o.Dir); rev != "" {
			ldflags += " -X github.com/portico-dev/portico/internal/version.revision=" + rev
		}
	}
	goBuild := func(buildVCS string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs="+buildVCS, "-ldflags="+ldflags,
			"-o", bin, "github.com/portico-dev/portico/cmd/portico")
		cmd.Dir, cmd.Env = o.Dir, env
		return cmd.CombinedOutput()
	}
	out, err := goBuild(o.BuildVCS)
	if err != nil && o.BuildVCS == "auto" && bytes.Contains(out, []byte("error obtaining VCS status")) {
		// auto is best effort: a checkout git refuses to read (another owner, say) still
		// builds, without the commit.
		fmt.Fprintf(o.Log, "git cannot read this checkout (%s); building without the commit\n", bytes.TrimSpace(bytes.SplitN(out, []byte("\n"), 2)[0]))
		out, err = goBuild("false")
	}
	if err != nil {
		return result{}, fmt.Errorf("go build: %v\n%s", err, out)
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return result{}, fmt.Errorf("reading the binary's build information: %v", err)
	}
	info := version.FromBuildInfo(bi)
	if rev != "" {
		info.Commit = rev // what the binary reports: the stamp wins (version.Get)
	}
	created, err := creationTime(bi)
	if err != nil {
		return result{}, err
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return result{}, err
	}

	fmt.Fprintf(o.Log, "assembling %s:%s (portico %s, commit %s)\n", o.Repository, o.Tag, info.Version, info.Commit)
	img, err := image(binary, info, platform, created)
	if err != nil {
		return result{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return result{}, err
	}
	dir := filepath.Join(tmp, "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return result{}, err
	}
	if err := p.AppendImage(img, layout.WithPlatform(platform), layout.WithAnnotations(map[string]string{
		annotationRefName:   o.Tag,
		annotationContainer: o.Repository + ":" + o.Tag,
	})); err != nil {
		return result{}, fmt.Errorf("writing the OCI layout: %v", err)
	}
	size, err := tarDir(dir, o.Output, created)
	if err != nil {
		return result{}, err
	}
	return result{Manifest: digest, Size: size, Build: info, Platform: platform}, nil
}

// gitRevision returns the commit git reports for the checkout holding dir, with
// "-dirty" when its work tree has changes, or "" when git cannot tell (no git, not a
// checkout, a checkout git refuses to read). The Go toolchain's own stamp misses it in
// a git worktree, whose .git is a file.
func gitRevision(ctx context.Context, dir string) string {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	rev, err := git("rev-parse", "HEAD")
	if err != nil || rev == "" {
		return ""
	}
	changes, err := git("status", "--porcelain")
	if err != nil {
		return ""
	}
	if changes != "" {
		rev += "-dirty"
	}
	return rev
}

// creationTime is the image's creation time: SOURCE_DATE_EPOCH when set, else the
// commit's time, else the Unix epoch. It never depends on when the build runs, so
// building the same commit again gives the same image digest.
func creationTime(bi *buildinfo.BuildInfo) (time.Time, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since 1970", s)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.time" {
			if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
				return t.UTC(), nil
			}
		}
	}
	return time.Unix(0, 0).UTC(), nil
}

// image returns the OCI image: one layer with the binary and the little a non-root
// static binary needs around it, and a config that runs it as uid/gid 65532.
func image(binary []byte, info version.Info, platform v1.Platform, created time.Time) (v1.Image, error) {
	layerTar, err := rootfs(binary, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "go run ./hack/image", Comment: "portico " + info.Version},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	cf.OS, cf.Architecture, cf.Variant = platform.OS, platform.Architecture, platform.Variant
	labels := map[string]string{
		labelVersion: info.Version,
		labelSource:  sourceURL,
		labelCreated: created.Format(time.RFC3339),
	}
	if info.Commit != version.Unknown {
		labels[labelRevision] = info.Commit
	}
	cf.Config = v1.Config{
		Entrypoint: []string{binaryPath},
		User:       fmt.Sprintf("%d:%d", nonroot, nonroot),
		WorkingDir: "/",
		Env:        []string{"PATH=" + imagePATH},
		Labels:     labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	// The same facts on the manifest, where registries (ghcr.io links an image to its
	// repository by the source) read them without fetching the config.
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// rootfs returns the layer's uncompressed tar.
func rootfs(binary []byte, mtime time.Time) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonroot, nonroot)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonroot)
	dir := func(name string, mode int64, owner int) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: owner, Gid: owner}
	}
	file := func(name string, mode int64, size int) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(size)}
	}
	entries := []struct {
		hdr  *tar.Header
		data []byte
	}{
		{dir("etc", 0o755, 0), nil},
		{file("etc/group", 0o644, len(group)), []byte(group)},
		{file("etc/passwd", 0o644, len(passwd)), []byte(passwd)},
		{dir("home", 0o755, 0), nil},
		{dir("home/nonroot", 0o700, nonroot), nil},
		{file(strings.TrimPrefix(binaryPath, "/"), 0o755, len(binary)), binary},
		{dir("tmp", 0o1777, 0), nil},
		{dir("usr", 0o755, 0), nil},
		{dir("usr/local", 0o755, 0), nil},
		{dir("usr/local/bin", 0o755, 0), nil},
		{&tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(pathLink, "/"), Linkname: binaryPath, Mode: 0o777}, nil},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		e.hdr.ModTime = mtime
		if err := tw.WriteHeader(e.hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes the files under dir to the tar file out (entries named relative to
// dir, in lexical order, with fixed times and modes) and returns its size. It writes a
// temporary file first, so out is either complete or untouched.
func tarDir(dir, out string, mtime time.Time) (int64, error) {
	f, err := os.CreateTemp(filepath.Dir(out), ".portico-image-*.tar")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return 0, err
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return 0, err
	}
	return st.Size(), os.Rename(f.Name(), out)
}
