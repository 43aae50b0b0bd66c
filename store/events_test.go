package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

func TestEventsAddAndList(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		base := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
		add := func(min int, actor, action, tt, target, outcome, detail string) {
			t.Helper()
			e := &store.Event{At: base.Add(time.Duration(min) * time.Minute), Actor: actor, Action: action,
				TargetType: tt, Target: target, Outcome: outcome, Detail: detail}
			if err := store.AddEvent(ctx, db, e); err != nil {
				t.Fatal(err)
			}
			if e.ID == 0 {
				t.Fatal("AddEvent did not set the id")
			}
		}
		add(0, "admin", "node.create", "node", "w1", "ok", "")
		add(1, "admin", "node.connect", "node", "w1", "ok", "")
		add(2, "admin", "node.enable", "node", "w1", "error", "node w1 is offline")
		add(3, "worker w2", "node.register", "node", "w2", "", "host 127.0.0.1:2")
		add(4, "health-checker", "node.offline", "node", "w1", "ok", "offline after 3 failed health checks")
		add(5, "token:ci", "task.start", "task", "t-1", "ok", "")
		add(6, "admin", "nodeX.create", "node", "w_1", "ok", "")
		add(7, "", "settings.update", "settings", "", "ok", "")

		list := func(f store.EventFilter) ([]store.Event, int) {
			t.Helper()
			evs, total, err := store.ListEvents(ctx, db, f)
			if err != nil {
				t.Fatal(err)
			}
			return evs, total
		}
		actions := func(evs []store.Event) string {
			var out []string
			for _, e := range evs {
				out = append(out, e.Action)
			}
			return strings.Join(out, ",")
		}

		all, total := list(store.EventFilter{})
		if total != 8 || len(all) != 8 {
			t.Fatalf("all events: %d of %d, want 8", len(all), total)
		}
		if got := actions(all); got != "settings.update,nodeX.create,task.start,node.offline,node.register,node.enable,node.connect,node.create" {
			t.Errorf("order = %s, want newest first", got)
		}
		if all[0].Actor != "system" {
			t.Errorf("empty actor stored as %q, want system", all[0].Actor)
		}
		if all[4].Outcome != "ok" || all[4].Detail != "host 127.0.0.1:2" || all[4].TargetType != "node" || all[4].Target != "w2" {
			t.Errorf("register event = %+v", all[4])
		}
		if !all[7].At.Equal(base) || all[7].At.Location() != time.UTC {
			t.Errorf("first event at %v, want %v in UTC", all[7].At, base)
		}

		cases := []struct {
			name  string
			f     store.EventFilter
			want  string
			total int
		}{
			{"actor", store.EventFilter{Actor: "admin"}, "nodeX.create,node.enable,node.connect,node.create", 4},
			{"action prefix", store.EventFilter{Action: "node."}, "node.offline,node.register,node.enable,node.connect,node.create", 5},
			{"exact action", store.EventFilter{Action: "node.connect"}, "node.connect", 1},
			{"LIKE wildcards are literal", store.EventFilter{Action: "node_"}, "", 0},
			{"percent is literal", store.EventFilter{Action: "%"}, "", 0},
			{"target", store.EventFilter{TargetType: "node", Target: "w1"}, "node.offline,node.enable,node.connect,node.create", 4},
			{"target with underscore", store.EventFilter{Target: "w_1"}, "nodeX.create", 1},
			{"outcome error", store.EventFilter{Outcome: "error"}, "node.enable", 1},
			{"time range", store.EventFilter{From: base.Add(2 * time.Minute), To: base.Add(5 * time.Minute)}, "node.offline,node.register,node.enable", 3},
			{"combined", store.EventFilter{Actor: "admin", Action: "node.", Outcome: "ok"}, "node.connect,node.create", 2},
		}
		for _, c := range cases {
			evs, total := list(c.f)
			if got := actions(evs); got != c.want || total != c.total {
				t.Errorf("%s: %q (total %d), want %q (total %d)", c.name, got, total, c.want, c.total)
			}
		}

		// Pages of 3, newest first, with the total on every page.
		var seen []string
		for off := 0; off < 9; off += 3 {
			evs, total := list(store.EventFilter{Limit: 3, Offset: off})
			if total != 8 {
				t.Errorf("page at %d: total %d, want 8", off, total)
			}
			seen = append(seen, actions(evs))
		}
		if got := strings.Join(seen, "|"); got != "settings.update,nodeX.create,task.start|node.offline,node.register,node.enable|node.connect,node.create" {
			t.Errorf("pages = %s", got)
		}
		if evs, total := list(store.EventFilter{Offset: 100}); len(evs) != 0 || total != 8 {
			t.Errorf("page past the end: %d events, total %d", len(evs), total)
		}
	})
}

