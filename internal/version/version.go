// Package version says which Portico this is: the release version, the commit it was
// built from and the Go toolchain that built it (`portico version`).
//
// The release version has one source of truth, the file VERSION next to this one: the
// binary embeds it, hack/image tags images with it, and test/deploy checks that deploy/
// pins that tag.
package version

import (
	_ "embed"
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
)

//go:embed VERSION
var versionFile string

// revision is the commit as the build stamped it:
// -ldflags "-X github.com/portico-dev/portico/internal/version.revision=COMMIT".
// hack/build.sh and hack/image stamp what git says of the source tree, and the
// Dockerfile its REVISION argument (its context has no .git). It takes precedence over
// the Go toolchain's own stamp (vcs.revision), which a git worktree lacks (its .git is
// a file, which the toolchain does not recognise) or, inside another checkout, takes
// from that checkout.
var revision string

// Unknown is what Info reports for a commit the build did not record.
const Unknown = "unknown"

// Info identifies a build.
type Info struct {
	// Version is the release, e.g. "v0.7.0", from the VERSION file.
	Version string
	// Commit is the revision the binary was built from, with "-dirty" when the work
	// tree had uncommitted changes, or Unknown.
	Commit string
	// GoVersion is the toolchain that built the binary, e.g. "go1.26.8".
	GoVersion string
}

// Version returns the release version of this source tree, e.g. "v0.7.0".
func Version() string { return strings.TrimSpace(versionFile) }

// Get returns the running binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	info := FromBuildInfo(bi)
	if revision != "" {
		info.Commit = revision
	}
	return info
}

// pseudoVersion matches the end of a Go pseudo-version (v0.7.1-0.20261127123456-
// abcdef123456, with +dirty when built from a modified tree): its commit, shortened to
// 12 hex digits.
var pseudoVersion = regexp.MustCompile(`(?:^v[0-9]+\.[0-9]+\.[0-9]+-|\.)[0-9]{14}-([0-9a-f]{12})(\+dirty)?$`)

// FromBuildInfo returns the Info of a build described by bi (nil when there is none):
// the commit comes from the vcs.revision and vcs.modified settings `go build` records
// in a version-controlled work tree or, failing those, from the main module's
// pseudo-version (`go install github.com/portico-dev/portico/cmd/portico@COMMIT`). The
// Go version is bi's, or the running one's.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: Version(), Commit: Unknown, GoVersion: runtime.Version()}
	if bi == nil {
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" {
		info.Commit = rev
		if dirty {
			info.Commit += "-dirty"
		}
		return info
	}
	if m := pseudoVersion.FindStringSubmatch(bi.Main.Version); m != nil {
		info.Commit = m[1]
		if m[2] != "" {
			info.Commit += "-dirty"
		}
	}
	return info
}

// String is what `portico version` prints: version, commit and Go version, one line each.
func (i Info) String() string {
	return fmt.Sprintf("portico %s\ncommit %s\ngo %s\n", i.Version, i.Commit, i.GoVersion)
}
