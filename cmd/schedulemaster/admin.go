package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// dbConfig is the database of an admin command: --db and --data-dir, read
// from the same flags, env and config file section as the master's.
type dbConfig struct {
	DB      string
	DataDir string
	DSN     store.DSN // DB parsed, SQLite placed in DataDir
}

// addDBOptions registers --db and --data-dir as the master has them, and
// accepts (ignores) the master's other config file keys, so that the
// master's config file and env work unchanged.
func addDBOptions(o *options, c *dbConfig) {
	o.add(&option{name: "db", key: "DB", dst: &c.DB, usage: "database, as for the master"})
	o.add(&option{name: "data-dir", key: "DataDir", def: "./data", dst: &c.DataDir, usage: "directory of the SQLite database, as for the master"})
	var mc masterConfig
	for _, opt := range masterOptions(&mc).list {
		if opt.key != "" && opt.key != "DB" && opt.key != "DataDir" {
			o.ignoredKeys = append(o.ignoredKeys, opt.key)
		}
	}
}

// check parses the DSN, adding a problem when it is bad.
func (c *dbConfig) check(o *options, problems []string) []string {
	dsn, err := store.ParseDSN(c.DB, c.DataDir)
	if err != nil {
		problems = append(problems, o.where("db")+": "+strings.TrimPrefix(err.Error(), "store: --db: "))
	}
	c.DSN = dsn
	return problems
}

// existingSQLite refuses a SQLite path with no database: opening would
// create an empty one, and a wrong --data-dir would then act on a database
// no master uses.
func (c *dbConfig) existingSQLite() error {
	if c.DSN.Dialect != store.SQLite {
		return nil
	}
	if _, err := os.Stat(c.DSN.Path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no database at %s: pass the master's --db / --data-dir (or its --config), or start a master first", c.DSN.Path)
	}
	return nil
}

// connect opens the database without migrating it, saying which database
// did not answer.
func (c *dbConfig) connect(ctx context.Context, log *slog.Logger) (*store.Store, error) {
	st, err := store.Connect(ctx, c.DSN, log)
	if err != nil {
		return nil, fmt.Errorf("the database does not answer: %w", err) // the error names it
	}
	return st, nil
}

// migrateConfig is the configuration of `schedulemaster migrate`.
type migrateConfig struct {
	dbConfig
	Status bool
	// From and To, given together, copy a cluster's data from one database
	// to another (any engines) instead of migrating --db.
	From, To       string
	FromDSN, ToDSN store.DSN
	Force          bool
	Batch          int
}

const migrateSynopsis = "migrate [--status] [--db DSN] [--data-dir DIR] [--config FILE]\n" +
	"       schedulemaster migrate --from DSN --to DSN [--force] [--batch N]"

func migrateOptions(c *migrateConfig) *options {
	o := newOptions("migrate", "Master")
	o.add(&option{name: "status", noEnv: true, def: "false", dst: &c.Status,
		usage: "list the applied and pending migrations, change nothing"})
	o.add(&option{name: "from", noEnv: true, dst: &c.From,
		usage: "copy the cluster's data from this database (a --db value; stop the masters first) to --to"})
	o.add(&option{name: "to", noEnv: true, dst: &c.To,
		usage: "the database to copy --from's data to: migrated first, refused unless empty (see --force)"})
	o.add(&option{name: "force", noEnv: true, def: "false", dst: &c.Force,
		usage: "with --from/--to: empty a target that holds data before the copy, instead of refusing it"})
	o.add(&option{name: "batch", noEnv: true, def: "500", dst: &c.Batch, min: 1, max: 10000,
		usage: "with --from/--to: rows per read and per INSERT"})
	addDBOptions(o, &c.dbConfig)
	return o
}

func parseMigrateConfig(args []string, lookupEnv lookupEnvFunc) (migrateConfig, *options, error) {
	var c migrateConfig
	o := migrateOptions(&c)
	problems, err := o.parse(args, lookupEnv)
	if err != nil {
		return c, o, err
	}
	if c.From != "" || c.To != "" {
		problems = c.checkCopy(problems)
		if len(problems) > 0 {
			return c, o, &configError{problems: problems}
		}
		return c, o, nil
	}
	if c.Force {
		problems = append(problems, "flag --force: only with --from and --to")
	}
	if problems = c.check(o, problems); len(problems) > 0 {
		return c, o, &configError{problems: problems}
	}
	return c, o, nil
}

