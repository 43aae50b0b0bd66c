package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// Route classes of the authorization table: who may use a route.
const (
	clsOpen        = "open"         // anyone, signed in or not
	clsWorker      = "worker"       // workers only (cluster key or node secret): no person
	clsSignedIn    = "signed-in"    // any signed-in user
	clsPerson      = "person"       // any signed-in user in a session, never an API token
	clsAdmin       = "admin"        // cluster admins
	clsReader      = "cluster-read" // cluster admins and viewers of every project
	clsRead        = "read"         // who may read project alpha
	clsOperate     = "operate"      // operators of alpha and up
	clsEdit        = "edit"         // editors of alpha and up
	clsManage      = "manage"       // owners of alpha and cluster admins
	clsTokenManage = "token-manage" // the token's owner, owners of its project, cluster admins
)

// authzRoutes is every route of the router and its class; a route missing
// here fails TestAuthorizationEveryRouteEveryRole, so a new route cannot be
// added without deciding who may use it.
var authzRoutes = map[string]string{
	"GET /health": clsOpen, "GET /ready": clsOpen, "GET /static/*filepath": clsOpen, "HEAD /static/*filepath": clsOpen,
	"GET /login": clsOpen, "POST /login": clsOpen, "POST /logout": clsOpen, "POST /language": clsOpen, "POST /account/locale": clsSignedIn,
	"GET /login/oidc": clsOpen, "GET /login/oidc/callback": clsOpen, "GET /api/v1/openapi.json": clsOpen,

	"POST /api/worker/register": clsWorker, "POST /api/worker/offline": clsWorker, "POST /api/worker/claim": clsWorker,
	"POST /api/worker/lock": clsWorker, "POST /api/worker/runs": clsWorker, "POST /api/worker/tasks": clsWorker,

	"GET /metrics": clsReader, "GET /": clsSignedIn, "GET /dashboard": clsSignedIn, "GET /dashboard/live": clsSignedIn,
	"GET /nodes": clsSignedIn, "GET /nodes/rows": clsSignedIn, "GET /nodes/:name": clsSignedIn, "GET /nodes/:name/live": clsSignedIn,
	"GET /schedules/preview": clsSignedIn, "GET /selectors/preview": clsSignedIn, "GET /pools": clsSignedIn, "GET /pools/*pool": clsSignedIn,
	"GET /runs": clsSignedIn, "GET /runs/live": clsSignedIn, "GET /runs/tasks": clsSignedIn, "GET /tokens": clsSignedIn, "POST /tokens": clsRead,
	"GET /account": clsSignedIn, "POST /account/password": clsPerson, "POST /account/email": clsPerson,
	"GET /events": clsSignedIn, "GET /delayed": clsSignedIn, "GET /delayed/rows": clsSignedIn, "GET /projects": clsSignedIn,
	"GET /tasks": clsSignedIn, "GET /tasks/rows": clsSignedIn, "GET /docs": clsSignedIn, "GET /docs/*page": clsSignedIn,
	"GET /api/v1/nodes": clsSignedIn, "GET /api/v1/nodes/:name": clsSignedIn, "GET /api/v1/schedules/preview": clsSignedIn,
	"GET /api/v1/selectors/preview": clsSignedIn, "GET /api/v1/pools": clsSignedIn, "GET /api/v1/pools/*pool": clsSignedIn,
	"GET /api/v1/runs": clsSignedIn, "GET /api/v1/tokens": clsSignedIn, "POST /api/v1/tokens": clsRead,
	"GET /api/v1/events": clsSignedIn, "GET /api/v1/delayed": clsSignedIn, "GET /api/v1/tasks": clsSignedIn,
	"GET /api/v1/projects": clsSignedIn, "GET /api/v1/workflows": clsSignedIn, "GET /workflows": clsSignedIn,

	"GET /nodes/command": clsAdmin, "GET /nodes/new": clsAdmin, "POST /nodes": clsAdmin, "GET /nodes/:name/edit": clsAdmin,
	"POST /nodes/:name": clsAdmin, "POST /nodes/:name/connect": clsAdmin, "POST /nodes/:name/enable": clsAdmin,
	"POST /nodes/:name/disable": clsAdmin, "POST /nodes/:name/delete": clsAdmin, "POST /nodes/:name/reset-identity": clsAdmin,
	"POST /nodes/:name/approve": clsAdmin, "POST /nodes/:name/labels": clsAdmin, "POST /pools/approve": clsAdmin,
	"POST /pools/revoke": clsAdmin, "POST /users": clsAdmin, "GET /users/:username/edit": clsAdmin, "POST /users/:username": clsAdmin,
	"POST /users/:username/password": clsAdmin, "POST /users/:username/disable": clsAdmin, "POST /users/:username/enable": clsAdmin,
	"POST /settings": clsAdmin, "POST /settings/test": clsAdmin, "POST /projects": clsAdmin, "POST /projects/:name/delete": clsAdmin,
	"POST /api/v1/nodes": clsAdmin, "PATCH /api/v1/nodes/:name": clsAdmin, "POST /api/v1/nodes/:name/connect": clsAdmin,
	"POST /api/v1/nodes/:name/enable": clsAdmin, "POST /api/v1/nodes/:name/disable": clsAdmin, "DELETE /api/v1/nodes/:name": clsAdmin,
	"POST /api/v1/nodes/:name/reset-identity": clsAdmin, "POST /api/v1/nodes/:name/approve": clsAdmin,
	"PUT /api/v1/nodes/:name/labels": clsAdmin, "POST /api/v1/pools/*pool": clsAdmin, "DELETE /api/v1/pools/*pool": clsAdmin,
	"POST /api/v1/users": clsAdmin, "PATCH /api/v1/users/:username": clsAdmin, "POST /api/v1/projects": clsAdmin,
	"DELETE /api/v1/projects/:name": clsAdmin, "GET /api/v1/settings": clsAdmin, "PATCH /api/v1/settings": clsAdmin,

	"GET /users": clsReader, "GET /settings": clsReader, "GET /api/v1/users": clsReader, "GET /api/v1/users/:username": clsReader,

	"GET /tasks/:id": clsRead, "GET /tasks/:id/runs": clsRead, "GET /tasks/:id/versions": clsRead, "GET /tasks/:id/versions/:n": clsRead, "GET /runs/:id": clsRead, "GET /runs/:id/live": clsRead,
	"GET /delayed/:id": clsRead, "GET /delayed/:id/live": clsRead, "GET /projects/:name": clsRead, "POST /projects/switch": clsRead,
	"GET /api/v1/tasks/:id": clsRead, "GET /api/v1/tasks/:id/runs": clsRead,
	"GET /api/v1/tasks/:id/versions": clsRead, "GET /api/v1/tasks/:id/versions/:n": clsRead, "GET /api/v1/runs/:id": clsRead,
	"GET /api/v1/runs/:id/output": clsRead, "GET /api/v1/delayed/:id": clsRead, "GET /api/v1/projects/:name": clsRead,
	"GET /api/v1/projects/:name/members": clsRead, "GET /api/v1/export": clsRead,
	"GET /workflows/:id": clsRead, "GET /workflow-runs/:id": clsRead, "GET /workflow-runs/:id/live": clsRead,
	"GET /api/v1/workflows/:id": clsRead, "GET /api/v1/workflows/:id/runs": clsRead, "GET /api/v1/workflow-runs/:id": clsRead,
	"GET /api/v1/workflows/:id/backfills": clsRead, "GET /api/v1/workflows/:id/versions": clsRead,
	"GET /api/v1/workflows/:id/versions/:n": clsRead, "GET /api/v1/tasks/:id/backfills": clsRead, "GET /api/v1/backfills/:id": clsRead,
	"GET /backfills/:id": clsRead, "GET /backfills/:id/live": clsRead,

	"POST /tasks/:id/start": clsOperate, "POST /tasks/:id/stop": clsOperate, "POST /tasks/:id/pause": clsOperate,
	"POST /tasks/:id/resume": clsOperate, "POST /tasks/:id/run": clsOperate, "POST /tasks/bulk": clsOperate,
	"POST /runs/:id/kill": clsOperate, "POST /delayed/:id/cancel": clsOperate,
	"POST /api/v1/tasks/:id/start": clsOperate, "POST /api/v1/tasks/:id/stop": clsOperate, "POST /api/v1/tasks/:id/pause": clsOperate,
	"POST /api/v1/tasks/:id/resume": clsOperate, "POST /api/v1/tasks/:id/run": clsOperate, "POST /api/v1/tasks/bulk": clsOperate,
	"POST /api/v1/runs/:id/kill": clsOperate, "DELETE /api/v1/delayed/:id": clsOperate, "POST /api/v1/delayed/:id/cancel": clsOperate,
	"POST /workflows/:id/run": clsOperate, "POST /workflow-runs/:id/cancel": clsOperate, "POST /workflow-runs/:id/rerun": clsOperate,
	"POST /api/v1/workflows/:id/run": clsOperate, "POST /api/v1/workflow-runs/:id/cancel": clsOperate,
	"POST /api/v1/workflow-runs/:id/rerun": clsOperate,
	"POST /api/v1/workflows/:id/pause":     clsOperate, "POST /api/v1/workflows/:id/resume": clsOperate,
	"POST /api/v1/workflows/:id/backfills": clsOperate, "POST /api/v1/tasks/:id/backfills": clsOperate,
	"POST /api/v1/backfills/:id/pause": clsOperate, "POST /api/v1/backfills/:id/resume": clsOperate,
	"POST /api/v1/backfills/:id/cancel": clsOperate,
	"POST /tasks/:id/backfill":          clsOperate,
	"POST /workflows/:id/pause":         clsOperate, "POST /workflows/:id/resume": clsOperate,
	"POST /workflows/:id/backfill": clsOperate, "POST /backfills/:id/pause": clsOperate, "POST /backfills/:id/resume": clsOperate,
	"POST /backfills/:id/cancel": clsOperate,

	"GET /tasks/new": clsEdit, "POST /tasks": clsEdit, "GET /tasks/:id/edit": clsEdit, "GET /tasks/:id/clone": clsEdit,
	"POST /tasks/:id": clsEdit, "POST /tasks/:id/delete": clsEdit, "POST /tasks/:id/versions/:n/restore": clsEdit, "GET /delayed/new": clsEdit, "POST /delayed": clsEdit,
	"POST /api/v1/tasks": clsEdit, "PUT /api/v1/tasks/:id": clsEdit, "DELETE /api/v1/tasks/:id": clsEdit,
	"POST /api/v1/tasks/:id/clone": clsEdit, "POST /api/v1/tasks/:id/versions/:n/restore": clsEdit, "POST /api/v1/delayed": clsEdit, "POST /api/v1/apply": clsEdit,
	"POST /api/v1/delayed/batch": clsEdit, "POST /api/v1/workflows": clsEdit, "PUT /api/v1/workflows/:id": clsEdit,
	"DELETE /api/v1/workflows/:id": clsEdit, "POST /api/v1/workflows/:id/versions/:n/restore": clsEdit,
	"GET /workflows/new": clsEdit, "POST /workflows": clsEdit,
	"GET /workflows/:id/edit": clsEdit, "POST /workflows/:id": clsEdit, "POST /workflows/:id/delete": clsEdit,

	"POST /projects/:name": clsManage, "POST /projects/:name/members": clsManage, "POST /projects/:name/members/:username/remove": clsManage,
	"PATCH /api/v1/projects/:name": clsManage, "PUT /api/v1/projects/:name/members/:username": clsManage,
	"DELETE /api/v1/projects/:name/members/:username": clsManage,

	"POST /tokens/:id/revoke": clsTokenManage, "DELETE /api/v1/tokens/:id": clsTokenManage,

	"GET /api/v1/connections": clsSignedIn, "GET /api/v1/connections/:id": clsRead, "POST /api/v1/connections/:id/test": clsEdit,
	"POST /api/v1/connections": clsManage, "PUT /api/v1/connections/:id": clsManage, "DELETE /api/v1/connections/:id": clsManage,
	"GET /connections": clsSignedIn, "GET /connections/:id": clsRead, "POST /connections/:id/test": clsEdit,
	"GET /connections/new": clsManage, "POST /connections": clsManage, "GET /connections/:id/edit": clsManage,
	"POST /connections/:id": clsManage, "POST /connections/:id/delete": clsManage,
	"GET /tasks/type-fields": clsSignedIn, "GET /tasks/type-runners": clsSignedIn,
}

