package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// TestImage builds the image archive the way `go run ./hack/image` does, opens it again
// as a user's tools would (an OCI layout in a tar), and checks what a user of the image
// relies on: it is named by the VERSION file, runs as a non-root user, holds a static
// binary that reports that version, and runs every command deploy/ gives it.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/portico")
	}
	wantVersion := readVersionFile(t)
	out := filepath.Join(t.TempDir(), "portico-image.tar")
	o := options{
		Output:     out,
		Repository: "ghcr.io/portico-dev/portico",
		Tag:        wantVersion,
		// The host's architecture, so that the test can run the binary it extracts.
		GOARCH:   runtime.GOARCH,
		BuildVCS: "auto",
		Log:      testWriter{t},
	}
	res, err := build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("archive: %d bytes, manifest %s", res.Size, res.Manifest)

	// The archive is an OCI image layout with one image, tagged with the version.
	dir := untar(t, out)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("not an OCI image layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != wantVersion {
		t.Errorf("ref.name annotation %q, want the VERSION file's %q", got, wantVersion)
	}
	if got, want := desc.Annotations["io.containerd.image.name"], "ghcr.io/portico-dev/portico:"+wantVersion; got != want {
		t.Errorf("io.containerd.image.name annotation %q, want %q", got, want)
	}
	if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != runtime.GOARCH {
		t.Errorf("index platform %v, want linux/%s", desc.Platform, runtime.GOARCH)
	}
	if desc.MediaType != types.OCIManifestSchema1 || desc.Digest != res.Manifest {
		t.Errorf("index entry %s %s, want %s %s", desc.MediaType, desc.Digest, types.OCIManifestSchema1, res.Manifest)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}

	// Config: what `docker run`/Kubernetes use.
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/portico"}) {
		t.Errorf("entrypoint %q, want [/portico]", c.Entrypoint)
	}
	if user, _, _ := strings.Cut(c.User, ":"); user == "" || user == "0" || user == "root" {
		t.Errorf("user %q: the image would run as root", c.User)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (deploy/ sets runAsUser and runAsGroup 65532)", c.User)
	}
	if c.WorkingDir != "/" {
		t.Errorf("working dir %q, want /", c.WorkingDir)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("config platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if got := c.Labels["org.opencontainers.image.version"]; got != wantVersion {
		t.Errorf("version label %q, want %q", got, wantVersion)
	}
	if got := c.Labels["org.opencontainers.image.source"]; got != "https://github.com/portico-dev/portico" {
		t.Errorf("source label %q", got)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}

	// The layer: a static binary, a passwd/group that name the user, a writable /tmp.
	files := readLayer(t, layers[0])
	bin := files["portico"]
	if bin == nil || bin.hdr.Typeflag != tar.TypeReg || bin.hdr.Mode&0o7777 != 0o755 {
		t.Fatalf("/portico: %+v, want a regular file with mode 0755", bin)
	}
	if tmp := files["tmp"]; tmp == nil || tmp.hdr.Typeflag != tar.TypeDir || tmp.hdr.Mode&0o7777 != 0o1777 {
		t.Errorf("/tmp: %+v, want a directory with mode 1777", tmp)
	}
	if p := files["etc/passwd"]; p == nil || !hasLine(p.data, "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no user 65532")
	}
	if g := files["etc/group"]; g == nil || !hasLine(g.data, "nonroot:x:65532:") {
		t.Errorf("/etc/group has no group 65532")
	}
	binFile := filepath.Join(t.TempDir(), "portico")
	if err := os.WriteFile(binFile, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(binFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("/portico is dynamically linked (%v); the image has no libc", p.Type)
		}
	}
	ef.Close()

	// The binary reports the VERSION file's version, and the labels agree with it.
	got, err := exec.Command(binFile, "version").Output()
	if err != nil {
		t.Fatalf("/portico version: %v", err)
	}
	lines := strings.Split(string(got), "\n")
	if lines[0] != "portico "+wantVersion {
		t.Errorf("/portico version printed %q first, want %q", lines[0], "portico "+wantVersion)
	}
	commit := strings.TrimPrefix(lines[1], "commit ")
	if rev, ok := c.Labels["org.opencontainers.image.revision"]; ok != (commit != "unknown") || (ok && rev != commit) {
		t.Errorf("revision label %q (present: %v), but the binary reports commit %q", rev, ok, commit)
	}
	// Built from a git checkout (a worktree too, which Go's own stamp misses), the binary
	// reports its HEAD.
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		if want := strings.TrimSpace(string(head)); commit != want && commit != want+"-dirty" {
			t.Errorf("the binary reports commit %q, want HEAD %s (with -dirty if the work tree has changes)", commit, want)
		}
	}

	// Every container of deploy/ that runs this image finds its command in it.
	for _, ctr := range deployContainers(t) {
		argv0 := ctr.Command
		if len(argv0) == 0 {
			argv0 = c.Entrypoint
		}
		if !resolves(files, c.Env, argv0[0]) {
			t.Errorf("deploy/%s: container %s runs %q, which the image does not provide (PATH %v)", ctr.file, ctr.Name, argv0[0], c.Env)
		}
	}

	// Building the same tree again gives the same image: the digest identifies the source.
	again, err := build(context.Background(), options{Output: filepath.Join(t.TempDir(), "again.tar"),
		Repository: o.Repository, Tag: o.Tag, GOARCH: o.GOARCH, BuildVCS: o.BuildVCS, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if again.Manifest != res.Manifest {
		t.Errorf("second build: manifest %s, first %s: the build is not reproducible", again.Manifest, res.Manifest)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func readVersionFile(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "internal", "version", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func hasLine(data []byte, prefix string) bool {
	for l := range strings.Lines(string(data)) {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// untar extracts the archive into a new directory and returns it.
func untar(t *testing.T, archive string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, filepath.FromSlash(path.Clean(hdr.Name)))
		if !strings.HasPrefix(name, dir+string(filepath.Separator)) {
			t.Fatalf("archive entry %q leaves the directory", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(name, data, 0o644)
			}
		default:
			t.Fatalf("archive entry %q has type %c", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

type entry struct {
	hdr  *tar.Header
	data []byte
}

// readLayer returns the layer's entries by path, without a leading / or ./.
func readLayer(t *testing.T, l v1.Layer) map[string]*entry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*entry{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")] = &entry{hdr, data}
	}
}

// resolves reports whether the image runs argv0 as the kernel would: an absolute path,
// or a name looked up in the image's PATH, that leads (through symbolic links) to an
// executable regular file.
func resolves(files map[string]*entry, env []string, argv0 string) bool {
	candidates := []string{argv0}
	if !strings.Contains(argv0, "/") {
		candidates = nil
		for _, e := range env {
			if p, ok := strings.CutPrefix(e, "PATH="); ok {
				for _, d := range strings.Split(p, ":") {
					candidates = append(candidates, path.Join(d, argv0))
				}
			}
		}
	}
	for _, c := range candidates {
		for range 10 { // follow at most 10 links
			e := files[strings.TrimPrefix(path.Clean(c), "/")]
			if e == nil {
				break
			}
			if e.hdr.Typeflag == tar.TypeSymlink {
				if strings.HasPrefix(e.hdr.Linkname, "/") {
					c = e.hdr.Linkname
				} else {
					c = path.Join(path.Dir(c), e.hdr.Linkname)
				}
				continue
			}
			if e.hdr.Typeflag == tar.TypeReg && e.hdr.Mode&0o111 != 0 {
				return true
			}
			break
		}
	}
	return false
}

type container struct {
	file    string
	Name    string   `json:"name"`
	Image   string   `json:"image"`
	Command []string `json:"command"`
}

// deployContainers returns the containers and init containers of deploy/'s workloads
// that run Portico's image.
func deployContainers(t *testing.T) []container {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "deploy", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []container
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			var obj struct {
				Spec struct {
					Template struct {
						Spec struct {
							Containers     []container `json:"containers"`
							InitContainers []container `json:"initContainers"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			for _, c := range append(obj.Spec.Template.Spec.Containers, obj.Spec.Template.Spec.InitContainers...) {
				if strings.HasPrefix(c.Image, "ghcr.io/portico-dev/portico:") || strings.HasPrefix(c.Image, "ghcr.io/portico-dev/portico@") {
					c.file = filepath.Base(p)
					out = append(out, c)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no container in deploy/ runs ghcr.io/portico-dev/portico")
	}
	return out
}