// checkCopy checks --from and --to, adding the problems found.
func (c *migrateConfig) checkCopy(problems []string) []string {
	parse := func(flag, raw string) store.DSN {
		if raw == "" {
			problems = append(problems, "flag --"+flag+": is required with --"+map[string]string{"from": "to", "to": "from"}[flag]+": a database (sqlite://PATH, mysql://…, postgres://…)")
			return store.DSN{}
		}
		dsn, err := store.ParseDSN(raw, "")
		if err != nil {
			problems = append(problems, "flag --"+flag+": "+strings.TrimPrefix(err.Error(), "store: --db: "))
		}
		return dsn
	}
	c.FromDSN, c.ToDSN = parse("from", c.From), parse("to", c.To)
	if c.Status {
		problems = append(problems, "flag --status: not with --from and --to")
	}
	if c.From != "" && c.FromDSN.String() == c.ToDSN.String() {
		problems = append(problems, "flags --from and --to: name the same database")
	}
	return problems
}

// runMigrateCopy copies a cluster's data from --from to --to (see
// store.CopyData): the target is migrated first, a target with data is
// refused without --force, and every table's rows are counted on both sides
// at the end. A SQLite source or target is locked as a master locks it, so
// no master runs on it meanwhile; masters on a server database must be
// stopped by hand (a difference in the counts says one was not).
func runMigrateCopy(ctx context.Context, cfg migrateConfig, stdout io.Writer, log *slog.Logger) error {
	from := dbConfig{DSN: cfg.FromDSN}
	if err := from.existingSQLite(); err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	for _, d := range []store.DSN{cfg.FromDSN, cfg.ToDSN} {
		if d.Dialect != store.SQLite {
			continue
		}
		unlock, err := lockSQLite(d.Path)
		if err != nil {
			return fmt.Errorf("%s: %w; stop it before copying", d, err)
		}
		defer unlock()
	}
	src, err := from.connect(ctx, log)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	defer src.Close()
	dst, err := store.Open(ctx, cfg.ToDSN, log) // migrates the target
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	defer dst.Close()
	fmt.Fprintf(stdout, "copying %s -> %s\n", cfg.FromDSN, cfg.ToDSN)
	start := time.Now()
	next := map[string]int64{}
	report, err := store.CopyData(ctx, src, dst, store.CopyOptions{Batch: cfg.Batch, Force: cfg.Force,
		Progress: func(table string, copied, total int64) {
			if copied >= next[table] || copied == total {
				log.Info("copying", "table", table, "rows", copied, "of", total)
				next[table] = copied + max(10000, total/10)
			}
		}})
	if errors.Is(err, store.ErrTargetNotEmpty) {
		return fmt.Errorf("%s: %w (it is not a new database: pass --force to empty it first)", cfg.ToDSN, err)
	}
	var rows int64
	fmt.Fprintf(stdout, "%-20s %12s %12s\n", "table", "source rows", "target rows")
	for _, c := range report {
		state := "ok"
		if !c.OK() {
			state = "MISMATCH"
		}
		fmt.Fprintf(stdout, "%-20s %12d %12d  %s (%s)\n", c.Table, c.Source, c.Target, state, c.Took.Round(time.Millisecond))
		rows += c.Target
	}
	if err != nil {
		if errors.Is(err, store.ErrCountMismatch) {
			return fmt.Errorf("%w: did a master write to %s meanwhile? stop every master and run the copy again with --force", err, cfg.FromDSN)
		}
		return err
	}
	fmt.Fprintf(stdout, "copied %d rows in %d tables in %s; every table's count matches\n", rows, len(report), time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(stdout, "point the masters' --db at %s and start them\n", cfg.ToDSN)
	return nil
}

// runMigrate applies the pending migrations (what a master does as it
// starts), or with --status lists them. Applying takes the SQLite lock a
// master holds, so it never migrates under a running master; on MySQL bun's
// migration lock orders it with masters that start meanwhile.
func runMigrate(ctx context.Context, cfg migrateConfig, stdout io.Writer, log *slog.Logger) error {
	if cfg.From != "" {
		return runMigrateCopy(ctx, cfg, stdout, log)
	}
	if cfg.Status {
		if err := cfg.existingSQLite(); err != nil {
			return err
		}
		st, err := cfg.connect(ctx, log)
		if err != nil {
			return err
		}
		defer st.Close()
		ms, err := st.MigrationStatus(ctx)
		if err != nil {
			return err
		}
		return printMigrations(stdout, ms)
	}
	if cfg.DSN.Dialect == store.SQLite {
		unlock, err := lockSQLite(cfg.DSN.Path)
		if err != nil {
			return fmt.Errorf("%w; stop it before migrating", err)
		}
		defer unlock()
		if _, err := os.Stat(cfg.DSN.Path); errors.Is(err, fs.ErrNotExist) {
			log.Info("no database yet: creating it", "db", cfg.DSN.String())
		}
	}
	st, err := cfg.connect(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	applied, err := st.Migrate(ctx, log)
	if err != nil {
		return err
	}
	ms, err := st.MigrationStatus(ctx)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "database %s is up to date: %d migrations applied, none pending\n", cfg.DSN, len(ms.Known))
	} else {
		fmt.Fprintf(stdout, "applied %d migration(s) to %s:\n", len(applied), cfg.DSN)
		for _, name := range applied {
			fmt.Fprintf(stdout, "  %s\n", name)
		}
	}
	if len(ms.Unknown) > 0 {
		fmt.Fprintf(stdout, "note: the database also has %d migration(s) of a newer version of ScheduleMaster\n", len(ms.Unknown))
	}
	return nil
}

