package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// TestAPIApplyBoundsAndFailures: POST /api/v1/apply refuses oversized,
// hostile and malformed bodies with a sentence and changes nothing; a JSON
// body may ask for a dry run; a change that fails midway answers its status
// with the plan saying what was done.
func TestAPIApplyBoundsAndFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	_, host := startWorker(t, worker.Config{Identity: "w1", WorkerOf: "master", AutoRegister: false})
	if st, body := e.do(c, "POST", "/api/v1/nodes", `{"name":"w1","host":"`+host+`"}`, nil); st != http.StatusCreated {
		t.Fatalf("add w1: %d %s", st, body)
	}
	yamlCT := map[string]string{"Content-Type": "application/yaml"}
	task := func(state string) string {
		return "version: 1\ntasks:\n  - title: t\n    type: http\n    state: " + state +
			"\n    schedule: {kind: interval, every: 1h}\n    http: {url: \"http://127.0.0.1:1/\"}\n    executors: [w1]\n"
	}
	tasks := func() string {
		_, body := e.do(c, "GET", "/api/v1/tasks", "", nil)
		return body
	}
	cases := []struct {
		name, url, body string
		hdr             map[string]string
		status          int
		want            string
	}{
		{"too large", "/api/v1/apply", task("stopped") + "# " + strings.Repeat("x", 8<<20), yamlCT, http.StatusRequestEntityTooLarge, "larger than"},
		{"nul", "/api/v1/apply", task("stopped") + "\x00", yamlCT, http.StatusBadRequest, "NUL"},
		{"invalid utf-8", "/api/v1/apply", task("stopped") + "# \xff\n", yamlCT, http.StatusBadRequest, "UTF-8"},
		{"bad option", "/api/v1/apply?dry_run=maybe", task("stopped"), yamlCT, http.StatusBadRequest, "dry_run must be true or false"},
		{"bad state", "/api/v1/apply", task("asleep"), yamlCT, http.StatusBadRequest, `tasks[0] “t”.state`},
		{"json dry run", "/api/v1/apply", `{"version":1,"dry_run":true,"tasks":[{"title":"t","type":"http","schedule":{"kind":"interval","every":"1h"},"http":{"url":"http://127.0.0.1:1/"},"executors":["w1"]}]}`,
			nil, http.StatusOK, `"dry_run":true`},
	}
	for _, tc := range cases {
		st, body := e.do(c, "POST", tc.url, tc.body, tc.hdr)
		if st != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %.300s, want %d with %q", tc.name, st, body, tc.status, tc.want)
		}
	}
	if got := tasks(); !strings.Contains(got, `"total":0`) {
		t.Fatalf("a refused or dry-run apply made a task: %s", got)
	}
	// w1 is not running: the create succeeds, the start fails, and the plan says so.
	st, body := e.do(c, "POST", "/api/v1/apply", task("running"), yamlCT)
	if st != http.StatusConflict || !strings.Contains(body, `"error":"create “t”: no running worker`) || !strings.Contains(body, `"applied":false`) {
		t.Fatalf("failed start: %d %s", st, body)
	}
	if got := tasks(); !strings.Contains(got, `"total":1`) {
		t.Fatalf("after a failed start: %s", got)
	}
	st, body = e.do(c, "POST", "/api/v1/apply", task("stopped"), yamlCT)
	if st != http.StatusOK || !strings.Contains(body, `"unchanged":1`) {
		t.Fatalf("apply of the stopped state: %d %s", st, body)
	}
}
