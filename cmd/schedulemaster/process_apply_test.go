package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// apiToken creates an API token of admin through the master's API.
func (m *masterProc) apiToken() string {
	m.t.Helper()
	status, body := m.api("POST", "/api/v1/tokens", `{"name":"apply"}`)
	var tok struct {
		Token string `json:"token"`
	}
	if status != http.StatusCreated || json.Unmarshal([]byte(body), &tok) != nil || tok.Token == "" {
		m.t.Fatalf("create token: %d %s", status, body)
	}
	return tok.Token
}

// cli runs the binary with env added to this process's environment and
// returns its exit code, stdout and stderr.
func cli(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

func (m *masterProc) taskCount() int {
	m.t.Helper()
	status, body := m.api("GET", "/api/v1/tasks", "")
	var list struct {
		Total int `json:"total"`
	}
	if status != 200 || json.Unmarshal([]byte(body), &list) != nil {
		m.t.Fatalf("list tasks: %d %s", status, body)
	}
	return list.Total
}

// TestProcessApply: schedulemaster apply against a real master: a dry run
// prints the plan and changes nothing; a missing variable is named and
// nothing is sent; the apply makes the tasks, which run, with the secret
// from the environment; a second apply changes nothing; schedulemaster export
// writes a document that, applied to a fresh master, exports the same text;
// prune deletes what the document lacks; hostile files get a sentence.
func TestProcessApply(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	startWorker(t, m, "aw1")
	m.waitNode("aw1", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	tg := newTarget(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "tasks.yaml")
	doc := `version: 1
tasks:
  - key: ping
    title: Ping the target
    state: running
    type: http
    schedule: {kind: interval, every: 1s}
    http: {url: "` + tg.URL + `/applied?t={{token}}"}
    params: {token: "${ENV:PING_TOKEN}"}
    secret_params: [token]
    executors: [aw1]
    children: [child]
  - title: child
    type: http
    schedule: {kind: cron, cron: "0 3 * * *"}
    http: {url: "` + tg.URL + `/child"}
    executors: [aw1]
`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"SM_TOKEN=" + m.apiToken(), "PING_TOKEN=s3cret-token-value"}
	base := []string{"apply", "-f", file, "--master", m.URL, "--env", "PING_TOKEN"}

	code, out, errOut := cli(t, env, append(base, "--dry-run")...)
	if code != 0 || !strings.Contains(out, "dry run: nothing changed") || strings.Count(out, "+ create") != 2 ||
		!strings.Contains(out, "2 to create, 0 to update, 0 unchanged, 0 to delete") || m.taskCount() != 0 {
		t.Fatalf("dry run: %d\n%s\n%s", code, out, errOut)
	}
	// Children come before their parents in the plan.
	if strings.Index(out, "“child”") > strings.Index(out, "“Ping the target”") {
		t.Fatalf("plan order:\n%s", out)
	}
	code, out, errOut = cli(t, env[:1], base...)
	if code != 1 || !strings.Contains(errOut, "the environment has no PING_TOKEN") || !strings.Contains(errOut, "nothing was sent") || m.taskCount() != 0 {
		t.Fatalf("missing variable: %d\n%s\n%s", code, out, errOut)
	}
	// Apply fills only the variables named with --env, only in secret
	// fields, and never SM_*: the token applying is no one's to read.
	code, out, errOut = cli(t, env, "apply", "-f", file, "--master", m.URL)
	if code != 1 || !strings.Contains(errOut, "not named with --env") || m.taskCount() != 0 {
		t.Fatalf("a variable not named: %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, env, append(base, "--env", "SM_TOKEN")...)
	if code != 1 || !strings.Contains(errOut, "never filled") || m.taskCount() != 0 {
		t.Fatalf("--env SM_TOKEN: %d\n%s\n%s", code, out, errOut)
	}
	leak := filepath.Join(dir, "leak.yaml")
	if err := os.WriteFile(leak, []byte(strings.Replace(doc, "title: child", "title: child\n    description: \"${ENV:PING_TOKEN}\"", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, env, "apply", "-f", leak, "--master", m.URL, "--env", "PING_TOKEN")
	if code != 1 || !strings.Contains(errOut, "tasks[1].description") || !strings.Contains(errOut, "only in secret fields") || m.taskCount() != 0 {
		t.Fatalf("a variable in a description: %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, env, base...)
	if code != 0 || !strings.Contains(out, "2 created, 0 updated, 0 unchanged, 0 deleted") || m.taskCount() != 2 {
		t.Fatalf("apply: %d\n%s\n%s", code, out, errOut)
	}
	deadline := time.Now().Add(15 * time.Second)
	for tg.count("/applied") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the applied task did not run: %d hits", tg.count("/applied"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, out, errOut = cli(t, env, base...)
	if code != 0 || !strings.Contains(out, "0 created, 0 updated, 2 unchanged, 0 deleted") {
		t.Fatalf("second apply: %d\n%s\n%s", code, out, errOut)
	}
	// Documents are per project: the same one planned for another project
	// creates its own tasks; a project that does not exist is refused.
	if st, body := m.api("POST", "/api/v1/projects", `{"name":"team-x","pools":["*"]}`); st != http.StatusCreated {
		t.Fatalf("create project: %d %s", st, body)
	}
	code, out, errOut = cli(t, env, append(base, "--project", "team-x", "--dry-run")...)
	if code != 0 || !strings.Contains(out, "2 to create, 0 to update, 0 unchanged, 0 to delete") {
		t.Fatalf("dry run for another project: %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, env, append(base, "--project", "no-such", "--dry-run")...)
	if code != 1 || !strings.Contains(errOut, "project no-such not found") {
		t.Fatalf("apply to a missing project: %d\n%s\n%s", code, out, errOut)
	}
	// The secret went to the worker, and the API shows it masked.
	if _, body := m.api("GET", "/api/v1/tasks", ""); strings.Contains(body, "s3cret-token-value") {
		t.Fatalf("the API shows the secret: %s", body)
	}

	// Export, apply to a fresh master, export again: the same text.
	exported := filepath.Join(dir, "export.yaml")
	code, _, errOut = cli(t, env[:1], "export", "--master", m.URL, "-o", exported)
	first, _ := os.ReadFile(exported)
	if code != 0 || !bytes.Contains(first, []byte("${ENV:PING_PARAM_TOKEN}")) || bytes.Contains(first, []byte("s3cret")) {
		t.Fatalf("export: %d %s\n%s", code, errOut, first)
	}
	m2 := startMaster(t, "")
	startWorker(t, m2, "aw1")
	m2.waitNode("aw1", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	env2 := []string{"SM_TOKEN=" + m2.apiToken(), "PING_PARAM_TOKEN=s3cret-token-value"}
	code, out, errOut = cli(t, env2, "apply", "-f", exported, "--master", m2.URL, "--env", "PING_PARAM_TOKEN")
	if code != 0 || !strings.Contains(out, "2 created") {
		t.Fatalf("apply the export to a fresh master: %d\n%s\n%s", code, out, errOut)
	}
	code, second, errOut := cli(t, env2[:1], "export", "--master", m2.URL)
	if code != 0 || second != string(first) {
		t.Fatalf("export of the fresh master differs (%d %s):\n--- first\n%s\n--- second\n%s", code, errOut, first, second)
	}

	// Prune: a document without the child deletes it.
	pruned := strings.Replace(doc, "    children: [child]\n", "", 1)
	pruned = pruned[:strings.Index(pruned, "  - title: child")]
	if err := os.WriteFile(file, []byte(pruned), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, env, append(base, "--prune", "--dry-run")...)
	if code != 0 || !strings.Contains(out, "- delete    “child”") || !strings.Contains(out, "~ update    ping “Ping the target”: children [running]\n") ||
		m.taskCount() != 2 {
		t.Fatalf("prune dry run: %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, env, append(base, "--prune")...)
	if code != 0 || !strings.Contains(out, "0 created, 1 updated, 0 unchanged, 1 deleted") || m.taskCount() != 1 {
		t.Fatalf("prune: %d\n%s\n%s", code, out, errOut)
	}

	// Hostile and wrong files change nothing and say why.
	for name, c := range map[string]struct{ text, want string }{
		"nul":     {pruned + "\x00", "NUL"},
		"invalid": {strings.Replace(pruned, "every: 1s", "every: 0s", 1), "schedule.every"},
		"unknown": {strings.Replace(pruned, "executors:", "executorz:", 1), `unknown field "executorz"`},
	} {
		if err := os.WriteFile(file, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut = cli(t, env, base...)
		if code != 1 || !strings.Contains(errOut, c.want) || m.taskCount() != 1 {
			t.Errorf("%s: %d\n%s\n%s", name, code, out, errOut)
		}
	}
	// Workflows travel with the tasks: the plan names them, a step names
	// its task by key, and the export writes them back so.
	wfDoc := pruned + "workflows:\n  - key: etl\n    title: ETL\n    steps:\n      - {name: ping, task: ping}\n"
	if err := os.WriteFile(file, []byte(wfDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, env, append(base, "--dry-run")...)
	if code != 0 || !strings.Contains(out, "+ create    workflow etl “ETL”\n") || !strings.Contains(out, "1 to create, 0 to update, 1 unchanged") {
		t.Fatalf("workflow dry run: %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, env, base...)
	if code != 0 || !strings.Contains(out, "1 created, 0 updated, 1 unchanged") {
		t.Fatalf("workflow apply: %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, env[:1], "export", "--master", m.URL)
	if code != 0 || !strings.Contains(out, "workflows:\n  # version 1\n  - key: etl\n    title: ETL\n") || !strings.Contains(out, "task: ping\n") {
		t.Fatalf("export of the workflow: %d %s\n%s", code, errOut, out)
	}

	code, _, errOut = cli(t, []string{"SM_TOKEN=smt_wrong"}, "export", "--master", m.URL)
	if code != 1 || !strings.Contains(errOut, "HTTP 401") {
		t.Fatalf("wrong token: %d %s", code, errOut)
	}
}
