package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestLastRuns: each task gets exactly its newest n runs, newest first (ties
// of started_at by id), a task without runs is absent, and more tasks than
// one query covers are all answered.
func TestLastRuns(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		base := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
		all := seedRuns(t, ctx, db, 300, base) // t0..t9, 30 runs each, newest first
		// Two runs of t1 at the same instant, newer than all: the id decides.
		tie := base.Add(time.Hour)
		var extra []store.Run
		for _, id := range []string{"tie-a", "tie-b"} {
			extra = append(extra, store.Run{ID: id, TaskID: "t1", Node: "w1", ScheduledAt: tie, StartedAt: tie, EndedAt: tie,
				DurationMS: 7, Result: store.ResultFailed, Attempt: 1})
		}
		// 130 more tasks with one run each: more than one query's hundred.
		var many []string
		for i := range 130 {
			id := fmt.Sprintf("m%03d", i)
			many = append(many, id)
			at := base.Add(-time.Duration(i) * time.Minute)
			extra = append(extra, store.Run{ID: "run-" + id, TaskID: id, Node: "w1", ScheduledAt: at, StartedAt: at, EndedAt: at,
				DurationMS: int64(i), Result: store.ResultSuccess, Attempt: 1})
		}
		if _, err := store.InsertRuns(ctx, db, extra); err != nil {
			t.Fatal(err)
		}

		got, err := store.LastRuns(ctx, db, []string{"t0", "t1", "nope"}, 4)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got["nope"]; ok || len(got) != 2 {
			t.Fatalf("tasks answered: %d (%v), want t0 and t1 only", len(got), keys(got))
		}
		var want0 []string
		for _, r := range all {
			if r.TaskID == "t0" && len(want0) < 4 {
				want0 = append(want0, r.ID)
			}
		}
		if ids := pointIDs(got["t0"]); !slices.Equal(ids, want0) {
			t.Fatalf("t0: %v, want %v", ids, want0)
		}
		ids1 := pointIDs(got["t1"])
		if len(ids1) != 4 || ids1[0] != "tie-b" || ids1[1] != "tie-a" || ids1[2] != "run-0000001" || ids1[3] != "run-0000011" {
			t.Fatalf("t1: %v, want tie-b, tie-a, then its two newest seeded runs", ids1)
		}
		p := got["t1"][0]
		if p.DurationMS != 7 || p.Result != store.ResultFailed || !p.StartedAt.Equal(tie) {
			t.Fatalf("t1's newest run read as %+v", p)
		}

		got, err = store.LastRuns(ctx, db, many, 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(many) {
			t.Fatalf("%d of %d tasks answered", len(got), len(many))
		}
		for i, id := range many {
			if ps := got[id]; len(ps) != 1 || ps[0].DurationMS != int64(i) {
				t.Fatalf("%s: %+v", id, ps)
			}
		}
		if got, err := store.LastRuns(ctx, db, nil, 50); err != nil || len(got) != 0 {
			t.Fatalf("no tasks: %v, %v", got, err)
		}
	})
}

// TestLastRunsUsesIndex asks each database for its plan of LastRuns over a
// page of tasks: every member must read idx_runs_task_started, never the
// whole runs table nor sort a task's runs, so a page costs about tasks x n
// rows however many runs there are.
func TestLastRunsUsesIndex(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		base := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
		n := explainRuns(t)
		seedRuns(t, ctx, db, n, base)
		analyzeRuns(t, ctx, s.Name, db)
		ids := []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"}
		query := store.LastRunsSQL(db, ids, 50)
		plan := explain(t, ctx, s.Name, db, query)
		t.Logf("%s: plan: %s", s.Name, strings.ReplaceAll(plan, "\n", " | "))
		if planScansTable(s.Name, plan) || planSorts(s.Name, plan) {
			t.Fatalf("%s: LastRuns scans or sorts the runs:\n%s\n%s", s.Name, query, plan)
		}
		uses := 0
		for _, line := range strings.Split(plan, "\n") {
			switch used := planIndex(s.Name, line); used {
			case "":
			case "idx_runs_task_started":
				uses++
			default:
				t.Errorf("%s: a member reads %s: %s", s.Name, used, line)
			}
		}
		if uses != len(ids) {
			t.Fatalf("%s: %d members of %d read idx_runs_task_started:\n%s", s.Name, uses, len(ids), plan)
		}
		start := time.Now()
		got, err := store.LastRuns(ctx, db, ids, 50)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: last 50 runs of 10 tasks among %d runs in %s", s.Name, n, time.Since(start).Round(time.Microsecond))
		for _, id := range ids {
			if len(got[id]) != min(50, n/10) {
				t.Fatalf("%s: %d runs, want %d", id, len(got[id]), min(50, n/10))
			}
		}
	})
}

func pointIDs(ps []store.RunPoint) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// BenchmarkLastRuns reads the last 50 runs of a page of 50 tasks that have
// 200 runs each (10,000 runs): the task list's health query.
func BenchmarkLastRuns(b *testing.B) {
	s := storetest.OpenSQLite(b)
	ctx := storetest.Ctx(b)
	var runs []store.Run
	var ids []string
	base := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
	for task := range 50 {
		id := fmt.Sprintf("task-%02d", task)
		ids = append(ids, id)
		for i := range 200 {
			at := base.Add(-time.Duration(i) * time.Minute)
			runs = append(runs, store.Run{ID: fmt.Sprintf("%s-%03d", id, i), TaskID: id, Node: "w1", ScheduledAt: at, StartedAt: at,
				EndedAt: at, DurationMS: int64(i), Result: store.ResultSuccess, Attempt: 1})
		}
	}
	for part := range slices.Chunk(runs, 1000) {
		if _, err := store.InsertRuns(ctx, s.Store.DB, part); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		got, err := store.LastRuns(ctx, s.Store.DB, ids, 50)
		if err != nil || len(got) != 50 {
			b.Fatalf("%d tasks, %v", len(got), err)
		}
	}
}
