// Package store holds the bun models and the queries of the master's database,
// Open for SQLite, MySQL/MariaDB and PostgreSQL, and the migration runner (the SQL itself
// is in package migrations). Query functions take bun.IDB so that they compose
// inside RunInTx.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/sqliteshim"
	"github.com/uptrace/bun/migrate"

	"github.com/schedulemaster-go/schedulemaster/migrations"
)

// Dialect names a supported database.
type Dialect string

// Supported dialects.
const (
	SQLite Dialect = "sqlite"
	MySQL  Dialect = "mysql"
	// Postgres is PostgreSQL 14 or later, through the pgx driver.
	Postgres Dialect = "postgres"
)

// Store is an open, migrated database.
type Store struct {
	DB      *bun.DB
	Dialect Dialect
}

// DSN is a parsed --db value.
type DSN struct {
	Dialect Dialect
	// Path is the SQLite file; Conn the go-sql-driver/mysql DSN, or the
	// postgres:// URL for PostgreSQL.
	Path string
	Conn string
}

// IOTimeout bounds each read from and write to a MySQL connection unless
// the DSN sets readTimeout or writeTimeout, and each read from and write to a
// PostgreSQL connection outside a deadline of the driver's own: no database
// call hangs for ever.
const IOTimeout = 30 * time.Second

// String hides the password so a DSN can be logged.
func (d DSN) String() string {
	switch d.Dialect {
	case SQLite:
		return "sqlite://" + d.Path
	case Postgres:
		u, err := url.Parse(d.Conn)
		if err != nil {
			return "postgres://(unparsable)"
		}
		return u.Redacted()
	}
	cfg, err := mysql.ParseDSN(d.Conn)
	if err != nil {
		return "mysql://(unparsable)"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "***"
	}
	return "mysql://" + cfg.FormatDSN()
}

// ParseDSN parses a --db value: empty (SQLite in dataDir), "sqlite://PATH", a plain
// file path, "mysql://user:pass@tcp(host:3306)/db", or
// "postgres://user:pass@host:5432/db?sslmode=disable" (or postgresql://).
func ParseDSN(raw, dataDir string) (DSN, error) {
	switch {
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		conn, err := parsePostgresDSN(raw)
		if err != nil {
			return DSN{}, err
		}
		return DSN{Dialect: Postgres, Conn: conn}, nil
	case raw == "":
		return DSN{Dialect: SQLite, Path: filepath.Join(dataDir, "schedulemaster.db")}, nil
	case strings.HasPrefix(raw, "mysql://"):
		conn := strings.TrimPrefix(raw, "mysql://")
		cfg, err := mysql.ParseDSN(conn)
		if err != nil {
			return DSN{}, fmt.Errorf("store: --db: bad MySQL DSN (want mysql://user:pass@tcp(host:3306)/db): %w", err)
		}
		if cfg.DBName == "" {
			return DSN{}, errors.New("store: --db: the MySQL DSN names no database (…/dbname)")
		}
		cfg.ParseTime = true
		cfg.Loc = time.UTC
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["charset"] = "utf8mb4"
		return DSN{Dialect: MySQL, Conn: cfg.FormatDSN()}, nil
	case strings.HasPrefix(raw, "sqlite://"):
		p := strings.TrimPrefix(raw, "sqlite://")
		if p == "" {
			return DSN{}, errors.New("store: --db: sqlite:// needs a file path")
		}
		return DSN{Dialect: SQLite, Path: p}, nil
	case strings.Contains(raw, "://"):
		return DSN{}, fmt.Errorf("store: --db: unknown scheme in %q (use sqlite://PATH, mysql://… or postgres://…)", strings.SplitN(raw, "://", 2)[0]+"://")
	default:
		return DSN{Dialect: SQLite, Path: raw}, nil
	}
}

