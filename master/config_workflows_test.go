package master_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// workflowsEnv is configEnv with two workflows over its tasks: "nightly"
// (keyed, scheduled in Berlin, a step on the keyed task and one on the
// keyless "report" after it on failure) and the keyless "by hand".
func workflowsEnv(t *testing.T, s storetest.NamedStore) *env {
	t.Helper()
	e := configEnv(t, s)
	got := e.tasksByTitle()
	end := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	nightly := master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "Nightly ETL", Key: "nightly",
		Timeout: protocol.Duration(2 * time.Hour), Params: map[string]string{"region": "eu"},
		Schedule: &protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "0 2 * * *"}, Timezone: "Europe/Berlin", EndAt: &end,
		Overlap: protocol.OverlapQueue, Misfire: protocol.MisfireRunOnce,
		Steps: []master.WorkflowStep{
			{Name: "ping", Task: got["Ping billing"].ID, Timeout: protocol.Duration(30 * time.Second)},
			{Name: "report", Task: got["report"].ID, Params: map[string]string{"day": "{{WORKFLOW_TIME}}"},
				After: []master.StepEdge{{Step: "ping", On: master.OnFailure}}},
		}}}
	if _, err := e.m.Workflows().Create(e.ctx, nightly); err != nil {
		t.Fatal(err)
	}
	byHand := master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "by hand",
		Steps: []master.WorkflowStep{{Name: "only", Task: got["report"].ID}}}}
	if _, err := e.m.Workflows().Create(e.ctx, byHand); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) workflowsByTitle() map[string]*master.Workflow {
	e.t.Helper()
	list, err := e.m.Workflows().List(e.ctx, "")
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]*master.Workflow{}
	for i := range list {
		if out[list[i].Title] != nil {
			e.t.Fatalf("two workflows titled %q", list[i].Title)
		}
		out[list[i].Title] = &list[i]
	}
	return out
}

// workflowsSection is the workflows section of an exported document.
func workflowsSection(t *testing.T, doc string) string {
	t.Helper()
	i := strings.Index(doc, "\nworkflows:")
	if i < 0 {
		t.Fatalf("export has no workflows section:\n%s", doc)
	}
	return doc[i:]
}

// workflowChanges counts a plan's workflow changes by action.
func workflowChanges(p *master.Plan) map[string]int {
	out := map[string]int{}
	for _, c := range p.Changes {
		if c.Kind == master.PlanWorkflow {
			out[c.Action]++
		}
	}
	return out
}

