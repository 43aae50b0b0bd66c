package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/schedulemaster-go/schedulemaster/store"
)

// server is a database server the scenarios of several masters (and the
// server rows of the others) run on: MariaDB/MySQL or PostgreSQL.
type server struct {
	dialect string // "mysql" or "postgres"
	label   string // in row names
	dsn     string // the flag's value; "" skips the server's rows
	missing string // the figure of a skipped row
}

// servers are the database servers of this run, in table order.
func (b *bench) servers() []server {
	return []server{
		{"mysql", "MariaDB", b.opt.MySQL, "no -mysql DSN (nor $SM_TEST_MYSQL_DSN)"},
		{"postgres", "PostgreSQL", b.opt.Postgres, "no -pg URL (nor $SM_TEST_PG_DSN)"},
	}
}

// serverOf is the server of a dialect.
func (b *bench) serverOf(dialect string) server {
	for _, s := range b.servers() {
		if s.dialect == dialect {
			return s
		}
	}
	panic("smbench: no server " + dialect)
}

// create makes an empty database smbench_<random> on the server and returns
// its --db value and a function that drops it.
func (s server) create(ctx context.Context) (string, func(), error) {
	if s.dialect == "mysql" {
		dsn, drop, err := createMySQLDatabase(ctx, s.dsn)
		return "mysql://" + dsn, drop, err
	}
	return createPostgresDatabase(ctx, s.dsn)
}

// open is create, then a migrated store in the new database; the cleanup
// closes it and drops the database.
func (s server) open(ctx context.Context, log *slog.Logger) (*store.Store, func(), error) {
	raw, drop, err := s.create(ctx)
	if err != nil {
		return nil, nil, err
	}
	dsn, err := store.ParseDSN(raw, "")
	if err != nil {
		drop()
		return nil, nil, err
	}
	st, err := store.Open(ctx, dsn, log)
	if err != nil {
		drop()
		return nil, nil, err
	}
	return st, func() { st.Close(); drop() }, nil
}

// createPostgresDatabase creates an empty database smbench_<random> on the
// PostgreSQL server of the URL raw and returns a URL for it and a function
// that drops it (ending the connections still open to it).
func createPostgresDatabase(ctx context.Context, raw string) (string, func(), error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", nil, fmt.Errorf("-pg: %w", err)
	}
	db, err := sql.Open("pgx", raw)
	if err != nil {
		return "", nil, fmt.Errorf("-pg: %w", err)
	}
	db.SetMaxOpenConns(1)
	name := "smbench_" + randHex(6)
	if _, err := db.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		db.Close()
		return "", nil, fmt.Errorf("create database on %s: %w", u.Host, err)
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = db.ExecContext(dctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`)
		db.Close()
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}