// Open connects to the database and applies the embedded migrations under a lock.
func Open(ctx context.Context, dsn DSN, log *slog.Logger) (*Store, error) {
	s, err := Connect(ctx, dsn, log)
	if err != nil {
		return nil, err
	}
	if _, err := s.Migrate(ctx, log); err != nil {
		s.Close()
		return nil, err
	}
	if dsn.Dialect == SQLite {
		// SQLite made the -wal and -shm files meanwhile: tighten them too.
		if err := secureSQLiteFiles(dsn.Path, log); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

const (
	// sqliteIdleConns is how many SQLite connections stay open between
	// requests (database/sql keeps 2 by default), each with its page cache.
	sqliteIdleConns = 8
	// sqliteCacheKiB is each SQLite connection's page cache: SQLite's
	// default, 2,000 KiB. 8 MiB made list pages over 100,000 tasks 15-20 %
	// faster, but a push of 100,000 tasks filled the caches of every
	// connection it read through and the master's RSS went from 102 to
	// 187 MB (the memory SQLite allocates is about twice its caches).
	sqliteCacheKiB = 2000
)

// Connect opens the database and checks that it answers, without migrating
// it: `schedulemaster migrate --status` reads what Open would apply. A
// SQLite file is created (private) when missing.
func Connect(ctx context.Context, dsn DSN, log *slog.Logger) (*Store, error) {
	var db *bun.DB
	switch dsn.Dialect {
	case SQLite:
		if err := secureSQLiteFiles(dsn.Path, log); err != nil {
			return nil, err
		}
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeout.Milliseconds()))
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		// The WAL's bounds (see Checkpointer).
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", WALAutoCheckpointPages))
		q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", WALSizeLimit))
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", fmt.Sprintf("cache_size(%d)", -sqliteCacheKiB))
		q.Set("_txlock", "immediate")
		sqldb, err := sql.Open(sqliteshim.ShimName, "file:"+dsn.Path+"?"+q.Encode())
		if err != nil {
			return nil, fmt.Errorf("store: open sqlite: %w", err)
		}
		// Connections are kept (not closed after each burst) and each
		// keeps a page cache: a list reads a large database's index
		// pages from memory instead of from the file at every query.
		sqldb.SetMaxIdleConns(sqliteIdleConns)
		db = bun.NewDB(sqldb, sqlitedialect.New())
	case MySQL:
		cfg, err := mysql.ParseDSN(dsn.Conn)
		if err != nil {
			return nil, fmt.Errorf("store: open mysql: %w", err)
		}
		// Every database call has an overall bound, writes included: a
		// server that accepts and never answers (frozen, blackholed) turns
		// into an error after it, which callers answer as "unavailable"
		// (IsUnreachable). A DSN that sets its own timeouts keeps them.
		if cfg.ReadTimeout == 0 {
			cfg.ReadTimeout = IOTimeout
		}
		if cfg.WriteTimeout == 0 {
			cfg.WriteTimeout = IOTimeout
		}
		// A connection the database refuses is marked, so that callers
		// answer "unavailable, try again" (IsUnreachable), not a server
		// error; any other dial error (a worker's, say) is not.
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, &UnreachableError{Err: err}
			}
			return c, nil
		}
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, fmt.Errorf("store: open mysql: %w", err)
		}
		sqldb := sql.OpenDB(conn)
		sqldb.SetMaxOpenConns(32)
		sqldb.SetMaxIdleConns(16)
		sqldb.SetConnMaxLifetime(5 * time.Minute)
		db = bun.NewDB(sqldb, mysqldialect.New(mysqldialect.WithTimeLocation("UTC")))
	case Postgres:
		sqldb, err := openPostgres(dsn.Conn)
		if err != nil {
			return nil, err
		}
		db = bun.NewDB(sqldb, pgdialect.New())
	default:
		return nil, fmt.Errorf("store: unknown dialect %q", dsn.Dialect)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: connect to %s: %w", dsn, err)
	}
	return &Store{DB: db, Dialect: dsn.Dialect}, nil
}

// secureSQLiteFiles makes the database's directory 0700 and the database
// file and its -wal and -shm files 0600, also when they already existed with
// looser modes: they hold the cluster key, session keys and node secrets. A
// shared directory (sticky bit, like /tmp) is left as it is.
func secureSQLiteFiles(path string, log *slog.Logger) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("store: create data dir: %w", err)
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode()&os.ModeSticky == 0 && fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			log.Warn("store: cannot make the data dir private", "dir", dir, "err", err)
		}
	}
	// Create the file before SQLite does, so it is never readable by others.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("store: open database file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("store: open database file: %w", err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("store: database file: %w", err)
		}
		if fi.Mode().Perm() != 0o600 {
			if err := os.Chmod(p, 0o600); err != nil {
				return fmt.Errorf("store: make %s private: %w", p, err)
			}
		}
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error { return s.DB.Close() }

// migrator is bun's migrator over the embedded migrations of s's dialect,
// and those migrations.
func (s *Store) migrator() (*migrate.Migrator, *migrate.Migrations, error) {
	sub, err := fs.Sub(migrations.FS, string(s.Dialect))
	if err != nil {
		return nil, nil, fmt.Errorf("store: migrations: %w", err)
	}
	ms := migrate.NewMigrations()
	if err := ms.Discover(sub); err != nil {
		return nil, nil, fmt.Errorf("store: discover migrations: %w", err)
	}
	return migrate.NewMigrator(s.DB, ms, migrate.WithMarkAppliedOnSuccess(true)), ms, nil
}

