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
	"runtime"
	"runtime/debug"
	"strings"
)

//go:embed VERSION
var versionFile string

// revision is the commit for builds that carry no VCS information (a Docker build,
// whose context has no .git): set with
// -ldflags "-X github.com/portico-dev/portico/internal/version.revision=COMMIT".
// The Go toolchain's own stamp (vcs.revision), when present, takes precedence.
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
	if info.Commit == Unknown && revision != "" {
		info.Commit = revision
	}
	return info
}

// FromBuildInfo returns the Info of a build described by bi (nil when there is none):
// the commit comes from the vcs.revision and vcs.modified settings `go build` records
// in a version-controlled work tree. The Go version is bi's, or the running one's.
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
	}
	return info
}

// String is what `portico version` prints: version, commit and Go version, one line each.
func (i Info) String() string {
	return fmt.Sprintf("portico %s\ncommit %s\ngo %s\n", i.Version, i.Commit, i.GoVersion)
}
