package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// lines collects what a sweep says.
type lines struct {
	mu  sync.Mutex
	got []string
}

func (l *lines) say(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, fmt.Sprintf(format, args...))
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.got, "\n")
}

// A sweep at the start of a run drops the smbench databases an earlier run
// left (by their name, or for an earlier version's name by their tables'
// age) and says so; it leaves those of runs still going (their lock held),
// those created after the run began and other databases.
func TestSweepDropsOnlyLeftovers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type server struct {
		name, dsn, driver string
		sweep             func(context.Context, *sql.DB, string, time.Time, say)
		hold              func(context.Context, *sql.DB, string) func()
		quote             func(string) string
	}
	var servers []server
	if dsn := os.Getenv(storetest.EnvMySQLDSN); dsn != "" {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DBName = ""
		sweep := func(ctx context.Context, db *sql.DB, host string, began time.Time, log say) {
			sweepMySQL(ctx, db, host, began, "", log)
		}
		servers = append(servers, server{"mysql", cfg.FormatDSN(), "mysql", sweep, holdMySQLDatabase, func(s string) string { return "`" + s + "`" }})
	}
	if dsn := os.Getenv(storetest.EnvPostgresDSN); dsn != "" {
		servers = append(servers, server{"postgres", dsn, "pgx", sweepPostgres, holdPostgresDatabase, func(s string) string { return `"` + s + `"` }})
	}
	if len(servers) == 0 {
		t.Skip("no " + storetest.EnvMySQLDSN + " nor " + storetest.EnvPostgresDSN)
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			db, err := sql.Open(srv.driver, srv.dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() }) // after the drops below (cleanups run last first)
			long := time.Now().Add(-time.Hour)
			left := newDatabaseName(long)        // an earlier run's, dropped
			held := newDatabaseName(long)        // a run still going, kept
			other := "smbenchmark_" + randHex(4) // not smbench's pattern, kept
			oldStyle := "smbench_" + randHex(6)  // an earlier version's name: its tables' age
			create := func(name string) {
				t.Helper()
				if _, err := db.ExecContext(ctx, "CREATE DATABASE "+srv.quote(name)); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _, _ = db.Exec("DROP DATABASE IF EXISTS " + srv.quote(name)) })
			}
			for _, name := range []string{left, held, other} {
				create(name)
			}
			began := time.Now().Add(-time.Minute)
			if srv.name == "mysql" {
				create(oldStyle)
				if _, err := db.ExecContext(ctx, "CREATE TABLE `"+oldStyle+"`.t (id INT)"); err != nil {
					t.Fatal(err)
				}
				// The run begins after its table was created
				// (information_schema's CREATE_TIME has seconds).
				time.Sleep(1100 * time.Millisecond)
				began = time.Now()
			}
			newer := newDatabaseName(began.Add(time.Second)) // created after the run began, kept
			create(newer)
			release := srv.hold(ctx, db, held)
			defer release()
			var out lines
			u, _ := url.Parse("x://" + srv.name)
			srv.sweep(ctx, db, u.Host, began, out.say)
			exists := func(name string) bool {
				q := "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?"
				if srv.name == "postgres" {
					q = "SELECT COUNT(*) FROM pg_database WHERE datname = $1"
				}
				var n int
				if err := db.QueryRowContext(ctx, q, name).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n == 1
			}
			gone := []string{left}
			if srv.name == "mysql" {
				gone = append(gone, oldStyle)
			}
			for _, name := range gone {
				if exists(name) || !strings.Contains(out.String(), "dropping leftover database "+name) {
					t.Errorf("leftover %s: still there or not said:\n%s", name, out.String())
				}
			}
			for _, name := range []string{held, newer, other} {
				if !exists(name) {
					t.Errorf("%s was dropped:\n%s", name, out.String())
				}
			}
			if !strings.Contains(out.String(), held+" on "+srv.name+" (created") || !strings.Contains(out.String(), "left alone") {
				t.Errorf("the database of a run still going is not said to be left alone:\n%s", out.String())
			}
		})
	}
}

// A drop that fails says the statement to run by hand.
func TestDropFailureSaysTheStatement(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:1)/")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out lines
	dropDatabase(db, "127.0.0.1:1", "smbench_x", "DROP DATABASE IF EXISTS `smbench_x`", out.say)
	if !strings.Contains(out.String(), "drop it by hand: DROP DATABASE IF EXISTS `smbench_x`;") {
		t.Fatalf("a failed drop says:\n%s", out.String())
	}
}
