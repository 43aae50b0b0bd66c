package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/schedulemaster-go/schedulemaster/store"
)

// server is a database server the scenarios of several masters (and the
// server rows of the others) run on: MariaDB/MySQL, a Galera cluster or
// PostgreSQL.
type server struct {
	key     string   // "mysql", "galera" or "postgres": ingest targets, serverOf
	dialect string   // "mysql" or "postgres"
	label   string   // in row names
	dsns    []string // the flag's value, one per node (Galera: three); nil skips the server's rows
	missing string   // the figure of a skipped row
	b       *bench
}

// servers are the database servers of this run, in table order.
func (b *bench) servers() []server {
	var my, pg []string
	if b.opt.MySQL != "" {
		my = []string{b.opt.MySQL}
	}
	if b.opt.Postgres != "" {
		pg = []string{b.opt.Postgres}
	}
	return []server{
		{"mysql", "mysql", "MariaDB", my, "no -mysql DSN (nor $SM_TEST_MYSQL_DSN)", b},
		{"galera", "mysql", "Galera", b.opt.Galera, "no -galera DSNs (nor $" + envGaleraDSNs + ")", b},
		{"postgres", "postgres", "PostgreSQL", pg, "no -pg URL (nor $SM_TEST_PG_DSN)", b},
	}
}

// envGaleraDSNs is the default of -galera.
const envGaleraDSNs = "SM_TEST_GALERA_DSNS"

// parseGaleraDSNs reads -galera: the go-sql-driver DSNs of the three nodes
// of one Galera cluster, comma-separated ("" runs no Galera rows).
func parseGaleraDSNs(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var dsns []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimPrefix(strings.TrimSpace(part), "mysql://")
		if part == "" {
			return nil, fmt.Errorf("-galera: an empty DSN in %q", s)
		}
		if _, err := mysql.ParseDSN(part); err != nil {
			return nil, fmt.Errorf("-galera: DSN %d: %w", len(dsns)+1, err)
		}
		dsns = append(dsns, part)
	}
	if len(dsns) != 3 {
		return nil, fmt.Errorf("-galera: want the DSNs of the three nodes of one cluster, comma-separated; got %d", len(dsns))
	}
	return dsns, nil
}

// serverOf is the server of a key.
func (b *bench) serverOf(key string) server {
	for _, s := range b.servers() {
		if s.key == key {
			return s
		}
	}
	panic("smbench: no server " + key)
}

// create makes an empty database smbench_<time>_<random> on the server and returns
// its --db value on every node (one but for Galera) and a function that
// drops it.
func (s server) create(ctx context.Context) ([]string, func(), error) {
	switch s.key {
	case "mysql":
		dsn, drop, err := s.b.createMySQLDatabase(ctx, s.dsns[0])
		return []string{"mysql://" + dsn}, drop, err
	case "galera":
		return s.b.createGaleraDatabase(ctx, s.dsns)
	}
	u, drop, err := s.b.createPostgresDatabase(ctx, s.dsns[0])
	return []string{u}, drop, err
}

// open is create, then a migrated store in the new database through the
// first node; the cleanup closes it and drops the database.
func (s server) open(ctx context.Context, log *slog.Logger) (*store.Store, func(), error) {
	raw, drop, err := s.create(ctx)
	if err != nil {
		return nil, nil, err
	}
	dsn, err := store.ParseDSN(raw[0], "")
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

// createGaleraDatabase creates an empty database smbench_<time>_<random> through
// the first node of a Galera cluster (Galera replicates the DDL to the
// others) and returns its --db value on every node and a function that drops
// it.
func (b *bench) createGaleraDatabase(ctx context.Context, nodes []string) ([]string, func(), error) {
	first, drop, err := b.createMySQLDatabase(ctx, nodes[0])
	if err != nil {
		return nil, nil, fmt.Errorf("galera node 1: %w", err)
	}
	cfg, err := mysql.ParseDSN(first)
	if err != nil {
		drop()
		return nil, nil, err
	}
	var out []string
	for _, raw := range nodes {
		c, err := mysql.ParseDSN(raw)
		if err != nil {
			drop()
			return nil, nil, err
		}
		c.DBName = cfg.DBName
		out = append(out, "mysql://"+c.FormatDSN())
	}
	return out, drop, nil
}

// createPostgresDatabase creates an empty database smbench_<time>_<random>
// on the PostgreSQL server of the URL raw and returns a URL for it and a
// function that drops it (ending the connections still open to it). Before,
// once a run, it drops what earlier runs left behind (sweepPostgres); until
// the drop, an advisory lock says the database is in use.
func (b *bench) createPostgresDatabase(ctx context.Context, raw string) (string, func(), error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", nil, fmt.Errorf("-pg: %w", err)
	}
	db, err := sql.Open("pgx", raw)
	if err != nil {
		return "", nil, fmt.Errorf("-pg: %w", err)
	}
	db.SetMaxOpenConns(2) // one holds the lock
	b.leftovers.sweepOnce("postgres "+u.Host, func() { sweepPostgres(ctx, db, u.Host, b.began, b.say) })
	name := newDatabaseName(time.Now())
	release := holdPostgresDatabase(ctx, db, name)
	if _, err := db.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		release()
		db.Close()
		return "", nil, fmt.Errorf("create database on %s: %w", u.Host, err)
	}
	drop := func() {
		dropDatabase(db, u.Host, name, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`, b.say)
		release()
		db.Close()
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}
