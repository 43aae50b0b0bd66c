package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// PostgreSQL error codes (SQLSTATE) the store acts on.
const (
	// pgUniqueViolation is unique_violation: a duplicate key (ErrDuplicate).
	pgUniqueViolation = "23505"
	// pgSerializationFailure is serialization_failure: a concurrent
	// transaction won; run it again.
	pgSerializationFailure = "40001"
	// pgDeadlock is deadlock_detected: this transaction was chosen as the
	// victim and rolled back; run it again.
	pgDeadlock = "40P01"
	// pgLockNotAvailable is lock_not_available (lock_timeout passed).
	pgLockNotAvailable = "55P03"
	// pgCannotConnectNow is cannot_connect_now: the server is starting up
	// or shutting down (a failover or a restart in progress).
	pgCannotConnectNow = "57P03"
)

// pgCode is the SQLSTATE of a PostgreSQL error, "" for any other error.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// parsePostgresDSN checks a postgres:// or postgresql:// URL part by part,
// so that a mistake is named (the host, the port, the database, a
// parameter), and returns it for pgx. The password never appears in an
// error.
func parsePostgresDSN(raw string) (string, error) {
	const want = "want postgres://user:pass@host:5432/dbname?sslmode=disable"
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return "", fmt.Errorf("store: --db: bad PostgreSQL URL (%s): %w", want, err)
	}
	if u.Opaque != "" {
		return "", fmt.Errorf("store: --db: bad PostgreSQL URL: %s:// must be followed by user@host (%s)", u.Scheme, want)
	}
	q := u.Query()
	if u.Hostname() == "" && q.Get("host") == "" {
		return "", fmt.Errorf("store: --db: the PostgreSQL URL names no host (%s, or ?host=/var/run/postgresql for a socket)", want)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("store: --db: the PostgreSQL URL's port %q is not a port number (1-65535)", p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return "", errors.New("store: --db: the PostgreSQL URL's port is empty (host:5432)")
	}
	if strings.Trim(u.Path, "/") == "" && q.Get("dbname") == "" {
		return "", fmt.Errorf("store: --db: the PostgreSQL URL names no database (…/dbname; %s)", want)
	}
	if strings.Contains(strings.Trim(u.Path, "/"), "/") {
		return "", fmt.Errorf("store: --db: the PostgreSQL URL's database %q holds a slash (one name: …/dbname)", strings.Trim(u.Path, "/"))
	}
	if _, err := pgx.ParseConfig(raw); err != nil {
		// pgx's errors name the parameter at fault and hide the password.
		return "", fmt.Errorf("store: --db: bad PostgreSQL URL: %w", err)
	}
	return raw, nil
}

// openPostgres opens a pool of pgx connections to the URL conn: sessions in
// UTC, a refused connection marked UnreachableError, every read and write
// bounded by IOTimeout (see deadlineConn).
func openPostgres(conn string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(conn)
	if err != nil {
		return nil, fmt.Errorf("store: open postgres: %w", err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	// Times are stored UTC in TIMESTAMP columns: the session's zone only
	// matters to SQL that reads the clock, which then reads UTC too.
	cfg.RuntimeParams["timezone"] = "UTC"
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "schedulemaster"
	}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, &UnreachableError{Err: err}
		}
		return &deadlineConn{Conn: c}, nil
	}
	sqldb := stdlib.OpenDB(*cfg)
	sqldb.SetMaxOpenConns(32)
	sqldb.SetMaxIdleConns(16)
	sqldb.SetConnMaxLifetime(5 * time.Minute)
	return sqldb, nil
}

// deadlineConn bounds each Read and Write by IOTimeout while pgx has no
// deadline of its own on the connection: pgx bounds a call only by its
// context, and a server that accepts and never answers (frozen,
// blackholed) would hold a call without one for ever. A deadline pgx sets
// (to interrupt a call whose context ended) is left alone. A read or write
// that fails is marked UnreachableError (the connection broke: closed by the
// server, reset, timed out), so that callers answer "unavailable" as for a
// connection refused; pgx finds the cause inside (errors.As), a context's
// end included.
type deadlineConn struct {
	net.Conn

	mu  sync.Mutex
	own bool // pgx set a deadline
}

// Read reads under IOTimeout unless pgx set a deadline.
func (c *deadlineConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	if !c.own {
		c.Conn.SetReadDeadline(time.Now().Add(IOTimeout))
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(b)
	if err != nil {
		err = &UnreachableError{Err: err}
	}
	return n, err
}

// Write writes under IOTimeout unless pgx set a deadline.
func (c *deadlineConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if !c.own {
		c.Conn.SetWriteDeadline(time.Now().Add(IOTimeout))
	}
	c.mu.Unlock()
	n, err := c.Conn.Write(b)
	if err != nil {
		err = &UnreachableError{Err: err}
	}
	return n, err
}

// SetDeadline records that pgx set (or cleared) a deadline.
func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.own = !t.IsZero()
	return c.Conn.SetDeadline(t)
}

// SetReadDeadline records that pgx set (or cleared) a deadline.
func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.own = !t.IsZero()
	return c.Conn.SetReadDeadline(t)
}

// SetWriteDeadline records that pgx set (or cleared) a deadline.
func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.own = !t.IsZero()
	return c.Conn.SetWriteDeadline(t)
}

// isPostgres reports whether db speaks PostgreSQL.
func isPostgres(db bun.IDB) bool { return db.Dialect().Name() == dialect.PG }

// mayFail runs fn, a statement whose error the caller handles and then goes
// on (a duplicate key, say), in a savepoint when db is a PostgreSQL
// transaction: PostgreSQL aborts the whole transaction at an error, where
// MySQL and SQLite undo only the failed statement. Elsewhere fn runs as it is.
func mayFail(ctx context.Context, db bun.IDB, fn func(ctx context.Context, db bun.IDB) error) error {
	if !isTx(db) || !isPostgres(db) {
		return fn(ctx, db)
	}
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return fn(ctx, tx) })
}