func TestEventFieldsAreBounded(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		long := strings.Repeat("é", 1500) // 2 bytes each: the bound is in characters
		e := &store.Event{Actor: strings.Repeat("a", 300), Action: "node.edit", TargetType: "node",
			Target: strings.Repeat("n", 400), Outcome: "bogus", Detail: long}
		before := time.Now().Add(-time.Second)
		if err := store.AddEvent(ctx, s.Store.DB, e); err != nil {
			t.Fatal(err)
		}
		evs, _, err := store.ListEvents(ctx, s.Store.DB, store.EventFilter{})
		if err != nil || len(evs) != 1 {
			t.Fatalf("list: %v %d", err, len(evs))
		}
		got := evs[0]
		if n := utf8.RuneCountInString(got.Detail); n != store.MaxEventDetail || !strings.HasSuffix(got.Detail, "…") {
			t.Errorf("detail: %d characters, want %d ending with …", n, store.MaxEventDetail)
		}
		if utf8.RuneCountInString(got.Actor) != 128 || utf8.RuneCountInString(got.Target) != 255 {
			t.Errorf("actor %d, target %d characters: not cut", len(got.Actor), len(got.Target))
		}
		if got.Outcome != "ok" {
			t.Errorf("unknown outcome stored as %q, want ok", got.Outcome)
		}
		if got.At.Before(before) || got.At.After(time.Now().Add(time.Second)) {
			t.Errorf("zero time stored as %v, want now", got.At)
		}
	})
}

func newTask(id, title string, status store.TaskStatus) *store.Task {
	return &store.Task{ID: id, Title: title, Type: "http", Spec: "{}", Keepers: "[]", Children: "[]", Status: status}
}

func TestDashboardCounts(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		for i, st := range []store.NodeStatus{store.StatusOffline, store.StatusIdle, store.StatusRunning, store.StatusRunning, store.StatusOffline, store.StatusOffline} {
			n := newWorkerNode(fmt.Sprintf("w%d", i))
			n.Status = st
			if err := store.CreateNode(ctx, db, n); err != nil {
				t.Fatal(err)
			}
		}
		nodes, err := store.CountNodesByStatus(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if nodes[0] != 3 || nodes[1] != 1 || nodes[2] != 2 {
			t.Errorf("nodes by status = %v, want 3 offline, 1 idle, 2 running", nodes)
		}
		for i, st := range []store.TaskStatus{store.TaskStopped, store.TaskRunning, store.TaskRunning, store.TaskPaused, store.TaskDeleted} {
			if err := store.CreateTask(ctx, db, newTask(fmt.Sprintf("t%d", i), "task", st)); err != nil {
				t.Fatal(err)
			}
		}
		tasks, err := store.CountTasksByStatus(ctx, db, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tasks[store.TaskStopped] != 1 || tasks[store.TaskRunning] != 2 || tasks[store.TaskPaused] != 1 || tasks[store.TaskDeleted] != 0 {
			t.Errorf("tasks by status = %v, want 1 stopped, 2 running, 1 paused, deleted left out", tasks)
		}
		titles, err := store.TaskTitles(ctx, db, []string{"t0", "t4", "nope"})
		if err != nil {
			t.Fatal(err)
		}
		if len(titles) != 2 || titles["t4"] != "task" {
			t.Errorf("titles = %v, want t0 and the deleted t4", titles)
		}
	})
}

