package master_test

import (
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// Secrets of the tasks of configEnv, which no export may show.
const (
	secretParam  = "param-secret-value-0001"
	secretHeader = "Bearer header-secret-value-0002"
	secretPass   = "url-secret-value-0003"
)

// configEnv is a master with workers w1 and w2 running, user alice, and
// three tasks: "billing-ping" (keyed, secrets, child "cleanup", running),
// "cleanup" (a selector, stopped) and "report" (cron in Berlin, paused).
func configEnv(t *testing.T, s storetest.NamedStore) *env {
	t.Helper()
	e := newEnv(t, s)
	e.addMasterNode()
	runningWorkers(e, "w1", "w2")
	addUser(e, "alice")
	cleanup := httpInput()
	cleanup.Title, cleanup.Selector, cleanup.Routing = "cleanup", "pool=batch", protocol.RoutingBroadcast
	cleanup.Executors = []string{"w2"}
	ct := e.mustCreate(cleanup)
	ping := httpInput("w1")
	ping.Title, ping.Key, ping.Description = "Ping billing", "billing-ping", "pings billing\nevery hour"
	ping.HTTP.URL = "https://ops:" + secretPass + "@billing.example/ping?x={{token}}"
	ping.HTTP.Method, ping.HTTP.Body, ping.HTTP.ContentType = "POST", `{"a": "${ENV:NOT_A_REF}"}`, "application/json"
	ping.HTTP.Headers = map[string]string{"Authorization": secretHeader, "X-Plain": "visible"}
	ping.Params = map[string]string{"token": secretParam, "region": "eu"}
	ping.SecretParams = []string{"token"}
	ping.Keepers, ping.Children, ping.Retries = []string{"alice"}, []string{ct.ID}, 2
	pt := e.mustCreate(ping)
	if _, err := e.m.Tasks().Start(e.ctx, pt.ID); err != nil {
		t.Fatal(err)
	}
	report := httpInput("w1", "w2")
	report.Title, report.Timezone, report.Overlap, report.Misfire = "report", "Europe/Berlin", protocol.OverlapSkip, protocol.MisfireRunOnce
	report.Schedule = protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "0 3 * * *"}
	rt := e.mustCreate(report)
	if _, err := e.m.Tasks().Start(e.ctx, rt.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Tasks().Pause(e.ctx, rt.ID); err != nil {
		t.Fatal(err)
	}
	return e
}

// secretsEnv has the values of the variables configEnv's export names.
var secretsEnv = map[string]string{
	"BILLING_PING_PARAM_TOKEN":          secretParam,
	"BILLING_PING_HEADER_AUTHORIZATION": secretHeader,
	"BILLING_PING_URL_PASSWORD":         secretPass,
}

func lookupIn(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func addUser(e *env, name string) {
	e.t.Helper()
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw-"+name+"-123456"), bcrypt.MinCost)
	if err := store.CreateUser(e.ctx, e.s.Store.DB, &store.User{Username: name, PasswordHash: string(hash), Role: store.RoleViewer}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) mustCreate(in master.TaskInput) *master.Task {
	e.t.Helper()
	t, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		e.t.Fatalf("CreateTask(%s): %v", in.Title, err)
	}
	return t
}

func (e *env) export() string {
	e.t.Helper()
	out, err := e.m.Export(e.ctx, master.ExportOptions{})
	if err != nil {
		e.t.Fatalf("Export: %v", err)
	}
	return string(out)
}

// apply fills text from vars, reads it as the API does, and applies it.
func (e *env) apply(text string, vars map[string]string, opts master.ApplyOptions) (*master.Plan, error) {
	e.t.Helper()
	filled, err := master.FillDocument([]byte(text), slices.Collect(maps.Keys(vars)), lookupIn(vars))
	if err != nil {
		e.t.Fatalf("FillDocument: %v", err)
	}
	doc, err := master.ParseDocument(filled)
	if err != nil {
		e.t.Fatalf("ParseDocument: %v\n%s", err, filled)
	}
	if opts.By == "" {
		opts.By = "admin"
	}
	return e.m.Apply(e.ctx, doc, opts)
}

func (e *env) tasksByTitle() map[string]*master.Task {
	e.t.Helper()
	list, _, err := e.m.Tasks().List(e.ctx, store.TaskFilter{Limit: 500})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]*master.Task{}
	for i := range list {
		out[list[i].Title] = &list[i]
	}
	return out
}

func counts(p *master.Plan) string {
	return fmt.Sprintf("create %d update %d unchanged %d delete %d", p.Create, p.Update, p.Unchanged, p.Delete)
}

// TestExportApplyRoundTrip: an export holds the desired state and no secret,
// id, timestamp or counter; applied to the master it came from it changes
// nothing; applied to a fresh master it makes the same tasks (secrets from
// the environment, children by key, states), whose export is the same text;
// applied again it changes nothing.
func TestExportApplyRoundTrip(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := configEnv(t, s)
		doc := e.export()
		for _, bad := range []string{secretParam, secretHeader, secretPass, "header-secret", "id:", "created_at", "run_count",
			"last_run", "next_run", "updated_at", protocol.SecretMask} {
			if strings.Contains(doc, bad) {
				t.Errorf("export holds %q:\n%s", bad, doc)
			}
		}
		for _, want := range []string{"key: billing-ping", "${ENV:BILLING_PING_PARAM_TOKEN}", "${ENV:BILLING_PING_HEADER_AUTHORIZATION}",
			"https://ops:${ENV:BILLING_PING_URL_PASSWORD}@billing.example/ping", "state: running", "state: paused", "state: stopped",
			"X-Plain: visible", "region: eu", "- cleanup", "selector: pool=batch", "timezone: Europe/Berlin",
			"$${ENV:NOT_A_REF}", "Environment needed: BILLING_PING_PARAM_TOKEN, BILLING_PING_HEADER_AUTHORIZATION, BILLING_PING_URL_PASSWORD"} {
			if !strings.Contains(doc, want) {
				t.Errorf("export lacks %q:\n%s", want, doc)
			}
		}
		if strings.Index(doc, "key: billing-ping") > strings.Index(doc, "title: cleanup") {
			t.Errorf("tasks are not in the order of their key or title:\n%s", doc)
		}

		plan, err := e.apply(doc, secretsEnv, master.ApplyOptions{})
		if err != nil || plan.Unchanged != 3 || plan.Create+plan.Update+plan.Delete != 0 || !plan.Applied {
			t.Fatalf("apply of its own export: %v %+v", err, plan)
		}

		// A fresh master with workers of the same names.
		e2 := newEnv(t, storetest.Open(t, s.Name))
		e2.addMasterNode()
		runningWorkers(e2, "w1", "w2")
		addUser(e2, "alice")
		plan, err = e2.apply(doc, secretsEnv, master.ApplyOptions{})
		if err != nil || plan.Create != 3 || !plan.Applied {
			t.Fatalf("apply on a fresh master: %v %+v", err, plan)
		}
		// Children are made before their parents.
		if plan.Changes[0].Title != "cleanup" && plan.Changes[1].Title != "cleanup" {
			t.Errorf("cleanup is not created before billing-ping: %+v", plan.Changes)
		}
		if doc2 := e2.export(); doc2 != doc {
			t.Fatalf("export after apply differs:\n--- first\n%s\n--- second\n%s", doc, doc2)
		}
		got := e2.tasksByTitle()
		ping := got["Ping billing"]
		if ping == nil || ping.Status != store.TaskRunning || ping.Params["token"] != secretParam ||
			ping.HTTP.Headers["Authorization"] != secretHeader || !strings.Contains(ping.HTTP.URL, ":"+secretPass+"@") ||
			ping.HTTP.Body != `{"a": "${ENV:NOT_A_REF}"}` || len(ping.Children) != 1 || ping.Children[0] != got["cleanup"].ID {
			t.Fatalf("task made by apply: %+v", ping)
		}
		if got["report"].Status != store.TaskPaused || got["cleanup"].Status != store.TaskStopped {
			t.Fatalf("states: report %s, cleanup %s", got["report"].Status, got["cleanup"].Status)
		}
		plan, err = e2.apply(doc, secretsEnv, master.ApplyOptions{})
		if err != nil || plan.Unchanged != 3 || plan.Create+plan.Update+plan.Delete != 0 {
			t.Fatalf("second apply: %v %s", err, counts(plan))
		}
	})
}

