package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// composeValidator finds a tool that validates a compose file against the
// Compose schema: docker compose (v2), a podman-compose that has the config
// command (1.0.3, Debian 12's, has not), or docker-compose 1.29 (Debian 12's
// package; it does not know the top-level "name", so the file has none).
func composeValidator(t *testing.T) []string {
	t.Helper()
	if p, err := exec.LookPath("docker"); err == nil {
		if _, err := tryCmd(time.Minute, nil, p, "compose", "version"); err == nil {
			return []string{p, "compose"}
		}
	}
	if p, err := exec.LookPath("podman-compose"); err == nil {
		if help, _ := tryCmd(time.Minute, nil, p, "--help"); strings.Contains(help, "config") {
			return []string{p}
		}
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	needTool(t, "docker-compose", "validates deploy/compose/compose.yaml: podman-compose 1.0.3 has no config command")
	return nil
}

// composeEnv are the values deploy/compose/.env gives.
var composeEnv = []string{"SM_CLUSTER_KEY=compose-test-cluster-key-0123456789", "SM_DB_PASSWORD=composetestpw",
	"SM_ADMIN_PASSWORD=compose-test-admin-pw", "GRAFANA_PASSWORD=compose-test-grafana"}

// TestComposeConfig validates compose.yaml with a Compose tool, then checks
// the resolved configuration: two masters on one database and cluster key,
// two workers of pool default knowing both masters, Prometheus scraping
// them, Grafana provisioned from files that exist.
func TestComposeConfig(t *testing.T) {
	t.Parallel()
	tool := composeValidator(t)
	dir := filepath.Join(repoRoot(t), "deploy/compose")
	file := filepath.Join(dir, "compose.yaml")
	// An empty env file: a developer's deploy/compose/.env must not hide a
	// variable the file forgot to require.
	empty := filepath.Join(t.TempDir(), "empty.env")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := func(f string) []string {
		return append(slices.Clone(tool[1:]), "-f", f, "--env-file", empty, "config")
	}
	var noEnv []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SM_") && !strings.HasPrefix(kv, "GRAFANA_") {
			noEnv = append(noEnv, kv)
		}
	}

	// Without the secrets it refuses, naming the missing one.
	out, err := tryCmdEnv(time.Minute, noEnv, tool[0], args(file)...)
	if err == nil || !strings.Contains(out, "deploy/compose/.env") {
		t.Errorf("config without the secrets: %v, want a refusal naming deploy/compose/.env:\n%s", err, out)
	}
	// The validator is strict: a misspelt key fails (so a pass means something).
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "compose.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(raw), "    healthcheck:\n", "    healthchek:\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := tryCmdEnv(time.Minute, append(slices.Clone(noEnv), composeEnv...), tool[0], args(bad)...); err == nil {
		t.Errorf("%s accepted a misspelt key:\n%s", strings.Join(tool, " "), out)
	}

	start := time.Now()
	out = runCmd(t, time.Minute, composeEnv, tool[0], args(file)...)
	t.Logf("%s config: valid in %v", strings.Join(tool, " "), time.Since(start).Round(time.Millisecond))
	var cfg struct {
		Services map[string]struct {
			Image       string
			Command     any
			Environment map[string]string
			Volumes     []any
			DependsOn   map[string]any `json:"depends_on"`
			Build       map[string]any
		}
		Volumes map[string]any
	}
	if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("the resolved configuration: %v\n%s", err, out)
	}
	svc := cfg.Services
	for _, name := range []string{"mariadb", "master1", "master2", "worker1", "worker2", "prometheus", "grafana", "prometheus-token"} {
		if _, ok := svc[name]; !ok {
			t.Errorf("no service %s", name)
		}
	}
	m1, m2 := svc["master1"].Environment, svc["master2"].Environment
	if m1["SM_DB"] == "" || m1["SM_DB"] != m2["SM_DB"] || !strings.Contains(m1["SM_DB"], "@tcp(mariadb:3306)/") {
		t.Errorf("masters' databases %q and %q: want the same MariaDB", m1["SM_DB"], m2["SM_DB"])
	}
	if m1["SM_CLUSTER_KEY"] != "compose-test-cluster-key-0123456789" || m2["SM_CLUSTER_KEY"] != m1["SM_CLUSTER_KEY"] {
		t.Errorf("masters' cluster keys %q %q: want the env file's", m1["SM_CLUSTER_KEY"], m2["SM_CLUSTER_KEY"])
	}
	if m1["SM_IDENTITY"] == m2["SM_IDENTITY"] {
		t.Errorf("both masters are %q: identities must differ", m1["SM_IDENTITY"])
	}
	for _, w := range []string{"worker1", "worker2"} {
		s := svc[w]
		if !strings.Contains(commandText(s.Command), "--labels pool=default") {
			t.Errorf("%s command %v: want --labels pool=default", w, s.Command)
		}
		if s.Environment["SM_MASTER"] != "http://master1:30000,http://master2:30000" {
			t.Errorf("%s SM_MASTER %q: want both masters", w, s.Environment["SM_MASTER"])
		}
		if s.Environment["SM_CLUSTER_KEY"] != m1["SM_CLUSTER_KEY"] || s.Environment["SM_IP"] != w || s.Environment["SM_METRICS_LISTEN"] != ":9101" {
			t.Errorf("%s environment %v", w, s.Environment)
		}
		if s.Build["target"] != "worker-shell" {
			t.Errorf("%s builds target %v, want worker-shell", w, s.Build["target"])
		}
	}
	for _, m := range []string{"master1", "master2"} {
		if svc[m].Build["target"] != "runtime" {
			t.Errorf("%s builds target %v, want runtime", m, svc[m].Build["target"])
		}
	}
	// Every bind mount names a file or directory of the repository.
	for name, s := range svc {
		for _, v := range s.Volumes {
			src := volumeSource(v)
			if strings.HasPrefix(src, "/") {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("%s mounts %s: %v", name, src, err)
				}
			} else if _, ok := cfg.Volumes[src]; !ok && src != "" {
				t.Errorf("%s mounts volume %q, not declared", name, src)
			}
		}
	}

	// Prometheus scrapes the masters and workers the file defines.
	var prom struct {
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			Authorization *struct {
				CredentialsFile string `json:"credentials_file"`
			}
			StaticConfigs []struct {
				Targets []string
				Labels  map[string]string
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	promYAML, err := os.ReadFile(filepath.Join(dir, "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(promYAML, &prom); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	jobs := map[string][]string{}
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			jobs[sc.JobName] = append(jobs[sc.JobName], st.Targets...)
			if sc.JobName == "schedulemaster-worker" && st.Labels["pool"] != "default" {
				t.Errorf("worker targets %v have no pool label", st.Targets)
			}
		}
		if sc.JobName == "schedulemaster-master" && (sc.Authorization == nil || !strings.HasPrefix(sc.Authorization.CredentialsFile, "/etc/prometheus/schedulemaster/")) {
			t.Errorf("masters scraped without the token file: %+v", sc.Authorization)
		}
	}
	if !slices.Equal(jobs["schedulemaster-master"], []string{"master1:30000", "master2:30000"}) ||
		!slices.Equal(jobs["schedulemaster-worker"], []string{"worker1:9101", "worker2:9101"}) {
		t.Errorf("scrape targets %v", jobs)
	}
}

// tryCmdEnv is tryCmd with the whole environment given; its output is
// stdout and stderr together.
func tryCmdEnv(timeout time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func commandText(c any) string {
	switch v := c.(type) {
	case string:
		return v
	case []any:
		var parts []string
		for _, p := range v {
			parts = append(parts, strings.TrimSpace(strings.ReplaceAll(toString(p), "\n", " ")))
		}
		return strings.Join(parts, " ")
	}
	return ""
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}

// volumeSource is the source of a service volume, in the short
// ("src:dst:mode") or long ({source: ...}) syntax.
func volumeSource(v any) string {
	switch x := v.(type) {
	case string:
		return strings.SplitN(x, ":", 2)[0]
	case map[string]any:
		return toString(x["source"])
	}
	return ""
}
