package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/nats-io/nats.go"

	"github.com/schedulemaster-go/schedulemaster/worker/executor/executortest"
)

// TestProcessNATSAndSQLTasksEndToEnd: on real processes (a master, a
// worker started with --allow-types nats,sql), connections defined through
// the API are tested by the worker; a nats task publishes exactly one
// message per recorded run to a subscriber of the local NATS server, and a
// sql task inserts exactly one row per recorded run into a table of the
// local PostgreSQL; the connection's secret is in no run's output.
func TestProcessNATSAndSQLTasksEndToEnd(t *testing.T) {
	t.Parallel()
	natsAddr := executortest.Service(t, "NATS", "127.0.0.1:4222")
	pgAddr := executortest.Service(t, "PostgreSQL", "127.0.0.1:5432")
	m := startMaster(t, "")
	startWorker(t, m, "tt1", "--allow-types", "nats,sql")
	m.waitNode("tt1", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })

	suffix := fmt.Sprint(time.Now().UnixNano())
	const secret = "e2e-connection-secret-7f3a"
	conn := func(body string) string {
		t.Helper()
		status, resp := m.api("POST", "/api/v1/connections", body)
		var c struct {
			ID     string `json:"id"`
			Secret string `json:"secret"`
		}
		if status != 201 || json.Unmarshal([]byte(resp), &c) != nil || c.Secret != "********" {
			t.Fatalf("create connection: %d %s", status, resp)
		}
		status, resp = m.api("POST", "/api/v1/connections/"+c.ID+"/test", `{"node":"tt1"}`)
		if status != 200 || !strings.Contains(resp, `"ok":true`) || strings.Contains(resp, secret) {
			t.Fatalf("test connection: %d %s", status, resp)
		}
		return resp
	}
	if resp := conn(fmt.Sprintf(`{"name":"bus","kind":"nats","address":%q,"secret":%q}`, natsAddr, secret)); !strings.Contains(resp, "NATS server") {
		t.Errorf("the NATS test says %s", resp)
	}
	if resp := conn(fmt.Sprintf(`{"name":"pg","kind":"postgres","address":%q,"database":"postgres","user":"postgres","secret":%q}`, pgAddr, secret)); !strings.Contains(resp, "PostgreSQL") {
		t.Errorf("the PostgreSQL test says %s", resp)
	}

	// The NATS subscriber and the table the tasks write to.
	subject := "sm.e2e." + suffix
	nc, err := nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var mu sync.Mutex
	var msgs []string
	sub, err := nc.Subscribe(subject, func(msg *nats.Msg) {
		mu.Lock()
		msgs = append(msgs, string(msg.Data))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", "postgres://postgres@"+pgAddr+"/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	table := "sm_e2e_" + suffix
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (id serial PRIMARY KEY, note text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	defer db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table)

	natsTask := m.createTask(fmt.Sprintf(`{"title":"publish","type":"nats","executors":["tt1"],"params":{"who":"sm"},
		"schedule":{"kind":"interval","every":"1s"},"nats":{"connection":"bus","subject":%q,"payload":"hello {{who}}"}}`, subject))
	sqlTask := m.createTask(fmt.Sprintf(`{"title":"insert","type":"sql","executors":["tt1"],"params":{"who":"sm"},
		"schedule":{"kind":"interval","every":"1s"},"sql":{"connection":"pg","statement":"INSERT INTO %s (note) VALUES ('{{who}}')"}}`, table))
	m.taskAction(natsTask.ID, "start")
	m.taskAction(sqlTask.ID, "start")
	enough := func(runs []runJSON) bool {
		n := 0
		for _, r := range runs {
			if r.Result == "success" {
				n++
			}
		}
		return n >= 3
	}
	m.waitRuns(natsTask.ID, 30*time.Second, "3 successful publishes", enough)
	m.waitRuns(sqlTask.ID, 30*time.Second, "3 successful inserts", enough)
	m.taskAction(natsTask.ID, "stop")
	m.taskAction(sqlTask.ID, "stop")

	// Once the runs stop changing, each recorded success is one message,
	// one row.
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		var rows int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		return len(msgs), rows
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		nr, sr := m.runs(natsTask.ID), m.runs(sqlTask.ID)
		ok := func(runs []runJSON) (int, bool) {
			n := 0
			for _, r := range runs {
				if r.Result == "running" {
					return 0, false
				}
				if r.Result == "success" {
					n++
				}
				if strings.Contains(r.Output, secret) {
					t.Fatalf("a run's output shows the connection's secret: %q", r.Output)
				}
			}
			return n, true
		}
		nOK, nDone := ok(nr)
		sOK, sDone := ok(sr)
		published, inserted := count()
		if nDone && sDone && published == nOK && inserted == sOK {
			for _, msg := range msgs {
				if msg != "hello sm" {
					t.Fatalf("message %q, want the param expanded", msg)
				}
			}
			if !strings.Contains(sr[0].Output, "1 row affected") || !strings.Contains(nr[0].Output, "published") {
				t.Fatalf("outputs: sql %q, nats %q", sr[0].Output, nr[0].Output)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled: %d messages for %d successful nats runs, %d rows for %d successful sql runs", published, nOK, inserted, sOK)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
