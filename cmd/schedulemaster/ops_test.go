package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// cliResult is what one run of the binary did.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs the binary once with stdin and extra env (over a clean one
// with no SM_ variable of this machine), bounded in time.
func runCLI(t *testing.T, stdin string, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "SM_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return r
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// TestHealthcheck runs `schedulemaster healthcheck` against a real master:
// ready (by --url and by the master's own SM_LISTEN), not ready (503 with
// its reason: a migration missing from the database), a server that never
// answers, and the master stopped.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	u, err := url.Parse(m.URL)
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", nil, "healthcheck", "--url", m.URL+"/ready")
	if r.code != 0 || !strings.Contains(r.stdout, "answered 200") {
		t.Fatalf("healthcheck of a ready master:\n%s", r)
	}
	// The default URL comes from the master's settings: env, or its config file.
	if r := runCLI(t, "", []string{"SM_LISTEN=" + u.Host}, "healthcheck"); r.code != 0 || !strings.Contains(r.stdout, "http://"+u.Host+"/ready") {
		t.Fatalf("healthcheck with SM_LISTEN=%s:\n%s", u.Host, r)
	}
	cfgFile := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfgFile, []byte(`{"Master": {"Listen": "`+u.Host+`", "DB": "", "Identity": "m"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "", nil, "healthcheck", "--config", cfgFile); r.code != 0 {
		t.Fatalf("healthcheck with the master's config file:\n%s", r)
	}

	// Not ready: the database lacks a migration of this build.
	dsn, err := store.ParseDSN("", m.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := storetest.Ctx(t)
	st, err := store.Connect(ctx, dsn, storetest.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var name string
	var group int64
	if err := st.DB.QueryRowContext(ctx, "SELECT name, group_id FROM bun_migrations ORDER BY name DESC LIMIT 1").Scan(&name, &group); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB.ExecContext(ctx, "DELETE FROM bun_migrations WHERE name = ?", name); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "", nil, "healthcheck", "--url", m.URL+"/ready")
	if r.code != 1 || !strings.Contains(r.stderr, "is not ready: 503 Service Unavailable: the database lacks 1 migration(s) of this build (first: "+name) {
		t.Fatalf("healthcheck of a master missing a migration:\n%s", r)
	}
	// /health stays 200: the process serves.
	if r := runCLI(t, "", nil, "healthcheck", "--url", m.URL+"/health"); r.code != 0 {
		t.Fatalf("healthcheck of /health:\n%s", r)
	}
	if _, err := st.DB.ExecContext(ctx, "INSERT INTO bun_migrations (name, group_id, migrated_at) VALUES (?, ?, CURRENT_TIMESTAMP)", name, group); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "", nil, "healthcheck", "--url", m.URL+"/ready"); r.code != 0 {
		t.Fatalf("healthcheck once the migration is back:\n%s", r)
	}

	// A server that accepts and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	start := time.Now()
	r = runCLI(t, "", nil, "healthcheck", "--url", "http://"+ln.Addr().String()+"/ready", "--timeout", "300ms")
	if r.code != 1 || !strings.Contains(r.stderr, "no answer within 300ms") || time.Since(start) > 20*time.Second {
		t.Fatalf("healthcheck of a silent server (%s):\n%s", time.Since(start), r)
	}
	// A redirect is not health.
	if r := runCLI(t, "", nil, "healthcheck", "--url", m.URL+"/dashboard"); r.code != 1 || !strings.Contains(r.stderr, "answered 303") {
		t.Fatalf("healthcheck of a page that redirects to the login:\n%s", r)
	}
	// A URL's password is never printed: not when it answers, not when it
	// fails, not when it does not answer.
	for _, target := range []string{"http://probe:s3cr3t-pw@" + u.Host + "/ready", "http://probe:s3cr3t-pw@" + u.Host + "/dashboard",
		"http://probe:s3cr3t-pw@" + ln.Addr().String() + "/ready", "ftp://probe:s3cr3t-pw@" + u.Host} {
		r := runCLI(t, "", nil, "healthcheck", "--url", target, "--timeout", "300ms")
		if strings.Contains(r.stdout+r.stderr, "s3cr3t-pw") || (r.code == 0) != strings.HasSuffix(target, u.Host+"/ready") {
			t.Fatalf("healthcheck --url %s printed its password or answered wrong:\n%s", target, r)
		}
	}

	// The master stopped: nothing listens.
	if err := m.term(); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "", []string{"SM_LISTEN=" + u.Host}, "healthcheck")
	if r.code != 1 || !strings.Contains(r.stderr, "connection refused") || !strings.Contains(r.stderr, "http://"+u.Host+"/ready") {
		t.Fatalf("healthcheck of a stopped master:\n%s", r)
	}
	// A config error is "unhealthy" too (Docker reserves exit code 2).
	if r := runCLI(t, "", []string{"SM_LISTEN=127.0.0.1:0"}, "healthcheck"); r.code != 1 || !strings.Contains(r.stderr, "pass --url") {
		t.Fatalf("healthcheck with listen port 0:\n%s", r)
	}
}

func TestLocalReadyURL(t *testing.T) {
	t.Parallel()
	for listen, want := range map[string]string{
		":30000": "http://127.0.0.1:30000/ready", "0.0.0.0:8080": "http://127.0.0.1:8080/ready",
		"[::]:30000": "http://[::1]:30000/ready", "10.1.2.3:30000": "http://10.1.2.3:30000/ready",
		"localhost:1": "http://localhost:1/ready",
	} {
		if got, msg := localReadyURL(listen, false); got != want || msg != "" {
			t.Errorf("localReadyURL(%q) = %q %q, want %q", listen, got, msg, want)
		}
	}
	if got, _ := localReadyURL(":443", true); got != "https://127.0.0.1:443/ready" {
		t.Errorf("TLS: %q", got)
	}
	for _, bad := range []string{"", "30000", ":0", ":99999"} {
		if got, msg := localReadyURL(bad, false); got != "" || msg == "" {
			t.Errorf("localReadyURL(%q) = %q, want a refusal", bad, got)
		}
	}
}

// migrateTarget is a database for the admin commands: a SQLite file in a
// fresh data dir, or a fresh MariaDB or PostgreSQL database.
func migrateTarget(t *testing.T, dialect string) (args []string, dbFlag string) {
	t.Helper()
	if dialect == string(store.SQLite) {
		return []string{"--data-dir", t.TempDir()}, ""
	}
	dsn := storetest.FreshDSN(t, dialect)
	return []string{"--db", dsn}, dsn
}

// TestMigrateCommand: `migrate --status` lists pending then applied
// migrations, `migrate` applies them once, a running SQLite master is not
// migrated under, and a bad DSN or a database that is down get a sentence.
func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	for _, dialect := range storetest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			db, _ := migrateTarget(t, dialect)
			r := runCLI(t, "", nil, append([]string{"migrate", "--status"}, db...)...)
			if dialect == string(store.SQLite) {
				if r.code != 1 || !strings.Contains(r.stderr, "no database at") {
					t.Fatalf("status of a data dir without a database:\n%s", r)
				}
			} else if r.code != 0 || !regexp.MustCompile(`(?m)^0 applied, \d+ pending \(run "schedulemaster migrate"`).MatchString(r.stdout) ||
				!strings.Contains(r.stdout, "pending  -") {
				t.Fatalf("status of an empty database:\n%s", r)
			}
			r = runCLI(t, "", nil, append([]string{"migrate"}, db...)...)
			if r.code != 0 || !strings.Contains(r.stdout, "20261122000001_init") {
				t.Fatalf("migrate:\n%s", r)
			}
			n := strings.Count(r.stdout, "\n  ")
			r = runCLI(t, "", nil, append([]string{"migrate", "--status"}, db...)...)
			if r.code != 0 || !strings.Contains(r.stdout, "applied  ") || !strings.HasSuffix(r.stdout, "\n"+strconv.Itoa(n)+" applied, 0 pending\n") {
				t.Fatalf("status after migrate (%d applied):\n%s", n, r)
			}
			r = runCLI(t, "", nil, append([]string{"migrate"}, db...)...)
			if r.code != 0 || !strings.Contains(r.stdout, "is up to date: "+strconv.Itoa(n)+" migrations applied, none pending") {
				t.Fatalf("second migrate:\n%s", r)
			}
		})
	}
	t.Run("running sqlite master", func(t *testing.T) {
		t.Parallel()
		m := startMaster(t, "")
		r := runCLI(t, "", nil, "migrate", "--data-dir", m.DataDir)
		if r.code != 1 || !strings.Contains(r.stderr, "another master is running on this SQLite database") || !strings.Contains(r.stderr, "stop it before migrating") {
			t.Fatalf("migrate under a running master:\n%s", r)
		}
		// Reading the status is fine meanwhile.
		if r := runCLI(t, "", nil, "migrate", "--status", "--data-dir", m.DataDir); r.code != 0 || !strings.Contains(r.stdout, " 0 pending") {
			t.Fatalf("status under a running master:\n%s", r)
		}
	})
	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			args []string
			env  []string
			code int
			want string
		}{
			{[]string{"migrate", "--db", "mysql://nodb@tcp(127.0.0.1:1)/"}, nil, exitUsage, "flag --db: the MySQL DSN names no database"},
			{[]string{"migrate"}, []string{"SM_DB=redis://x/y"}, exitUsage, "env SM_DB: unknown scheme"},
			{[]string{"migrate", "--db", "postgres://u:secret@127.0.0.1:99999/x"}, nil, exitUsage, `flag --db: the PostgreSQL URL's port "99999" is not a port number`},
			{[]string{"migrate", "--db", "postgresql://u:secret@127.0.0.1:5432/"}, nil, exitUsage, "flag --db: the PostgreSQL URL names no database"},
			{[]string{"migrate", "--db", "postgres://u:secret@127.0.0.1/x?sslmode=sometimes"}, nil, exitUsage, "sslmode is invalid"},
			{[]string{"migrate", "--status", "--db", "postgres://u:secret@127.0.0.1:1/x"}, nil, exitFailure, "the database does not answer: store: connect to postgres://u:xxxxx@127.0.0.1:1/x"},
			{[]string{"migrate", "--status", "--db", "mysql://root@tcp(127.0.0.1:1)/x"}, nil, exitFailure,
				"the database does not answer: store: connect to mysql://root@tcp(127.0.0.1:1)/x"},
			{[]string{"migrate", "--db", "mysql://root:secret@tcp(127.0.0.1:1)/x"}, nil, exitFailure, "connection refused"},
			{[]string{"migrate", "extra"}, nil, exitUsage, `unexpected argument "extra"`},
		} {
			r := runCLI(t, "", c.env, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "secret") {
				t.Errorf("%v %v: want exit %d and %q (no password)\n%s", c.args, c.env, c.code, c.want, r)
			}
		}
	})
}

