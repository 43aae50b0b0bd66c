package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/buildinfo"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// repoRoot is the module's root, seen from this package's directory.
const repoRoot = "../.."

// releaseFile reads a file of the repository.
func releaseFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yamlList returns the items of the first list under key (a "key:" line
// followed by "- item" lines), enough of YAML for .goreleaser.yaml's ldflags
// without a YAML module.
func yamlList(t *testing.T, doc, key string) []string {
	t.Helper()
	var items []string
	in := false
	indent := -1
	sc := bufio.NewScanner(strings.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if !in {
			in = trimmed == key+":"
			continue
		}
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		ind := len(line) - len(strings.TrimLeft(line, " "))
		if !strings.HasPrefix(trimmed, "- ") || (indent >= 0 && ind != indent) {
			break
		}
		indent = ind
		items = append(items, strings.TrimSpace(strings.TrimPrefix(trimmed, "- ")))
	}
	if len(items) == 0 {
		t.Fatalf("no %q list in the document", key)
	}
	return items
}

// goreleaserTemplate fills the template fields goreleaser would, with
// values the test can recognise.
var goreleaserTemplate = map[string]string{
	"Version":    "9.8.7",
	"FullCommit": "0123456789abcdef0123456789abcdef01234567",
	"CommitDate": "2026-11-26T10:00:00Z",
}

// TestGoreleaserConfig checks .goreleaser.yaml without goreleaser: every
// target, the static build, files that exist and shell scripts that parse.
// With goreleaser on PATH (or in ~/go/bin) it also runs `goreleaser check`.
func TestGoreleaserConfig(t *testing.T) {
	t.Parallel()
	doc := releaseFile(t, ".goreleaser.yaml")
	for _, want := range []string{"version: 2", "- CGO_ENABLED=0", "goos: [linux, darwin, windows]", "goarch: [amd64, arm64]",
		"formats: [deb, rpm]", "checksum:", "preinstall: deploy/scripts/preinstall.sh"} {
		if !strings.Contains(doc, want) {
			t.Errorf(".goreleaser.yaml lacks %q", want)
		}
	}
	// Every file it packs exists, and every script parses as POSIX sh.
	for _, m := range regexp.MustCompile(`(?m)^\s*(?:- )?(?:src|preinstall|postinstall|preremove|postremove): (\S+)$`).FindAllStringSubmatch(doc, -1) {
		files, _ := filepath.Glob(filepath.Join(repoRoot, m[1]))
		if len(files) == 0 {
			t.Errorf(".goreleaser.yaml packs %s, which does not exist", m[1])
		}
		for _, f := range files {
			if strings.HasSuffix(f, ".sh") {
				if out, err := exec.Command("sh", "-n", f).CombinedOutput(); err != nil {
					t.Errorf("sh -n %s: %v\n%s", f, err, out)
				}
				if fi, err := os.Stat(f); err != nil || fi.Mode()&0o111 == 0 {
					t.Errorf("%s is not executable", f)
				}
			}
		}
	}
	gr, err := exec.LookPath("goreleaser")
	if err != nil {
		home, _ := os.UserHomeDir()
		gr = filepath.Join(home, "go", "bin", "goreleaser")
		if _, err := os.Stat(gr); err != nil {
			t.Log("goreleaser is not installed: `goreleaser check` not run (go install github.com/goreleaser/goreleaser/v2@v2.15.1)")
			return
		}
	}
	cmd := exec.Command(gr, "check")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("goreleaser check: %v\n%s", err, out)
	}
}

