package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestWorkflowConsolePages: the Workflows page lists a workflow; its page
// draws its steps as SVG (edges labelled by condition) and offers Run now;
// a run started there whose step cannot run (no running worker) shows
// each step's state and offers Rerun failed, which opens the new run; a
// viewer reads the pages with no buttons and may not run.
func TestWorkflowConsolePages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	ctx := context.Background()
	// w1 exists and does not run: a step of its tasks cannot be sent.
	if err := store.CreateNode(ctx, e.st.DB, &store.Node{Name: "w1", Type: store.TypeWorker, Host: "127.0.0.1:1", Protocol: "http", Priority: 1}); err != nil {
		t.Fatal(err)
	}
	task := func(title string) string {
		tk, err := e.m.Tasks().Create(ctx, master.TaskInput{Executors: []string{"w1"}, TaskDef: protocol.TaskDef{Title: title,
			Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{Method: "GET", URL: "http://127.0.0.1:1/x"},
			Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(3600e9)}}}, "admin")
		if err != nil {
			t.Fatal(err)
		}
		return tk.ID
	}
	extract, alert := task("extract rows"), task("page the team")
	w, err := e.m.Workflows().Create(ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "nightly etl", Key: "etl",
		Steps: []master.WorkflowStep{{Name: "extract", Task: extract},
			{Name: "alert", Task: alert, After: []master.StepEdge{{Step: "extract", On: master.OnFailure}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	c := e.login("admin", "admin-password-1")
	status, page := e.do(c, "GET", "/workflows", "", nil)
	if status != 200 || !strings.Contains(page, `id="workflow-`+w.ID+`"`) || !strings.Contains(page, "nightly etl") {
		t.Fatalf("workflows page: %d\n%s", status, page)
	}
	status, page = e.do(c, "GET", "/workflows/"+w.ID, "", nil)
	if status != 200 || !strings.Contains(page, `<svg class="dag"`) || strings.Count(page, `class="dag-node`) != 2 ||
		!strings.Contains(page, `class="dag-edge-label"`) || !strings.Contains(page, ">failure</text>") ||
		!strings.Contains(page, `id="act-run-workflow"`) || !strings.Contains(page, "extract rows") {
		t.Fatalf("workflow page: %d\n%s", status, page)
	}
	resp := e.postForm(c, "/workflows/"+w.ID+"/run", nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/workflow-runs/") {
		t.Fatalf("run now: %d %s", resp.StatusCode, loc)
	}
	runID := strings.TrimPrefix(loc, "/workflow-runs/")
	r, err := e.m.Workflows().Run(ctx, runID)
	if err != nil || r.Status != store.WorkflowFailed {
		t.Fatalf("the run of a step with no running worker: %v %+v", err, r)
	}
	status, page = e.do(c, "GET", loc, "", nil)
	if status != 200 || !strings.Contains(page, `id="wstep-extract" data-state="failed"`) || !strings.Contains(page, `id="wstep-alert" data-state="success"`) &&
		!strings.Contains(page, `id="wstep-alert" data-state="failed"`) || !strings.Contains(page, `id="act-rerun-workflow-run"`) ||
		strings.Contains(page, `id="act-cancel-workflow-run"`) || strings.Contains(page, "hx-trigger") {
		t.Fatalf("run page: %d\n%s", status, page)
	}
	resp = e.postForm(c, loc+"/rerun", nil)
	if again := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || again == loc || !strings.HasPrefix(again, "/workflow-runs/") {
		t.Fatalf("rerun: %d %s", resp.StatusCode, again)
	}
	if resp := e.postForm(c, loc+"/cancel", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != loc {
		t.Fatalf("cancel of an ended run: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}

	// A viewer reads, with no buttons, and may not run.
	e.addUser("vera", "vera-password-1", store.RoleViewer)
	v := e.login("vera", "vera-password-1")
	if status, page := e.do(v, "GET", "/workflows/"+w.ID, "", nil); status != 200 || strings.Contains(page, `id="act-run-workflow"`) {
		t.Fatalf("workflow page for a viewer: %d", status)
	}
	if status, page := e.do(v, "GET", loc, "", nil); status != 200 || strings.Contains(page, `id="act-rerun-workflow-run"`) {
		t.Fatalf("run page for a viewer: %d", status)
	}
	if resp := e.postForm(v, "/workflows/"+w.ID+"/run", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a viewer's run now: %d", resp.StatusCode)
	}
}