// TestApplyUpdatesRunningTask: a running task whose definition changes is
// edited in place and stays running (never stopped); a change of
// state alone moves it; a secret changed in the environment is an update
// that names the field and never the value.
func TestApplyUpdatesRunningTask(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := configEnv(t, s)
		doc := e.export()
		changed := strings.Replace(doc, "region: eu", "region: us", 1)
		changed = strings.Replace(changed, "state: paused", "state: running", 1)
		vars := map[string]string{}
		for k, v := range secretsEnv {
			vars[k] = v
		}
		vars["BILLING_PING_PARAM_TOKEN"] = "a-new-secret-value"
		dry, err := e.apply(changed, vars, master.ApplyOptions{DryRun: true})
		if err != nil || dry.Update != 2 || dry.Unchanged != 1 || dry.Applied {
			t.Fatalf("dry run: %v %+v", err, dry)
		}
		if e.tasksByTitle()["Ping billing"].Params["region"] != "eu" || e.tasksByTitle()["report"].Status != store.TaskPaused {
			t.Fatal("a dry run changed a task")
		}
		plan, err := e.apply(changed, vars, master.ApplyOptions{})
		if err != nil || plan.Update != 2 || !plan.Applied {
			t.Fatalf("apply: %v %+v", err, plan)
		}
		for _, c := range plan.Changes {
			switch c.Title {
			case "Ping billing":
				if c.State != "running" || strings.Join(c.Fields, ",") != "params" || !c.Done {
					t.Errorf("change of the running task: %+v", c)
				}
			case "report":
				if c.State != "paused → running" || strings.Join(c.Fields, ",") != "state" {
					t.Errorf("change of state: %+v", c)
				}
			}
		}
		got := e.tasksByTitle()
		if p := got["Ping billing"]; p.Status != store.TaskRunning || p.Params["region"] != "us" || p.Params["token"] != "a-new-secret-value" {
			t.Fatalf("after apply: %s %v", p.Status, p.Params)
		}
		if got["report"].Status != store.TaskRunning {
			t.Fatalf("report is %s, want running", got["report"].Status)
		}
		if plan, err := e.apply(changed, vars, master.ApplyOptions{}); err != nil || plan.Unchanged != 3 {
			t.Fatalf("again: %v %s", err, counts(plan))
		}
	})
}

