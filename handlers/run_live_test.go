package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// apiRunsPage is GET /api/v1/runs's answer, the fields read here.
type apiRunsPage struct {
	Items []struct {
		ID     string `json:"id"`
		Result string `json:"result"`
		Node   string `json:"node"`
		Output string `json:"output"`
	} `json:"items"`
	Total int `json:"total"`
}

// TestRunInProgressStreamsItsOutputAndCanBeKilled: a shell run lasting
// longer than a second shows up as running (its worker's start notice), its
// output so far is read from that worker through the API and the run page's
// live part, a viewer may watch but not kill, and an admin's kill ends it as
// killed, counted once, with the kill in the event log.
func TestRunInProgressStreamsItsOutputAndCanBeKilled(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		w, _ := startWorker(t, worker.Config{Identity: "w1", AutoRegister: true, MasterURL: e.srv.URL, AllowShell: true})
		runWorker(t, w)
		admin := e.login("admin", "admin-password-1")
		e.addUser("vic", "vic-password-1", store.RoleViewer)
		viewer := e.login("vic", "vic-password-1")

		st, created := e.do(admin, "POST", "/api/v1/tasks", `{"title":"long job","type":"shell",
			"schedule":{"kind":"cron","cron":"0 0 1 1 *"},"timeout":"2m","retries":2,"executors":["w1"],
			"shell":{"command":"i=0; while [ $i -lt 600 ]; do echo tick $i; i=$((i+1)); sleep 0.1; done"}}`, nil)
		if st != http.StatusCreated {
			t.Fatalf("create task: %d %s", st, created)
		}
		taskID := decode[struct {
			ID string `json:"id"`
		}](t, created).ID
		if st, body := e.do(admin, "POST", "/api/v1/tasks/"+taskID+"/run", "", nil); st >= 300 {
			t.Fatalf("run once: %d %s", st, body)
		}

		// The worker announces the run after a second: it is listed as running.
		var runID string
		waitUntil(t, 15*time.Second, "the run listed as running", func() bool {
			_, body := e.do(admin, "GET", "/api/v1/runs?task="+taskID+"&result=running", "", nil)
			p := decode[apiRunsPage](t, body)
			if len(p.Items) == 1 && p.Items[0].Node == "w1" {
				runID = p.Items[0].ID
				return true
			}
			return false
		})

		// Its output so far comes from the worker, and grows.
		type output struct {
			Result      string `json:"result"`
			InProgress  bool   `json:"in_progress"`
			Output      string `json:"output"`
			OutputBytes int64  `json:"output_bytes"`
		}
		var first output
		waitUntil(t, 10*time.Second, "output so far", func() bool {
			st, body := e.do(viewer, "GET", "/api/v1/runs/"+runID+"/output", "", nil)
			first = decode[output](t, body)
			return st == http.StatusOK && first.InProgress && strings.Contains(first.Output, "tick 3")
		})
		waitUntil(t, 10*time.Second, "more output", func() bool {
			_, body := e.do(viewer, "GET", "/api/v1/runs/"+runID+"/output", "", nil)
			o := decode[output](t, body)
			return o.OutputBytes > first.OutputBytes && strings.Contains(o.Output, "tick 1")
		})

		// The page: live part polling every second, output shown; Kill for
		// admins only.
		st, page := e.do(admin, "GET", "/runs/"+runID, "", nil)
		if st != http.StatusOK || !strings.Contains(page, `hx-get="/runs/`+runID+`/live"`) || !strings.Contains(page, "tick 1") ||
			!strings.Contains(page, `data-action="kill"`) || !strings.Contains(page, `id="live-note"`) {
			t.Fatalf("run page while running (%d) lacks the live part, output or Kill:\n%s", st, page)
		}
		st, frag := e.do(viewer, "GET", "/runs/"+runID+"/live", "", hx)
		if st != http.StatusOK || !strings.Contains(frag, `id="run-live"`) || strings.Contains(frag, `data-action="kill"`) ||
			strings.Contains(frag, "<html") {
			t.Fatalf("viewer's live fragment (%d): want the fragment without Kill:\n%s", st, frag)
		}
		if st, _ := e.do(viewer, "POST", "/api/v1/runs/"+runID+"/kill", "", nil); st != http.StatusForbidden {
			t.Fatalf("viewer kill: %d, want 403", st)
		}
		if st, _ := e.do(admin, "POST", "/api/v1/runs/no-such-run/kill", "", nil); st != http.StatusNotFound {
			t.Fatalf("kill of an unknown run: %d, want 404", st)
		}

		if st, body := e.do(admin, "POST", "/api/v1/runs/"+runID+"/kill", "", nil); st != http.StatusAccepted {
			t.Fatalf("kill: %d %s, want 202", st, body)
		}
		var final apiRunsPage
		waitUntil(t, 15*time.Second, "the run recorded as killed", func() bool {
			_, body := e.do(admin, "GET", "/api/v1/runs?task="+taskID, "", nil)
			final = decode[apiRunsPage](t, body)
			return final.Total == 1 && final.Items[0].Result == "killed"
		})
		_, body := e.do(admin, "GET", "/api/v1/runs/"+runID, "", nil)
		if !strings.Contains(body, "[killed by admin]") || !strings.Contains(body, "tick 1") {
			t.Fatalf("killed run's output lacks the kill note or its output: %s", body)
		}
		// Not retried (retries: 2), counted once.
		task, err := store.GetTask(context.Background(), e.st.DB, taskID)
		if err != nil {
			t.Fatal(err)
		}
		if task.RunCount != 1 || task.LastResult != "killed" {
			t.Fatalf("task counters: %d runs, last %q; want 1 killed", task.RunCount, task.LastResult)
		}
		if st, body := e.do(admin, "POST", "/api/v1/runs/"+runID+"/kill", "", nil); st != http.StatusConflict ||
			!strings.Contains(body, "not in progress") {
			t.Fatalf("second kill: %d %s, want 409 not in progress", st, body)
		}
		st, page = e.do(admin, "GET", "/runs/"+runID, "", nil)
		if st != http.StatusOK || strings.Contains(page, "hx-trigger=\"every 1s\"") || strings.Contains(page, `data-action="kill"`) {
			t.Fatalf("ended run's page still polls or offers Kill:\n%s", page)
		}
		_, events := e.do(admin, "GET", "/api/v1/events?action=run.kill", "", nil)
		if !strings.Contains(events, "run "+runID+" on w1 killed") {
			t.Fatalf("events lack the kill: %s", events)
		}
	})
}

// waitUntil polls cond until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
