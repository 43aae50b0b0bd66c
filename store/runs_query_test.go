package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// seedRuns stores n runs, one a second back from base: task tN (N = i%10),
// node wN (N = i%5), result failed every 7th, timeout every 11th, else success.
func seedRuns(t testing.TB, ctx context.Context, db bun.IDB, n int, base time.Time) []store.Run {
	t.Helper()
	all := make([]store.Run, 0, n)
	for i := range n {
		result := store.ResultSuccess
		switch {
		case i%7 == 0:
			result = store.ResultFailed
		case i%11 == 0:
			result = store.ResultTimeout
		}
		at := base.Add(-time.Duration(i) * time.Second).UTC()
		all = append(all, store.Run{ID: fmt.Sprintf("run-%07d", i), TaskID: "t" + strconv.Itoa(i%10), Node: "w" + strconv.Itoa(i%5),
			ScheduledAt: at, StartedAt: at, EndedAt: at.Add(10 * time.Millisecond), DurationMS: 10, Result: result, Attempt: 1,
			Output: "out " + strconv.Itoa(i)})
	}
	for part := range slices.Chunk(all, 1000) {
		if _, err := store.InsertRuns(ctx, db, part); err != nil {
			t.Fatal(err)
		}
	}
	return all
}

// TestQueryRunsFilters: every filter alone and combined gives exactly the
// matching runs, newest first, with the right total; the capped count stops
// at its bound; the output is loaded only when asked.
func TestQueryRunsFilters(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		base := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
		all := seedRuns(t, ctx, db, 300, base)
		cases := []struct {
			name string
			f    store.RunFilter
			keep func(r store.Run) bool
		}{
			{"none", store.RunFilter{}, func(store.Run) bool { return true }},
			{"result", store.RunFilter{Result: store.ResultFailed}, func(r store.Run) bool { return r.Result == store.ResultFailed }},
			{"node", store.RunFilter{Node: "w3"}, func(r store.Run) bool { return r.Node == "w3" }},
			{"task", store.RunFilter{TaskID: "t4"}, func(r store.Run) bool { return r.TaskID == "t4" }},
			{"task and result", store.RunFilter{TaskID: "t0", Result: store.ResultTimeout},
				func(r store.Run) bool { return r.TaskID == "t0" && r.Result == store.ResultTimeout }},
			{"since until", store.RunFilter{Since: base.Add(-100 * time.Second), Until: base.Add(-50 * time.Second)},
				func(r store.Run) bool {
					return !r.StartedAt.Before(base.Add(-100*time.Second)) && r.StartedAt.Before(base.Add(-50*time.Second))
				}},
			{"all of them", store.RunFilter{Node: "w1", Result: store.ResultSuccess, Since: base.Add(-200 * time.Second)},
				func(r store.Run) bool {
					return r.Node == "w1" && r.Result == store.ResultSuccess && !r.StartedAt.Before(base.Add(-200*time.Second))
				}},
		}
		for _, c := range cases {
			var want []string
			for _, r := range all { // all is newest first already
				if c.keep(r) {
					want = append(want, r.ID)
				}
			}
			if len(want) == 0 {
				t.Fatalf("%s: the seed has no matching run; the test proves nothing", c.name)
			}
			c.f.Limit = 500
			runs, total, err := store.QueryRuns(ctx, db, c.f)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			var got []string
			for _, r := range runs {
				got = append(got, r.ID)
				if r.Output != "" {
					t.Errorf("%s: run %s has its output without Preview", c.name, r.ID)
				}
			}
			if !slices.Equal(got, want) || total != len(want) {
				t.Errorf("%s: got %d runs (total %d), want %d: first got %v, want %v", c.name, len(got), total, len(want),
					got[:min(3, len(got))], want[:min(3, len(want))])
			}
		}

		// A page in the middle, with output.
		runs, total, err := store.QueryRuns(ctx, db, store.RunFilter{Node: "w2", Limit: 5, Offset: 10, Preview: true})
		if err != nil {
			t.Fatal(err)
		}
		if total != 60 || len(runs) != 5 || runs[0].ID != "run-0000052" || runs[0].Output != "out 52" {
			t.Fatalf("page 3 of w2: total %d, %d runs, first %+v", total, len(runs), runs[0])
		}
		// The capped count stops at its bound; under it, it is exact.
		if _, total, err = store.QueryRuns(ctx, db, store.RunFilter{CountLimit: 100}); err != nil || total != 100 {
			t.Fatalf("capped count: %d, %v; want 100", total, err)
		}
		if _, total, err = store.QueryRuns(ctx, db, store.RunFilter{Node: "w2", CountLimit: 100}); err != nil || total != 60 {
			t.Fatalf("capped count under its bound: %d, %v; want 60", total, err)
		}
	})
}

