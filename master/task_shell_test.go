package master_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

func shellInput(executors ...string) master.TaskInput {
	return master.TaskInput{
		TaskDef: protocol.TaskDef{Title: "backup", Type: protocol.TaskShell,
			Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
			Shell:    &protocol.ShellSpec{Command: "/bin/true"}},
		Executors: executors,
	}
}

// TestShellTaskNeedsAnExecutorThatRunsShell: saving a shell task asks its
// executors' /health whether they run shell. None does: refused, naming them,
// nothing stored. One does, or one cannot say (down, or an older worker that
// does not tell): saved. Without executors only workers that run shell are
// picked. An HTTP task asks nobody.
func TestShellTaskNeedsAnExecutorThatRunsShell(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		e.addMasterNode()
		noShell := runningWorkers(e, "plain1", "plain2")
		sh := startWorker(t, "shell1", func(c *worker.Config) { c.AllowShell = true })
		e.create(sh)
		e.connect("shell1")
		e.enable("shell1")
		count := func() int {
			t.Helper()
			_, total, err := e.m.Tasks().List(e.ctx, store.TaskFilter{})
			if err != nil {
				t.Fatal(err)
			}
			return total
		}

		_, err := e.m.Tasks().Create(e.ctx, shellInput("plain1", "plain2"), "admin")
		if !isFieldErrors(err, "executors") {
			t.Fatalf("shell task on workers without --allow-shell: %v, want an executors field error", err)
		}
		msg := err.(protocol.FieldErrors)["executors"]
		if !strings.Contains(msg, "plain1, plain2") || !strings.Contains(msg, "--allow-shell") {
			t.Errorf("refusal %q should name both executors and the flag", msg)
		}
		if n := count(); n != 0 {
			t.Fatalf("the refused task was stored: %d tasks", n)
		}

		if _, err := e.m.Tasks().Create(e.ctx, shellInput("plain1", "shell1"), "admin"); err != nil {
			t.Fatalf("shell task with one executor that runs shell: %v", err)
		}
		if _, err := e.m.Tasks().Create(e.ctx, httpInput("plain1"), "admin"); err != nil {
			t.Fatalf("http task on a plain worker: %v", err)
		}

		// Picked for us: only shell1 runs shell, so only shell1 is picked.
		for range 5 {
			tk, err := e.m.Tasks().Create(e.ctx, shellInput(), "admin")
			if err != nil {
				t.Fatalf("shell task without executors: %v", err)
			}
			if len(tk.Executors) != 1 || tk.Executors[0] != "shell1" {
				t.Fatalf("picked %v for a shell task, want [shell1]", tk.Executors)
			}
		}

		// A worker that does not say (an older one) may run shell: saved.
		noShell["plain2"].Serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Path == protocol.PathHealth {
				rw.Header().Set("Content-Type", "application/json")
				_, _ = rw.Write([]byte(`{"node":"plain2","boot_id":"b","status":"scheduling","running_tasks":0}`))
				return
			}
			noShell["plain2"].Router().ServeHTTP(rw, r)
		}))
		if _, err := e.m.Tasks().Create(e.ctx, shellInput("plain1", "plain2"), "admin"); err != nil {
			t.Fatalf("shell task with a worker that does not say: %v", err)
		}
		// Nor does one that is down: it is asked again at Start.
		noShell["plain2"].Srv.Close()
		if _, err := e.m.Tasks().Create(e.ctx, shellInput("plain2"), "admin"); err != nil {
			t.Fatalf("shell task on a worker that is down: %v", err)
		}

		// With no running worker that runs shell, a pick is refused saying so.
		e2 := newEnv(t, storetest.OpenSQLite(t))
		e2.addMasterNode()
		runningWorkers(e2, "only-plain")
		if _, err := e2.m.Tasks().Create(e2.ctx, shellInput(), "admin"); !isFieldErrors(err, "executors") ||
			!strings.Contains(err.(protocol.FieldErrors)["executors"], "only-plain was started without --allow-shell") {
			t.Fatalf("shell task with no shell worker to pick: %v", err)
		}
	})
}