// TestApplyPruneAndKeys: without prune a task missing from the document
// stays; a dry run with prune lists it as a deletion and deletes nothing;
// prune deletes it. A key matches a task whose title changed; a key is one
// task's only.
func TestApplyPruneAndKeys(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := configEnv(t, s)
		doc := `version: 1
tasks:
  - key: billing-ping
    title: Billing ping, renamed
    type: http
    state: stopped
    schedule: {kind: interval, every: 1h}
    http: {method: GET, url: "http://127.0.0.1:1/"}
    executors: [w1]
  - title: fresh
    type: http
    schedule: {kind: interval, every: 2h}
    http: {url: "http://127.0.0.1:1/"}
    executors: [w2]
    children: [billing-ping]
`
		plan, err := e.apply(doc, nil, master.ApplyOptions{})
		if err != nil || plan.Create != 1 || plan.Update != 1 || plan.Delete != 0 {
			t.Fatalf("apply: %v %+v", err, plan)
		}
		got := e.tasksByTitle()
		if got["Billing ping, renamed"] == nil || got["Ping billing"] != nil || got["Billing ping, renamed"].Status != store.TaskStopped ||
			got["cleanup"] == nil || got["report"] == nil || got["fresh"].Children[0] != got["Billing ping, renamed"].ID {
			t.Fatalf("after apply: %v", got)
		}
		dry, err := e.apply(doc, nil, master.ApplyOptions{Prune: true, DryRun: true})
		if err != nil || dry.Delete != 2 || dry.Unchanged != 2 || len(e.tasksByTitle()) != 4 {
			t.Fatalf("dry run with prune: %v %+v", err, dry)
		}
		plan, err = e.apply(doc, nil, master.ApplyOptions{Prune: true})
		if err != nil || plan.Delete != 2 || !plan.Applied {
			t.Fatalf("prune: %v %+v", err, plan)
		}
		if got := e.tasksByTitle(); len(got) != 2 || got["report"] != nil {
			t.Fatalf("after prune: %v", got)
		}
		// The key is taken: neither a new task nor another one may have it.
		in := httpInput("w1")
		in.Key = "billing-ping"
		if _, err := e.m.Tasks().Create(e.ctx, in, "admin"); !isFieldErrors(err, "key") {
			t.Fatalf("duplicate key: %v", err)
		}
		in.Key = "bad key!"
		if _, err := e.m.Tasks().Create(e.ctx, in, "admin"); !isFieldErrors(err, "key") {
			t.Fatalf("bad key: %v", err)
		}
		// An edit without a key (the console's form) keeps it.
		bp := e.tasksByTitle()["Billing ping, renamed"]
		edit := master.TaskInput{TaskDef: bp.TaskDef, Executors: bp.Executors}
		edit.Key, edit.Description = "", "edited in the console"
		if up, err := e.m.Tasks().Update(e.ctx, bp.ID, edit); err != nil || up.Key != "billing-ping" {
			t.Fatalf("edit without key: %v %+v", err, up)
		}
		// A clone has no key.
		if cl, err := e.m.Tasks().Clone(e.ctx, bp.ID, "admin"); err != nil || cl.Key != "" {
			t.Fatalf("clone: %v %+v", err, cl)
		}
	})
}

