package sqltask

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
	"github.com/schedulemaster-go/schedulemaster/worker/executor/executortest"
)

// backend is a real server a test runs against, with a unique table.
type backend struct {
	kind  string
	conn  *protocol.ConnectionSpec
	admin *sql.DB // the test's own connection, to set up and check
	table string
	// sleep is a statement that sleeps 5 s, marked with mark.
	sleep, mark string
}

func randHex(t testing.TB) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func pgBackend(t *testing.T) *backend {
	addr := executortest.Service(t, "PostgreSQL", "127.0.0.1:5432")
	admin, err := sql.Open("pgx", "host=127.0.0.1 port=5432 user=postgres dbname=postgres sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	id := randHex(t)
	b := &backend{kind: protocol.ConnPostgres, admin: admin, table: "smtest_sql_" + id, mark: "smmark_" + id,
		// Trust auth takes any password: the secret is only for the
		// checks that no output shows it.
		conn: &protocol.ConnectionSpec{Name: "pg", Kind: protocol.ConnPostgres, Address: addr, Database: "postgres",
			User: "postgres", Secret: "pg-secret-" + id}}
	b.sleep = "SELECT pg_sleep(5) /* " + b.mark + " */"
	t.Cleanup(func() { _, _ = admin.Exec("DROP TABLE IF EXISTS " + b.table) })
	return b
}

func myBackend(t *testing.T) *backend {
	addr := executortest.Service(t, "MariaDB", "127.0.0.1:3306")
	root, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = root.Close() })
	id := randHex(t)
	db := "smtest_sql_" + id
	if _, err := root.Exec("CREATE DATABASE " + db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = root.Exec("DROP DATABASE IF EXISTS " + db) })
	admin, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/"+db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	b := &backend{kind: protocol.ConnMySQL, admin: admin, table: "t_" + id, mark: "smmark_" + id,
		conn: &protocol.ConnectionSpec{Name: "my", Kind: protocol.ConnMySQL, Address: addr, Database: db, User: "root"}}
	b.sleep = "SELECT SLEEP(5) /* " + b.mark + " */"
	return b
}

// forBoth runs test as a parallel subtest against PostgreSQL and MariaDB.
func forBoth(t *testing.T, test func(t *testing.T, b *backend)) {
	t.Helper()
	for name, mk := range map[string]func(*testing.T) *backend{"postgres": pgBackend, "mysql": myBackend} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, mk(t))
		})
	}
}

func (b *backend) exec(t *testing.T, stmt string) {
	t.Helper()
	if _, err := b.admin.Exec(stmt); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

func (b *backend) count(t *testing.T, where string) int {
	t.Helper()
	var n int
	if err := b.admin.QueryRow("SELECT count(*) FROM " + b.table + " WHERE " + where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// seed makes the test's table with rows 1..n, v 'v<id>', note NULL for
// even ids.
func (b *backend) seed(t *testing.T, n int) {
	t.Helper()
	b.exec(t, "CREATE TABLE "+b.table+" (id int PRIMARY KEY, v varchar(50) NOT NULL, note varchar(50))")
	var vals []string
	for i := 1; i <= n; i++ {
		note := "NULL"
		if i%2 == 1 {
			note = fmt.Sprintf("'note %d'", i)
		}
		vals = append(vals, fmt.Sprintf("(%d, 'v%d', %s)", i, i, note))
	}
	b.exec(t, "INSERT INTO "+b.table+" VALUES "+strings.Join(vals, ", "))
}

func sqlDef(stmt string, script bool, timeout time.Duration, params map[string]string) *protocol.TaskDef {
	return &protocol.TaskDef{ID: "t1", Title: "sql", Type: protocol.TaskSQL, Timeout: protocol.Duration(timeout),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		Params:   params, SQL: &protocol.SQLSpec{Connection: "c", Statement: stmt, Script: script}}
}

func newExec(t *testing.T) *Executor {
	e := New(testutil.Discard())
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func TestExecutorSQLUpdateChangesRowsAndSaysHowMany(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, b *backend) {
		b.seed(t, 5)
		e := newExec(t)
		res, out := executortest.Run(t, e, sqlDef("UPDATE "+b.table+" SET v = '{{NEW}}' WHERE id <= {{MAX}};", false, 10*time.Second,
			map[string]string{"NEW": "changed", "MAX": "3"}), b.conn, 10*time.Second)
		if res.Result != protocol.ResultSuccess || !strings.HasPrefix(out, "3 rows affected") {
			t.Fatalf("result %s, output %q", res.Result, out)
		}
		if n := b.count(t, "v = 'changed'"); n != 3 {
			t.Fatalf("%d rows changed, want 3", n)
		}
		executortest.NoSecret(t, out, b.conn.Secret)
	})
}

func TestExecutorSQLSelectShowsTableWithHeaderAndNull(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, b *backend) {
		b.seed(t, 3)
		e := newExec(t)
		res, out := executortest.Run(t, e, sqlDef("SELECT id, v, note FROM "+b.table+" ORDER BY id", false, 10*time.Second, nil),
			b.conn, 10*time.Second)
		want := "id | v  | note\n" +
			"---+----+-------\n" +
			"1  | v1 | note 1\n" +
			"2  | v2 | NULL\n" +
			"3  | v3 | note 3\n" +
			"(3 rows)\n"
		if res.Result != protocol.ResultSuccess || out != want {
			t.Fatalf("result %s, output:\n%s\nwant:\n%s", res.Result, out, want)
		}
	})
}

