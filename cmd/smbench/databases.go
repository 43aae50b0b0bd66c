package main

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// The databases smbench creates on a MariaDB or PostgreSQL server are named
// smbench_<unix seconds of creation>_<random>, so that a later run knows
// their age; earlier versions named them smbench_<random>.
var (
	benchDBName    = regexp.MustCompile(`^smbench_([0-9]{10})_[0-9a-f]{12}$`)
	oldBenchDBName = regexp.MustCompile(`^smbench_[0-9a-f]{12}$`)
)

// newDatabaseName is the name of a database created now.
func newDatabaseName(now time.Time) string {
	return "smbench_" + strconv.FormatInt(now.Unix(), 10) + "_" + randHex(6)
}

// Bounds of the drop of a database at the end of a run: a 2 GB database on
// a loaded MariaDB takes minutes (30 s was too short and left one behind).
const (
	dropTimeout = 10 * time.Minute
	dropSlow    = 15 * time.Second // then every dropSlow, a line says it still runs
)

// say prints a line of smbench's own about the databases it manages.
type say func(format string, args ...any)

// execer is a *sql.DB or a *sql.Conn.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// dropDatabase runs stmt (a DROP DATABASE of name on host) within
// dropTimeout, saying so when it is slow and, when it fails, what to run by
// hand.
func dropDatabase(db execer, host, name, stmt string, log say) {
	ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := db.ExecContext(ctx, stmt)
		done <- err
	}()
	tick := time.NewTicker(dropSlow)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			took := time.Since(start).Round(time.Second)
			if err != nil {
				log("could not drop database %s on %s after %s: %v; drop it by hand: %s;", name, host, took, err, stmt)
			} else if took >= dropSlow {
				log("dropped database %s on %s in %s", name, host, took)
			}
			return
		case <-tick.C:
			log("still dropping database %s on %s after %s (bound %s)", name, host, time.Since(start).Round(time.Second), dropTimeout)
		}
	}
}

// leftovers sweeps each server's leftover databases once per run.
type leftovers struct {
	mu    sync.Mutex
	swept map[string]bool // by server key and address
}

// sweepOnce runs sweep for key unless it ran already in this run.
func (l *leftovers) sweepOnce(key string, sweep func()) {
	l.mu.Lock()
	if l.swept == nil {
		l.swept = map[string]bool{}
	}
	done := l.swept[key]
	l.swept[key] = true
	l.mu.Unlock()
	if !done {
		sweep()
	}
}

// leftoverDB is a database of an earlier smbench run found on a server.
type leftoverDB struct {
	name    string
	created time.Time // zero: unknown
}

// createdOf is when a database of smbench's name pattern was created, from
// its name (zero for an earlier version's name, and false for another name).
func createdOf(name string) (time.Time, bool) {
	if m := benchDBName.FindStringSubmatch(name); m != nil {
		sec, _ := strconv.ParseInt(m[1], 10, 64)
		return time.Unix(sec, 0), true
	}
	return time.Time{}, oldBenchDBName.MatchString(name)
}

// listLeftovers runs query (the names of the server's databases) and keeps
// those of smbench's name patterns (createdOf) that want accepts, with the
// time their name says they were created (zero: an earlier version's name).
func listLeftovers(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, want func(name string, created time.Time) bool) ([]leftoverDB, error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var found []leftoverDB
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		if created, ok := createdOf(name); ok && want(name, created) {
			found = append(found, leftoverDB{name, created})
		}
	}
	return found, rows.Err()
}

