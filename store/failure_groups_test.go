package store_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestFailureGroups: the failed and timed-out runs since a time, grouped by
// task and delayed tasks by topic, the newest failure first, each with its
// count, its results, the latest failure's output; older failures and
// successes are left out; limit and scan bound the answer.
func TestFailureGroups(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		for _, id := range []string{"ta", "tb"} {
			if err := store.CreateTask(ctx, db, &store.Task{ID: id, Title: "Task " + id, Type: "http", Spec: "{}", Keepers: "[]", Children: "[]"}); err != nil {
				t.Fatal(err)
			}
		}
		due := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
		for i, topic := range []string{"orders", "orders", "mail"} {
			d := newDelayed(delayedID(i+1), "key-"+strconv.Itoa(i+1), due)
			d.Topic = topic
			if _, _, err := store.CreateDelayed(ctx, db, d); err != nil {
				t.Fatal(err)
			}
		}
		now := time.Now().UTC().Truncate(time.Second)
		var runs []store.Run
		add := func(id, task, delayed string, ago time.Duration, result, output string) {
			at := now.Add(-ago)
			runs = append(runs, store.Run{ID: id, TaskID: task, DelayedID: delayed, Node: "w1", ScheduledAt: at, StartedAt: at, EndedAt: at,
				Result: result, Attempt: 1, HTTPStatus: 500, Output: output})
		}
		add("a1", "ta", "", 50*time.Minute, store.ResultFailed, "old a")
		add("a2", "ta", "", 40*time.Minute, store.ResultTimeout, "timed out a")
		add("a3", "ta", "", 10*time.Minute, store.ResultFailed, "\n  boom a\nsecond line")
		add("a4", "ta", "", 5*time.Minute, store.ResultSuccess, "fine")
		add("a0", "ta", "", 30*time.Hour, store.ResultFailed, "too old")
		add("b1", "tb", "", 20*time.Minute, store.ResultFailed, "boom b")
		add("d1", delayedID(1), delayedID(1), 30*time.Minute, store.ResultFailed, "boom d1")
		add("d2", delayedID(2), delayedID(2), 2*time.Minute, store.ResultFailed, "boom d2")
		add("d3", delayedID(3), delayedID(3), 15*time.Minute, store.ResultTimeout, "boom d3")
		if _, err := store.InsertRuns(ctx, db, runs); err != nil {
			t.Fatal(err)
		}
		since := now.Add(-24 * time.Hour)
		groups, complete, err := store.FailureGroups(ctx, db, since, 100, 10, nil)
		if err != nil || !complete {
			t.Fatalf("groups: %v (complete %v)", err, complete)
		}
		type brief struct {
			key, last string
			n         int
			results   []string
			excerpt   string
		}
		var got []brief
		for _, g := range groups {
			key := g.TaskID + " " + g.TaskTitle
			if g.Delayed {
				key = "delayed " + g.Topic + " " + g.ContentKey
			}
			r := slices.Clone(g.Results)
			slices.Sort(r)
			got = append(got, brief{key, g.LastRunID, g.Count, r, g.Excerpt})
		}
		want := []brief{
			{"delayed orders key-2", "d2", 2, []string{"failed"}, "boom d2"},
			{"ta Task ta", "a3", 3, []string{"failed", "timeout"}, "\n  boom a\nsecond line"},
			{"delayed mail key-3", "d3", 1, []string{"timeout"}, "boom d3"},
			{"tb Task tb", "b1", 1, []string{"failed"}, "boom b"},
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("groups:\n got %v\nwant %v", got, want)
		}
		if g := groups[1]; g.LastAt.Unix() != now.Add(-10*time.Minute).Unix() || g.LastResult != store.ResultFailed || g.HTTPStatus != 500 || g.LastNode != "w1" {
			t.Errorf("ta's latest failure: %+v", g)
		}

		// Two groups at most: the two newest.
		groups, _, err = store.FailureGroups(ctx, db, since, 100, 2, nil)
		if err != nil || len(groups) != 2 || groups[0].LastRunID != "d2" || groups[1].LastRunID != "a3" {
			t.Fatalf("limit 2: %+v, %v", groups, err)
		}
		// Reading 2 failures of each result: counts cut short, and said so.
		groups, complete, err = store.FailureGroups(ctx, db, since, 2, 10, nil)
		if err != nil || complete || len(groups) == 0 || groups[0].LastRunID != "d2" {
			t.Fatalf("scan 2: %+v, complete %v, %v", groups, complete, err)
		}
		// No project: nothing.
		if groups, _, err := store.FailureGroups(ctx, db, since, 100, 10, []int64{}); err != nil || len(groups) != 0 {
			t.Fatalf("no project: %+v, %v", groups, err)
		}
		if groups, _, err := store.FailureGroups(ctx, db, since, 100, 10, []int64{store.DefaultProjectID}); err != nil || len(groups) != 4 {
			t.Fatalf("the default project: %d groups, %v", len(groups), err)
		}
	})
}

