// Package buildinfo says which build of ScheduleMaster is running: the
// version, commit and build date a release stamps with -ldflags -X, or what
// the Go toolchain recorded for `go install` and `go build` (module version,
// vcs.revision, vcs.time, vcs.modified). It imports nothing of the project,
// so master, worker, handlers and views can all use it.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Set by a release build, e.g.
//
//	go build -ldflags "-X github.com/schedulemaster-go/schedulemaster/buildinfo.version=1.2.3 \
//	  -X github.com/schedulemaster-go/schedulemaster/buildinfo.commit=$(git rev-parse HEAD) \
//	  -X github.com/schedulemaster-go/schedulemaster/buildinfo.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
//
// Empty means "ask the toolchain's build info".
var (
	version string
	commit  string
	date    string
)

// Unknown stands for a value neither the linker flags nor the toolchain gave.
const Unknown = "unknown"

// Info is one build's identity, as /health and the version command show it.
type Info struct {
	// Version is the release (1.2.3, without a leading v) or the module
	// version go install recorded (v0.0.0-2026...-abcdef), "devel" for a
	// build from a work tree without a version.
	Version string `json:"version"`
	// Commit is the full VCS revision.
	Commit string `json:"commit"`
	// Date is when the release was built, or else the commit's time (RFC 3339).
	Date string `json:"date"`
	// GoVersion is the toolchain the binary was built with.
	GoVersion string `json:"go_version"`
	// Modified is true when the work tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
}

var (
	once   sync.Once
	cached Info
)

// Get returns the running binary's build info; it is computed once.
func Get() Info {
	once.Do(func() {
		bi, _ := debug.ReadBuildInfo()
		cached = resolve(version, commit, date, bi)
	})
	return cached
}

// resolve puts the linker-set values over the toolchain's build info.
func resolve(ldVersion, ldCommit, ldDate string, bi *debug.BuildInfo) Info {
	i := Info{GoVersion: runtime.Version()}
	var vcsRev, vcsTime string
	if bi != nil {
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		switch v := bi.Main.Version; v {
		case "", "(devel)":
		default:
			i.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				vcsRev = s.Value
			case "vcs.time":
				vcsTime = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	// A version the toolchain stamped from a dirty tree says so itself.
	i.Version = strings.TrimSuffix(i.Version, "+dirty")
	i.Version = first(strings.TrimPrefix(ldVersion, "v"), i.Version, "devel")
	i.Commit = first(ldCommit, vcsRev, Unknown)
	i.Date = first(ldDate, vcsTime, Unknown)
	if ldCommit != "" && vcsRev != "" && ldCommit != vcsRev {
		// The linker flags name another commit than the tree built: believe
		// the flags, and the tree's modified flag no longer applies.
		i.Modified = false
	}
	return i
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// Short is the version with a 12-character commit, for the console footer:
// "1.2.3 (abcdef012345)", "devel (abcdef012345, modified)".
func (i Info) Short() string {
	c := i.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	s := i.Version + " (" + c
	if i.Modified {
		s += ", modified"
	}
	return s + ")"
}

// String is the version command's text, one line per value.
func (i Info) String() string {
	mod := ""
	if i.Modified {
		mod = " (modified work tree)"
	}
	if i.Commit == Unknown {
		// go run and go test never stamp the revision, and GOFLAGS=-buildvcs=false
		// turns it off: say so, since go build in a clone records it.
		mod = " (not recorded: go build in a git clone records it; go run and -buildvcs=false do not)"
	}
	return "schedulemaster " + i.Version + "\n" +
		"commit:     " + i.Commit + mod + "\n" +
		"built:      " + i.Date + "\n" +
		"go version: " + i.GoVersion + "\n"
}