func TestRunsPerDay(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		if err := store.CreateTask(ctx, db, newTask("t1", "nightly export", store.TaskRunning)); err != nil {
			t.Fatal(err)
		}
		if err := store.CreateTask(ctx, db, newTask("t2", "gone", store.TaskDeleted)); err != nil {
			t.Fatal(err)
		}
		d0 := time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC)
		var runs []store.Run
		add := func(id, task string, at time.Time, result, output string) {
			runs = append(runs, store.Run{ID: id, TaskID: task, Node: "w1", ScheduledAt: at, StartedAt: at, EndedAt: at.Add(time.Second),
				Result: result, Attempt: 1, HTTPStatus: 500, Output: output})
		}
		add("before", "t1", d0.Add(-time.Microsecond), "failed", "too early")             // 9th: outside the range
		add("a1", "t1", d0, "success", "")                                                // 10th, first instant
		add("a2", "t1", d0.Add(23*time.Hour+59*time.Minute+59*time.Second), "failed", "") // 10th, last second
		add("a3", "t1", d0.Add(12*time.Hour), "success", "")
		add("b1", "t1", d0.Add(24*time.Hour), "timeout", "took too long")
		add("b2", "t2", d0.Add(25*time.Hour), "failed", strings.Repeat("x", 500))
		add("b3", "t1", d0.Add(26*time.Hour), "skipped", "")
		add("c1", "t1", d0.Add(3*24*time.Hour), "success", "")
		add("after", "t1", d0.Add(4*24*time.Hour), "failed", "too late") // outside the range
		if _, err := store.InsertRuns(ctx, db, runs); err != nil {
			t.Fatal(err)
		}
		got, err := store.RunsPerDay(ctx, db, d0, d0.Add(4*24*time.Hour), nil)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{}
		for _, c := range got {
			counts[c.Day+" "+c.Result] += c.N
		}
		want := map[string]int{
			"2026-11-10 success": 2, "2026-11-10 failed": 1,
			"2026-11-11 timeout": 1, "2026-11-11 failed": 1, "2026-11-11 skipped": 1,
			"2026-11-13 success": 1,
		}
		if fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Errorf("runs per day = %v, want %v", counts, want)
		}
	})
}

// TestEventsTargetMatch finds a target as a person types it: its exact name
// or id, or part of a task's title in any case (deleted tasks too), with
// LIKE's wildcards taken literally.
func TestEventsTargetMatch(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		for _, tk := range []store.Task{{ID: "t-1", Title: "Billing Export"}, {ID: "t-2", Title: "other_job 100%"}, {ID: "t-3", Title: "Gone billing", Status: store.TaskDeleted}} {
			tk.Type, tk.Spec, tk.Keepers, tk.Children = "http", "{}", "[]", "[]"
			if err := store.CreateTask(ctx, db, &tk); err != nil {
				t.Fatal(err)
			}
		}
		for i, ev := range []struct{ tt, target string }{{"task", "t-1"}, {"task", "t-2"}, {"task", "t-3"}, {"node", "billing"}, {"node", "w1"}, {"user", "t-1"}} {
			if err := store.AddEvent(ctx, db, &store.Event{At: time.Date(2026, 11, 20, 10, i, 0, 0, time.UTC), Actor: "admin",
				Action: ev.tt + ".x", TargetType: ev.tt, Target: ev.target, Outcome: "ok"}); err != nil {
				t.Fatal(err)
			}
		}
		targets := func(f store.EventFilter) string {
			t.Helper()
			evs, total, err := store.ListEvents(ctx, db, f)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, e := range evs {
				out = append(out, e.TargetType+":"+e.Target)
			}
			if total != len(evs) {
				t.Errorf("total %d for %d events", total, len(evs))
			}
			return strings.Join(out, ",")
		}
		for match, want := range map[string]string{
			"billing":   "node:billing,task:t-3,task:t-1", // the node by name, the tasks by title
			"EXPORT":    "task:t-1",
			"t-1":       "user:t-1,task:t-1", // an exact id of any type
			"w1":        "node:w1",
			"job 100%":  "task:t-2",
			"100%%":     "",
			"other_job": "task:t-2",
			"other%job": "",
			"nothing":   "",
		} {
			if got := targets(store.EventFilter{TargetMatch: match}); got != want {
				t.Errorf("TargetMatch %q: %q, want %q", match, got, want)
			}
		}
		if got := targets(store.EventFilter{TargetMatch: "billing", TargetType: "task"}); got != "task:t-3,task:t-1" {
			t.Errorf("TargetMatch with a type: %q", got)
		}
	})
}