// explainRuns is how many runs TestRunQueriesUseIndexes stores: a few
// thousand by default, SM_TEST_EXPLAIN_RUNS (e.g. 100000) for the real check.
func explainRuns(t *testing.T) int {
	if v := os.Getenv("SM_TEST_EXPLAIN_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("SM_TEST_EXPLAIN_RUNS=%q: want a number >= 1000", v)
		}
		return n
	}
	return 5000
}

// TestRunQueriesUseIndexes asks each database for its plan of the runs page
// queries: every filter must read an index in started_at order (no sort of
// the matching rows, no scan of the table), so a page costs about a page of
// rows however many runs there are.
func TestRunQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		base := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
		n := explainRuns(t)
		start := time.Now()
		seedRuns(t, ctx, db, n, base)
		t.Logf("%s: stored %d runs in %s", s.Name, n, time.Since(start).Round(time.Millisecond))
		analyzeRuns(t, ctx, s.Name, db)
		cases := []struct {
			name  string
			f     store.RunFilter
			index string
		}{
			{"no filter", store.RunFilter{}, "idx_runs_started"},
			{"result", store.RunFilter{Result: store.ResultFailed}, "idx_runs_result_started"},
			{"node", store.RunFilter{Node: "w3"}, "idx_runs_node_started"},
			{"task", store.RunFilter{TaskID: "t4"}, "idx_runs_task_started"},
			{"task and result", store.RunFilter{TaskID: "t4", Result: store.ResultFailed}, "idx_runs_task_result_started"},
			{"since until", store.RunFilter{Since: base.Add(-2 * time.Hour), Until: base.Add(-time.Hour)}, "idx_runs_started"},
			{"result since", store.RunFilter{Result: store.ResultTimeout, Since: base.Add(-time.Hour)}, "idx_runs_result_started"},
		}
		for _, c := range cases {
			for _, capped := range []bool{false, true} {
				f := c.f
				if capped {
					f.CountLimit = 10_000
				}
				page, count := store.RunQueriesSQL(db, f)
				plan := explain(t, ctx, s.Name, db, page)
				// SQLite's planner is deterministic; MySQL may rather walk
				// idx_runs_started (also in order) when a filter matches many runs.
				used := planIndex(s.Name, plan)
				ok := used == c.index || (s.Name == "mysql" && used == "idx_runs_started")
				if !ok || planSorts(s.Name, plan) || planScansTable(s.Name, plan) {
					t.Errorf("%s: %s: page query does not read %s in order:\n%s\n%s", s.Name, c.name, c.index, page, plan)
				}
				cplan := explain(t, ctx, s.Name, db, count)
				if !reflect.DeepEqual(c.f, store.RunFilter{}) && planScansTable(s.Name, cplan) {
					t.Errorf("%s: %s: count query scans the table:\n%s\n%s", s.Name, c.name, count, cplan)
				}
				if !capped {
					t0 := time.Now()
					_, total, err := store.QueryRuns(ctx, db, f)
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("%s: %s: first page and exact total %d in %s", s.Name, c.name, total, time.Since(t0).Round(time.Microsecond))
					t.Logf("%s: %s: page plan: %s", s.Name, c.name, strings.ReplaceAll(plan, "\n", " | "))
					t.Logf("%s: %s: count plan: %s", s.Name, c.name, strings.ReplaceAll(cplan, "\n", " | "))
				}
			}
		}
	})
}