// TestExportApplyWorkflowsRoundTrip: an export's workflows section holds no
// id and names each step's task by key, or by title when it has none;
// applied to the master it came from it changes nothing; applied to a fresh
// master it makes the same workflows over the tasks it makes, whose export
// is the same text; applied again it changes nothing. The workflows of a
// project the caller may not read are not exported.
func TestExportApplyWorkflowsRoundTrip(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := workflowsEnv(t, s)
		other, err := e.m.Projects().Create(e.ctx, master.ProjectInput{Name: "other", Pools: []string{"*"}})
		if err != nil {
			t.Fatal(err)
		}
		in := httpInput("w1")
		in.Title, in.Project = "other task", "other"
		ot := e.mustCreate(in)
		if _, err := e.m.Workflows().Create(e.ctx, master.WorkflowInput{Project: "other", WorkflowDef: master.WorkflowDef{
			Title: "other workflow", Steps: []master.WorkflowStep{{Name: "x", Task: ot.ID}}}}); err != nil {
			t.Fatal(err)
		}

		doc := e.export()
		section := workflowsSection(t, doc)
		for _, w := range e.workflowsByTitle() {
			if strings.Contains(doc, w.ID) {
				t.Errorf("export holds workflow id %s:\n%s", w.ID, section)
			}
		}
		for _, tk := range e.tasksByTitle() {
			if strings.Contains(section, tk.ID) {
				t.Errorf("export's workflows hold task id %s:\n%s", tk.ID, section)
			}
		}
		for _, want := range []string{"key: nightly", "title: Nightly ETL", "cron: 0 2 * * *", "timezone: Europe/Berlin",
			"end_at: \"2031-01-02T03:04:05Z\"", "overlap: queue", "misfire: run_once", "timeout: 2h0m0s", "region: eu",
			"task: billing-ping", "task: report", "timeout: 30s", "day: '{{WORKFLOW_TIME}}'", "after: [{step: ping, on: failure}]",
			"title: by hand"} {
			if !strings.Contains(section, want) {
				t.Errorf("workflows section lacks %q:\n%s", want, section)
			}
		}
		if strings.Contains(doc, "other workflow") || strings.Contains(doc, "project") {
			t.Errorf("export holds another project's workflow, or a project:\n%s", section)
		}
		// A viewer of the default project only reads the default project's.
		viewer := master.WithPrincipal(e.ctx, &master.Principal{Name: "alice", Role: store.RoleNone,
			Memberships: map[int64]master.ProjectRole{1: master.ProjectViewer}})
		if out, err := e.m.Export(viewer, master.ExportOptions{}); err != nil || string(out) != doc {
			t.Fatalf("a viewer's export: %v\n%s", err, out)
		}
		if _, err := e.m.Export(viewer, master.ExportOptions{Project: other.Name}); master.KindOf(err) != master.KindNotFound {
			t.Fatalf("a viewer exported a project it may not read: %v", err)
		}

		plan, err := e.apply(doc, secretsEnv, master.ApplyOptions{})
		if err != nil || !plan.Applied || plan.Unchanged != 5 || workflowChanges(plan)[master.PlanUnchanged] != 2 {
			t.Fatalf("apply of its own export: %v %+v", err, plan)
		}

		e2 := newEnv(t, storetest.Open(t, s.Name))
		e2.addMasterNode()
		runningWorkers(e2, "w1", "w2")
		addUser(e2, "alice")
		dry, err := e2.apply(doc, secretsEnv, master.ApplyOptions{DryRun: true})
		if err != nil || workflowChanges(dry)[master.PlanCreate] != 2 || len(e2.workflowsByTitle()) != 0 {
			t.Fatalf("dry run on a fresh master: %v %+v", err, dry)
		}
		plan, err = e2.apply(doc, secretsEnv, master.ApplyOptions{})
		if err != nil || !plan.Applied || plan.Create != 5 || workflowChanges(plan)[master.PlanCreate] != 2 {
			t.Fatalf("apply on a fresh master: %v %+v", err, plan)
		}
		for _, c := range plan.Changes {
			if c.Kind == master.PlanWorkflow && (!c.Done || c.ID == "") {
				t.Errorf("workflow change not done: %+v", c)
			}
		}
		if doc2 := e2.export(); doc2 != doc {
			t.Fatalf("export after apply differs:\n--- first\n%s\n--- second\n%s", doc, doc2)
		}
		tasks, wfs := e2.tasksByTitle(), e2.workflowsByTitle()
		n := wfs["Nightly ETL"]
		if n == nil || n.Steps[0].Task != tasks["Ping billing"].ID || n.Steps[1].Task != tasks["report"].ID || n.NextFire == nil {
			t.Fatalf("workflow made by apply: %+v", n)
		}
		plan, err = e2.apply(doc, secretsEnv, master.ApplyOptions{})
		if err != nil || plan.Unchanged != 5 || plan.Create+plan.Update+plan.Delete != 0 {
			t.Fatalf("second apply: %v %s", err, counts(plan))
		}
	})
}

