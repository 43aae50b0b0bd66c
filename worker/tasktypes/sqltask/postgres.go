package sqltask

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// pgxClient is a pool of connections to one PostgreSQL database.
type pgxClient struct {
	pool *pgxpool.Pool
}

// openPostgres makes the pool of c, built field by field (no connection
// string, so none can show up in an error), and checks it connects.
func openPostgres(ctx context.Context, c *protocol.ConnectionSpec) (*pgxClient, error) {
	host, portText, err := net.SplitHostPort(c.Address)
	if err != nil {
		return nil, connectError(c, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, connectError(c, fmt.Errorf("port %q: %w", portText, err))
	}
	tlsConfig, err := executor.TLSConfig(c)
	if err != nil {
		return nil, connectError(c, err)
	}
	// ParseConfig("") is the only way to a valid config; it reads the
	// worker's PG* variables and ~/.pgpass, so every field they could set
	// is set again here: the connection is what its definition says.
	cfg, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, connectError(c, fmt.Errorf("the worker's PG* environment variables are invalid: %w", err))
	}
	cc := cfg.ConnConfig
	cc.Host, cc.Port, cc.Database, cc.User, cc.Password = host, uint16(port), c.Database, c.User, c.Secret
	cc.TLSConfig, cc.Fallbacks = tlsConfig, nil
	cc.ConnectTimeout = dialTimeout
	cc.RuntimeParams = map[string]string{"application_name": "schedulemaster"}
	cc.KerberosSrvName, cc.KerberosSpn, cc.SSLNegotiation, cc.SSLCertMode = "", "", "", ""
	cc.MinProtocolVersion, cc.MaxProtocolVersion, cc.ChannelBinding, cc.RequireAuth = "", "", "", ""
	cc.ValidateConnect = nil
	// A run's end sends the server a cancel request at once and waits
	// (a bounded while) for the statement's end, so the statement has
	// stopped when Run returns and the connection is kept; the default
	// closes the connection and cancels from a goroutine.
	cc.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: stopTimeout}
	}
	// Every statement is unique text: no prepared statement cache. The
	// extended protocol, unprepared, runs one statement per call (the
	// server refuses several) and returns its values as text.
	cc.DefaultQueryExecMode = pgx.QueryExecModeExec
	cc.StatementCacheCapacity, cc.DescriptionCacheCapacity = 0, 0
	cfg.MaxConns, cfg.MinConns = maxConns, 0
	cfg.MaxConnIdleTime, cfg.MaxConnLifetime = connIdle, connLife
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, connectError(c, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		// pgx's own words name the user and database again.
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) {
			err = ce.Unwrap()
		}
		return nil, connectError(c, err)
	}
	return &pgxClient{pool: pool}, nil
}

// run runs the statement, or the script's pieces, on one connection of
// the pool after setting its statement_timeout (for the session: each run
// sets its own, and a transaction cannot hold CREATE DATABASE or VACUUM).
func (p *pgxClient) run(r *run, text string, pieces []piece) executor.Result {
	pc, err := p.pool.Acquire(r.ctx)
	if err != nil {
		return r.error("", err)
	}
	// A connection left in a transaction (a run that ended mid-script) is
	// closed by Release, not reused.
	defer pc.Release()
	r.stopped = func() string { return "the server was sent a cancel request for the statement" }
	if limit := r.limit(); limit > 0 {
		ms := (limit + time.Millisecond - 1) / time.Millisecond
		if _, err := pc.Exec(r.ctx, "SET statement_timeout = "+strconv.FormatInt(int64(ms), 10)); err != nil {
			return r.error("", err)
		}
	}
	if pieces == nil {
		return pgSingle(r, pc, text)
	}
	return pgScript(r, pc, pieces)
}

// pgSingle runs one statement as a query: a result with columns is shown
// as a table, one without (UPDATE, DDL) by its rows affected. The server
// says which, whatever the statement's first word (WITH ... UPDATE,
// UPDATE ... RETURNING).
func pgSingle(r *run, pc *pgxpool.Conn, text string) executor.Result {
	rows, err := pc.Query(r.ctx, text)
	if err != nil {
		return r.error("", err)
	}
	defer rows.Close()
	fields := rows.FieldDescriptions()
	if len(fields) == 0 {
		rows.Close()
		if err := rows.Err(); err != nil {
			return r.error("", err)
		}
		tag := rows.CommandTag()
		return r.ok(fmt.Sprintf("%s (%s)", affected(tag.RowsAffected()), tag.String()))
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	tb := newTable(names)
	vals := make([]*string, len(fields))
	// Rows beyond those shown are counted, not kept: the driver reads a
	// result whole either way.
	for rows.Next() {
		if !tb.wants() {
			tb.skip()
			continue
		}
		for i, raw := range rows.RawValues() {
			vals[i] = nil
			if raw != nil {
				s := string(raw)
				vals[i] = &s
			}
		}
		tb.add(vals)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r.error("", err)
	}
	return r.ok(strings.TrimSuffix(tb.String(), "\n"))
}

// pgScript runs the pieces in one transaction, saying each one's rows
// affected; the first that fails rolls the whole back.
func pgScript(r *run, pc *pgxpool.Conn, pieces []piece) executor.Result {
	tx, err := pc.Begin(r.ctx)
	if err != nil {
		return r.error("", err)
	}
	rollback := func() {
		ctx, cancel := stopContext(r.ctx)
		defer cancel()
		_ = tx.Rollback(ctx)
	}
	for i, p := range pieces {
		rows, err := tx.Query(r.ctx, p.text)
		if err == nil {
			rows.Close()
			err = rows.Err()
		}
		if err != nil {
			rollback()
			res := r.error(stepName(i+1, p), fmt.Errorf("%w%s", err, midHint(p)))
			r.say(undone(len(pieces), ""))
			return res
		}
		tag := rows.CommandTag()
		what := affected(tag.RowsAffected())
		if tag.Select() {
			what = fmt.Sprintf("%d %s returned (not shown in a script)", tag.RowsAffected(), plural(tag.RowsAffected(), "row", "rows"))
		}
		r.say(fmt.Sprintf("%s: %s: %s", stepName(i+1, p), what, excerpt(p.text)))
	}
	if err := tx.Commit(r.ctx); err != nil {
		rollback()
		res := r.error("commit", err)
		r.say(undone(len(pieces), ""))
		return res
	}
	return r.ok(fmt.Sprintf("committed: %d %s in one transaction", len(pieces), plural(int64(len(pieces)), "statement", "statements")))
}
