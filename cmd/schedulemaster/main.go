// Command schedulemaster is the one binary of ScheduleMaster: `master` serves the
// console and the master API, `worker` runs tasks for a master, `token create`
// makes an API token; `migrate`, `user reset-password` and `healthcheck` are
// for operators.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/schedulemaster-go/schedulemaster/buildinfo"

	// Task time zones must resolve the same on every host, with or without
	// a system tz database (scratch images, Windows).
	_ "time/tzdata"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // a runtime error: database down, port taken, ...
	exitUsage   = 2 // bad command line, env or config file
)

func main() {
	os.Exit(runIO(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv))
}

const usageText = `usage: schedulemaster <command> [flags]

commands:
  master        serve the admin console and the master API (owns the database)
  worker        run tasks for a master on this machine
  token create  create an API token for the open API and print it once
  migrate       apply the database migrations (--status: list them, change nothing;
                --from DSN --to DSN: copy a cluster's data to another database)
  user reset-password NAME
                set a new password for a user (random, printed once; or --stdin)
  healthcheck   exit 0 when the local master's /ready (or --url) answers 200
  apply         make a master's tasks match a YAML document (configuration as code)
  export        write a master's tasks as that document
  version       print the version, commit, build date and Go version
  help [cmd]    print this help, or the flags of a command

Every flag also has an SM_* env var and a key in the --config JSON file.
Run "schedulemaster <command> -h" for its flags.
`

// run is main without the process: tests call it with their own args and env.
func run(args []string, stdout, stderr io.Writer, lookupEnv lookupEnvFunc) int {
	return runIO(args, eofReader{}, stdout, stderr, lookupEnv)
}

// eofReader is an empty standard input.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// runIO is run with a standard input (user reset-password --stdin reads it).
func runIO(args []string, stdin io.Reader, stdout, stderr io.Writer, lookupEnv lookupEnvFunc) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "master":
		cfg, o, err := parseMasterConfig(rest, lookupEnv)
		if err != nil {
			return configFailed(stdout, stderr, "master", o, masterSynopsis, err)
		}
		return runCommand(stderr, func(ctx context.Context, log *slog.Logger) error { return runMaster(ctx, cfg, log) })
	case "worker":
		cfg, o, err := parseWorkerConfig(rest, lookupEnv)
		if err != nil {
			return configFailed(stdout, stderr, "worker", o, workerSynopsis, err)
		}
		return runCommand(stderr, func(ctx context.Context, log *slog.Logger) error { return runWorker(ctx, cfg, log) })
	case "token":
		if len(rest) == 0 || rest[0] != "create" {
			fmt.Fprintf(stderr, "schedulemaster token: want \"token create --name NAME\"\n\n")
			var c tokenConfig
			tokenOptions(&c).usage(stderr, tokenSynopsis)
			return exitUsage
		}
		cfg, o, err := parseTokenConfig(rest[1:], lookupEnv)
		if err != nil {
			return configFailed(stdout, stderr, "token create", o, tokenSynopsis, err)
		}
		return runCommand(stderr, func(ctx context.Context, log *slog.Logger) error { return runTokenCreate(ctx, cfg, stdout, log) })
	case "migrate":
		cfg, o, err := parseMigrateConfig(rest, lookupEnv)
		if err != nil {
			return configFailed(stdout, stderr, "migrate", o, migrateSynopsis, err)
		}
		return runCommand(stderr, func(ctx context.Context, log *slog.Logger) error { return runMigrate(ctx, cfg, stdout, log) })
	case "user":
		if len(rest) == 0 || rest[0] != "reset-password" {
			fmt.Fprintf(stderr, "schedulemaster user: want \"user reset-password NAME\"\n\n")
			var c resetPasswordConfig
			resetPasswordOptions(&c).usage(stderr, resetPasswordSynopsis)
			return exitUsage
		}
		cfg, o, err := parseResetPasswordConfig(rest[1:], lookupEnv)
		if err != nil {
			return configFailed(stdout, stderr, "user reset-password", o, resetPasswordSynopsis, err)
		}
		return runCommand(stderr, func(ctx context.Context, log *slog.Logger) error {
			return runResetPassword(ctx, cfg, stdin, stdout, log)
		})
	case "healthcheck":
		cfg, o, err := parseHealthcheckConfig(rest, lookupEnv)
		if err != nil {
			code := configFailed(stdout, stderr, "healthcheck", o, healthcheckSynopsis, err)
			if code == exitUsage {
				// Docker reserves exit code 2 of a HEALTHCHECK: unhealthy is 1.
				code = exitFailure
			}
			return code
		}
		if err := runHealthcheck(context.Background(), cfg, stdout); err != nil {
			fmt.Fprintf(stderr, "schedulemaster healthcheck: %v\n", err)
			return exitFailure
		}
		return exitOK
	case "apply", "export":
		cfg, o, err := parseApplyConfig(rest, lookupEnv, cmd == "export")
		if err != nil {
			return configFailed(stdout, stderr, cmd, o, map[string]string{"apply": applySynopsis, "export": exportSynopsis}[cmd], err)
		}
		if cmd == "export" {
			return runExport(cfg, stdout, stderr)
		}
		return runApply(cfg, stdin, stdout, stderr, lookupEnv)
	case "version", "-version", "--version":
		fmt.Fprint(stdout, buildinfo.Get().String())
		return exitOK
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			return commandHelp(stdout, stderr, rest[0])
		}
		fmt.Fprint(stdout, usageText)
		return exitOK
	default:
		fmt.Fprintf(stderr, "schedulemaster: unknown command %q\n\n%s", cmd, usageText)
		return exitUsage
	}
}