// TestApplyWorkflowUnknownTaskRefused: a step naming a task that neither
// the document nor the project has, or a title two tasks share, is refused
// with the workflow, the step and its field path, and nothing changes: not
// the document's new task, nor its good workflow, nor the settings.
func TestApplyWorkflowUnknownTaskRefused(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := workflowsEnv(t, s)
		for _, key := range []string{"twin-1", "twin-2"} {
			in := httpInput("w1")
			in.Title, in.Key = "twin", key
			e.mustCreate(in)
		}
		before, beforeWfs := e.export(), len(e.workflowsByTitle())
		doc := `version: 1
tasks:
  - title: fresh
    type: http
    schedule: {kind: interval, every: 1h}
    http: {url: "http://127.0.0.1:1/"}
    executors: [w1]
workflows:
  - key: etl
    title: ETL
    steps:
      - {name: extract, task: fresh}
      - {name: load, task: nowhere, after: [{step: extract}]}
  - title: twins
    steps:
      - {name: one, task: twin}
  - title: good
    steps:
      - {name: one, task: billing-ping}
`
		for _, dry := range []bool{true, false} {
			_, err := e.apply(doc, nil, master.ApplyOptions{DryRun: dry})
			var me *master.Error
			if !errors.As(err, &me) || me.Kind != master.KindInvalid {
				t.Fatalf("apply (dry run %v): %v", dry, err)
			}
			unknown := me.Fields["workflows[0] (key etl).steps[1].task"]
			if !strings.Contains(unknown, `step "load"`) || !strings.Contains(unknown, `"nowhere"`) {
				t.Errorf("unknown task: %q in %v", unknown, me.Fields)
			}
			if twin := me.Fields["workflows[1] “twins”.steps[0].task"]; !strings.Contains(twin, `2 tasks have the title "twin"`) {
				t.Errorf("ambiguous title: %q in %v", twin, me.Fields)
			}
			if len(me.Fields) != 2 || !strings.Contains(me.Msg, "workflows[0] (key etl).steps[1].task") ||
				!strings.HasPrefix(me.Msg, "the document was not applied, nothing changed") {
				t.Errorf("refusal: %s %v", me.Msg, me.Fields)
			}
		}
		if after := e.export(); after != before || len(e.workflowsByTitle()) != beforeWfs {
			t.Fatalf("a refused document changed the master:\n%s", after)
		}

		// A bad graph is refused at the plan too, named by workflow and step.
		bad := strings.Replace(doc, "task: nowhere, after: [{step: extract}]", "task: fresh, after: [{step: load}]", 1)
		bad = strings.Replace(bad, "task: twin}", "task: report}", 1)
		_, err := e.apply(bad, nil, master.ApplyOptions{})
		var fe protocol.FieldErrors
		if !errors.As(err, &fe) || !strings.Contains(fe["workflows[0] (key etl).steps[1].after[0]"], "waits for itself") {
			t.Fatalf("a step waiting for itself: %v", err)
		}
		// A document's workflow may not be what prune deletes, nor use a
		// task prune deletes.
		_, err = e.apply(strings.Replace(bad, ", after: [{step: load}]", "", 1), nil, master.ApplyOptions{Prune: true})
		if !errors.As(err, &fe) || !strings.Contains(fe["workflows[1] “twins”.steps[0].task"], "prune deletes it") {
			t.Fatalf("a step on a pruned task: %v", err)
		}
		if after := e.export(); after != before {
			t.Fatalf("a refused document changed the master:\n%s", after)
		}
	})
}