// explain returns the database's plan of query, one line per step.
func explain(t *testing.T, ctx context.Context, dialect string, db bun.IDB, query string) string {
	t.Helper()
	prefix := "EXPLAIN "
	if dialect == "sqlite" {
		prefix = "EXPLAIN QUERY PLAN "
	}
	if dialect == "postgres" {
		// PostgreSQL's planner rightly prefers a sequential scan or a sort
		// on a table of a few thousand runs: with those priced out, as they
		// are on a big table, the plan shows whether an index serves the
		// query in order.
		var plan string
		err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.ExecContext(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "SET LOCAL enable_sort = off"); err != nil {
				return err
			}
			plan = explainRows(t, ctx, tx, prefix+query)
			return nil
		})
		if err != nil {
			t.Fatalf("explain %s: %v", query, err)
		}
		return plan
	}
	return explainRows(t, ctx, db, prefix+query)
}

// explainRows runs an EXPLAIN statement and returns its rows, one a line,
// each as column=value pairs.
func explainRows(t *testing.T, ctx context.Context, db bun.IDB, query string) string {
	t.Helper()
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var parts []string
		for i, c := range cols {
			if vals[i].Valid && vals[i].String != "" {
				parts = append(parts, c+"="+vals[i].String)
			}
		}
		lines = append(lines, strings.Join(parts, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// planSorts reports whether a plan sorts rows: a filesort (MySQL) or a
// temporary b-tree for the whole ORDER BY (SQLite; a sort of the ties of
// started_at only, "RIGHT PART OF ORDER BY", is fine).
func planSorts(dialect, plan string) bool {
	switch dialect {
	case "sqlite":
		return strings.Contains(plan, "USE TEMP B-TREE FOR ORDER BY")
	case "postgres":
		// An Incremental Sort over an index read in started_at order
		// only orders the runs of one started_at by id: a page's worth.
		return pgSort.MatchString(plan)
	}
	return strings.Contains(plan, "Using filesort")
}

// planScansTable reports whether a plan reads the whole runs table.
func planScansTable(dialect, plan string) bool {
	for _, line := range strings.Split(plan, "\n") {
		if dialect == "sqlite" && sqliteTableScan.MatchString(line) && !strings.Contains(line, "INDEX") {
			return true
		}
		if dialect == "postgres" && pgTableScan.MatchString(line) {
			return true
		}
		if dialect == "mysql" && mysqlTableScan.MatchString(line) {
			return true
		}
	}
	return false
}

// planIndex returns the index a plan reads runs through, "" when none.
func planIndex(dialect, plan string) string {
	re := mysqlKey
	switch dialect {
	case "sqlite":
		re = sqliteIndex
	case "postgres":
		re = pgIndex
	}
	if m := re.FindStringSubmatch(plan); m != nil {
		return m[1]
	}
	return ""
}

var (
	mysqlKey    = regexp.MustCompile(`table=runs? .*key=(\S+)`)
	sqliteIndex = regexp.MustCompile(`(?:SCAN|SEARCH) runs? USING (?:COVERING )?INDEX (\S+)`)
	pgIndex     = regexp.MustCompile(`Index (?:Only )?Scan(?: Backward)? using (\S+) on runs`)
	pgSort      = regexp.MustCompile(`(?m)(?:^|-> +|=)Sort `)
)

// analyzeRuns has MySQL and PostgreSQL gather fresh statistics of the runs
// just stored, so that their planners choose as they would on a table in use.
func analyzeRuns(t *testing.T, ctx context.Context, dialect string, db bun.IDB) {
	t.Helper()
	q := map[string]string{"mysql": "ANALYZE TABLE runs", "postgres": "ANALYZE runs"}[dialect]
	if q == "" {
		return
	}
	if _, err := db.ExecContext(ctx, q); err != nil {
		t.Fatal(err)
	}
}

// The runs table is named runs, or run as bun aliases it.
var (
	sqliteTableScan = regexp.MustCompile(`SCAN runs?( |$)`)
	mysqlTableScan  = regexp.MustCompile(`table=runs? .*type=ALL`)
	pgTableScan     = regexp.MustCompile(`Seq Scan on runs`)
)
