package store

import "github.com/uptrace/bun"

// RunQueriesSQL is the SQL of the page and count queries of QueryRuns, for
// the tests that EXPLAIN them.
func RunQueriesSQL(db bun.IDB, f RunFilter) (page, count string) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	var runs []Run
	return runPageQuery(db, f, &runs).String(), runCountQuery(db, f).String()
}
