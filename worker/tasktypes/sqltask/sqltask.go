// Package sqltask runs sql tasks: one statement, or a script of statements
// in one transaction, on PostgreSQL (pgx) or MySQL/MariaDB
// (go-sql-driver/mysql), through a named connection.
//
// A statement's output is its rows affected, or the first MaxRows rows of
// its result as a text table. A run that reaches its timeout stops its
// statement on the server too (PostgreSQL: a cancel request; MySQL: KILL
// QUERY), and each statement also carries the timeout to the server
// (statement_timeout, max_statement_time or max_execution_time) in case
// the worker cannot reach it then.
//
// {{KEY}} params are expanded into the statement as text, not bound as
// values: they are for trusted values (the task's own), never for input an
// outsider chose.
package sqltask

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// Bounds of the clients and of stopping a statement.
const (
	// maxConns bounds the connections a pooled client holds to one
	// database: that many runs of its tasks at once, the others wait
	// (within their timeout) for one.
	maxConns = 4
	// maxIdleConns is how many of them a MySQL client keeps unused.
	maxIdleConns = 2
	// connIdle is how long an unused connection is kept.
	connIdle = 5 * time.Minute
	// connLife bounds a connection's life, so servers behind a moving
	// address (failover) are found again.
	connLife = time.Hour
	// dialTimeout bounds a connection attempt, below the run's timeout.
	dialTimeout = 10 * time.Second
	// stopTimeout bounds the work after a run's end: a rollback, KILL
	// QUERY, or waiting for a cancelled statement's answer.
	stopTimeout = 2 * time.Second
	// serverGrace is added to the timeout MySQL itself enforces, so the
	// worker's own end of the run (and its KILL QUERY) comes first: MySQL
	// ends some interrupted statements (SLEEP) without an error.
	serverGrace = time.Second
	// maxExcerpt bounds the statement text quoted in a script's output.
	maxExcerpt = 80
)

// Executor runs sql tasks, with one pooled client per connection.
type Executor struct {
	log  *slog.Logger
	pool *executor.Pool[*client]
}

// client reaches one database: a pgx pool, or a database/sql pool of
// MySQL connections.
type client struct {
	pg *pgxClient
	my *mysqlClient
}

// New returns the sql executor; log receives what the drivers say.
func New(log *slog.Logger) *Executor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Executor{log: log}
	e.pool = executor.NewPool(func(ctx context.Context, c *protocol.ConnectionSpec) (*client, error) {
		return e.open(ctx, c)
	}, (*client).close, executor.PoolOptions{})
	return e
}

// Type implements executor.Executor.
func (*Executor) Type() string { return protocol.TaskSQL }

// Validate implements executor.Executor: the definition and, when known,
// the connection's kind.
func (*Executor) Validate(t *executor.Task) error {
	if t.Def.SQL == nil {
		return ErrNoSpec
	}
	if t.Conn != nil {
		return checkKind(t.Conn)
	}
	return nil
}

func checkKind(c *protocol.ConnectionSpec) error {
	if c.Kind != protocol.ConnPostgres && c.Kind != protocol.ConnMySQL {
		return fmt.Errorf("%w: connection %q is of kind %q", ErrKind, c.Name, c.Kind)
	}
	return nil
}

// Close implements executor.Closer: it closes the pooled clients.
func (e *Executor) Close() error { return e.pool.Close() }

// Run implements executor.Executor.
func (e *Executor) Run(ctx context.Context, t *executor.Task, out io.Writer) executor.Result {
	r := &run{ctx: ctx, t: t, out: out, conn: t.Conn, log: e.log}
	spec := t.Def.SQL
	switch {
	case spec == nil:
		return r.fail(ErrNoSpec.Error())
	case t.Conn == nil:
		return r.fail(executor.ErrNoConnection.Error())
	}
	if err := checkKind(t.Conn); err != nil {
		return r.fail(err.Error())
	}
	text := strings.TrimSpace(t.Param(spec.Statement))
	var pieces []piece
	if spec.Script {
		if pieces = splitScript(text, t.Conn.Kind == protocol.ConnMySQL); len(pieces) == 0 {
			return r.fail(ErrEmptyScript.Error())
		}
	} else {
		// One final ';' is the habit of consoles; servers differ in
		// taking it.
		text = strings.TrimSpace(strings.TrimSuffix(text, ";"))
	}
	cl, release, err := e.pool.Get(ctx, t.Conn)
	if err != nil {
		return r.error("", err)
	}
	defer release()
	if cl.pg != nil {
		return cl.pg.run(r, text, pieces)
	}
	return cl.my.run(r, text, pieces)
}

// Test implements executor.Tester: it connects (outside the pool: the
// connection may be an unsaved edit), asks the server's version and says
// it.
func (e *Executor) Test(ctx context.Context, c *protocol.ConnectionSpec) (string, error) {
	if err := checkKind(c); err != nil {
		return "", err
	}
	cl, err := e.open(ctx, c)
	if err != nil {
		return "", errors.New(errText(err, c))
	}
	defer func() { _ = cl.close() }()
	var version string
	if cl.pg != nil {
		err = cl.pg.pool.QueryRow(ctx, "SELECT version()").Scan(&version)
	} else {
		err = cl.my.db.QueryRowContext(ctx, "SELECT version()").Scan(&version)
		if err == nil {
			version = "MySQL " + version
			if strings.Contains(version, "MariaDB") {
				version = "MariaDB " + strings.TrimPrefix(version, "MySQL ")
			}
		}
	}
	if err != nil {
		return "", errors.New(errText(err, c))
	}
	return fmt.Sprintf("%s; database %s, user %s", cell(version), c.Database, c.User), nil
}