func TestExecutorSQLSelectOf150RowsShowsTheFirst100(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, b *backend) {
		b.seed(t, 150)
		e := newExec(t)
		res, out := executortest.Run(t, e, sqlDef("SELECT id, v FROM "+b.table+" ORDER BY id", false, 10*time.Second, nil),
			b.conn, 10*time.Second)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if res.Result != protocol.ResultSuccess || len(lines) != 2+100+1 ||
			!strings.HasPrefix(lines[101], "100 | v100") || lines[102] != "(showing the first 100 of 150 rows)" {
			t.Fatalf("result %s, %d lines, ending %q", res.Result, len(lines), lines[len(lines)-2:])
		}
	})
}

func TestExecutorSQLScriptIsOneTransactionRolledBackWhole(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, b *backend) {
		b.seed(t, 3)
		e := newExec(t)
		ok := "-- a script\nUPDATE " + b.table + " SET v = 'one;\ntwo' WHERE id = 1;\n" +
			"INSERT INTO " + b.table + " VALUES (10, 'ten', NULL);\n" +
			"DELETE FROM " + b.table + " WHERE id >= 2 AND id <= 3;\n"
		res, out := executortest.Run(t, e, sqlDef(ok, true, 10*time.Second, nil), b.conn, 10*time.Second)
		if res.Result != protocol.ResultSuccess || !strings.Contains(out, "statement 1 (line 2): 1 row affected: UPDATE") ||
			!strings.Contains(out, "statement 3 (line 5): 2 rows affected: DELETE") ||
			!strings.HasSuffix(out, "committed: 3 statements in one transaction\n") {
			t.Fatalf("result %s, output:\n%s", res.Result, out)
		}
		if n := b.count(t, "1 = 1"); n != 2 || b.count(t, "id = 1 AND v = 'one;\ntwo'") != 1 {
			t.Fatalf("after the script: %d rows", n)
		}

		bad := "UPDATE " + b.table + " SET v = 'gone' WHERE id = 1;\n" +
			"INSERT INTO " + b.table + " VALUES (11, 'eleven', NULL);\n" +
			"INSERT INTO " + b.table + "_missing VALUES (12, 'x', NULL);\n" +
			"DELETE FROM " + b.table + ";\n"
		res, out = executortest.Run(t, e, sqlDef(bad, true, 10*time.Second, nil), b.conn, 10*time.Second)
		if res.Result != protocol.ResultFailed || !strings.Contains(out, "statement 3 (line 3) failed: ") ||
			!strings.Contains(out, "_missing") || !strings.Contains(out, "rolled back") || strings.Contains(out, "statement 4") {
			t.Fatalf("result %s, output:\n%s", res.Result, out)
		}
		if b.count(t, "v = 'gone'") != 0 || b.count(t, "id = 11") != 0 || b.count(t, "1 = 1") != 2 {
			t.Fatal("a failed script left changes behind")
		}
	})
}