// authzCaller is one way of asking: a person's session or an API token.
type authzCaller struct {
	name   string
	client *http.Client
	bearer string
	// allowed says which classes it may use; denied answers for the others
	// are 401/redirect (anonymous), 404 (project objects it may not read)
	// or 403.
	allowed map[string]bool
	// hidden: project alpha's objects are missing for it (404).
	hidden bool
}

// TestAuthorizationEveryRouteEveryRole walks every route of the router for
// every role (anonymous; viewer, operator, editor and owner of project
// alpha; the owner of another project; a viewer of every project; a cluster
// admin; a token capped to operator in alpha; a cluster admin's token
// limited to the other project; a cluster token) and checks each answer:
// allowed (anything but 401, 403, 404, a redirect to the login or a 500)
// or refused the way the table says (404 for objects of a project one may
// not read, 403 for an action one's role does not allow). Fixtures are made
// afresh for every request, so deleting routes act on their own objects.
func TestAuthorizationEveryRouteEveryRole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t), func(c *master.Config) { c.Metrics = master.NewMetrics() })
	ctx := context.Background()
	if err := store.CreateNode(ctx, e.st.DB, &store.Node{Name: "w1", Type: store.TypeWorker, Host: "127.0.0.1:1", Protocol: "http", Priority: 1}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []master.ProjectInput{{Name: "alpha", Pools: []string{"*"}}, {Name: "beta", Pools: []string{"*"}}} {
		if _, err := e.m.Projects().Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	members := map[string]master.ProjectRole{"ann-viewer": master.ProjectViewer, "otto-operator": master.ProjectOperator,
		"eddy-editor": master.ProjectEditor, "olga-owner": master.ProjectOwner}
	for u, r := range members {
		e.addUser(u, "password-of-"+u, store.RoleNone)
		if err := e.m.Projects().SetMember(ctx, "alpha", u, r); err != nil {
			t.Fatal(err)
		}
	}
	e.addUser("bob-beta", "password-of-bob-beta", store.RoleNone)
	if err := e.m.Projects().SetMember(ctx, "beta", "bob-beta", master.ProjectOwner); err != nil {
		t.Fatal(err)
	}
	e.addUser("vera-viewer", "password-of-vera-viewer", store.RoleViewer)
	token := func(owner string, in master.NewToken) string {
		plain, _, err := e.m.Accounts().CreateToken(ctx, owner, in)
		if err != nil {
			t.Fatalf("token of %s: %v", owner, err)
		}
		return plain
	}
	set := func(cls ...string) map[string]bool {
		m := map[string]bool{clsOpen: true, clsSignedIn: true, clsPerson: true}
		for _, c := range cls {
			m[c] = true
		}
		return m
	}
	callers := []authzCaller{
		{name: "anonymous", client: e.client(), allowed: map[string]bool{clsOpen: true}, hidden: true},
		{name: "viewer of alpha", client: e.login("ann-viewer", "password-of-ann-viewer"), allowed: set(clsRead)},
		{name: "operator of alpha", client: e.login("otto-operator", "password-of-otto-operator"), allowed: set(clsRead, clsOperate)},
		{name: "editor of alpha", client: e.login("eddy-editor", "password-of-eddy-editor"), allowed: set(clsRead, clsOperate, clsEdit, clsTokenManage)},
		{name: "owner of alpha", client: e.login("olga-owner", "password-of-olga-owner"), allowed: set(clsRead, clsOperate, clsEdit, clsManage, clsTokenManage)},
		{name: "owner of another project", client: e.login("bob-beta", "password-of-bob-beta"), allowed: set(), hidden: true},
		{name: "viewer of every project", client: e.login("vera-viewer", "password-of-vera-viewer"), allowed: set(clsRead, clsReader)},
		{name: "cluster admin", client: e.login("admin", "admin-password-1"), allowed: set(clsRead, clsOperate, clsEdit, clsManage, clsAdmin, clsReader, clsTokenManage)},
		{name: "editor's token capped to operator in alpha", client: e.client(), allowed: set(clsRead, clsOperate, clsTokenManage),
			bearer: token("eddy-editor", master.NewToken{Name: "ops", Project: "alpha", Role: master.ProjectOperator})},
		{name: "admin's token limited to beta", client: e.client(), allowed: set(), hidden: true,
			bearer: token("admin", master.NewToken{Name: "beta-only", Project: "beta"})},
		{name: "admin's cluster token", client: e.client(), allowed: set(clsRead, clsOperate, clsEdit, clsManage, clsAdmin, clsReader, clsTokenManage),
			bearer: token("admin", master.NewToken{Name: "cluster"})},
	}

	// A token acts for its owner in projects, never on the owner's account.
	for i := range callers {
		if callers[i].bearer != "" {
			delete(callers[i].allowed, clsPerson)
		}
	}
	h, err := handlers.NewMasterRouter(ctx, handlers.MasterDeps{Master: e.m, Log: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	eng := h.(*gin.Engine)
	var keys []string
	for _, r := range eng.Routes() {
		key := r.Method + " " + r.Path
		if _, ok := authzRoutes[key]; !ok {
			t.Errorf("route %s is not in the authorization table (authzRoutes): decide who may use it", key)
			continue
		}
		keys = append(keys, key)
	}
	sort.Strings(keys)
	if len(keys) < 140 {
		t.Fatalf("only %d routes found", len(keys))
	}

	seq := 0
	checked := 0
	for _, key := range keys {
		cls := authzRoutes[key]
		if cls == clsOpen {
			continue
		}
		method, pattern, _ := strings.Cut(key, " ")
		for _, who := range callers {
			seq++
			path, body, ctype := authzRequest(t, e, method, pattern, seq)
			st, loc, text := authzDo(t, e, who, method, path, body, ctype)
			checked++
			allowed := who.allowed[cls]
			switch {
			case cls == clsWorker:
				if st < 300 {
					t.Errorf("%s %s as %s: %d, want a refusal (workers only)", method, path, who.name, st)
				}
			case allowed:
				if st == 401 || st == 403 || st == 404 || st >= 500 && st != 502 || (st == 303 && strings.HasPrefix(loc, "/login")) {
					t.Errorf("%s %s as %s: %d %s %.200s, want it allowed", method, path, who.name, st, loc, text)
				}
			case who.name == "anonymous":
				if st != 401 && !(st == 303 && strings.HasPrefix(loc, "/login")) {
					t.Errorf("%s %s anonymously: %d %s, want 401 or the login", method, path, st, loc)
				}
			case strings.HasSuffix(pattern, "/tasks/bulk") && who.hidden:
				// A bulk call answers per task: another project's task is
				// "no such task", as a missing one.
				if st != http.StatusOK || !strings.Contains(text, `"no such task"`) && !strings.Contains(text, "no such task") {
					t.Errorf("%s %s as %s: %d %.200s, want 200 saying no such task", method, path, who.name, st, text)
				}
			case strings.HasSuffix(pattern, "/delayed/batch") && who.hidden && st == http.StatusOK:
				// A batch answers per task: another project is "not
				// found", as a missing one.
				if !strings.Contains(text, "project alpha not found") || strings.Contains(text, `"ok":true`) {
					t.Errorf("%s %s as %s: %d %.200s, want each task refused as not existing", method, path, who.name, st, text)
				}
			default:
				want := http.StatusForbidden
				if who.hidden && projectClass(cls) || cls == clsTokenManage {
					want = http.StatusNotFound // another's token is missing, as an unknown one
				}
				if st != want {
					t.Errorf("%s %s as %s: %d %.200s, want %d", method, path, who.name, st, text, want)
				}
			}
		}
	}
	t.Logf("%d routes, %d callers, %d requests checked", len(keys), len(callers), checked)
}

// projectClass reports whether a class is about project alpha's objects,
// which are missing (404) for who may not read alpha.
func projectClass(cls string) bool {
	switch cls {
	case clsRead, clsOperate, clsEdit, clsManage, clsTokenManage:
		return true
	}
	return false
}

// authzRequest makes the fixtures a request acts on (afresh, so a delete
// deletes its own) and returns its path and body.
func authzRequest(t *testing.T, e *env, method, pattern string, seq int) (path, body, ctype string) {
	t.Helper()
	ctx := context.Background()
	api := strings.HasPrefix(pattern, "/api/")
	ctype = "application/x-www-form-urlencoded"
	if api {
		ctype, body = "application/json", "{}"
	}
	if method == http.MethodGet || method == http.MethodDelete || method == http.MethodHead {
		ctype, body = "", ""
	}
	newTask := func() *master.Task {
		tk, err := e.m.Tasks().Create(ctx, master.TaskInput{Project: "alpha", Executors: []string{"w1"}, TaskDef: protocol.TaskDef{
			Title: fmt.Sprintf("authz %d", seq), Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{Method: "GET", URL: "http://127.0.0.1:1/x"},
			Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}}}, "admin")
		if err != nil {
			t.Fatalf("fixture task: %v", err)
		}
		return tk
	}
	param := map[string]string{}
	seg := strings.Split(strings.TrimPrefix(strings.TrimPrefix(pattern, "/api/v1"), "/"), "/")[0]
	if strings.Contains(pattern, ":id") {
		switch seg {
		case "tasks":
			param["id"] = newTask().ID
		case "runs":
			tk := newTask()
			now := time.Now().UTC()
			run := store.Run{ID: fmt.Sprintf("run-authz-%d", seq), TaskID: tk.ID, Node: "w1", ScheduledAt: now, StartedAt: now,
				Result: string(protocol.ResultRunning), Attempt: 1}
			if _, err := store.InsertRuns(ctx, e.st.DB, []store.Run{run}); err != nil {
				t.Fatal(err)
			}
			param["id"] = run.ID
		case "delayed":
			d, _, err := e.m.Delayed().CreateDelayed(ctx, master.DelayedInput{Project: "alpha", SourceApp: "app", Topic: "t",
				ContentKey: fmt.Sprint(seq), Delay: json.RawMessage(`"1h"`), NotifyURL: "http://127.0.0.1:1/x", Executors: []string{"w1"}}, "admin")
			if err != nil {
				t.Fatalf("fixture delayed: %v", err)
			}
			param["id"] = d.ID
		case "workflows":
			param["id"] = authzWorkflow(t, e, newTask().ID, seq).ID
		case "backfills":
			w := authzWorkflow(t, e, newTask().ID, seq)
			now := time.Now().UTC()
			// One fire of the hourly schedule in the window (or two), run
			// one at a time.
			b, err := e.m.Workflows().BackfillWorkflow(ctx, w.ID, master.BackfillInput{From: now.Add(-90 * time.Minute), To: now.Add(-time.Minute)})
			if err != nil {
				t.Fatalf("fixture backfill: %v", err)
			}
			param["id"] = b.ID
		case "workflow-runs":
			w := authzWorkflow(t, e, newTask().ID, seq)
			r, err := e.m.Workflows().RunNow(ctx, w.ID, nil)
			if err != nil {
				t.Fatalf("fixture workflow run: %v", err)
			}
			param["id"] = r.ID
		case "connections":
			cn, err := e.m.Connections().Create(ctx, master.ConnectionInput{Project: "alpha", ConnectionSpec: protocol.ConnectionSpec{
				Name: fmt.Sprintf("c%d", seq), Kind: protocol.ConnNATS, Address: "127.0.0.1:1", Secret: "authz-secret"}})
			if err != nil {
				t.Fatalf("fixture connection: %v", err)
			}
			param["id"] = cn.ID
		case "tokens":
			_, tok, err := e.m.Accounts().CreateToken(ctx, "eddy-editor", master.NewToken{Name: fmt.Sprint("t", seq), Project: "alpha"})
			if err != nil {
				t.Fatal(err)
			}
			param["id"] = fmt.Sprint(tok.ID)
		}
	}
	if strings.Contains(pattern, ":name") {
		switch seg {
		case "nodes":
			name := fmt.Sprintf("n%d", seq)
			if err := store.CreateNode(ctx, e.st.DB, &store.Node{Name: name, Type: store.TypeWorker, Host: "127.0.0.1:1", Protocol: "http", Priority: 1}); err != nil {
				t.Fatal(err)
			}
			param["name"] = name
		case "projects":
			param["name"] = "alpha"
			if strings.HasSuffix(pattern, "/delete") || method == http.MethodDelete && !strings.Contains(pattern, "members") {
				name := fmt.Sprintf("tmp-%d", seq)
				if _, err := e.m.Projects().Create(ctx, master.ProjectInput{Name: name}); err != nil {
					t.Fatal(err)
				}
				param["name"] = name
			}
		}
	}
	if strings.Contains(pattern, ":n") && strings.Contains(pattern, "/versions/") {
		param["n"] = "1" // every task has its first version
	}
	if strings.Contains(pattern, ":username") {
		name := fmt.Sprintf("user%d", seq)
		e.addUser(name, "password-of-"+name, store.RoleNone)
		if strings.Contains(pattern, "/projects/") {
			if err := e.m.Projects().SetMember(ctx, "alpha", name, master.ProjectViewer); err != nil {
				t.Fatal(err)
			}
		}
		param["username"] = name
	}
	path = pattern
	for k, v := range param {
		path = strings.Replace(path, ":"+k, url.PathEscape(v), 1)
	}
	if strings.Contains(pattern, "*pool") {
		// The pool exists (approved) for every request: a revoke before
		// does not turn a read into a 404.
		_ = e.m.Pools().Approve(ctx, "pool=billing", "admin")
		pool := "pool=billing"
		if api && method != http.MethodGet {
			pool += "/approve"
		}
		path = strings.Replace(path, "*pool", pool, 1)
	}
	path = strings.Replace(path, "*filepath", "app.css", 1)
	path = strings.Replace(path, "*page", "tasks", 1)

	// Bodies that pass the handlers' own checks, so the engine decides.
	switch method + " " + pattern {
	case "POST /tasks", "POST /tasks/:id":
		body = url.Values{"title": {"authz"}, "type": {"http"}, "schedule_kind": {"interval"}, "schedule_every": {"1h"},
			"http_method": {"GET"}, "http_url": {"http://127.0.0.1:1/x"}, "timeout": {"30s"}, "retries": {"0"}, "executors": {"w1"}}.Encode()
		if pattern == "/tasks" {
			path += "?project=alpha"
		}
	case "GET /tasks/new", "GET /delayed/new", "GET /workflows/new":
		path += "?project=alpha"
	case "GET /connections/new":
		path += "?project=alpha"
	case "POST /connections":
		body = url.Values{"project": {"alpha"}, "name": {fmt.Sprintf("new%d", seq)}, "kind": {"nats"}, "address": {"127.0.0.1:1"},
			"secret": {"s3cret"}}.Encode()
	case "POST /connections/:id":
		body = url.Values{"name": {fmt.Sprintf("c%d", seq)}, "kind": {"nats"}, "address": {"127.0.0.1:2"}, "secret": {"********"}}.Encode()
	case "GET /tasks/type-fields":
		path += "?type=nats"
	case "GET /tasks/type-runners":
		path += "?type=nats"
	case "POST /api/v1/connections":
		body = fmt.Sprintf(`{"project":"alpha","name":"new%d","kind":"nats","address":"127.0.0.1:1","secret":"s3cret"}`, seq)
	case "PUT /api/v1/connections/:id":
		body = fmt.Sprintf(`{"name":"c%d","kind":"nats","address":"127.0.0.1:2","secret":"********"}`, seq)
	case "POST /delayed":
		path += "?project=alpha"
		body = url.Values{"source_app": {"app"}, "topic": {"t"}, "content_key": {fmt.Sprint("c", seq)}, "delay": {"1h"},
			"notify_url": {"http://127.0.0.1:1/x"}, "executors": {"w1"}}.Encode()
	case "POST /api/v1/tasks":
		body = `{"project":"alpha","title":"authz","type":"http","schedule":{"kind":"interval","every":"1h"},"http":{"method":"GET","url":"http://127.0.0.1:1/x"},"executors":["w1"]}`
	case "PUT /api/v1/tasks/:id":
		body = `{"title":"authz","type":"http","schedule":{"kind":"interval","every":"1h"},"http":{"method":"GET","url":"http://127.0.0.1:1/x"},"executors":["w1"]}`
	case "POST /api/v1/delayed":
		body = fmt.Sprintf(`{"project":"alpha","source_app":"app","topic":"t","content_key":"k%d","delay":"1h","notify_url":"http://127.0.0.1:1/x","executors":["w1"]}`, seq)
	case "POST /workflows", "POST /workflows/:id":
		body = url.Values{"project": {"alpha"}, "title": {"authz"}, "steps[0].name": {"a"}, "steps[0].task": {newTask().ID}}.Encode()
	case "POST /api/v1/workflows":
		body = fmt.Sprintf(`{"project":"alpha","title":"authz","steps":[{"name":"a","task":%q}]}`, newTask().ID)
	case "POST /tasks/:id/backfill":
		now := time.Now().UTC()
		body = url.Values{"from": {now.Add(-3 * time.Hour).Format("2006-01-02T15:04")}, "to": {now.Format("2006-01-02T15:04")}}.Encode()
	case "POST /api/v1/workflows/:id/backfills", "POST /api/v1/tasks/:id/backfills":
		now := time.Now().UTC()
		body = fmt.Sprintf(`{"from":%q,"to":%q}`, now.Add(-3*time.Hour).Format(time.RFC3339), now.Format(time.RFC3339))
	case "PUT /api/v1/workflows/:id":
		body = fmt.Sprintf(`{"title":"authz","steps":[{"name":"a","task":%q}]}`, newTask().ID)
	case "POST /api/v1/delayed/batch":
		body = fmt.Sprintf(`{"tasks":[{"project":"alpha","source_app":"app","topic":"t","content_key":"b%d","delay":"1h","notify_url":"http://127.0.0.1:1/x","executors":["w1"]}]}`, seq)
	case "POST /tasks/bulk":
		body = url.Values{"action": {"stop"}, "ids": {newTask().ID}}.Encode()
	case "POST /api/v1/tasks/bulk":
		body = fmt.Sprintf(`{"action":"stop","ids":[%q]}`, newTask().ID)
	case "POST /api/v1/apply":
		path += "?project=alpha&dry_run=true"
		body = `{"version":1,"tasks":[]}`
	case "GET /api/v1/export":
		path += "?project=alpha"
	case "POST /tokens":
		body = url.Values{"name": {fmt.Sprint("mine", seq)}, "project": {"alpha"}}.Encode()
	case "POST /api/v1/tokens":
		body = fmt.Sprintf(`{"name":"mine%d","project":"alpha"}`, seq)
	case "POST /projects/switch":
		body = url.Values{"project": {"alpha"}, "back": {"/tasks"}}.Encode()
	case "POST /projects/:name":
		body = url.Values{"description": {"team alpha"}}.Encode()
	case "POST /projects/:name/members":
		name := fmt.Sprintf("member%d", seq)
		e.addUser(name, "password-of-"+name, store.RoleNone)
		body = url.Values{"username": {name}, "role": {"viewer"}}.Encode()
	case "PATCH /api/v1/projects/:name":
		body = `{"description":"team alpha"}`
	case "PUT /api/v1/projects/:name/members/:username":
		body = `{"role":"operator"}`
	case "POST /projects", "POST /api/v1/projects":
		name := fmt.Sprintf("new-%d", seq)
		body = url.Values{"name": {name}}.Encode()
		if api {
			body = fmt.Sprintf(`{"name":%q}`, name)
		}
	}
	return path, body, ctype
}

// authzWorkflow is a fixture workflow of project alpha with one step, run
// every hour.
func authzWorkflow(t *testing.T, e *env, task string, seq int) *master.Workflow {
	t.Helper()
	w, err := e.m.Workflows().Create(context.Background(), master.WorkflowInput{Project: "alpha", WorkflowDef: master.WorkflowDef{
		Title: fmt.Sprintf("authz %d", seq), Steps: []master.WorkflowStep{{Name: "a", Task: task}},
		Schedule: &protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}}})
	if err != nil {
		t.Fatalf("fixture workflow: %v", err)
	}
	return w
}

// authzDo sends one request as who and returns the status, the redirect
// and the start of the body.
func authzDo(t *testing.T, e *env, who authzCaller, method, path, body, ctype string) (int, string, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if who.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+who.bearer)
	}
	if path == "/tasks/bulk" {
		req.Header.Set("HX-Request", "true") // the list answers with each task's outcome
	}
	resp, err := who.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// TestAuthorizationHidesButtonsPerRole: the console shows only the buttons