// TestReleaseBuildIdentity builds the binary with the -X flags of
// .goreleaser.yaml and finds their values in `version`, the master's and a
// worker's /health, the master's sm_build_info metric and the console footer.
func TestReleaseBuildIdentity(t *testing.T) {
	t.Parallel()
	var ldflags []string
	for _, f := range yamlList(t, releaseFile(t, ".goreleaser.yaml"), "ldflags") {
		f = regexp.MustCompile(`\{\{\s*\.(\w+)\s*\}\}`).ReplaceAllStringFunc(f, func(m string) string {
			name := regexp.MustCompile(`\w+`).FindString(m)
			v, ok := goreleaserTemplate[name]
			if !ok {
				t.Fatalf("ldflags use template field %s, which this test does not know", name)
			}
			return v
		})
		ldflags = append(ldflags, f)
	}
	if !slices.ContainsFunc(ldflags, func(f string) bool { return strings.Contains(f, "/buildinfo.version=9.8.7") }) {
		t.Fatalf("ldflags %q do not set buildinfo.version", ldflags)
	}
	bin := filepath.Join(t.TempDir(), "schedulemaster")
	// Only the link differs from TestMain's build (both CGO_ENABLED=0 and
	// -trimpath, as the release), so this costs a link, not a compile.
	build := exec.Command("go", "build", "-trimpath", "-ldflags", strings.Join(ldflags, " "), "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build with the release ldflags: %v\n%s", err, out)
	}

	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("version: %v\n%s", err, out)
	}
	want := buildinfo.Info{Version: "9.8.7", Commit: goreleaserTemplate["FullCommit"], Date: goreleaserTemplate["CommitDate"],
		GoVersion: buildinfo.Get().GoVersion}
	if string(out) != want.String() {
		t.Fatalf("version printed\n%s\nwant\n%s", out, want.String())
	}

	dataDir := t.TempDir()
	_, m := startProcBin(t, bin, "release master", masterReady, "master", "--listen", "127.0.0.1:0", "--data-dir", dataDir,
		"--admin-password", adminPassword, "--cluster-key", testClusterKey, "--health-interval", "1s", "--health-timeout", "500ms")
	base := m[1]
	var health struct {
		Node    string          `json:"node"`
		Version *buildinfo.Info `json:"version"`
	}
	getJSON(t, http.DefaultClient, base+"/health", &health)
	if health.Version == nil || *health.Version != want {
		t.Errorf("master /health version %+v, want %+v", health.Version, want)
	}

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := client.PostForm(base+"/login", url.Values{"username": {"admin"}, "password": {adminPassword}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	page := getText(t, client, base+"/dashboard")
	if !strings.Contains(page, `id="build-version"`) || !strings.Contains(page, ">9.8.7 (0123456789ab)</span>") {
		t.Errorf("console footer lacks the build; page ends with %q", page[max(0, len(page)-600):])
	}
	login := getText(t, http.DefaultClient, base+"/login")
	if strings.Contains(login, "9.8.7") {
		t.Error("the login page shows the version to anyone")
	}
	metrics := getText(t, client, base+"/metrics")
	line := fmt.Sprintf(`sm_build_info{commit="%s",go_version="%s",version="9.8.7"} 1`, want.Commit, want.GoVersion)
	if !strings.Contains(metrics, line+"\n") {
		t.Errorf("master /metrics lacks %s", line)
	}

	_, w := startProcBin(t, bin, "release worker", workerReady, "worker", "--ip", "127.0.0.1", "--port", "0", "--master", base,
		"--cluster-key", testClusterKey, "--data-dir", t.TempDir(), "--identity", "rw1")
	health.Version = nil
	getJSON(t, http.DefaultClient, "http://"+w[1]+"/health", &health)
	if health.Node != "rw1" || health.Version == nil || *health.Version != want {
		t.Errorf("worker /health: node %q version %+v, want rw1 and %+v", health.Node, health.Version, want)
	}
}

func getText(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return string(b)
}

func getJSON(t *testing.T, c *http.Client, u string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(getText(t, c, u)), v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// unitFile is a systemd unit parsed into section -> key -> values (a key
// may repeat: Environment=).
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, text string) unitFile {
	t.Helper()
	u := unitFile{}
	section := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("unit line %q is not key=value in a section", line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

// one is the single value of a service key.
func (u unitFile) one(t *testing.T, key string) string {
	t.Helper()
	v := u["Service"][key]
	if len(v) != 1 {
		t.Fatalf("[Service] %s: %q, want one value", key, v)
	}
	return v[0]
}

// envOf is the environment a unit gives its command: its Environment= lines
// with systemd's specifiers filled, then the env file's lines over them.
func envOf(t *testing.T, u unitFile, envFile string, spec map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	fill := func(s string) string {
		for k, v := range spec {
			s = strings.ReplaceAll(s, k, v)
		}
		return s
	}
	for _, e := range u["Service"]["Environment"] {
		k, v, _ := strings.Cut(fill(e), "=")
		env[k] = v
	}
	for _, line := range strings.Split(envFile, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("env file line %q is not KEY=value", line)
		}
		env[k] = v
	}
	return env
}

// knownEnv are the env vars a command's options read.
func knownEnv(o *options) map[string]bool {
	known := map[string]bool{}
	for _, opt := range o.list {
		for _, e := range opt.env {
			known[e] = true
		}
	}
	return known
}

// TestSystemdUnits: the units pass `systemd-analyze verify` (on copies whose
// ExecStart is the test binary, which verify wants to exist), keep the
// properties the README promises, and give the commands an environment
// that their own config parser accepts, env files included.
func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	masterText := releaseFile(t, "deploy/systemd/schedulemaster-master.service")
	workerText := releaseFile(t, "deploy/systemd/schedulemaster-worker@.service")
	master, worker := parseUnit(t, masterText), parseUnit(t, workerText)

	for name, u := range map[string]unitFile{"master": master, "worker": worker} {
		for key, want := range map[string]string{"User": "schedulemaster", "Group": "schedulemaster", "Restart": "on-failure",
			"ProtectSystem": "strict", "NoNewPrivileges": "yes", "PrivateTmp": "yes", "ProtectHome": "yes",
			"RestartPreventExitStatus": "2", "CapabilityBoundingSet": ""} {
			if got := u.one(t, key); got != want {
				t.Errorf("%s unit: %s=%q, want %q", name, key, got, want)
			}
		}
		if got := u.one(t, "ExecStart"); !strings.HasPrefix(got, "/usr/bin/schedulemaster "+name) {
			t.Errorf("%s unit: ExecStart=%q", name, got)
		}
	}
	if got := master.one(t, "StateDirectory"); got != "schedulemaster" {
		t.Errorf("master StateDirectory=%q", got)
	}
	if got := worker.one(t, "StateDirectory"); got != "schedulemaster/worker-%i" {
		t.Errorf("worker StateDirectory=%q", got)
	}
	if got := worker["Service"]["EnvironmentFile"]; !slices.Equal(got, []string{"-/etc/schedulemaster/worker.env", "-/etc/schedulemaster/worker-%i.env"}) {
		t.Errorf("worker EnvironmentFile=%q, want the machine's file then the instance's", got)
	}
	if got := master.one(t, "EnvironmentFile"); got != "-/etc/schedulemaster/master.env" {
		t.Errorf("master EnvironmentFile=%q", got)
	}
	// The worker kills its shell tasks itself within the drain: systemd
	// signals the worker alone, and waits longer than the drain.
	if got := worker.one(t, "KillMode"); got != "mixed" {
		t.Errorf("worker KillMode=%q, want mixed", got)
	}
	var wc workerConfig
	var drain string
	for _, opt := range workerOptions(&wc).list {
		if opt.name == "drain-timeout" {
			drain = opt.def
		}
	}
	d, err := time.ParseDuration(drain)
	if err != nil {
		t.Fatalf("worker --drain-timeout default %q: %v", drain, err)
	}
	stop, err := time.ParseDuration(worker.one(t, "TimeoutStopSec"))
	if err != nil || stop < d+30*time.Second {
		t.Errorf("worker TimeoutStopSec=%s (%v), want at least the drain timeout %s + 30s", worker.one(t, "TimeoutStopSec"), err, d)
	}

	// The env the units give, with the example env files, is a valid config
	// of each command, and names only variables the command reads.
	var mc masterConfig
	for _, c := range []struct {
		name, envFile string
		u             unitFile
		known         map[string]bool
		parse         func(lookupEnvFunc) error
	}{
		{"master", "deploy/systemd/master.env.example", master, knownEnv(masterOptions(&mc)), func(l lookupEnvFunc) error {
			_, _, err := parseMasterConfig(nil, l)
			return err
		}},
		{"worker", "deploy/systemd/worker.env.example", worker, knownEnv(workerOptions(&wc)), func(l lookupEnvFunc) error {
			cfg, _, err := parseWorkerConfig(nil, l)
			if err == nil && (cfg.Identity != "web1-billing" || cfg.Labels["pool"] != "billing" || cfg.DataDir != "/var/lib/schedulemaster/worker-billing") {
				return fmt.Errorf("identity %q labels %v data dir %q, want the instance's", cfg.Identity, cfg.Labels, cfg.DataDir)
			}
			return err
		}},
	} {
		text := releaseFile(t, c.envFile)
		// Commented-out settings must be real variables too.
		for _, m := range regexp.MustCompile(`(?m)^#?(SM_[A-Z_]+)=`).FindAllStringSubmatch(text, -1) {
			if !c.known[m[1]] {
				t.Errorf("%s mentions %s, which %s does not read", c.envFile, m[1], c.name)
			}
		}
		env := envOf(t, c.u, text, map[string]string{"%i": "billing", "%l": "web1"})
		for k := range env {
			if !c.known[k] {
				t.Errorf("%s unit sets %s, which %s does not read", c.name, k, c.name)
			}
		}
		if err := c.parse(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
			t.Errorf("%s config from the unit and %s: %v", c.name, c.envFile, err)
		}
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		storetest.SkipOrFail(t, "systemd-analyze is not installed (Debian package systemd), so the units cannot be verified")
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(text, "/usr/bin/schedulemaster", binPath)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	verify := func(paths ...string) (string, error) {
		cmd := exec.Command(analyze, append([]string{"verify", "--man=no"}, paths...)...)
		out, err := cmd.CombinedOutput()
		// Only what is said of these files counts: verify also loads the
		// units they name (network-online.target, ...) from this system.
		var ours []string
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, dir) || strings.Contains(line, "schedulemaster-") {
				ours = append(ours, line)
			}
		}
		return strings.Join(ours, "\n"), err
	}
	units := []string{write("schedulemaster-master.service", masterText), write("schedulemaster-worker@billing.service", workerText)}
	if out, err := verify(units...); err != nil || out != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The check can fail: a misspelt key is reported.
	bad := write("schedulemaster-typo.service", strings.Replace(masterText, "ProtectSystem=strict", "ProtectSystm=strict", 1))
	if out, _ := verify(bad); !strings.Contains(out, "ProtectSystm") {
		t.Errorf("systemd-analyze verify said nothing of a misspelt key: %q", out)
	}
}
