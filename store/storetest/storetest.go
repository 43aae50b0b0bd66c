// Package storetest holds helpers shared by the tests of store, worker and master:
// real databases per test (SQLite always, MariaDB/MySQL when configured), a
// test-bound logger and a polling helper.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// Environment variables read by the helpers.
const (
	// EnvMySQLDSN is a go-sql-driver DSN, e.g. root@tcp(127.0.0.1:3306)/smtest.
	EnvMySQLDSN = "SM_TEST_MYSQL_DSN"
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
	Name  string // "sqlite" or "mysql"
	Store *store.Store
	// DSN opens the same database again (e.g. to test that migrations are idempotent).
	DSN store.DSN
}

// Ctx returns a context cancelled when the test ends.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// Dialects are the names Run and Stores use, in order.
var Dialects = []string{string(store.SQLite), string(store.MySQL)}

// Stores opens a fresh store per configured dialect: SQLite in t.TempDir()
// always, MySQL/MariaDB when SM_TEST_MYSQL_DSN is set (in a database of its own,
// dropped at cleanup). Without the DSN and with RequireAll, the test fails.
func Stores(t testing.TB) []NamedStore {
	t.Helper()
	out := []NamedStore{OpenSQLite(t)}
	if os.Getenv(EnvMySQLDSN) == "" {
		if RequireAll() {
			t.Fatalf("%s is not set (and %s=1)", EnvMySQLDSN, EnvRequireAll)
		}
		t.Logf("%s is not set: testing SQLite only", EnvMySQLDSN)
		return out
	}
	return append(out, OpenMySQL(t))
}

// Run runs fn as one sub-test per dialect, each with a fresh store. The mysql
// sub-test is skipped (with the reason) when SM_TEST_MYSQL_DSN is not set.
func Run(t *testing.T, fn func(t *testing.T, s NamedStore)) {
	t.Helper()
	for _, d := range Dialects {
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
	}
	t.Fatalf("testutil: unknown dialect %q", dialect)
	return NamedStore{}
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

// Discard is a logger that drops everything.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Logger returns a logger writing through t.Log (shown with -v or on failure).
// Records logged after the test's cleanup started are dropped, so background
// goroutines that outlive the test cannot make it panic.
func Logger(t testing.TB) *slog.Logger {
	tw := &testWriter{t: t}
	t.Cleanup(tw.stop)
	return slog.New(slog.NewTextHandler(tw, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// Eventually polls cond every 10ms until it holds, failing the test with msg
// when timeout passes first. Call it from the test's goroutine.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, fmt.Sprintf(msg, args...))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