// loginStatus is the status of a console login (200 after the redirect, 401 refused).
func loginStatus(t *testing.T, base, user, pw string) int {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := c.PostForm(base+"/login", url.Values{"username": {user}, "password": {pw}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestUserResetPassword: with the master stopped, `user reset-password`
// sets a random password through the engine (printed once, old one dead,
// event recorded) on SQLite and MariaDB; --stdin takes one and applies the
// engine's rule; unknown users and bad input get a sentence and change nothing.
func TestUserResetPassword(t *testing.T) {
	t.Parallel()
	for _, dialect := range storetest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			db, dsn := migrateTarget(t, dialect)
			dataDir := t.TempDir()
			if dialect == string(store.SQLite) {
				dataDir = db[1]
			}
			var extra []string
			if dsn != "" {
				extra = []string{"--db", dsn}
			}
			m := startMaster(t, dataDir, extra...)
			if err := m.term(); err != nil {
				t.Fatal(err)
			}

			r := runCLI(t, "", nil, append([]string{"user", "reset-password", "admin"}, db...)...)
			pw := strings.TrimSpace(r.stdout)
			if r.code != 0 || strings.Count(r.stdout, "\n") != 1 || master.CheckPassword(pw) != "" || pw == adminPassword ||
				!strings.Contains(r.stderr, "printed once on stdout") {
				t.Fatalf("reset-password admin:\n%s", r)
			}
			// --stdin, name after the flags; a short one is refused by the engine's rule.
			if r := runCLI(t, "short\n", nil, append(append([]string{"user", "reset-password", "--stdin"}, db...), "admin")...); r.code != 1 ||
				!strings.Contains(r.stderr, "must be at least 10 characters") || r.stdout != "" {
				t.Fatalf("reset-password --stdin with a short password:\n%s", r)
			}
			for _, c := range []struct{ stdin, want string }{
				{"", "stdin is empty"},
				{"one-long-password\ntwo-long-password\n", "stdin holds 2 lines"},
				{"nul-in-the\x00-password", "invalid UTF-8 or a NUL byte"},
				{strings.Repeat("x", 10000), "more than 4096 bytes"},
			} {
				if r := runCLI(t, c.stdin, nil, append([]string{"user", "reset-password", "admin", "--stdin"}, db...)...); r.code != 1 || !strings.Contains(r.stderr, c.want) {
					t.Errorf("reset-password --stdin %.20q: want %q\n%s", c.stdin, c.want, r)
				}
			}
			if r := runCLI(t, "", nil, append([]string{"user", "reset-password", "nobody"}, db...)...); r.code != 1 || !strings.Contains(r.stderr, "there is no user nobody") {
				t.Fatalf("reset-password of an unknown user:\n%s", r)
			}
			if r := runCLI(t, "", nil, append([]string{"user", "reset-password", "bad name!"}, db...)...); r.code != exitUsage || !strings.Contains(r.stderr, `NAME "bad name!"`) {
				t.Fatalf("reset-password of an invalid name:\n%s", r)
			}
			if r := runCLI(t, "", nil, append([]string{"user", "reset-password"}, db...)...); r.code != exitUsage || !strings.Contains(r.stderr, "NAME: is required") {
				t.Fatalf("reset-password without a name:\n%s", r)
			}

			// Started again without startMaster's login as admin: that password is gone.
			p, sub := startProc(t, "master again", masterReady, append([]string{"master", "--listen", "127.0.0.1:0", "--data-dir", dataDir,
				"--cluster-key", testClusterKey}, extra...)...)
			m = &masterProc{proc: p, URL: sub[1], DataDir: dataDir}
			if st := loginStatus(t, m.URL, "admin", adminPassword); st != http.StatusUnauthorized {
				t.Errorf("old password: login %d, want 401", st)
			}
			if st := loginStatus(t, m.URL, "admin", pw); st != http.StatusOK {
				t.Fatalf("new password: login %d, want 200", st)
			}
			// While the master runs, through stdin.
			r = runCLI(t, "typed-password-42\r\n", nil, append([]string{"user", "reset-password", "admin", "--stdin"}, db...)...)
			if r.code != 0 || r.stdout != "" {
				t.Fatalf("reset-password --stdin while the master runs:\n%s", r)
			}
			if st := loginStatus(t, m.URL, "admin", "typed-password-42"); st != http.StatusOK {
				t.Fatalf("password from stdin: login %d, want 200", st)
			}
			jar, _ := cookiejar.New(nil)
			m.client = &http.Client{Jar: jar, Timeout: 30 * time.Second}
			resp, err := m.client.PostForm(m.URL+"/login", url.Values{"username": {"admin"}, "password": {"typed-password-42"}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			status, body := m.api("GET", "/api/v1/events?action=user.password_reset", "")
			if status != http.StatusOK || strings.Count(body, `"actor":"cli"`) != 2 || !strings.Contains(body, `"target":"admin"`) {
				t.Fatalf("events of the resets: %d %s", status, body)
			}
		})
	}
}