// printMigrations writes one line per migration (state, when, name) and a total.
func printMigrations(w io.Writer, ms store.MigrationStatus) error {
	var b bytes.Buffer
	when := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }
	applied := 0
	for _, m := range ms.Known {
		if m.Applied() {
			applied++
			fmt.Fprintf(&b, "applied  %s  %s\n", when(m.AppliedAt), m.Name)
		} else {
			fmt.Fprintf(&b, "pending  %-20s  %s\n", "-", m.Name)
		}
	}
	for _, m := range ms.Unknown {
		fmt.Fprintf(&b, "unknown  %s  %s (applied by a newer version)\n", when(m.AppliedAt), m.Name)
	}
	fmt.Fprintf(&b, "%d applied, %d pending", applied, len(ms.Known)-applied)
	if len(ms.Unknown) > 0 {
		fmt.Fprintf(&b, ", %d unknown", len(ms.Unknown))
	}
	if applied < len(ms.Known) {
		b.WriteString(` (run "schedulemaster migrate" or start a master to apply them)`)
	}
	b.WriteString("\n")
	_, err := w.Write(b.Bytes())
	return err
}

// resetPasswordConfig is the configuration of `schedulemaster user reset-password`.
type resetPasswordConfig struct {
	dbConfig
	User  string
	Stdin bool
}

const resetPasswordSynopsis = "user reset-password NAME [--stdin] [--db DSN] [--data-dir DIR] [--config FILE]"

func resetPasswordOptions(c *resetPasswordConfig) *options {
	o := newOptions("user reset-password", "Master")
	o.maxArgs = 1
	o.add(&option{name: "stdin", noEnv: true, def: "false", dst: &c.Stdin,
		usage: "read the new password from the first line of standard input instead of making a random one"})
	addDBOptions(o, &c.dbConfig)
	return o
}