// TestApplyWorkflowMatchedByKey: a second apply of a keyed workflow updates
// it in place (same id, the fields named, a new version), never a second
// one; a keyless one is matched by title; without a workflows section
// prune leaves the workflows alone and refuses to delete a task one uses;
// with one (even empty) prune deletes those it lacks.
func TestApplyWorkflowMatchedByKey(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := configEnv(t, s)
		doc := `version: 1
tasks:
  - key: extract
    title: Extract
    type: http
    schedule: {kind: interval, every: 1h}
    http: {url: "http://127.0.0.1:1/extract"}
    executors: [w1]
workflows:
  - key: etl
    title: ETL
    steps:
      - {name: extract, task: extract}
      - {name: report, task: report, after: [{step: extract}]}
  - title: plain
    steps:
      - {name: one, task: Ping billing}
`
		plan, err := e.apply(doc, nil, master.ApplyOptions{})
		if err != nil || workflowChanges(plan)[master.PlanCreate] != 2 {
			t.Fatalf("first apply: %v %+v", err, plan)
		}
		first := e.workflowsByTitle()["ETL"]
		if first == nil || first.Steps[0].Task != e.tasksByTitle()["Extract"].ID ||
			e.workflowsByTitle()["plain"].Steps[0].Task != e.tasksByTitle()["Ping billing"].ID {
			t.Fatalf("workflows after the first apply: %+v", e.workflowsByTitle())
		}

		changed := strings.Replace(doc, "title: ETL", "title: ETL, renamed", 1)
		changed = strings.Replace(changed, "{name: report, task: report, after: [{step: extract}]}",
			"{name: report, task: report, params: {day: today}, after: [{step: extract, on: always}]}", 1)
		dry, err := e.apply(changed, nil, master.ApplyOptions{DryRun: true})
		if err != nil || workflowChanges(dry)[master.PlanUpdate] != 1 || e.workflowsByTitle()["ETL"] == nil {
			t.Fatalf("dry run: %v %+v", err, dry)
		}
		plan, err = e.apply(changed, nil, master.ApplyOptions{})
		if err != nil || !plan.Applied || workflowChanges(plan)[master.PlanUpdate] != 1 || workflowChanges(plan)[master.PlanUnchanged] != 1 {
			t.Fatalf("second apply: %v %+v", err, plan)
		}
		for _, c := range plan.Changes {
			if c.Kind == master.PlanWorkflow && c.Action == master.PlanUpdate &&
				(c.ID != first.ID || c.Key != "etl" || strings.Join(c.Fields, ",") != "steps,title" || !c.Done) {
				t.Errorf("update of the workflow: %+v", c)
			}
		}
		wfs := e.workflowsByTitle()
		got := wfs["ETL, renamed"]
		if len(wfs) != 2 || got == nil || got.ID != first.ID || got.Version != first.Version+1 ||
			got.Steps[1].Params["day"] != "today" || got.Steps[1].After[0].On != master.OnAlways {
			t.Fatalf("after the second apply: %+v", wfs)
		}
		if plan, err := e.apply(changed, nil, master.ApplyOptions{}); err != nil || workflowChanges(plan)[master.PlanUnchanged] != 2 {
			t.Fatalf("third apply: %v %+v", err, plan)
		}

		// Who applies needs the edit role in the project: an operator's
		// apply changes nothing, an editor's goes through the workflow
		// domain. One document serves a dry run and then the apply.
		d, err := master.ParseDocument([]byte(strings.Replace(changed, "title: plain", "title: plain\n    timeout: 1h", 1)))
		if err != nil {
			t.Fatal(err)
		}
		as := func(role master.ProjectRole) context.Context {
			return master.WithPrincipal(e.ctx, &master.Principal{Name: "alice", Role: store.RoleNone,
				Memberships: map[int64]master.ProjectRole{1: role}})
		}
		if _, err := e.m.Apply(as(master.ProjectOperator), d, master.ApplyOptions{By: "alice"}); master.KindOf(err) != master.KindForbidden {
			t.Fatalf("an operator's apply: %v", err)
		}
		if dry, err := e.m.Apply(as(master.ProjectEditor), d, master.ApplyOptions{By: "alice", DryRun: true}); err != nil || workflowChanges(dry)[master.PlanUpdate] != 1 {
			t.Fatalf("an editor's dry run: %v %+v", err, dry)
		}
		if plan, err := e.m.Apply(as(master.ProjectEditor), d, master.ApplyOptions{By: "alice"}); err != nil || workflowChanges(plan)[master.PlanUpdate] != 1 ||
			time.Duration(e.workflowsByTitle()["plain"].Timeout) != time.Hour {
			t.Fatalf("an editor's apply: %v %+v", err, plan)
		}

		// No workflows section: prune leaves the workflows alone, and
		// deletes no task one of them uses.
		tasksOnly := changed[:strings.Index(changed, "workflows:")]
		_, err = e.apply(tasksOnly, nil, master.ApplyOptions{Prune: true})
		var fe protocol.FieldErrors
		if !errors.As(err, &fe) || !strings.Contains(fe["prune"], "workflow “plain”") || !strings.Contains(fe["prune"], "task “Ping billing”") {
			t.Fatalf("prune of a task a workflow uses: %v", err)
		}
		if len(e.workflowsByTitle()) != 2 || e.tasksByTitle()["Ping billing"] == nil {
			t.Fatal("a refused prune changed the master")
		}
		// An empty section says the document holds the project's
		// workflows: prune deletes them, before the tasks they used.
		plan, err = e.apply(tasksOnly+"workflows: []\n", nil, master.ApplyOptions{Prune: true})
		if err != nil || !plan.Applied || workflowChanges(plan)[master.PlanDelete] != 2 {
			t.Fatalf("prune: %v %+v", err, plan)
		}
		if n := len(e.workflowsByTitle()); n != 0 {
			t.Fatalf("%d workflows left after prune", n)
		}
		for i, c := range plan.Changes {
			if c.Kind == "" && c.Action == master.PlanDelete && workflowChanges(&master.Plan{Changes: plan.Changes[i:]})[master.PlanDelete] > 0 {
				t.Fatalf("a task deleted before a workflow: %+v", plan.Changes)
			}
		}
	})
}

