package master_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// Only the worker's own "not in progress" answer means a run ended there. A
// 404 with another body (a worker too old for the run routes, or another
// server now at the node's address) must not be read as "the run ended":
// the page says the node cannot show the run, and a kill is a worker error.
func TestRunLiveTellsAnEndedRunFromAnUnknownRoute(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		cases := []struct {
			name    string
			answer  func(w http.ResponseWriter)
			ended   bool
			page    string // part of RunLive.Unreachable; "" when Ended
			killErr master.Kind
			kill    string
		}{
			{"ended", func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"error":"` + protocol.ErrRunNotInProgress + `"}`))
			}, true, "", master.KindState, "has already ended"},
			{"old-worker", func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"error":"no such route"}`))
			}, false, "cannot show runs in progress", master.KindWorker, "cannot kill runs"},
			{"plain-404", func(w http.ResponseWriter) { http.NotFound(w, nil) },
				false, "cannot show runs in progress", master.KindWorker, "cannot kill runs"},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { c.answer(w) }))
				t.Cleanup(srv.Close)
				node := "live" + string(rune('a'+i))
				n := e.fakeNode(node)
				e.exec("UPDATE nodes SET host = ? WHERE name = ?", strings.TrimPrefix(srv.URL, "http://"), node)
				task := "task-" + node
				e.storeTask(task, store.TaskRunning, []string{node}, nil, 0)
				at := time.Now().UTC().Truncate(time.Second)
				notice := protocol.RunReport{ID: "run-" + node, TaskID: task, Node: node, ScheduledAt: at, StartedAt: at,
					Result: protocol.ResultRunning, Attempt: 1}
				if resp, err := e.m.Runs().Ingest(e.ctx, n, []protocol.RunReport{notice}); err != nil || len(resp.Rejected) != 0 {
					t.Fatalf("store the notice: %v %+v", err, resp)
				}
				live, err := e.m.Runs().Live(e.ctx, notice.ID)
				if err != nil {
					t.Fatal(err)
				}
				if live.Ended != c.ended || live.Progress != nil {
					t.Fatalf("RunLive: ended %v progress %v, want ended %v and no progress", live.Ended, live.Progress, c.ended)
				}
				if c.page == "" && live.Unreachable != "" || !strings.Contains(live.Unreachable, c.page) {
					t.Fatalf("RunLive says %q, want it to hold %q", live.Unreachable, c.page)
				}
				err = e.m.Runs().Kill(e.ctx, notice.ID)
				if master.KindOf(err) != c.killErr || !strings.Contains(master.Message(err), c.kill) {
					t.Fatalf("KillRun: %v (kind %v), want kind %v saying %q", err, master.KindOf(err), c.killErr, c.kill)
				}
				if r := e.stored(notice.ID); r == nil || r.Result != store.ResultRunning {
					t.Fatalf("the run after a refused kill: %+v, want still running", r)
				}
			})
		}
	})
}
