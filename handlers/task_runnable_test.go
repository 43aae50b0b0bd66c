package handlers_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// startStoppableWorker is startRunningWorker with a way to take the worker's
// server down, so the master's health checks see it go offline.
func startStoppableWorker(t *testing.T, e *env, name string) (down func()) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	u, _ := url.Parse("http://" + srv.Listener.Addr().String())
	cfg := worker.Config{Identity: name, AutoRegister: true, MasterURL: e.srv.URL, ClusterKey: clusterKey,
		IP: u.Hostname(), Protocol: "http", Priority: 1, MaxConcurrency: 5}
	for _, ch := range u.Port() {
		cfg.Port = cfg.Port*10 + int(ch-'0')
	}
	w, err := worker.New(cfg, storetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = worker.NewHandler(w, storetest.Logger(t))
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	runWorker(t, w)
	if n := e.node(name); n.Status != store.StatusRunning {
		t.Fatalf("worker %s: status %d after registration, want running", name, n.Status)
	}
	return func() {
		srv.CloseClientConnections()
		srv.Close()
	}
}

// TestTaskWithoutRunningExecutorIsFlagged: a running task whose only executor
// is disabled or offline is flagged in the API, the list (and its live rows),
// the task page and the dashboard; once the executor runs again it is not.
func TestTaskWithoutRunningExecutorIsFlagged(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		ctx := storetest.Ctx(t)
		down := startStoppableWorker(t, e, "w1")
		c := e.login("admin", "admin-password-1")
		task := e.createTask("stranded", "w1")
		other := e.createTask("stopped one", "w1") // stopped: never flagged
		if _, err := e.m.Tasks().Start(ctx, task.ID); err != nil {
			t.Fatal(err)
		}

		// check asserts every view of the flag at once.
		check := func(stage string, want bool) {
			t.Helper()
			_, list := e.do(c, "GET", "/api/v1/tasks", "", nil)
			got := decode[struct {
				Items []struct {
					ID               string     `json:"id"`
					Runnable         *bool      `json:"runnable"`
					NotRunnableSince *time.Time `json:"not_runnable_since"`
				} `json:"items"`
			}](t, list)
			for _, it := range got.Items {
				if it.Runnable == nil {
					t.Fatalf("%s: task %s has no runnable field\n%s", stage, it.ID, list)
				}
				flagged := it.ID == task.ID && want
				if *it.Runnable == flagged || (it.NotRunnableSince != nil) != flagged {
					t.Fatalf("%s: task %s runnable=%v since=%v, want runnable=%v\n%s", stage, it.ID, *it.Runnable, it.NotRunnableSince, !flagged, list)
				}
			}
			_, one := e.do(c, "GET", "/api/v1/tasks/"+task.ID, "", nil)
			if has := strings.Contains(one, `"runnable":false`); has != want {
				t.Fatalf("%s: GET task: %s", stage, one)
			}
			for _, path := range []string{"/tasks", "/tasks/rows"} {
				_, html := e.do(c, "GET", path, "", nil)
				row := html[strings.Index(html, `id="task-`+task.ID+`"`):]
				row = row[:strings.Index(row, "</tr>")]
				if has := strings.Contains(row, "no running executor"); has != want {
					t.Fatalf("%s: %s row of the task: flagged=%v\n%s", stage, path, has, row)
				}
				if strings.Count(html, `data-testid="no-executor"`) > 1 {
					t.Fatalf("%s: %s flags the stopped task %s too", stage, path, other.ID)
				}
			}
			_, page := e.do(c, "GET", "/tasks/"+task.ID, "", nil)
			if has := strings.Contains(page, "No running executor since "); has != want {
				t.Fatalf("%s: task page: flagged=%v", stage, has)
			}
			_, dash := e.do(c, "GET", "/dashboard/live", "", nil)
			if has := strings.Contains(dash, `id="dash-tasks-no-executor"`) && strings.Contains(dash, "<b>1</b> running task cannot run"); has != want {
				t.Fatalf("%s: dashboard: flagged=%v\n%s", stage, has, dash)
			}
		}
		check("executor running", false)

		if _, err := e.m.Nodes().Disable(ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		check("executor disabled", true)
		if _, err := e.m.Nodes().Enable(ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		check("executor enabled again", false)

		// Offline: the worker's server goes away and the health checks notice.
		down()
		deadline := time.Now().Add(20 * time.Second)
		for e.node("w1").Status != store.StatusOffline {
			if time.Now().After(deadline) {
				t.Fatal("w1 never went offline")
			}
			e.m.Sweep(ctx)
		}
		check("executor offline", true)
		n := e.node("w1")
		_, page := e.do(c, "GET", "/tasks/"+task.ID, "", nil)
		if since := n.UpdatedAt.UTC().Format("2006-01-02 15:04:05"); !strings.Contains(page, "No running executor since "+since) {
			t.Fatalf("task page does not say since %s (w1 went offline)", since)
		}
	})
}