// runCommand gives body a logger and a context cancelled by SIGINT or SIGTERM.
func runCommand(stderr io.Writer, body func(context.Context, *slog.Logger) error) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal a second one kills at once, for a stuck shutdown.
		<-ctx.Done()
		stop()
	}()
	if err := body(ctx, log); err != nil {
		log.Error("exiting", "err", err)
		return exitFailure
	}
	return exitOK
}

// configFailed prints every configuration problem, or the help asked for.
func configFailed(stdout, stderr io.Writer, cmd string, o *options, synopsis string, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		o.usage(stdout, synopsis)
		return exitOK
	}
	var ce *configError
	if !errors.As(err, &ce) {
		fmt.Fprintf(stderr, "schedulemaster %s: %v\n", cmd, err)
		return exitUsage
	}
	for _, p := range ce.problems {
		fmt.Fprintf(stderr, "schedulemaster %s: %s\n", cmd, p)
	}
	if ce.showUsage {
		fmt.Fprintln(stderr)
		o.usage(stderr, synopsis)
	} else {
		fmt.Fprintf(stderr, "run \"schedulemaster %s -h\" for the flags\n", cmd)
	}
	return exitUsage
}

func commandHelp(stdout, stderr io.Writer, cmd string) int {
	switch cmd {
	case "master":
		var c masterConfig
		masterOptions(&c).usage(stdout, masterSynopsis)
	case "worker":
		var c workerConfig
		workerOptions(&c).usage(stdout, workerSynopsis)
	case "token":
		var c tokenConfig
		tokenOptions(&c).usage(stdout, tokenSynopsis)
	case "migrate":
		var c migrateConfig
		migrateOptions(&c).usage(stdout, migrateSynopsis)
	case "user":
		var c resetPasswordConfig
		resetPasswordOptions(&c).usage(stdout, resetPasswordSynopsis)
	case "healthcheck":
		var c healthcheckConfig
		healthcheckOptions(&c).usage(stdout, healthcheckSynopsis)
	case "apply", "export":
		var c applyConfig
		applyOptions(&c, cmd == "export").usage(stdout, map[string]string{"apply": applySynopsis, "export": exportSynopsis}[cmd])
	default:
		fmt.Fprintf(stderr, "schedulemaster help: unknown command %q\n\n%s", cmd, usageText)
		return exitUsage
	}
	return exitOK
}