// Migrate applies the embedded migrations the database lacks, under bun's
// migration lock (another master may be migrating the same database), and
// returns the names of those it applied, oldest first.
func (s *Store) Migrate(ctx context.Context, log *slog.Logger) ([]string, error) {
	m, _, err := s.migrator()
	if err != nil {
		return nil, err
	}
	if err := m.Init(ctx); err != nil {
		return nil, fmt.Errorf("store: init migrations: %w", err)
	}
	// Another master may be migrating the same database: wait for its lock.
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := m.Lock(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("store: migration lock held for over 60s (if no other master is starting, delete the row in bun_migration_locks): %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	defer func() {
		if err := m.Unlock(context.WithoutCancel(ctx)); err != nil {
			log.Error("store: release migration lock", "err", err)
		}
	}()
	group, err := m.Migrate(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	var applied []string
	if !group.IsZero() {
		log.Info("database migrated", "group", group.String())
		for _, mg := range group.Migrations {
			applied = append(applied, mg.Name+"_"+mg.Comment)
		}
		slices.Sort(applied)
	}
	return applied, nil
}

// MigrationState is one migration and whether the database has it.
type MigrationState struct {
	// Name is the file name without ".up.sql", e.g. 20261122000001_init.
	Name string
	// AppliedAt is when it was applied; zero while it is pending.
	AppliedAt time.Time
}

// Applied reports whether the database has the migration.
func (m MigrationState) Applied() bool { return !m.AppliedAt.IsZero() }

// MigrationStatus is what the database has of the embedded migrations.
type MigrationStatus struct {
	// Known are the migrations of this binary, oldest first, applied or not.
	Known []MigrationState
	// Unknown are migrations the database has and this binary does not: a
	// newer version migrated it.
	Unknown []MigrationState
}

// Pending are the names of the known migrations the database lacks.
func (st MigrationStatus) Pending() []string {
	var out []string
	for _, m := range st.Known {
		if !m.Applied() {
			out = append(out, m.Name)
		}
	}
	return out
}

// MigrationStatus reads which embedded migrations the database has, without
// changing anything: a database never migrated has them all pending.
func (s *Store) MigrationStatus(ctx context.Context) (MigrationStatus, error) {
	var st MigrationStatus
	m, all, err := s.migrator()
	if err != nil {
		return st, err
	}
	exists, err := s.tableExists(ctx, migrationsTable)
	if err != nil {
		return st, fmt.Errorf("store: read migrations: %w", err)
	}
	// Without the table (a database never migrated) every migration is pending.
	applied := map[string]migrate.Migration{}
	if exists {
		rows, err := m.AppliedMigrations(ctx)
		if err != nil {
			return st, fmt.Errorf("store: read migrations: %w", err)
		}
		for _, r := range rows {
			applied[r.Name] = r
		}
	}
	for _, mg := range all.Sorted() {
		ms := MigrationState{Name: mg.Name + "_" + mg.Comment}
		if r, ok := applied[mg.Name]; ok {
			delete(applied, mg.Name)
			ms.AppliedAt = r.MigratedAt
			if ms.AppliedAt.IsZero() {
				ms.AppliedAt = time.Unix(0, 0).UTC() // applied, time not recorded
			}
		}
		st.Known = append(st.Known, ms)
	}
	for name, r := range applied {
		st.Unknown = append(st.Unknown, MigrationState{Name: name, AppliedAt: r.MigratedAt})
	}
	slices.SortFunc(st.Unknown, func(a, b MigrationState) int { return strings.Compare(a.Name, b.Name) })
	return st, nil
}

// migrationsTable is where bun records the applied migrations.
const migrationsTable = "bun_migrations"

// tableExists reports whether the database has the named table.
func (s *Store) tableExists(ctx context.Context, table string) (bool, error) {
	var n int
	var err error
	switch s.Dialect {
	case SQLite:
		err = s.DB.NewRaw("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", table).Scan(ctx, &n)
	case Postgres:
		err = s.DB.NewRaw("SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?", table).Scan(ctx, &n)
	default:
		err = s.DB.NewRaw("SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", table).Scan(ctx, &n)
	}
	return n > 0, err
}

// isDuplicate reports whether err is a unique-key violation in any dialect.
func isDuplicate(err error) bool {
	if err == nil {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1062 {
		return true
	}
	if pgCode(err) == pgUniqueViolation {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "UNIQUE constraint failed") || strings.Contains(s, "constraint failed: UNIQUE")
}

// notFound maps sql.ErrNoRows to ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// affected returns ErrConflict when a conditional update changed no row.
func affected(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrConflict
	}
	return nil
}
