package sqltask

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// mysqlClient is a pool of connections to one MySQL or MariaDB database,
// and the connector that reaches it outside the pool (to kill a
// statement when every pooled connection is busy).
type mysqlClient struct {
	db        *sql.DB
	connector driver.Connector
}

// mysqlLog passes what the driver logs (lost connections) to the worker's
// log, the secret masked.
type mysqlLog struct {
	log    *slog.Logger
	secret string
}

// Print implements mysql.Logger.
func (l mysqlLog) Print(v ...any) {
	s := strings.TrimSpace(fmt.Sprint(v...))
	if len(l.secret) >= protocol.MinScrubLen {
		s = strings.ReplaceAll(s, l.secret, protocol.SecretMask)
	}
	l.log.Debug("mysql driver: " + s)
}

// openMySQL makes the pool of c from a mysql.Config built field by field
// (never a DSN) and checks it connects.
func openMySQL(ctx context.Context, c *protocol.ConnectionSpec, log *slog.Logger) (*mysqlClient, error) {
	tlsConfig, err := executor.TLSConfig(c)
	if err != nil {
		return nil, connectError(c, err)
	}
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.DBName, cfg.User, cfg.Passwd = "tcp", c.Address, c.Database, c.User, c.Secret
	cfg.TLS = tlsConfig
	cfg.Timeout = dialTimeout
	cfg.Logger = mysqlLog{log: log, secret: c.Secret}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, connectError(c, err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxIdleConns)
	db.SetConnMaxIdleTime(connIdle)
	db.SetConnMaxLifetime(connLife)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, connectError(c, err)
	}
	return &mysqlClient{db: db, connector: connector}, nil
}

// run runs the statement, or the script's pieces, on one connection taken
// from the pool for the run (database/sql would otherwise retry a
// statement on another connection, and the kill needs its id). The driver
// closes the connection when the run's ctx ends, which does not stop the
// statement on the server: KILL QUERY does, from another connection.
func (m *mysqlClient) run(r *run, text string, pieces []piece) executor.Result {
	conn, err := m.db.Conn(r.ctx)
	if err != nil {
		return r.error("", err)
	}
	defer func() { _ = conn.Close() }()
	var id int64
	var version string
	if err := conn.QueryRowContext(r.ctx, "SELECT CONNECTION_ID(), VERSION()").Scan(&id, &version); err != nil {
		return r.error("", err)
	}
	r.stopped = func() string { return m.kill(r.ctx, id) }
	if limit := r.limit(); limit > 0 {
		// The server's own bound, a backstop should the worker not reach
		// it to kill the statement: MariaDB's bounds every statement,
		// MySQL's only SELECT. An older server without it still runs.
		limit += serverGrace
		set := fmt.Sprintf("SET SESSION max_execution_time = %d", limit.Milliseconds())
		if strings.Contains(version, "MariaDB") {
			set = fmt.Sprintf("SET SESSION max_statement_time = %.3f", limit.Seconds())
		}
		if _, err := conn.ExecContext(r.ctx, set); err != nil {
			if r.ctx.Err() != nil {
				return r.error("", err)
			}
			r.log.Debug("mysql: the server keeps no statement timeout", "err", errText(err, r.conn))
		}
	}
	if pieces == nil {
		return mySingle(r, conn, text)
	}
	return myScript(r, conn, pieces)
}

// kill stops the statement of connection id on the server, from a
// connection of its own; it says what it did.
func (m *mysqlClient) kill(ctx context.Context, id int64) string {
	ctx, cancel := stopContext(ctx)
	defer cancel()
	stmt := "KILL QUERY " + strconv.FormatInt(id, 10)
	dc, err := m.connector.Connect(ctx)
	if err == nil {
		defer func() { _ = dc.Close() }()
		if ex, ok := dc.(driver.ExecerContext); ok {
			_, err = ex.ExecContext(ctx, stmt, nil)
		} else {
			err = fmt.Errorf("the driver cannot execute")
		}
	}
	if err != nil {
		return fmt.Sprintf("the statement may still run on the server: %s failed: %v", stmt, err)
	}
	return "the statement was killed on the server (" + stmt + ")"
}

// mySingle runs one statement as a query: a result with columns is shown
// as a table, one without by its rows affected, which ROW_COUNT() on the
// same connection tells (database/sql does not pass it from a query).
// The server says which, whatever the statement's first word (CALL,
// MariaDB's INSERT ... RETURNING).
func mySingle(r *run, conn *sql.Conn, text string) executor.Result {
	rows, err := conn.QueryContext(r.ctx, text)
	if err != nil {
		return r.error("", err)
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		return r.error("", err)
	}
	if len(cols) == 0 {
		_ = rows.Close()
		if err := rows.Err(); err != nil {
			return r.error("", err)
		}
		var n int64
		if err := conn.QueryRowContext(r.ctx, "SELECT ROW_COUNT()").Scan(&n); err != nil {
			return r.error("", err)
		}
		return r.ok(affected(max(n, 0)))
	}
	tb := newTable(cols)
	cells := make([]sql.NullString, len(cols))
	dest := make([]any, len(cols))
	for i := range cells {
		dest[i] = &cells[i]
	}
	vals := make([]*string, len(cols))
	for rows.Next() {
		if !tb.wants() {
			tb.skip()
			continue
		}
		if err := rows.Scan(dest...); err != nil {
			return r.error("", err)
		}
		for i := range cells {
			vals[i] = nil
			if cells[i].Valid {
				vals[i] = &cells[i].String
			}
		}
		tb.add(vals)
	}
	if err := rows.Err(); err != nil {
		return r.error("", err)
	}
	if err := rows.Close(); err != nil {
		return r.error("", err)
	}
	return r.ok(strings.TrimSuffix(tb.String(), "\n"))
}

// ddlNote is what a rolled back MySQL script could not undo.
const ddlNote = " (but DDL: MySQL commits CREATE, ALTER, DROP... at once)"

// myScript runs the pieces in one transaction, saying each one's rows
// affected; the first that fails rolls the whole back. MySQL commits on
// its own before and after DDL (CREATE, ALTER, DROP...): those do not roll
// back.
func myScript(r *run, conn *sql.Conn, pieces []piece) executor.Result {
	tx, err := conn.BeginTx(r.ctx, nil)
	if err != nil {
		return r.error("", err)
	}
	for i, p := range pieces {
		res, err := tx.ExecContext(r.ctx, p.text)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err != nil {
			_ = tx.Rollback()
			out := r.error(stepName(i+1, p), fmt.Errorf("%w%s", err, midHint(p)))
			r.say(undone(len(pieces), ddlNote))
			return out
		}
		r.say(fmt.Sprintf("%s: %s: %s", stepName(i+1, p), affected(n), excerpt(p.text)))
	}
	if err := tx.Commit(); err != nil {
		_ = tx.Rollback()
		out := r.error("commit", err)
		r.say(undone(len(pieces), ddlNote))
		return out
	}
	return r.ok(fmt.Sprintf("committed: %d %s in one transaction", len(pieces), plural(int64(len(pieces)), "statement", "statements")))
}