// the role may press: on a project's task list a viewer sees none, an
// operator Start but not Edit or Delete, an editor all; node actions only
// for cluster admins.
func TestAuthorizationHidesButtonsPerRole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	ctx := context.Background()
	if err := store.CreateNode(ctx, e.st.DB, &store.Node{Name: "w1", Type: store.TypeWorker, Host: "127.0.0.1:1", Protocol: "http", Priority: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Projects().Create(ctx, master.ProjectInput{Name: "alpha", Pools: []string{"*"}}); err != nil {
		t.Fatal(err)
	}
	tk, err := e.m.Tasks().Create(ctx, master.TaskInput{Project: "alpha", Executors: []string{"w1"}, TaskDef: protocol.TaskDef{
		Title: "nightly", Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{Method: "GET", URL: "http://127.0.0.1:1/x"},
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}}}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user        string
		role        master.ProjectRole
		start, edit bool
	}{{"ann", master.ProjectViewer, false, false}, {"otto", master.ProjectOperator, true, false}, {"eddy", master.ProjectEditor, true, true}} {
		e.addUser(c.user, "password-of-"+c.user, store.RoleNone)
		if err := e.m.Projects().SetMember(ctx, "alpha", c.user, c.role); err != nil {
			t.Fatal(err)
		}
		cl := e.login(c.user, "password-of-"+c.user)
		for _, path := range []string{"/tasks?project=alpha", "/tasks/" + tk.ID + "?project=alpha"} {
			st, body := e.do(cl, "GET", path, "", nil)
			if st != http.StatusOK {
				t.Fatalf("%s GET %s: %d", c.user, path, st)
			}
			if got := strings.Contains(body, `data-action="start"`); got != c.start {
				t.Errorf("%s (%s) on %s: Start shown %v, want %v", c.user, c.role, path, got, c.start)
			}
			if got := strings.Contains(body, `data-action="edit"`) || strings.Contains(body, `data-action="delete"`); got != c.edit {
				t.Errorf("%s (%s) on %s: Edit/Delete shown %v, want %v", c.user, c.role, path, got, c.edit)
			}
		}
		if _, body := e.do(cl, "GET", "/nodes", "", nil); strings.Contains(body, `data-action="connect"`) || strings.Contains(body, `id="new-node"`) {
			t.Errorf("%s sees node actions on /nodes", c.user)
		}
	}
}

// TestAPIBodyWithoutJSONContentType: curl -d sends a JSON body typed as a
// form; the API takes it when it is JSON and otherwise answers 415 naming
// the header to send.
func TestAPIBodyWithoutJSONContentType(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	for _, ctype := range []string{"application/x-www-form-urlencoded", "text/plain", ""} {
		name := strings.NewReplacer("/", "-", "+", "-").Replace("p-" + strings.TrimSuffix(strings.Split(ctype+"-none", "/")[0], "-"))
		st, body := e.do(c, "POST", "/api/v1/projects", fmt.Sprintf(`{"name":%q}`, name), map[string]string{"Content-Type": ctype})
		if st != http.StatusCreated {
			t.Errorf("JSON body typed %q: %d %s, want 201", ctype, st, body)
		}
	}
	st, body := e.do(c, "POST", "/api/v1/projects", "name=billing", map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if st != http.StatusUnsupportedMediaType || !strings.Contains(body, "Content-Type: application/json") {
		t.Fatalf("a form body on the API: %d %s, want 415 naming the header", st, body)
	}
}