func parseResetPasswordConfig(args []string, lookupEnv lookupEnvFunc) (resetPasswordConfig, *options, error) {
	var c resetPasswordConfig
	o := resetPasswordOptions(&c)
	// The name may come first (user reset-password alice --stdin): flag
	// parsing stops at the first argument, so it goes last.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		args = append(append([]string(nil), args[1:]...), args[0])
	}
	problems, err := o.parse(args, lookupEnv)
	if err != nil {
		return c, o, err
	}
	if len(o.args) == 1 {
		c.User = o.args[0]
	}
	if c.User == "" {
		problems = append(problems, "NAME: is required: the user whose password to reset")
	} else if msg := master.CheckUsername(c.User); msg != "" {
		problems = append(problems, fmt.Sprintf("NAME %q: %s", c.User, msg))
	}
	if problems = c.check(o, problems); len(problems) > 0 {
		return c, o, &configError{problems: problems}
	}
	return c, o, nil
}

// maxStdinPassword bounds what --stdin reads: a password is at most 72 bytes.
const maxStdinPassword = 4 << 10

// readStdinPassword reads the password from the first line of r; more than
// one line, or a huge input, is refused rather than guessed at.
func readStdinPassword(r io.Reader) (string, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxStdinPassword+1))
	if err != nil {
		return "", fmt.Errorf("read the password from stdin: %w", err)
	}
	if len(data) > maxStdinPassword {
		return "", fmt.Errorf("stdin holds more than %d bytes: give the password alone, on one line", maxStdinPassword)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	var lines []string
	for sc.Scan() {
		lines = append(lines, strings.TrimSuffix(sc.Text(), "\r"))
	}
	switch {
	case len(lines) == 0:
		return "", errors.New("stdin is empty: give the new password on one line")
	case len(lines) > 1:
		return "", fmt.Errorf("stdin holds %d lines: give the password alone, on one line", len(lines))
	case !utf8.ValidString(lines[0]) || strings.ContainsRune(lines[0], 0):
		return "", errors.New("the password from stdin holds invalid UTF-8 or a NUL byte")
	}
	return lines[0], nil
}

// runResetPassword sets a user's password through the engine (its rule,
// the end of the user's sessions, the event user.password_reset), with the
// master running or not. The random password is printed once on stdout.
func runResetPassword(ctx context.Context, cfg resetPasswordConfig, stdin io.Reader, stdout io.Writer, log *slog.Logger) error {
	var given string
	if cfg.Stdin {
		pw, err := readStdinPassword(stdin)
		if err != nil {
			return err
		}
		// The engine's rule, checked before the database is touched.
		if msg := master.CheckPassword(pw); msg != "" {
			return fmt.Errorf("the password from stdin %s", msg)
		}
		given = pw
	}
	if err := cfg.existingSQLite(); err != nil {
		return err
	}
	st, err := cfg.connect(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	// Never migrate as a side effect: the schema is the masters' (or
	// `schedulemaster migrate`'s) to change.
	ms, err := st.MigrationStatus(ctx)
	if err != nil {
		return err
	}
	if p := ms.Pending(); len(p) > 0 {
		return fmt.Errorf("database %s lacks %d migration(s) of this version (first: %s): run \"schedulemaster migrate\" first, or use the masters' version of this binary", cfg.DSN, len(p), p[0])
	}
	m := master.New(master.Config{Identity: "cli"}, st, log) // built, not started
	actx := master.WithActor(ctx, "cli")
	u, err := m.Accounts().GetUser(actx, cfg.User)
	if err != nil {
		return userError(err)
	}
	plain := given
	if cfg.Stdin {
		err = m.Accounts().ResetPassword(actx, cfg.User, given)
	} else {
		plain, err = m.Accounts().ResetPasswordRandom(actx, cfg.User)
	}
	if err != nil {
		return userError(err)
	}
	log.Info("password reset; the user's sessions ended", "user", cfg.User, "role", u.Role)
	if u.Disabled {
		log.Warn("the user is disabled: the new password works once an admin enables them", "user", cfg.User)
	}
	if cfg.Stdin {
		return nil
	}
	log.Info("the new password is printed once on stdout: hand it on and ask the user to change it on their Account page")
	if _, err := fmt.Fprintln(stdout, plain); err != nil {
		return fmt.Errorf("print password: %w", err)
	}
	return nil
}

// userError turns the engine's refusal into the command's sentence: field
// errors read "password: must be ...".
func userError(err error) error {
	switch master.KindOf(err) {
	case master.KindNotFound, master.KindState:
		return errors.New(master.Message(err))
	}
	return err
}
