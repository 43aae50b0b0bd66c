package store

import "github.com/uptrace/bun"

// LastRunsSQL is the SQL of LastRuns for ids (at most a hundred), for the
// tests that EXPLAIN it.
func LastRunsSQL(db bun.IDB, ids []string, n int) string { return lastRunsQuery(db, ids, n).String() }