// serverStatementGone polls the server until no session runs the
// statement marked mark.
func (b *backend) serverStatementGone(t *testing.T) {
	t.Helper()
	q := "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep%" + b.mark +
		"%' AND pid <> pg_backend_pid()"
	if b.kind == protocol.ConnMySQL {
		q = "SELECT count(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%SLEEP%" + b.mark +
			"%' AND ID <> CONNECTION_ID()"
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		var n int
		if err := b.admin.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the timed out statement still runs on the server 3s after the run ended (%d sessions)", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestExecutorSQLTimeoutEndsTheRunAndTheServerStatement(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, b *backend) {
		e := newExec(t)
		for _, script := range []bool{false, true} {
			start := time.Now()
			res, out := executortest.Run(t, e, sqlDef(b.sleep, script, 300*time.Millisecond, nil), b.conn, 300*time.Millisecond)
			took := time.Since(start)
			if res.Result != protocol.ResultTimeout || took > 2*time.Second || !strings.Contains(out, "timed out after 300ms") {
				t.Fatalf("script %v: result %s after %s, output %q", script, res.Result, took, out)
			}
			t.Logf("script %v: %s in %s", script, strings.TrimSpace(out), took)
			b.serverStatementGone(t)
		}
		// The pool still serves runs after a timeout.
		res, out := executortest.Run(t, e, sqlDef("SELECT 1 AS one", false, 5*time.Second, nil), b.conn, 5*time.Second)
		if res.Result != protocol.ResultSuccess || !strings.Contains(out, "(1 row)") {
			t.Fatalf("after timeouts: %s %q", res.Result, out)
		}
	})
}

func TestExecutorSQLDownServerFailsFastAndPrecisely(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{protocol.ConnPostgres, protocol.ConnMySQL} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			addr := executortest.ClosedPort(t)
			conn := &protocol.ConnectionSpec{Name: "down", Kind: kind, Address: addr, Database: "db", User: "u", Secret: "down-secret-42"}
			e := newExec(t)
			start := time.Now()
			res, out := executortest.Run(t, e, sqlDef("SELECT 1", false, 10*time.Second, nil), conn, 10*time.Second)
			if res.Result != protocol.ResultFailed || time.Since(start) > 3*time.Second ||
				!strings.Contains(out, "connect to "+kind+" "+addr) || !strings.Contains(out, "connection refused") ||
				strings.Count(strings.TrimSpace(out), "\n") != 0 {
				t.Fatalf("result %s after %s, output %q", res.Result, time.Since(start), out)
			}
			executortest.NoSecret(t, out, conn.Secret)
			if e.pool.Len() != 0 {
				t.Fatal("a client that could not connect was kept")
			}
			if _, err := e.Test(context.Background(), conn); err == nil || !strings.Contains(err.Error(), "connection refused") {
				t.Fatalf("Test on a down server: %v", err)
			}
			t.Logf("%s", out)
		})
	}
}

func TestExecutorSQLWrongPasswordIsRefusedWithoutShowingSecrets(t *testing.T) {
	t.Parallel()
	b := myBackend(t)
	user, right, wrong := "smsql_"+randHex(t)[:8], "right-"+randHex(t), "wrong-"+randHex(t)
	b.exec(t, "CREATE USER '"+user+"'@'127.0.0.1' IDENTIFIED BY '"+right+"'")
	b.exec(t, "CREATE USER '"+user+"'@'localhost' IDENTIFIED BY '"+right+"'")
	t.Cleanup(func() {
		_, _ = b.admin.Exec("DROP USER IF EXISTS '" + user + "'@'127.0.0.1'")
		_, _ = b.admin.Exec("DROP USER IF EXISTS '" + user + "'@'localhost'")
	})
	b.exec(t, "GRANT ALL ON "+b.conn.Database+".* TO '"+user+"'@'127.0.0.1'")
	b.exec(t, "GRANT ALL ON "+b.conn.Database+".* TO '"+user+"'@'localhost'")
	e := newExec(t)

	good := *b.conn
	good.User, good.Secret = user, right
	res, out := executortest.Run(t, e, sqlDef("SELECT CURRENT_USER() AS u", false, 10*time.Second, nil), &good, 10*time.Second)
	if res.Result != protocol.ResultSuccess || !strings.Contains(out, user+"@") {
		t.Fatalf("the right password: %s %q", res.Result, out)
	}
	executortest.NoSecret(t, out, right)
	msg, err := e.Test(context.Background(), &good)
	if err != nil || !strings.Contains(msg, "MariaDB") {
		t.Fatalf("Test with the right password: %q, %v", msg, err)
	}
	executortest.NoSecret(t, msg, right)

	bad := good
	bad.Secret = wrong
	res, out = executortest.Run(t, e, sqlDef("SELECT 1", false, 10*time.Second, nil), &bad, 10*time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "Access denied for user '"+user+"'") {
		t.Fatalf("a wrong password: %s %q", res.Result, out)
	}
	_, err = e.Test(context.Background(), &bad)
	if err == nil || !strings.Contains(err.Error(), "Access denied") {
		t.Fatalf("Test with a wrong password: %v", err)
	}
	for _, text := range []string{out, err.Error()} {
		executortest.NoSecret(t, text, wrong)
		executortest.NoSecret(t, text, right)
	}
	t.Logf("%s", out)
}

