// Package storetest holds the database helpers shared by the tests of store,
// master, handlers and the binary: real databases per test (SQLite always,
// MariaDB/MySQL and PostgreSQL when configured) and Run, one sub-test per
// dialect. It also
// passes on internal/testutil's helpers, so such tests need one import.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// Environment variables read by the helpers.
const (
	// EnvMySQLDSN is a go-sql-driver DSN, e.g. root@tcp(127.0.0.1:3306)/smtest.
	EnvMySQLDSN = "SM_TEST_MYSQL_DSN"
	// EnvPostgresDSN is a PostgreSQL URL, e.g.
	// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable; each test
	// creates a database of its own on that server.
	EnvPostgresDSN = "SM_TEST_PG_DSN"
	// EnvRequireAll=1 turns every "not configured" skip into a failure.
	EnvRequireAll = "SM_TEST_REQUIRE_ALL"
)

// RequireAll reports whether SM_TEST_REQUIRE_ALL=1: optional back ends must be present.
func RequireAll() bool { return os.Getenv(EnvRequireAll) == "1" }

// SkipOrFail skips the test with reason, or fails it when RequireAll is set.
func SkipOrFail(t testing.TB, reason string) {
	t.Helper()
	if RequireAll() {
		t.Fatalf("%s (and %s=1)", reason, EnvRequireAll)
	}
	t.Skip(reason)
}

// NamedStore is an open, migrated store with the name of its dialect.
type NamedStore struct {
	Name  string // "sqlite", "mysql" or "postgres"
	Store *store.Store
	// DSN opens the same database again (e.g. to test that migrations are idempotent).
	DSN store.DSN
}

// Ctx is testutil.Ctx: a context cancelled when the test ends.
func Ctx(t testing.TB) context.Context { return testutil.Ctx(t) }

// Dialects are the names Run uses, in order.
var Dialects = []string{string(store.SQLite), string(store.MySQL), string(store.Postgres)}

// Run runs fn as one sub-test per dialect, each with a fresh store. The mysql
// sub-test is skipped (with the reason) when SM_TEST_MYSQL_DSN is not set,
// the postgres one when SM_TEST_PG_DSN is not.
func Run(t *testing.T, fn func(t *testing.T, s NamedStore)) {
	t.Helper()
	for _, d := range Dialects {
		t.Run(d, func(t *testing.T) {
			fn(t, Open(t, d))
		})
	}
}

// ServerDialects are the dialects of database servers, which several
// masters can share (SQLite serves one master).
var ServerDialects = []string{string(store.MySQL), string(store.Postgres)}

// RunServers is Run over ServerDialects: the tests of several masters or
// writers on one database.
func RunServers(t *testing.T, fn func(t *testing.T, s NamedStore)) {
	t.Helper()
	for _, d := range ServerDialects {
		t.Run(d, func(t *testing.T) {
			fn(t, Open(t, d))
		})
	}
}

// Open opens a fresh store of the named dialect, skipping (or failing, see
// RequireAll) when that dialect is not configured.
func Open(t testing.TB, dialect string) NamedStore {
	t.Helper()
	switch dialect {
	case string(store.SQLite):
		return OpenSQLite(t)
	case string(store.MySQL):
		return OpenMySQL(t)
	case string(store.Postgres):
		return OpenPostgres(t)
	}
	t.Fatalf("testutil: unknown dialect %q", dialect)
	return NamedStore{}
}

// FreshDSN is a --db value for a new, empty database of the named dialect:
// a file in t.TempDir() for SQLite, a database of its own (dropped when the
// test ends) on the configured server otherwise, skipping (or failing, see
// RequireAll) when that server is not configured.
func FreshDSN(t testing.TB, dialect string) string {
	t.Helper()
	switch dialect {
	case string(store.SQLite):
		return "sqlite://" + filepath.Join(t.TempDir(), "sm.db")
	case string(store.MySQL):
		return "mysql://" + MySQLDatabase(t)
	case string(store.Postgres):
		return PostgresDatabase(t)
	}
	t.Fatalf("storetest: unknown dialect %q", dialect)
	return ""
}

// OpenSQLite opens a new SQLite store in t.TempDir().
func OpenSQLite(t testing.TB) NamedStore {
	t.Helper()
	dsn, err := store.ParseDSN("sqlite://"+filepath.Join(t.TempDir(), "sm.db"), "")
	if err != nil {
		t.Fatalf("parse sqlite DSN: %v", err)
	}
	return openDSN(t, "sqlite", dsn)
}

// OpenMySQL creates a database of its own on the server of SM_TEST_MYSQL_DSN,
// opens a store in it and drops it at cleanup. Without the DSN it skips.
func OpenMySQL(t testing.TB) NamedStore {
	t.Helper()
	conn := MySQLDatabase(t)
	dsn, err := store.ParseDSN("mysql://"+conn, "")
	if err != nil {
		t.Fatalf("parse MySQL DSN: %v", err)
	}
	return openDSN(t, "mysql", dsn)
}