// TestApplyRefusesWholeDocument: one bad task refuses the document, every
// problem is named by task and field, and nothing changes.
func TestApplyRefusesWholeDocument(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := configEnv(t, s)
		before := e.export()
		doc := `version: 1
tasks:
  - title: good
    type: http
    schedule: {kind: interval, every: 1h}
    http: {url: "http://127.0.0.1:1/"}
    executors: [w1]
  - title: bad cron
    type: http
    schedule: {kind: cron, cron: "61 * * * *"}
    http: {url: "http://127.0.0.1:1/"}
    executors: [w1]
  - title: ghost executor
    type: http
    schedule: {kind: interval, every: 1h}
    http: {url: "http://127.0.0.1:1/"}
    executors: [nobody]
    keepers: [nobody]
  - key: billing-ping
    title: Ping billing
    type: http
    state: sleeping
    schedule: {kind: interval, every: 1h}
    http: {url: "http://127.0.0.1:1/"}
  - title: loop a
    type: http
    schedule: {kind: interval, every: 1h}
    http: {url: "http://127.0.0.1:1/"}
    executors: [w1]
    children: [loop b]
  - title: loop b
    type: http
    schedule: {kind: interval, every: 1h}
    http: {url: "http://127.0.0.1:1/"}
    executors: [w1]
    children: [loop a, nowhere]
`
		_, err := e.apply(doc, nil, master.ApplyOptions{Prune: true})
		var me *master.Error
		if !errors.As(err, &me) || me.Kind != master.KindInvalid {
			t.Fatalf("apply: %v", err)
		}
		for _, f := range []string{"tasks[3] (key billing-ping).state", "tasks[5] “loop b”.children"} {
			if me.Fields[f] == "" {
				t.Errorf("no error on %s: %v", f, me.Fields)
			}
		}
		// The first pass stops at names; fix them and the checks come.
		doc = strings.Replace(doc, "state: sleeping", "state: running", 1)
		doc = strings.Replace(doc, "[loop a, nowhere]", "[loop a]", 1)
		_, err = e.apply(doc, nil, master.ApplyOptions{Prune: true})
		if !errors.As(err, &me) || me.Kind != master.KindInvalid {
			t.Fatalf("apply: %v", err)
		}
		for _, f := range []string{"tasks[1] “bad cron”.schedule.cron", "tasks[2] “ghost executor”.executors",
			"tasks[2] “ghost executor”.keepers"} {
			if me.Fields[f] == "" {
				t.Errorf("no error on %s: %v", f, me.Fields)
			}
		}
		cycle := me.Fields["tasks[4] “loop a”.children"] + me.Fields["tasks[5] “loop b”.children"]
		if !strings.Contains(cycle, "cycle") || !strings.Contains(cycle, "“loop a”") {
			t.Errorf("cycle not named by title: %v", me.Fields)
		}
		if !strings.HasPrefix(me.Msg, "the document was not applied, nothing changed") {
			t.Errorf("message: %s", me.Msg)
		}
		if after := e.export(); after != before {
			t.Fatalf("a refused document changed the master:\n%s", after)
		}
	})
}