// TestParseDocumentWorkflows: a workflows section that is not a list of
// workflows, a workflow with an id or an unknown field, too many
// workflows, and a reference to the environment in a workflow are refused
// naming where; none, an empty one and a list read as such.
func TestParseDocumentWorkflows(t *testing.T) {
	t.Parallel()
	const head = "version: 1\ntasks: []\n"
	wf := head + "workflows:\n  - key: etl\n    title: ETL\n    steps: [{name: a, task: extract}]\n"
	for name, c := range map[string]struct{ doc, want string }{
		"not a list": {head + "workflows: 5\n", "workflows: must be a list of workflows"},
		"not a map":  {head + "workflows: [x]\n", "workflows[0]: must be a mapping"},
		"id":         {wf + "    id: abc\n", "workflows[0].id: a document carries no ids"},
		"project":    {wf + "    project: other\n", `workflows[0] (key etl): unknown field "project"`},
		"step field": {strings.Replace(wf, "task: extract", "task: extract, taks: x", 1), `workflows[0] (key etl): unknown field "taks"`},
		"type":       {wf + "    timeout: soon\n", "workflows[0] (key etl)"},
		"too many":   {head + "workflows:\n" + strings.Repeat("  - {}\n", master.MaxDocumentWorkflows+1), "at most 1000"},
		"ref":        {wf + "    params: {token: \"${ENV:TOKEN}\"}\n", "workflows[0].params.token: ${ENV:TOKEN} is a reference"},
	} {
		if _, err := master.ParseDocument([]byte(c.doc)); err == nil || !strings.Contains(master.Message(err), c.want) {
			t.Errorf("%s: got %v, want an error saying %q", name, err, c.want)
		}
	}
	if _, err := master.FillDocument([]byte(wf+"    params: {token: \"${ENV:TOKEN}\"}\n"), []string{"TOKEN"}, lookupIn(map[string]string{"TOKEN": "x"})); err == nil ||
		!strings.Contains(master.Message(err), "filled only in secret fields") {
		t.Errorf("a reference in a workflow's params filled: %v", err)
	}
	for doc, want := range map[string]int{head: -1, head + "workflows: []\n": 0, wf: 1} {
		d, err := master.ParseDocument([]byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if got := len(d.Workflows); (want < 0) != (d.Workflows == nil) || (want >= 0 && got != want) {
			t.Errorf("%q: %d workflows (nil %v), want %d", doc, got, d.Workflows == nil, want)
		}
	}
	if d, _ := master.ParseDocument([]byte(wf)); d.Workflows[0].Steps[0].Task != "extract" {
		t.Errorf("step's task: %+v", d.Workflows[0])
	}
}
