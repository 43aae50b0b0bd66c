package main

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"path/filepath"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// Local servers the task types' scenario publishes to and writes in.
const (
	benchNATSAddr = "127.0.0.1:4222"
	benchPGAddr   = "127.0.0.1:5432"
)

// taskTypesScenario is the task types' figure: N tasks of a type firing
// every second on one in-process worker, beside the same number of HTTP
// tasks: the runs' start lag (started_at − scheduled time) and the worker
// process's CPU per 1,000 runs. nats publishes to the local NATS server
// (core NATS, flushed); sql inserts one row per run into a table of the
// local PostgreSQL.
func (b *bench) taskTypesScenario(ctx context.Context) []row {
	d := b.opt.LagFor
	nNATS, nSQL := b.pick(1000, 50), b.pick(200, 20)
	natsConn := &protocol.ConnectionSpec{Name: "bench-nats", Kind: protocol.ConnNATS, Address: benchNATSAddr, Version: 1}
	pgConn := &protocol.ConnectionSpec{Name: "bench-pg", Kind: protocol.ConnPostgres, Address: benchPGAddr, Database: "postgres", User: "postgres", Version: 1}
	table := fmt.Sprintf("smbench_sql_%d", time.Now().UnixNano())
	every := protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "* * * * * *"}
	cases := []struct {
		label  string
		n      int
		allow  []string
		needs  string // the server's address, "" for none
		spec   func(i int, peer string) protocol.TaskSpec
		target string
	}{
		{"http", nNATS, nil, "", func(i int, peer string) protocol.TaskSpec {
			return protocol.TaskSpec{TaskDef: httpTask(fmt.Sprintf("tth%05d", i), "* * * * * *", peer), Executors: 1}
		}, "p99 < 5 ms"},
		{"nats", nNATS, []string{protocol.TaskNATS}, benchNATSAddr, func(i int, _ string) protocol.TaskSpec {
			return protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: fmt.Sprintf("ttn%05d", i), Title: "smbench nats", Type: protocol.TaskNATS,
				Schedule: every, Timeout: protocol.Duration(10 * time.Second),
				NATS: &protocol.NATSSpec{Connection: natsConn.Name, Subject: fmt.Sprintf("smbench.tt.%d", i), Payload: "fire"}},
				Executors: 1, Connection: natsConn}
		}, "p99 < 5 ms"},
		{"http", nSQL, nil, "", func(i int, peer string) protocol.TaskSpec {
			return protocol.TaskSpec{TaskDef: httpTask(fmt.Sprintf("tti%05d", i), "* * * * * *", peer), Executors: 1}
		}, "p99 < 5 ms"},
		{"sql", nSQL, []string{protocol.TaskSQL}, benchPGAddr, func(i int, _ string) protocol.TaskSpec {
			return protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: fmt.Sprintf("tts%05d", i), Title: "smbench sql", Type: protocol.TaskSQL,
				Schedule: every, Timeout: protocol.Duration(10 * time.Second),
				SQL: &protocol.SQLSpec{Connection: pgConn.Name, Statement: fmt.Sprintf("INSERT INTO %s (task) VALUES (%d)", table, i)}},
				Executors: 1, Connection: pgConn}
		}, "p99 < 5 ms"},
	}
	var db *sql.DB
	var rows []row
	for i, c := range cases {
		name := fmt.Sprintf("task types: %s %s tasks firing every second on one worker, %s (start lag; worker CPU per 1,000 runs)", fmtInt(c.n), c.label, d)
		if c.needs != "" {
			conn, err := net.DialTimeout("tcp", c.needs, 2*time.Second)
			if err != nil {
				rows = append(rows, row{name, fmt.Sprintf("no server on %s", c.needs), c.target, Skip})
				continue
			}
			_ = conn.Close()
		}
		if c.label == "sql" && db == nil {
			var err error
			if db, err = sql.Open("pgx", "postgres://postgres@"+benchPGAddr+"/postgres?sslmode=disable"); err == nil {
				_, err = db.ExecContext(ctx, "CREATE TABLE "+table+" (id bigserial PRIMARY KEY, task int NOT NULL, at timestamptz NOT NULL DEFAULT now())")
			}
			if err != nil {
				rows = append(rows, errRow(name, err))
				continue
			}
			defer db.Close()
			defer db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table)
		}
		settle()
		start, _, err := b.lagWorkerOf(ctx, c.n, c.n, d, filepath.Join(b.tmp, fmt.Sprintf("tt%d", i)), c.allow, c.spec)
		if err != nil {
			rows = append(rows, errRow(name, err))
			continue
		}
		perK := time.Duration(0)
		if c.n > 0 {
			perK = start.cpuWorker * 1000 / time.Duration(c.n)
		}
		b.logf("%s x%d: start %s; worker CPU %s per second, %s per 1,000 runs", c.label, c.n, fmtLag(start), fmtDur(start.cpuWorker), fmtDur(perK))
		rows = append(rows, row{name, fmt.Sprintf("%s (%s runs); %s CPU per 1,000 runs", fmtLag(start), fmtInt(start.n), fmtDur(perK)),
			c.target, verdict(start.p99 < 5*time.Millisecond)})
	}
	if db != nil {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err == nil {
			b.logf("sql: %d rows inserted", n)
		}
	}
	return rows
}