// MySQLDatabase creates an empty database smtest_<random> on the server named by
// SM_TEST_MYSQL_DSN, drops it when the test ends and returns a go-sql-driver DSN
// for it. Without the DSN it skips (or fails, see RequireAll).
func MySQLDatabase(t testing.TB) string {
	t.Helper()
	raw := os.Getenv(EnvMySQLDSN)
	if raw == "" {
		SkipOrFail(t, EnvMySQLDSN+" is not set (e.g. root@tcp(127.0.0.1:3306)/smtest), so the MySQL/MariaDB variant cannot run")
	}
	raw = strings.TrimPrefix(raw, "mysql://")
	cfg, err := mysql.ParseDSN(raw)
	if err != nil {
		t.Fatalf("%s: %v", EnvMySQLDSN, err)
	}
	admin := cfg.Clone()
	admin.DBName = ""
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		t.Fatalf("open MySQL admin connection: %v", err)
	}
	name := "smtest_" + RandomHex(t, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		db.Close()
		t.Fatalf("create test database on %s: %v", admin.Addr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
		db.Close()
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// OpenPostgres creates a database of its own on the server of
// SM_TEST_PG_DSN, opens a store in it and drops it at cleanup. Without the
// DSN it skips.
func OpenPostgres(t testing.TB) NamedStore {
	t.Helper()
	dsn, err := store.ParseDSN(PostgresDatabase(t), "")
	if err != nil {
		t.Fatalf("parse PostgreSQL DSN: %v", err)
	}
	return openDSN(t, "postgres", dsn)
}

// PostgresDatabase creates an empty database smtest_<random> on the server
// named by SM_TEST_PG_DSN, drops it when the test ends (ending its
// connections first) and returns a postgres:// URL for it. Without the DSN
// it skips (or fails, see RequireAll).
func PostgresDatabase(t testing.TB) string {
	t.Helper()
	raw := os.Getenv(EnvPostgresDSN)
	if raw == "" {
		SkipOrFail(t, EnvPostgresDSN+" is not set (e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable), so the PostgreSQL variant cannot run")
	}
	name := "smtest_" + RandomHex(t, 6)
	conn, drop, err := CreatePostgresDatabase(context.Background(), raw, name)
	if err != nil {
		t.Fatalf("%s: %v", EnvPostgresDSN, err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return conn
}

// CreatePostgresDatabase creates the empty database name on the server of
// the PostgreSQL URL raw and returns a URL for it and a function that drops
// it (ending the connections still open to it). smbench uses it too.
func CreatePostgresDatabase(ctx context.Context, raw, name string) (string, func() error, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", nil, fmt.Errorf("parse PostgreSQL URL: %w", err)
	}
	db, err := sql.Open("pgx", raw)
	if err != nil {
		return "", nil, fmt.Errorf("open PostgreSQL admin connection: %w", err)
	}
	db.SetMaxOpenConns(1)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := db.ExecContext(cctx, `CREATE DATABASE "`+name+`"`); err != nil {
		db.Close()
		return "", nil, fmt.Errorf("create test database on %s: %w", u.Host, err)
	}
	drop := func() error {
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := db.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`)
		return err
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

func openDSN(t testing.TB, name string, dsn store.DSN) NamedStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := store.Open(ctx, dsn, Logger(t))
	if err != nil {
		t.Fatalf("open %s store: %v", name, err)
	}
	t.Cleanup(func() { st.Close() })
	return NamedStore{Name: name, Store: st, DSN: dsn}
}

// RandomHex returns n random bytes, hex encoded.
func RandomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("crypto/rand: %v", err)
	}
	return hex.EncodeToString(b)
}

// Discard is testutil.Discard: a logger that drops everything.
func Discard() *slog.Logger { return testutil.Discard() }

// Logger is testutil.Logger: a logger writing through t.Log that goes quiet
// once the test's cleanup started.
func Logger(t testing.TB) *slog.Logger { return testutil.Logger(t) }

// Eventually is testutil.Eventually: poll cond until it holds or fail after
// timeout.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	testutil.Eventually(t, timeout, cond, msg, args...)
}

// DeadlockCounter is a bun query hook that counts the statements that met a
// deadlock or a lock wait timeout (store.IsRetryable), for tests that prove
// concurrent writers queue instead of deadlocking.
type DeadlockCounter struct{ n atomic.Int64 }

// BeforeQuery does nothing.
func (d *DeadlockCounter) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	return ctx
}

// AfterQuery counts the statement when it met a deadlock or lock wait timeout.
func (d *DeadlockCounter) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	if store.IsRetryable(e.Err) {
		d.n.Add(1)
	}
}

// N is the number of statements counted so far.
func (d *DeadlockCounter) N() int64 { return d.n.Load() }