func TestExecutorSQLSecretNeverInOutputsOrErrors(t *testing.T) {
	t.Parallel()
	// PostgreSQL here trusts local connections, whatever their password:
	// every output and error of a connection with a secret is checked.
	b := pgBackend(t)
	b.seed(t, 2)
	e := newExec(t)
	for _, stmt := range []string{"SELECT id, v FROM " + b.table, "UPDATE " + b.table + " SET v = 'x'", "SELEC nonsense",
		"SELECT current_setting('application_name') AS app"} {
		_, out := executortest.Run(t, e, sqlDef(stmt, false, 10*time.Second, nil), b.conn, 10*time.Second)
		executortest.NoSecret(t, out, b.conn.Secret)
	}
	_, out := executortest.Run(t, e, sqlDef("SELEC nonsense", false, 10*time.Second, nil), b.conn, 10*time.Second)
	if !strings.Contains(out, `syntax error at or near "SELEC" (SQLSTATE 42601); at character 1`) {
		t.Fatalf("a syntax error: %q", out)
	}
	// A wrong database: the server's refusal, no secret.
	other := *b.conn
	other.Database = "smtest_missing_" + randHex(t)
	res, out := executortest.Run(t, e, sqlDef("SELECT 1", false, 10*time.Second, nil), &other, 10*time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "does not exist") {
		t.Fatalf("a missing database: %s %q", res.Result, out)
	}
	executortest.NoSecret(t, out, b.conn.Secret)
	if _, err := e.Test(context.Background(), &other); err == nil {
		t.Fatal("Test of a missing database succeeded")
	} else {
		executortest.NoSecret(t, err.Error(), b.conn.Secret)
	}
	t.Logf("%s", out)
}

func TestExecutorSQLTesterSaysTheServerVersion(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, b *backend) {
		e := newExec(t)
		msg, err := e.Test(context.Background(), b.conn)
		want := "PostgreSQL "
		if b.kind == protocol.ConnMySQL {
			want = "MariaDB"
		}
		if err != nil || !strings.Contains(msg, want) || !strings.Contains(msg, "database "+b.conn.Database) {
			t.Fatalf("Test = %q, %v", msg, err)
		}
		if e.pool.Len() != 0 {
			t.Fatal("Test kept its client in the pool")
		}
		t.Logf("%s", msg)
	})
}

func TestExecutorSQLPoolIsReusedAcrossRunsAndClosed(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, b *backend) {
		b.seed(t, 1)
		e := New(testutil.Discard())
		for i := range 4 {
			res, out := executortest.Run(t, e, sqlDef("UPDATE "+b.table+" SET v = 'run{{N}}'", false, 10*time.Second,
				map[string]string{"N": fmt.Sprint(i)}), b.conn, 10*time.Second)
			if res.Result != protocol.ResultSuccess || e.pool.Len() != 1 {
				t.Fatalf("run %d: %s %q, pool holds %d clients", i, res.Result, out, e.pool.Len())
			}
		}
		if b.count(t, "v = 'run3'") != 1 {
			t.Fatal("the last run's update is not there")
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if e.pool.Len() != 0 {
			t.Fatalf("after Close the pool holds %d clients", e.pool.Len())
		}
		res, out := executortest.Run(t, e, sqlDef("SELECT 1", false, 5*time.Second, nil), b.conn, 5*time.Second)
		if res.Result != protocol.ResultFailed || !strings.Contains(out, executor.ErrPoolClosed.Error()) {
			t.Fatalf("a run after Close: %s %q", res.Result, out)
		}
	})
}