// TestApplyStopsAtFailedChange: a start that no worker can do stops the
// apply there; the plan says which change failed and what was done.
func TestApplyStopsAtFailedChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addMasterNode()
	runningWorkers(e, "w1")
	if _, err := e.m.Nodes().Disable(e.ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	doc := `version: 1
tasks:
  - title: a
    type: http
    state: stopped
    schedule: {kind: interval, every: 1h}
    http: {url: "http://127.0.0.1:1/"}
    executors: [w1]
  - title: b
    type: http
    state: running
    schedule: {kind: interval, every: 1h}
    http: {url: "http://127.0.0.1:1/"}
    executors: [w1]
`
	plan, err := e.apply(doc, nil, master.ApplyOptions{})
	if err == nil || plan == nil || plan.Applied || !strings.Contains(plan.Error, "create “b”") ||
		!plan.Changes[0].Done || plan.Changes[1].Done || plan.Changes[1].Error == "" {
		t.Fatalf("apply: %v %+v", err, plan)
	}
	if master.KindOf(err) != master.KindState {
		t.Fatalf("kind of %v: %v", err, master.KindOf(err))
	}
}

// TestParseDocumentHostile: hostile documents get a sentence naming what
// is wrong, never a panic or an unbounded expansion.
func TestParseDocumentHostile(t *testing.T) {
	t.Parallel()
	task := "version: 1\ntasks:\n  - title: t\n    type: http\n    schedule: {kind: interval, every: 1h}\n    http: {url: \"http://h/\"}\n"
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i, prev := 0, "a"; i < 8; i++ {
		name := fmt.Sprintf("b%d", i)
		bomb += fmt.Sprintf("%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", name, name, prev, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = name
	}
	cases := map[string]struct{ doc, want string }{
		"nul":          {task + "\x00", "NUL"},
		"utf8":         {task + "    description: \xff\n", "UTF-8"},
		"escaped nul":  {task + "    description: \"a\\0b\"\n", "tasks[0].description: holds a NUL"},
		"bomb":         {bomb, "aliases expand to more than"},
		"deep":         {"version: 1\ntasks: " + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "\n", "nested more than"},
		"large":        {task + "    description: " + strings.Repeat("x", master.MaxDocumentBytes) + "\n", "larger than 8 MiB"},
		"unknown":      {task + "    scheduel: 1\n", `unknown field "scheduel"`},
		"id":           {task + "    id: abc\n", "tasks[0].id"},
		"ref":          {task + "    description: ${ENV:SECRET}\n", "tasks[0].description: ${ENV:SECRET} is a reference"},
		"bad ref":      {task + "    description: ${ENV:no way}\n", "is not an environment variable name"},
		"open ref":     {task + "    description: ${ENV:X\n", "without its closing }"},
		"two docs":     {task + "---\n" + task, "more than one YAML document"},
		"version":      {strings.Replace(task, "version: 1", "version: 2", 1), "version 1 documents"},
		"top unknown":  {task + "extra: 1\n", "extra: unknown field"},
		"dup key":      {task + "    title: again\n", "tasks[0].title: line 7: given twice"},
		"type":         {task + "    retries: many\n", "retries"},
		"tag":          {task + "    description: !!binary aGk=\n", "tag !!binary"},
		"not a map":    {"- a\n- b\n", "must be a mapping"},
		"bad yaml":     {"tasks: [\n", "not valid YAML"},
		"empty":        {"  \n", "empty"},
		"non-text key": {task + "    params: {1: a}\n", "a key must be text"},
		"too many":     {"version: 1\ntasks:\n" + strings.Repeat("  - {}\n", master.MaxDocumentTasks+1), "at most 5000"},
	}
	for name, c := range cases {
		_, err := master.ParseDocument([]byte(c.doc))
		if err == nil || !strings.Contains(master.Message(err), c.want) {
			t.Errorf("%s: got %v, want an error saying %q", name, err, c.want)
		}
	}
	// Anchors and merges are YAML: they work, and escapes stand for text.
	doc, err := master.ParseDocument([]byte("version: 1\nx: 1\n"))
	if err == nil {
		t.Fatalf("unknown top field accepted: %+v", doc)
	}
	doc, err = master.ParseDocument([]byte(`version: 1
tasks:
  - &base
    title: a
    type: http
    description: "$${ENV:LITERAL}"
    schedule: {kind: interval, every: 1h}
    http: {url: "http://h/"}
  - <<: *base
    title: b
`))
	if err != nil || len(doc.Tasks) != 2 || doc.Tasks[1].Title != "b" || doc.Tasks[1].Type != "http" ||
		doc.Tasks[0].Description != "${ENV:LITERAL}" {
		t.Fatalf("anchors: %v %+v", err, doc)
	}
	// JSON is a document too.
	doc, err = master.ParseDocument([]byte(`{"version": 1, "dry_run": true, "tasks": [{"title": "j", "type": "http", "timeout": "5s"}]}`))
	if err != nil || !doc.DryRun || doc.Tasks[0].Timeout != protocol.Duration(5*time.Second) {
		t.Fatalf("JSON: %v %+v", err, doc)
	}
}

// TestFillDocument: every missing variable is named at once; a value that
// holds ${ENV: stays text.
func TestFillDocument(t *testing.T) {
	t.Parallel()
	doc := "version: 1\ntasks:\n  - title: t\n    secret_params: [a, b, c]\n    params: {a: \"${ENV:A}\", b: \"x${ENV:B}y\", c: \"${ENV:C}\"}\n"
	all := []string{"A", "B", "C"}
	_, err := master.FillDocument([]byte(doc), all, lookupIn(map[string]string{"A": "1"}))
	if err == nil || !strings.Contains(master.Message(err), "the environment has no B, C") {
		t.Fatalf("missing: %v", err)
	}
	out, err := master.FillDocument([]byte(doc), all, lookupIn(map[string]string{"A": "${ENV:A}", "B": "2\n  injected: true", "C": ""}))
	if err != nil {
		t.Fatal(err)
	}
	d, err := master.ParseDocument(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if p := d.Tasks[0].Params; p["a"] != "${ENV:A}" || p["b"] != "x2\n  injected: truey" || p["c"] != "" || len(p) != 3 {
		t.Fatalf("filled: %q\n%s", p, out)
	}
}

// TestHardening3DocumentAliasesAreBoundedBySize: a small document whose
// aliases expand far beyond its text is refused, early, with a sentence; a
// document sharing its defaults by anchors and merges is read.
func TestHardening3DocumentAliasesAreBoundedBySize(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("version: 1\nx0: &a0 [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "x%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	b.WriteString("tasks: []\n")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	_, err := master.ParseDocument([]byte(b.String()))
	runtime.ReadMemStats(&ms)
	if err == nil || !strings.Contains(master.Message(err), "aliases expand to more than") {
		t.Fatalf("a billion laughs of %d bytes: %v", b.Len(), err)
	}
	if alloc := ms.TotalAlloc - before; alloc > 64<<20 {
		t.Fatalf("refusing a %d-byte document allocated %d MiB", b.Len(), alloc>>20)
	}
	shared := "version: 1\ndefaults: &d {type: http, schedule: {kind: interval, every: 1h}, http: {url: \"http://127.0.0.1:1/x\"}}\ntasks:\n"
	for i := range 200 {
		shared += fmt.Sprintf("  - {<<: *d, title: t%d}\n", i)
	}
	if _, err := master.ParseDocument([]byte(shared)); err != nil && strings.Contains(master.Message(err), "aliases") {
		t.Fatalf("a document of 200 tasks sharing defaults: %v", err)
	}
}

// The cluster's settings travel in a document: a cluster admin exports them
// (secrets as references) and applies them back (first, validated whole,
// only the fields named); anyone else is refused and nothing changes.
func TestSettingsInExportAndApply(t *testing.T) {
	t.Parallel()
	e := configEnv(t, storetest.OpenSQLite(t))
	const smtpPass, hookPass = "smtp-secret-0004", "hook-secret-0005"
	if err := e.m.ChangeSettings(e.ctx, func(s *master.Settings) {
		s.SMTPHost, s.SMTPFrom, s.SMTPPassword, s.RunRetentionDays = "mail.example", "sm@mail.example", smtpPass, 12
		s.WebhookURL = "https://ops:" + hookPass + "@hooks.example/sm"
	}); err != nil {
		t.Fatal(err)
	}

	// Without the option, an export holds no settings.
	if doc := e.export(); strings.Contains(doc, "settings:") || strings.Contains(doc, "mail.example") {
		t.Fatalf("export without settings holds them:\n%s", doc)
	}
	out, err := e.m.Export(e.ctx, master.ExportOptions{Settings: true})
	if err != nil {
		t.Fatal(err)
	}
	doc := string(out)
	for _, bad := range []string{smtpPass, hookPass} {
		if strings.Contains(doc, bad) {
			t.Fatalf("export holds the secret %q:\n%s", bad, doc)
		}
	}
	for _, want := range []string{"settings:", "smtp_host: mail.example", "run_retention_days: 12", "approve_new_nodes: false",
		"smtp_password: ${ENV:SETTINGS_SMTP_PASSWORD}", "https://ops:${ENV:SETTINGS_WEBHOOK_URL_PASSWORD}@hooks.example/sm",
		"SETTINGS_SMTP_PASSWORD, SETTINGS_WEBHOOK_URL_PASSWORD"} {
		if !strings.Contains(doc, want) {
			t.Errorf("export lacks %q:\n%s", want, doc)
		}
	}

	// Someone else's settings meanwhile; the document puts the exported ones back.
	if err := e.m.ChangeSettings(e.ctx, func(s *master.Settings) {
		s.SMTPHost, s.SMTPPassword, s.RunRetentionDays, s.WebhookURL = "other.example", "changed", 40, ""
	}); err != nil {
		t.Fatal(err)
	}
	vars := maps.Clone(secretsEnv)
	vars["SETTINGS_SMTP_PASSWORD"], vars["SETTINGS_WEBHOOK_URL_PASSWORD"] = smtpPass, hookPass
	plan, err := e.apply(doc, vars, master.ApplyOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Settings == nil || plan.Settings.Done || !slices.Contains(plan.Settings.Fields, "smtp_host") ||
		!slices.Contains(plan.Settings.Fields, "run_retention_days") || slices.Contains(plan.Settings.Fields, "health_interval") {
		t.Fatalf("dry run's settings plan: %+v", plan.Settings)
	}
	if st, _ := e.m.StoredSettings(e.ctx); st.SMTPHost != "other.example" {
		t.Fatalf("a dry run changed the settings: %+v", st)
	}
	plan, err = e.apply(doc, vars, master.ApplyOptions{})
	if err != nil || !plan.Applied || !plan.Settings.Done {
		t.Fatalf("apply: %v %+v", err, plan)
	}
	st, err := e.m.StoredSettings(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.SMTPHost != "mail.example" || st.SMTPPassword != smtpPass || st.RunRetentionDays != 12 ||
		st.WebhookURL != "https://ops:"+hookPass+"@hooks.example/sm" {
		t.Fatalf("settings after apply: %+v", st)
	}

	// Only the fields named change; a bad value refuses the whole document.
	partial := "version: 1\nsettings:\n  run_retention_days: 9\ntasks: []\n"
	if _, err := e.apply(partial, nil, master.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.m.StoredSettings(e.ctx); st.RunRetentionDays != 9 || st.SMTPHost != "mail.example" || st.SMTPPassword != smtpPass {
		t.Fatalf("a partial settings section changed more than it named: %+v", st)
	}
	before := e.tasksByTitle()
	bad := "version: 1\nsettings:\n  run_retention_days: 0\n  health_interval: soon\ntasks:\n  - title: new one\n    type: http\n    schedule: {kind: interval, every: 1m}\n    http: {url: 'https://x.example/'}\n    executors: [w1]\n"
	_, err = e.apply(bad, nil, master.ApplyOptions{})
	var fe protocol.FieldErrors
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "settings.health_interval") {
		t.Fatalf("bad settings: %v, want field errors naming settings.health_interval", err)
	}
	if len(e.tasksByTitle()) != len(before) {
		t.Fatal("a refused document created a task")
	}
	if _, err := master.ParseDocument([]byte("version: 1\nsettings:\n  smtp_hots: x\n")); err == nil || !strings.Contains(err.Error(), "smtp_hots") {
		t.Fatalf("unknown settings field: %v", err)
	}

	// A project owner applies tasks, not the cluster's settings, and
	// cannot export them.
	owner := master.WithPrincipal(e.ctx, &master.Principal{Name: "alice", Role: store.RoleViewer,
		Memberships: map[int64]master.ProjectRole{1: master.ProjectOwner}})
	d, err := master.ParseDocument([]byte(partial))
	if err != nil {
		t.Fatal(err)
	}
	d.Settings.RunRetentionDays = new(int)
	*d.Settings.RunRetentionDays = 3
	if _, err := e.m.Apply(owner, d, master.ApplyOptions{By: "alice"}); master.KindOf(err) != master.KindForbidden {
		t.Fatalf("a project owner applied settings: %v", err)
	}
	if st, _ := e.m.StoredSettings(e.ctx); st.RunRetentionDays != 9 {
		t.Fatalf("a refused apply changed the settings: %+v", st)
	}
	if _, err := e.m.Export(owner, master.ExportOptions{Settings: true}); master.KindOf(err) != master.KindForbidden {
		t.Fatalf("a project owner exported settings: %v", err)
	}
}
