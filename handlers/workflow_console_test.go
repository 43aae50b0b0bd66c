package handlers_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

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

	// The list shows the latest run; a search keeps the workflows whose
	// title or key holds it; a bad search is shown, not obeyed.
	latest := r.ID
	if again, err := e.m.Workflows().Runs(ctx, w.ID); err == nil && len(again) > 0 {
		latest = again[0].ID
	}
	status, page = e.do(c, "GET", "/workflows", "", nil)
	if status != 200 || !strings.Contains(page, `href="/workflow-runs/`+latest+`"`) {
		t.Fatalf("workflows page without its last run %s:\n%s", latest, page)
	}
	for q, want := range map[string]bool{"ETL": true, "nightly": true, "reports": false} {
		status, page = e.do(c, "GET", "/workflows?q="+url.QueryEscape(q), "", nil)
		if status != 200 || strings.Contains(page, `id="workflow-`+w.ID+`"`) != want {
			t.Errorf("search %q: %d, listed %v, want %v", q, status, !want, want)
		}
	}
	if status, page = e.do(c, "GET", "/workflows?q="+strings.Repeat("x", 201), "", nil); status != 200 || !strings.Contains(page, `id="error-workflow-q"`) {
		t.Errorf("a search too long: %d, no error shown", status)
	}

	// Run now with params: over the defaults, in the run; a bad line is
	// refused and starts nothing.
	before, _ := e.m.Workflows().Runs(ctx, w.ID)
	if resp := e.postForm(c, "/workflows/"+w.ID+"/run", url.Values{"params": {"day=2026-11-28\nregion=eu"}}); resp.StatusCode != http.StatusSeeOther ||
		!strings.HasPrefix(resp.Header.Get("Location"), "/workflow-runs/") {
		t.Fatalf("run with params: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	} else if got, err := e.m.Workflows().Run(ctx, strings.TrimPrefix(resp.Header.Get("Location"), "/workflow-runs/")); err != nil ||
		got.Params["day"] != "2026-11-28" || got.Params["region"] != "eu" {
		t.Fatalf("run with params: %v %+v", err, got)
	}
	if resp := e.postForm(c, "/workflows/"+w.ID+"/run", url.Values{"params": {"no equals sign"}}); resp.StatusCode != http.StatusSeeOther ||
		resp.Header.Get("Location") != "/workflows/"+w.ID {
		t.Fatalf("run with a bad param: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if after, _ := e.m.Workflows().Runs(ctx, w.ID); len(after) != len(before)+1 {
		t.Errorf("runs %d then %d: a bad param started a run", len(before), len(after))
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

// TestWorkflowConsoleForm: the workflow form adds and removes rows by
// posting itself back (nothing saved); a graph the engine refuses comes
// back with each error beside the field of the step it names and what was
// typed, nothing saved; a good one is saved as typed; an edit that started
// from a version saved over since is refused with the engine's sentence,
// the typed values kept; Delete deletes.
func TestWorkflowConsoleForm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	ctx := context.Background()
	if err := store.CreateNode(ctx, e.st.DB, &store.Node{Name: "w1", Type: store.TypeWorker, Host: "127.0.0.1:1", Protocol: "http", Priority: 1}); err != nil {
		t.Fatal(err)
	}
	extract, alert := workflowTask(t, e, "extract rows"), workflowTask(t, e, "page the team")
	c := e.login("admin", "admin-password-1")
	if status, page := e.do(c, "GET", "/workflows", "", nil); status != 200 || !strings.Contains(page, `id="new-workflow"`) {
		t.Fatalf("workflows page without New workflow: %d\n%s", status, page)
	}
	status, page := e.do(c, "GET", "/workflows/new", "", nil)
	if status != 200 || !strings.Contains(page, `name="steps[0].name"`) || !strings.Contains(page, `<option value="`+extract+`">extract rows</option>`) ||
		!strings.Contains(page, `id="default-submit"`) || strings.Contains(page, `name="steps[1].name"`) {
		t.Fatalf("new workflow form: %d\n%s", status, page)
	}

	// Add step and Add a step it waits for: the form again, with the new
	// row focused and what was typed kept.
	typed := url.Values{"project": {"default"}, "title": {"nightly etl"}, "schedule_kind": {"manual"},
		"steps[0].name": {"extract"}, "steps[0].task": {extract}}
	page = postPage(t, e, c, "/workflows", typed, "op", "add-step", http.StatusOK)
	if !strings.Contains(page, `name="steps[1].name"`) || !regexp.MustCompile(`id="steps-1-name"[^>]* autofocus`).MatchString(page) ||
		!strings.Contains(page, `value="nightly etl"`) || !strings.Contains(page, `<option value="`+extract+`" selected>`) {
		t.Fatalf("add step:\n%s", page)
	}
	typed.Set("steps[1].name", "alert")
	typed.Set("steps[1].task", alert)
	page = postPage(t, e, c, "/workflows", typed, "op", "add-edge:1", http.StatusOK)
	if !strings.Contains(page, `name="steps[1].after[0].step"`) || !strings.Contains(page, `name="op" value="remove-edge:1:0"`) {
		t.Fatalf("add edge:\n%s", page)
	}
	if ws, _ := e.m.Workflows().List(ctx, ""); len(ws) != 0 {
		t.Fatalf("a row button saved %d workflows", len(ws))
	}

	// A graph the engine refuses: the parent named is no step, and the
	// other step's timeout does not read; each message is beside its
	// field, and the form keeps what was typed.
	bad := cloneValues(typed)
	bad.Set("steps[1].after[0].step", "nope")
	bad.Set("steps[1].after[0].on", "failure")
	page = postPage(t, e, c, "/workflows", bad, "", "", http.StatusUnprocessableEntity)
	if !strings.Contains(page, `id="error-steps-1-after-0-step"`) || !strings.Contains(page, `no step is named`) ||
		!strings.Contains(page, `value="nope"`) || !strings.Contains(page, `id="form-errors"`) ||
		!strings.Contains(page, `href="#steps-1-after-0-step"`) {
		t.Fatalf("unknown parent:\n%s", page)
	}
	cycle := cloneValues(typed)
	cycle.Set("steps[0].after[0].step", "alert")
	cycle.Set("steps[1].after[0].step", "extract")
	page = postPage(t, e, c, "/workflows", cycle, "", "", http.StatusUnprocessableEntity)
	if !strings.Contains(page, `id="error-steps-0-after"`) && !strings.Contains(page, `id="error-steps-1-after"`) || !strings.Contains(page, "cycle") {
		t.Fatalf("cycle:\n%s", page)
	}
	badTimeout := cloneValues(typed)
	badTimeout.Set("steps[0].timeout", "soon")
	page = postPage(t, e, c, "/workflows", badTimeout, "", "", http.StatusUnprocessableEntity)
	if !strings.Contains(page, `id="error-steps-0-timeout"`) || !strings.Contains(page, `value="soon"`) {
		t.Fatalf("bad timeout:\n%s", page)
	}
	if ws, _ := e.m.Workflows().List(ctx, ""); len(ws) != 0 {
		t.Fatalf("a refused form saved %d workflows", len(ws))
	}

	// A good one, with a blank edge left over (dropped), saved as typed.
	good := cloneValues(typed)
	good.Set("steps[1].after[0].step", "extract")
	good.Set("steps[1].after[0].on", "failure")
	good.Set("steps[1].after[1].step", "")
	good.Set("steps[1].params", "WHO=ops")
	good.Set("steps[1].timeout", "90s")
	resp := e.postForm(c, "/workflows", good)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/workflows/") {
		t.Fatalf("save: %d %s", resp.StatusCode, loc)
	}
	id := strings.TrimPrefix(loc, "/workflows/")
	w, err := e.m.Workflows().Get(ctx, id)
	if err != nil || w.Title != "nightly etl" || len(w.Steps) != 2 || w.Steps[1].Task != alert || len(w.Steps[1].After) != 1 ||
		w.Steps[1].After[0] != (master.StepEdge{Step: "extract", On: master.OnFailure}) || w.Steps[1].Params["WHO"] != "ops" ||
		w.Steps[1].Timeout != protocol.Duration(90*time.Second) || w.Schedule != nil {
		t.Fatalf("saved: %v %+v", err, w)
	}
	if status, page := e.do(c, "GET", loc, "", nil); status != 200 || !strings.Contains(page, "Workflow “nightly etl” was saved.") ||
		!strings.Contains(page, `id="act-edit-workflow"`) || !strings.Contains(page, `id="act-delete-workflow"`) {
		t.Fatalf("workflow page after the save: %d\n%s", status, page)
	}

	// The edit form holds the definition; an edit from version 1 after
	// another save is refused, the typed title kept.
	status, page = e.do(c, "GET", loc+"/edit", "", nil)
	if status != 200 || !strings.Contains(page, `name="version" value="1"`) || !strings.Contains(page, `name="steps[1].after[0].step" value="extract"`) ||
		!strings.Contains(page, `<option value="failure" selected>`) || !strings.Contains(page, "WHO=ops") || strings.Contains(page, `id="project"`) {
		t.Fatalf("edit form: %d\n%s", status, page)
	}
	in := master.WorkflowInput{WorkflowDef: w.WorkflowDef, Version: 1}
	in.Title = "saved first"
	if _, err := e.m.Workflows().Update(ctx, id, in); err != nil {
		t.Fatal(err)
	}
	stale := cloneValues(good)
	stale.Set("version", "1")
	stale.Set("title", "typed meanwhile")
	page = postPage(t, e, c, loc, stale, "", "", http.StatusConflict)
	if !strings.Contains(page, `id="form-conflict"`) || !strings.Contains(page, "changed since version 1") ||
		!strings.Contains(page, `value="typed meanwhile"`) || !strings.Contains(page, `name="version" value="2"`) {
		t.Fatalf("stale edit:\n%s", page)
	}
	if w, _ := e.m.Workflows().Get(ctx, id); w.Title != "saved first" || w.Version != 2 {
		t.Fatalf("the stale edit saved: %+v", w)
	}
	stale.Set("version", "2")
	if resp := e.postForm(c, loc, stale); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving again over version 2: %d", resp.StatusCode)
	}
	if w, _ := e.m.Workflows().Get(ctx, id); w.Title != "typed meanwhile" || w.Version != 3 {
		t.Fatalf("saved again: %+v", w)
	}

	// A viewer sees neither New workflow nor Edit, and may not open the form.
	e.addUser("vera", "vera-password-1", store.RoleViewer)
	v := e.login("vera", "vera-password-1")
	if _, page := e.do(v, "GET", "/workflows", "", nil); strings.Contains(page, `id="new-workflow"`) {
		t.Fatal("a viewer is offered New workflow")
	}
	if _, page := e.do(v, "GET", loc, "", nil); strings.Contains(page, `id="act-edit-workflow"`) || strings.Contains(page, `id="act-pause-workflow"`) ||
		strings.Contains(page, `id="backfill-form"`) {
		t.Fatal("a viewer is offered Edit, Pause or Backfill")
	}
	if status, _ := e.do(v, "GET", loc+"/edit", "", nil); status != http.StatusForbidden {
		t.Fatalf("a viewer's edit form: %d", status)
	}

	// Delete (the confirmation's htmx post is told where to go).
	status, _ = e.do(c, "POST", loc+"/delete", "", map[string]string{"HX-Request": "true", "Content-Type": "application/x-www-form-urlencoded"})
	if _, err := e.m.Workflows().Get(ctx, id); status != http.StatusOK || !errors.Is(err, master.ErrNotFound) {
		t.Fatalf("delete: %d %v", status, err)
	}
}

// TestWorkflowConsoleScheduleAndBackfill: a workflow given a schedule in
// the form shows its next fire and offers Pause, then Resume; its backfill
// form (times in the workflow's zone) refuses a window that ends before it
// starts beside the field, and starts a backfill whose page shows its
// window and progress; the backfill's runs and a run's note are listed; a
// task's backfill run leads back to its task, not to a workflow.
func TestWorkflowConsoleScheduleAndBackfill(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	ctx := context.Background()
	if err := store.CreateNode(ctx, e.st.DB, &store.Node{Name: "w1", Type: store.TypeWorker, Host: "127.0.0.1:1", Protocol: "http", Priority: 1}); err != nil {
		t.Fatal(err)
	}
	task := workflowTask(t, e, "load")
	c := e.login("admin", "admin-password-1")
	resp := e.postForm(c, "/workflows", url.Values{"project": {"default"}, "title": {"daily load"}, "schedule_kind": {"cron"},
		"schedule_cron": {"0 3 * * *"}, "timezone": {"Europe/Berlin"}, "overlap": {"queue"}, "steps[0].name": {"load"}, "steps[0].task": {task}})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d %s", resp.StatusCode, loc)
	}
	id := strings.TrimPrefix(loc, "/workflows/")
	status, page := e.do(c, "GET", loc, "", nil)
	if status != 200 || !strings.Contains(page, `id="workflow-next-fire"`) || !strings.Contains(page, "03:00:00 +0") ||
		!strings.Contains(page, `id="act-pause-workflow"`) || !strings.Contains(page, `id="backfill-form"`) || !strings.Contains(page, "Europe/Berlin") {
		t.Fatalf("scheduled workflow page: %d\n%s", status, page)
	}

	if resp := e.postForm(c, loc+"/pause", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != loc {
		t.Fatalf("pause: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if w, _ := e.m.Workflows().Get(ctx, id); !w.Paused {
		t.Fatal("not paused")
	}
	if _, page := e.do(c, "GET", loc, "", nil); !strings.Contains(page, `id="workflow-paused"`) || !strings.Contains(page, `id="act-resume-workflow"`) ||
		strings.Contains(page, `id="act-pause-workflow"`) {
		t.Fatalf("paused workflow page:\n%s", page)
	}
	if resp := e.postForm(c, loc+"/resume", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("resume: %d", resp.StatusCode)
	}
	if w, _ := e.m.Workflows().Get(ctx, id); w.Paused || w.NextFire == nil {
		t.Fatalf("resumed: %+v", w)
	}
	// Resume again: refused by its state, said on the page.
	e.postForm(c, loc+"/resume", nil)
	if _, page := e.do(c, "GET", loc, "", nil); !strings.Contains(page, "is not paused") {
		t.Fatalf("a second resume is not refused on the page:\n%s", page)
	}

	// The backfill form: a window ending before it starts is refused
	// beside its end; three days of 03:00 Berlin fires start a backfill.
	berlin, _ := time.LoadLocation("Europe/Berlin")
	day := time.Now().In(berlin).AddDate(0, 0, -5)
	from := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, berlin)
	to := from.AddDate(0, 0, 3)
	form := url.Values{"from": {to.Format("2006-01-02T15:04")}, "to": {from.Format("2006-01-02T15:04")}, "max_concurrent": {"1"}, "order": {"oldest"}}
	page = postPage(t, e, c, loc+"/backfill", form, "", "", http.StatusUnprocessableEntity)
	if !strings.Contains(page, `id="error-backfill-to"`) || !strings.Contains(page, "must be after from") || !strings.Contains(page, `id="backfill-errors"`) {
		t.Fatalf("backfill ending before it starts:\n%s", page)
	}
	form.Set("from", from.Format("2006-01-02T15:04"))
	form.Set("to", to.Format("2006-01-02T15:04"))
	resp = e.postForm(c, loc+"/backfill", form)
	bloc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(bloc, "/backfills/") {
		t.Fatalf("backfill: %d %s", resp.StatusCode, bloc)
	}
	bid := strings.TrimPrefix(bloc, "/backfills/")
	b, err := e.m.Workflows().Backfill(ctx, bid)
	if err != nil || b.Total != 3 || !b.From.Equal(from) || !b.To.Equal(to) {
		t.Fatalf("backfill %v %+v, want 3 fires from %s to %s", err, b, from, to)
	}
	status, page = e.do(c, "GET", bloc, "", nil)
	if status != 200 || !strings.Contains(page, `id="progress-`+bid+`"`) || !strings.Contains(page, `max="3"`) ||
		!strings.Contains(page, `id="backfill-state"`) || !strings.Contains(page, from.Format("2006-01-02 15:04:05 -07:00")) ||
		!strings.Contains(page, "The backfill started: 3 runs to go.") || !strings.Contains(page, `href="/workflows/`+id+`"`) {
		t.Fatalf("backfill page: %d\n%s", status, page)
	}
	if status, page := e.do(c, "GET", bloc+"/live", "", nil); status != 200 || !strings.Contains(page, `id="backfill-live"`) {
		t.Fatalf("backfill live: %d\n%s", status, page)
	}
	// Its runs fail at once (w1 does not run): it ends as done, each run
	// listed; Pause, then refused as done, goes back to the page.
	deadline := time.Now().Add(20 * time.Second)
	for b.State == store.BackfillRunning && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		b, _ = e.m.Workflows().Backfill(ctx, bid)
	}
	if b.State != store.BackfillDone || len(b.Runs) != 3 {
		t.Fatalf("backfill did not end: %+v", b)
	}
	status, page = e.do(c, "GET", bloc, "", nil)
	if status != 200 || strings.Count(page, `id="wrun-`) != 3 || !strings.Contains(page, `data-state="done"`) || strings.Contains(page, "hx-trigger") ||
		strings.Contains(page, `id="act-pause-backfill"`) {
		t.Fatalf("ended backfill page: %d\n%s", status, page)
	}
	if resp := e.postForm(c, bloc+"/pause", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != bloc {
		t.Fatalf("pause of a done backfill: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, page := e.do(c, "GET", loc, "", nil); !strings.Contains(page, `id="backfill-`+bid+`"`) || !strings.Contains(page, `value="3" max="3"`) {
		t.Fatalf("the workflow page does not list the backfill:\n%s", page)
	}
	// A run's run page leads back to its backfill.
	if _, page := e.do(c, "GET", "/workflow-runs/"+b.Runs[0].ID, "", nil); !strings.Contains(page, `id="run-backfill-link"`) {
		t.Fatalf("run of a backfill:\n%s", page)
	}

	// A run skipped by the overlap policy shows its note in the list and on
	// its page.
	row, err := store.GetWorkflow(ctx, e.st.DB, id)
	if err != nil {
		t.Fatal(err)
	}
	skipped := &store.WorkflowRun{ID: "skipped-run", WorkflowID: id, ProjectID: row.ProjectID, Status: store.WorkflowSkipped,
		LogicalTime: time.Now().UTC(), StartedBy: master.ActorScheduler, Trigger: master.TriggerSchedule, Definition: row.Definition,
		Note: "a run was still in progress (overlap policy skip)", EndedAt: time.Now().UTC()}
	if err := store.CreateWorkflowRun(ctx, e.st.DB, skipped, nil); err != nil {
		t.Fatal(err)
	}
	if _, page := e.do(c, "GET", loc, "", nil); !strings.Contains(page, "a run was still in progress (overlap policy skip)") {
		t.Fatalf("the run list does not show the note:\n%s", page)
	}
	if _, page := e.do(c, "GET", "/workflow-runs/skipped-run", "", nil); !strings.Contains(page, `id="wrun-note"`) {
		t.Fatalf("the run page does not show the note:\n%s", page)
	}

	// A task's backfill: its runs belong to no workflow, and their page
	// leads to the task.
	tb, err := e.m.Workflows().BackfillTask(ctx, task, master.BackfillInput{From: time.Now().Add(-3 * time.Hour), To: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if status, page := e.do(c, "GET", "/backfills/"+tb.ID, "", nil); status != 200 || !strings.Contains(page, `href="/tasks/`+task+`"`) {
		t.Fatalf("a task's backfill page: %d\n%s", status, page)
	}
	deadline = time.Now().Add(20 * time.Second)
	for len(tb.Runs) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		tb, _ = e.m.Workflows().Backfill(ctx, tb.ID)
	}
	if len(tb.Runs) == 0 {
		t.Fatal("no run of the task's backfill started")
	}
	status, page = e.do(c, "GET", "/workflow-runs/"+tb.Runs[0].ID, "", nil)
	if status != 200 || strings.Contains(page, `href="/workflows/"`) || !strings.Contains(page, `id="run-task-link" href="/tasks/`+task+`"`) &&
		!strings.Contains(page, `href="/tasks/`+task+`" id="run-task-link"`) {
		t.Fatalf("a task backfill's run page: %d\n%s", status, page)
	}
}

// workflowTask is a task of the default project on w1 (which does not
// run: its runs fail at once).
func workflowTask(t *testing.T, e *env, title string) string {
	t.Helper()
	tk, err := e.m.Tasks().Create(context.Background(), master.TaskInput{Executors: []string{"w1"}, TaskDef: protocol.TaskDef{Title: title,
		Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{Method: "GET", URL: "http://127.0.0.1:1/x"},
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(3600e9)}}}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

// postPage posts a form (with op=value when op is given) and checks the
// status of the page it answers with.
func postPage(t *testing.T, e *env, c *http.Client, path string, v url.Values, op, value string, want int) string {
	t.Helper()
	v = cloneValues(v)
	if op != "" {
		v.Set(op, value)
	}
	resp := e.postForm(c, path, v)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("POST %s %v: %d, want %d\n%s", path, v, resp.StatusCode, want, body)
	}
	return string(body)
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// TestTaskBackfillFromItsPage: an operator backfills a task from its page
// (times in the task's zone), lands on the backfill's page, and finds the
// backfill listed on the task's page; a window with no fire is refused on
// the task page; a viewer gets no form and may not post it.
func TestTaskBackfillFromItsPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	ctx := context.Background()
	if err := store.CreateNode(ctx, e.st.DB, &store.Node{Name: "w1", Type: store.TypeWorker, Host: "127.0.0.1:1", Protocol: "http", Priority: 1}); err != nil {
		t.Fatal(err)
	}
	tk, err := e.m.Tasks().Create(ctx, master.TaskInput{Executors: []string{"w1"}, TaskDef: protocol.TaskDef{Title: "hourly",
		Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{Method: "GET", URL: "http://127.0.0.1:1/x"}, Timezone: "Asia/Shanghai",
		Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "0 * * * *"}}}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	c := e.login("admin", "admin-password-1")
	status, page := e.do(c, "GET", "/tasks/"+tk.ID, "", nil)
	if status != 200 || !strings.Contains(page, `action="/tasks/`+tk.ID+`/backfill"`) || !strings.Contains(page, "Asia/Shanghai") {
		t.Fatalf("task page without its backfill form: %d", status)
	}
	shanghai, _ := time.LoadLocation("Asia/Shanghai")
	to := time.Now().In(shanghai).Truncate(time.Hour)
	from := to.Add(-2 * time.Hour)
	resp := e.postForm(c, "/tasks/"+tk.ID+"/backfill", url.Values{"from": {from.Format("2006-01-02T15:04")}, "to": {to.Format("2006-01-02T15:04")},
		"order": {"newest"}})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/backfills/") {
		t.Fatalf("backfill: %d %s", resp.StatusCode, loc)
	}
	b, err := e.m.Workflows().Backfill(ctx, strings.TrimPrefix(loc, "/backfills/"))
	if err != nil || b.Total != 3 || b.TaskID != tk.ID || b.Order != master.BackfillNewestFirst {
		t.Fatalf("backfill %+v (%v): want 3 fires of the task, newest first", b, err)
	}
	if status, page = e.do(c, "GET", "/tasks/"+tk.ID, "", nil); status != 200 || !strings.Contains(page, `id="task-backfills"`) ||
		!strings.Contains(page, `href="/backfills/`+b.ID+`"`) {
		t.Fatalf("task page without its backfill: %d", status)
	}
	// Ten to twenty past an hour holds no fire: refused, back on the task.
	resp = e.postForm(c, "/tasks/"+tk.ID+"/backfill", url.Values{"from": {from.Add(10 * time.Minute).Format("2006-01-02T15:04")},
		"to": {from.Add(20 * time.Minute).Format("2006-01-02T15:04")}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/tasks/"+tk.ID {
		t.Fatalf("a window with no fire: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, page = e.do(c, "GET", "/tasks/"+tk.ID, "", nil); !strings.Contains(page, "no fire") {
		t.Errorf("the refusal is not shown on the task page")
	}
	if bs, _ := e.m.Workflows().Backfills(ctx, "", tk.ID); len(bs) != 1 {
		t.Errorf("%d backfills after a refusal, want 1", len(bs))
	}
	e.addUser("vera", "vera-password-1", store.RoleViewer)
	v := e.login("vera", "vera-password-1")
	if status, page := e.do(v, "GET", "/tasks/"+tk.ID, "", nil); status != 200 || strings.Contains(page, `id="backfill-form"`) {
		t.Fatalf("a viewer's task page: %d, form shown %v", status, strings.Contains(page, `id="backfill-form"`))
	}
	if resp := e.postForm(v, "/tasks/"+tk.ID+"/backfill", url.Values{"from": {from.Format("2006-01-02T15:04")}}); resp.StatusCode != http.StatusForbidden &&
		resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a viewer's backfill: %d", resp.StatusCode)
	}
}