// sweepMySQL drops, on the MariaDB/MySQL server of admin (a connection
// without a database), the smbench databases created before began that no
// run holds (its lock, see holdMySQLDatabase) and no session uses: what an
// earlier run that failed or was killed left behind. keep is never dropped
// (-scale-mysql-db's database).
func sweepMySQL(ctx context.Context, admin *sql.DB, host string, began time.Time, keep string, log say) {
	found, err := listLeftovers(ctx, admin, `SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'smbench\_%'`,
		func(name string, _ time.Time) bool { return name != keep })
	if err != nil {
		log("could not list leftover smbench databases on %s: %v", host, err)
		return
	}
	for _, d := range found {
		var size sql.NullInt64
		var oldest sql.NullFloat64 // Unix seconds: free of the server's time zone
		_ = admin.QueryRowContext(ctx, `SELECT SUM(DATA_LENGTH + INDEX_LENGTH), UNIX_TIMESTAMP(MIN(CREATE_TIME)) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?`,
			d.name).Scan(&size, &oldest)
		if d.created.IsZero() && oldest.Valid {
			d.created = time.Unix(int64(oldest.Float64), 0) // an earlier version's name: its first table's age
		}
		var held sql.NullInt64
		_ = admin.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?)`, d.name).Scan(&held)
		var sessions int
		_ = admin.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ?`, d.name).Scan(&sessions)
		switch {
		case d.created.IsZero() || !d.created.Before(began):
			continue // newer than this run, or of unknown age: another run's
		case held.Valid || sessions > 0:
			log("database %s on %s (created %s) is in use by another run: left alone", d.name, host, d.created.UTC().Format(time.DateTime))
			continue
		}
		log("dropping leftover database %s on %s (%s, created %s by an earlier run that did not drop it)",
			d.name, host, fmtBytes(size.Int64), d.created.UTC().Format(time.DateTime))
		dropDatabase(admin, host, d.name, "DROP DATABASE IF EXISTS `"+d.name+"`", log)
	}
}

// holdMySQLDatabase takes the lock named after a database on a connection
// of its own, kept until release: a later run's sweep sees the database is
// in use. A run that dies loses its connection, and the lock with it.
func holdMySQLDatabase(ctx context.Context, admin *sql.DB, name string) (release func()) {
	conn, err := admin.Conn(ctx)
	if err != nil {
		return func() {}
	}
	_, _ = conn.ExecContext(ctx, "SELECT GET_LOCK(?, 0)", name)
	return func() { conn.Close() }
}

// sweepPostgres is sweepMySQL on a PostgreSQL server: the databases of
// smbench's current name pattern created before began that no run holds
// (an advisory lock, see holdPostgresDatabase) and no session uses.
func sweepPostgres(ctx context.Context, admin *sql.DB, host string, began time.Time, log say) {
	// One connection: an advisory lock taken is released on the same one.
	conn, err := admin.Conn(ctx)
	if err != nil {
		log("could not list leftover smbench databases on %s: %v", host, err)
		return
	}
	defer conn.Close()
	found, err := listLeftovers(ctx, conn, `SELECT datname FROM pg_database WHERE datname LIKE 'smbench\_%'`,
		func(_ string, created time.Time) bool { return !created.IsZero() })
	if err != nil {
		log("could not list leftover smbench databases on %s: %v", host, err)
		return
	}
	for _, d := range found {
		if !d.created.Before(began) {
			continue
		}
		var free bool
		if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, d.name).Scan(&free); err != nil {
			continue
		}
		if free {
			_, _ = conn.ExecContext(ctx, `SELECT pg_advisory_unlock(hashtext($1))`, d.name)
		}
		var sessions int
		_ = conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1`, d.name).Scan(&sessions)
		if !free || sessions > 0 {
			log("database %s on %s (created %s) is in use by another run: left alone", d.name, host, d.created.UTC().Format(time.DateTime))
			continue
		}
		var size int64
		_ = conn.QueryRowContext(ctx, `SELECT pg_database_size($1)`, d.name).Scan(&size)
		log("dropping leftover database %s on %s (%s, created %s by an earlier run that did not drop it)",
			d.name, host, fmtBytes(size), d.created.UTC().Format(time.DateTime))
		dropDatabase(conn, host, d.name, `DROP DATABASE IF EXISTS "`+d.name+`"`, log)
	}
}

// holdPostgresDatabase is holdMySQLDatabase with an advisory lock.
func holdPostgresDatabase(ctx context.Context, admin *sql.DB, name string) (release func()) {
	conn, err := admin.Conn(ctx)
	if err != nil {
		return func() {}
	}
	_, _ = conn.ExecContext(ctx, "SELECT pg_advisory_lock(hashtext($1))", name)
	return func() { conn.Close() }
}

// fmtBytes says a size in MB or GB.
func fmtBytes(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%d MB", n>>20)
}