// TestRunsPerSlot: runs counted by UTC minute, hour and day and result, in
// the layout of each unit, in every dialect.
func TestRunsPerSlot(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		base := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
		var runs []store.Run
		for i, off := range []time.Duration{10 * time.Second, 20 * time.Second, 90 * time.Second, 70 * time.Minute, 25 * time.Hour} {
			at := base.Add(off)
			result := store.ResultSuccess
			if i == 1 {
				result = store.ResultFailed
			}
			runs = append(runs, store.Run{ID: "r" + strconv.Itoa(i), TaskID: "t", Node: "w1", ScheduledAt: at, StartedAt: at, EndedAt: at,
				Result: result, Attempt: 1})
		}
		if _, err := store.InsertRuns(ctx, db, runs); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			unit store.SlotUnit
			to   time.Duration
			want string
		}{
			{store.SlotMinute, time.Hour, "[{2030-05-01 12:00 failed 1} {2030-05-01 12:00 success 1} {2030-05-01 12:01 success 1}]"},
			{store.SlotHour, 24 * time.Hour, "[{2030-05-01 12 failed 1} {2030-05-01 12 success 2} {2030-05-01 13 success 1}]"},
			{store.SlotDay, 48 * time.Hour, "[{2030-05-01 failed 1} {2030-05-01 success 3} {2030-05-02 success 1}]"},
		} {
			got, err := store.RunsPerSlot(ctx, db, c.unit, base, base.Add(c.to), nil)
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(got, func(a, b store.DayCount) int {
				if a.Day != b.Day {
					return map[bool]int{true: -1, false: 1}[a.Day < b.Day]
				}
				return map[bool]int{true: -1, false: 1}[a.Result < b.Result]
			})
			if fmt.Sprint(got) != c.want {
				t.Errorf("unit %d: %v, want %s", c.unit, got, c.want)
			}
			if len(got) > 0 {
				if _, err := time.Parse(c.unit.SlotLayout(), got[0].Day); err != nil {
					t.Errorf("unit %d: slot %q is not in the layout %q", c.unit, got[0].Day, c.unit.SlotLayout())
				}
			}
		}
	})
}

// BenchmarkFailureGroups groups the failures of the last 24 hours among
// SM_BENCH_RUNS runs (default 200,000; 1,000,000 for the figure in the
// notes) of 100,000 tasks, one in ten failed: the dashboard's query.
func BenchmarkFailureGroups(b *testing.B) {
	n := 200_000
	if v, err := strconv.Atoi(os.Getenv("SM_BENCH_RUNS")); err == nil && v > 0 {
		n = v
	}
	s := storetest.OpenSQLite(b)
	ctx := storetest.Ctx(b)
	db := s.Store.DB
	now := time.Now().UTC()
	batch := make([]store.Run, 0, 1000)
	for i := range n {
		at := now.Add(-time.Duration(n-i) * 3 * time.Second) // 1,000,000 runs: about 35 days
		result := store.ResultSuccess
		if i%10 == 0 {
			result = store.ResultFailed
		}
		batch = append(batch, store.Run{ID: fmt.Sprintf("run-%08d", i), TaskID: fmt.Sprintf("task-%06d", i%100_000), Node: "w1",
			ScheduledAt: at, StartedAt: at, EndedAt: at, Result: result, Attempt: 1, Output: "boom"})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := store.InsertRunsMode(ctx, db, batch, store.InsertThenLookUp); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.ResetTimer()
	for b.Loop() {
		groups, _, err := store.FailureGroups(ctx, db, now.Add(-24*time.Hour), 1000, 10, nil)
		if err != nil || len(groups) != 10 {
			b.Fatalf("%d groups, %v", len(groups), err)
		}
	}
}