func TestExecutorSQLRefusesWhatItCannotRun(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	def := sqlDef("SELECT 1", false, time.Second, nil)
	res, out := executortest.Run(t, e, def, nil, time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, executor.ErrNoConnection.Error()) {
		t.Fatalf("no connection: %s %q", res.Result, out)
	}
	redis := &protocol.ConnectionSpec{Name: "r", Kind: protocol.ConnRedis, Address: "127.0.0.1:6379"}
	if err := e.Validate(&executor.Task{Def: def, Conn: redis}); err == nil {
		t.Fatal("Validate took a redis connection")
	}
	res, out = executortest.Run(t, e, sqlDef("-- nothing\n;\n", true, time.Second, nil),
		&protocol.ConnectionSpec{Name: "p", Kind: protocol.ConnPostgres, Address: "127.0.0.1:1", Database: "d"}, time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, ErrEmptyScript.Error()) {
		t.Fatalf("an empty script: %s %q", res.Result, out)
	}
}

func TestExecutorSQLServerSaysWhetherAStatementReturnsRows(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, b *backend) {
		b.seed(t, 3)
		e := newExec(t)
		for stmt, want := range map[string]string{
			// DML returning rows: a table, and the change is made.
			"DELETE FROM " + b.table + " WHERE id = 3 RETURNING id, v": "id | v\n---+---\n3  | v3\n(1 row)\n",
			"CREATE INDEX " + b.table + "_v ON " + b.table + " (v)":    "0 rows affected",
			"WITH x AS (SELECT 2 AS n) SELECT n FROM x":                "n\n-\n2\n(1 row)\n",
			"SELECT id FROM " + b.table + " WHERE id > 100":            "id\n--\n(0 rows)\n",
		} {
			res, out := executortest.Run(t, e, sqlDef(stmt, false, 10*time.Second, nil), b.conn, 10*time.Second)
			if res.Result != protocol.ResultSuccess || !strings.HasPrefix(out, want) {
				t.Errorf("%s: %s %q, want %q", stmt, res.Result, out, want)
			}
		}
		if b.count(t, "id = 3") != 0 {
			t.Fatal("DELETE ... RETURNING did not delete")
		}
		res, out := executortest.Run(t, e, sqlDef("SELECT 1; SELECT 2", false, 10*time.Second, nil), b.conn, 10*time.Second)
		if res.Result != protocol.ResultFailed {
			t.Fatalf("two statements without script: %s %q", res.Result, out)
		}
		t.Logf("two statements without script: %s", out)
	})
}

func TestExecutorSQLTLSIsUsedAndChecked(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, b *backend) {
		e := newExec(t)
		conn := *b.conn
		conn.TLS = &protocol.ConnectionTLS{Enabled: true, InsecureSkipVerify: true}
		res, out := executortest.Run(t, e, sqlDef("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", false, 10*time.Second, nil),
			&conn, 10*time.Second)
		if b.kind == protocol.ConnMySQL {
			// The local MariaDB has no TLS: a precise refusal.
			if res.Result != protocol.ResultFailed || !strings.Contains(out, "TLS requested but server does not support TLS") {
				t.Fatalf("TLS to a server without it: %s %q", res.Result, out)
			}
			return
		}
		if ssl := b.adminSSL(t); ssl != "on" {
			t.Skipf("the local PostgreSQL has ssl = %s", ssl)
		}
		if res.Result != protocol.ResultSuccess || !strings.Contains(out, "\nt\n") {
			t.Fatalf("TLS (no verification): %s %q", res.Result, out)
		}
		// Verified against the system roots, the local self-signed
		// certificate is refused.
		conn.TLS = &protocol.ConnectionTLS{Enabled: true}
		res, out = executortest.Run(t, e, sqlDef("SELECT 1", false, 10*time.Second, nil), &conn, 10*time.Second)
		if res.Result != protocol.ResultFailed || !strings.Contains(out, "certificate") {
			t.Fatalf("TLS verified against a self-signed certificate: %s %q", res.Result, out)
		}
		executortest.NoSecret(t, out, conn.Secret)
		t.Logf("%s", out)
	})
}

func (b *backend) adminSSL(t *testing.T) string {
	var v string
	if err := b.admin.QueryRow("SHOW ssl").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
