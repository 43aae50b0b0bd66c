package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	vcs := func(rev, tm, mod string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: tm}, {Key: "vcs.modified", Value: mod}}
	}
	cases := []struct {
		name                 string
		ldVer, ldRev, ldDate string
		bi                   *debug.BuildInfo
		want                 Info
	}{
		{"no build info at all", "", "", "", nil,
			Info{Version: "devel", Commit: Unknown, Date: Unknown}},
		{"go run: devel, no vcs", "", "", "",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			Info{Version: "devel", Commit: Unknown, Date: Unknown, GoVersion: "go1.26.8"}},
		{"go build in a dirty tree", "", "", "",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261126100000-abcdef012345+dirty"},
				Settings: vcs("abcdef0123456789", "2026-11-26T10:00:00Z", "true")},
			Info{Version: "v0.0.0-20261126100000-abcdef012345", Commit: "abcdef0123456789", Date: "2026-11-26T10:00:00Z",
				GoVersion: "go1.26.8", Modified: true}},
		{"go install module@v1.2.3", "", "", "",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}},
			Info{Version: "v1.2.3", Commit: Unknown, Date: Unknown, GoVersion: "go1.26.8"}},
		{"release: ldflags win", "v1.2.3", "fedcba9876543210", "2026-12-01T00:00:00Z",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-x"},
				Settings: vcs("fedcba9876543210", "2026-11-30T00:00:00Z", "false")},
			Info{Version: "1.2.3", Commit: "fedcba9876543210", Date: "2026-12-01T00:00:00Z", GoVersion: "go1.26.8"}},
		{"ldflags name another commit: modified dropped", "1.0.0", "1111", "",
			&debug.BuildInfo{GoVersion: "go1.26.8", Settings: vcs("2222", "2026-11-30T00:00:00Z", "true")},
			Info{Version: "1.0.0", Commit: "1111", Date: "2026-11-30T00:00:00Z", GoVersion: "go1.26.8"}},
	}
	for _, c := range cases {
		got := resolve(c.ldVer, c.ldRev, c.ldDate, c.bi)
		if c.want.GoVersion == "" {
			c.want.GoVersion = got.GoVersion // runtime.Version(): this test's toolchain
			if !strings.HasPrefix(got.GoVersion, "go") {
				t.Errorf("%s: GoVersion %q does not come from the runtime", c.name, got.GoVersion)
			}
		}
		if got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func TestShortAndString(t *testing.T) {
	t.Parallel()
	i := Info{Version: "1.2.3", Commit: "abcdef0123456789", Date: "2026-12-01T00:00:00Z", GoVersion: "go1.26.8", Modified: true}
	if got, want := i.Short(), "1.2.3 (abcdef012345, modified)"; got != want {
		t.Errorf("Short = %q, want %q", got, want)
	}
	s := i.String()
	for _, want := range []string{"schedulemaster 1.2.3\n", "commit:     abcdef0123456789 (modified work tree)\n",
		"built:      2026-12-01T00:00:00Z\n", "go version: go1.26.8\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q, lacks %q", s, want)
		}
	}
	if got := (Info{Version: "devel", Commit: Unknown}).Short(); got != "devel (unknown)" {
		t.Errorf("Short of an unknown commit = %q", got)
	}
	// An unknown commit says why and how to get it recorded.
	if s := (Info{Version: "devel", Commit: Unknown}).String(); !strings.Contains(s, "commit:     unknown (not recorded: go build in a git clone records it") {
		t.Errorf("String of an unknown commit = %q, want the reason", s)
	}
}

// TestGetIsStable: the value is computed once and the same every call.
func TestGetIsStable(t *testing.T) {
	t.Parallel()
	a, b := Get(), Get()
	if a != b || a.Version == "" || a.Commit == "" || a.Date == "" || a.GoVersion == "" {
		t.Fatalf("Get() = %+v then %+v: want the same, every field set", a, b)
	}
}