// open makes the client of c and checks that it connects, so a client
// that cannot is not kept and its error is the connection's.
func (e *Executor) open(ctx context.Context, c *protocol.ConnectionSpec) (*client, error) {
	switch c.Kind {
	case protocol.ConnPostgres:
		pg, err := openPostgres(ctx, c)
		if err != nil {
			return nil, err
		}
		return &client{pg: pg}, nil
	case protocol.ConnMySQL:
		my, err := openMySQL(ctx, c, e.log)
		if err != nil {
			return nil, err
		}
		return &client{my: my}, nil
	}
	return nil, checkKind(c)
}

func (c *client) close() error {
	if c.pg != nil {
		c.pg.pool.Close()
		return nil
	}
	return c.my.db.Close()
}

// connectError is a failure to connect: which server, then why.
func connectError(c *protocol.ConnectionSpec, err error) error {
	return fmt.Errorf("connect to %s %s (database %s, user %s): %w", c.Kind, c.Address, c.Database, c.User, err)
}

// limit is the timeout a statement carries to the server: what is left
// of the run's; 0 for none.
func (r *run) limit() time.Duration {
	ctx, timeout := r.ctx, r.t.Timeout
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); timeout <= 0 || left < timeout {
			timeout = max(left, time.Millisecond)
		}
	}
	return timeout
}

// run is one execution.
type run struct {
	ctx  context.Context
	t    *executor.Task
	out  io.Writer
	conn *protocol.ConnectionSpec
	log  *slog.Logger
	// stopped says how the server's statement was stopped when the run
	// ended before it did; set by the kind's code.
	stopped func() string
}

func (r *run) say(line string) { _, _ = io.WriteString(r.out, line+"\n") }

func (r *run) ok(line string) executor.Result {
	r.say(line)
	return executor.Result{Result: protocol.ResultSuccess}
}

func (r *run) fail(line string) executor.Result {
	r.say(line)
	return executor.Result{Result: protocol.ResultFailed}
}

// error ends the run on err, what said what failed ("" for the run's one
// statement): a timeout when the run reached its timeout or the server
// ended the statement at it, else a failure with the error's text.
func (r *run) error(what string, err error) executor.Result {
	prefix := what
	if prefix != "" {
		prefix += " "
	}
	stopped := ""
	if r.ctx.Err() != nil && r.stopped != nil {
		stopped = "; " + r.stopped()
	}
	switch {
	case timedOut(r.ctx, err):
		after := "its timeout"
		if r.t.Timeout > 0 {
			after = r.t.Timeout.String()
		}
		r.say(fmt.Sprintf("%stimed out after %s%s", prefix, after, stopped))
		return executor.Result{Result: protocol.ResultTimeout}
	case r.ctx.Err() != nil:
		return r.fail(fmt.Sprintf("%scanceled: the run was stopped%s", prefix, stopped))
	}
	if what != "" {
		prefix = what + " failed: "
	}
	return r.fail(prefix + errText(err, r.conn))
}

// timedOut says the run's statement ended at its timeout: the run's
// deadline passed, or the server's own statement timeout ended it.
func timedOut(ctx context.Context, err error) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57014" && strings.Contains(pe.Message, "statement timeout")
	}
	var me *mysql.MySQLError
	// MariaDB's max_statement_time, MySQL's max_execution_time.
	return errors.As(err, &me) && (me.Number == 1969 || me.Number == 3024)
}

// errText is err as one line that names no secret: the server's message
// with its details for a server's error, the drivers' text otherwise
// (built from the connection's fields, never from a connection string).
func errText(err error, c *protocol.ConnectionSpec) string {
	s := err.Error()
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		more := pe.Error()
		if pe.Detail != "" {
			more += "; detail: " + pe.Detail
		}
		if pe.Hint != "" {
			more += "; hint: " + pe.Hint
		}
		if pe.Code == "42601" && strings.Contains(pe.Message, "multiple commands") {
			more += "; a task runs one statement unless it is a script (script: true, a ';' ending each statement's line)"
		}
		if pe.Position > 0 {
			more += fmt.Sprintf("; at character %d", pe.Position)
		}
		s = strings.Replace(s, pe.Error(), more, 1)
	}
	s = strings.Join(strings.Fields(s), " ")
	if c != nil && len(c.Secret) >= protocol.MinScrubLen {
		s = strings.ReplaceAll(s, c.Secret, protocol.SecretMask)
	}
	return s
}

// excerpt is a statement's first line, bounded, for a script's output.
func excerpt(s string) string {
	line, _, more := strings.Cut(s, "\n")
	line = strings.TrimSpace(line)
	if n := []rune(line); len(n) > maxExcerpt {
		return string(n[:maxExcerpt-1]) + "…"
	}
	if more {
		return line + " …"
	}
	return line
}

// stepName names statement n of a script, for its line of output.
func stepName(n int, p piece) string {
	return fmt.Sprintf("statement %d (line %d)", n, p.line)
}

// midHint explains the error of a statement holding a ';' that does not
// end a line.
func midHint(p piece) string {
	if !p.midSemicolon {
		return ""
	}
	return " (it holds a ';' within a line: a script is split only at a ';' that ends a line)"
}

// undone is the last line of a script rolled back.
func undone(n int, note string) string {
	return fmt.Sprintf("rolled back: none of the script's %d %s took effect%s", n, plural(int64(n), "statement", "statements"), note)
}

// stopContext bounds the work after a run ended (rollback, kill) without
// the run's own ended ctx.
func stopContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
}
