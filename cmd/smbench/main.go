// Command smbench measures ScheduleMaster against the performance targets of
// SPEC section 9. Every scenario runs the real code (master engine, store,
// handlers, worker engine, the schedulemaster binary) on loopback and prints
// one table: scenario, figure, target, verdict. Figures are medians of -runs
// runs; comparisons are ratios measured in the same run.
//
//	go run ./cmd/smbench                        # full run (about 15 minutes on 2 cores)
//	go run ./cmd/smbench -short                 # small and quick; proves it works, judges nothing
//	go run ./cmd/smbench -mysql 'root@tcp(127.0.0.1:3306)/test' -pg 'postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'
//	go run ./cmd/smbench -only ingest,failover -galera 'root@tcp(10.0.0.1:3306)/,root@tcp(10.0.0.2:3306)/,root@tcp(10.0.0.3:3306)/'
//	go run ./cmd/smbench -only sweep,render -cpuprofile /tmp/prof
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// Verdicts.
const (
	Pass  = "PASS"
	Miss  = "MISS"
	Info  = "INFO"
	Skip  = "SKIP"
	Error = "ERROR"
)

// row is one line of the result table.
type row struct {
	Scenario, Figure, Target, Verdict string
}

// tableRow is a row with the scenario (group) that printed it.
type tableRow struct {
	row
	Group string
}

// options are the command line.
type options struct {
	Short      bool
	MySQL      string        // go-sql-driver DSN of a MariaDB/MySQL server; empty: skip MySQL
	Postgres   string        // postgres:// URL of a PostgreSQL server; empty: skip PostgreSQL
	Galera     []string      // go-sql-driver DSNs of the three nodes of a Galera cluster; nil: skip Galera
	Runs       int           // runs per figure (median)
	Only       string        // comma-separated scenario names
	Bin        string        // prebuilt schedulemaster binary (default: go build)
	RestartBin string        // binary of the restarted master in the bulk scenario (default: Bin)
	BulkN      int           // tasks of the bulk scenario (default 100,000, 3,000 with -short)
	CPUProfile string        // directory for one CPU profile per scenario
	ScaleDB    string        // SQLite file the scale scenario seeds once and then reuses
	ScaleMySQL string        // MariaDB database the scale scenario seeds once, keeps and reuses
	LagFor     time.Duration // trigger-lag measurement window
	Verbose    bool
	Progress   io.Writer // progress lines (stderr)

	// The Dkron comparison (dkron.go), run only when PeerDkron is set.
	PeerDkron string        // Dkron binary
	PeerN     string        // comma-separated task counts
	PeerFor   time.Duration // measurement window per round
}

// bench is one smbench invocation.
type bench struct {
	opt    options
	tmp    string
	binary string // built once, on first use
	// began is when the run began: databases of smbench's name pattern
	// created before it that no run holds are an earlier run's leftovers.
	began     time.Time
	leftovers leftovers
}

// scenario is one group of measurements.
type scenario struct {
	name string
	what string
	run  func(b *bench, ctx context.Context) []row
}

func scenarios() []scenario {
	return []scenario{
		{"sweep", "health sweep of a fleet of in-process worker endpoints", (*bench).sweepScenario},
		{"detect", "dead-worker detection by a started master", (*bench).detectScenario},
		{"lag", "trigger lag of the worker engine and of bare gocron", (*bench).lagScenario},
		{"ingest", "runs recorded end to end, SQLite, MySQL, Galera and PostgreSQL", (*bench).ingestScenario},
		{"render", "console pages with 1,000 nodes and 10,000 runs", (*bench).renderScenario},
		{"rss", "resident memory of real worker and master processes", (*bench).rssScenario},
		{"failover", "leader failover and claim latency with several masters on MariaDB, Galera and PostgreSQL", (*bench).failoverScenario},
		{"delayed", "fire lag of delayed tasks: 100,000 pending, 1,000 due in the same second", (*bench).delayedScenario},
		{"burst", "10,000 HTTP fires at one instant on two workers, beside a bare fan-out", (*bench).burstScenario},
		{"herd", "100,000 HTTP fires at one instant on three workers: none skipped, throughput flat", (*bench).herdScenario},
		{"burstdelayed", "10,000 delayed tasks due at one instant on two workers, beside a bare fan-out", (*bench).burstDelayedScenario},
		{"bulk", "100,000 tasks created and started in bulk, 50,000 delayed tasks in batches, a master restart re-pushing them all", (*bench).bulkScenario},
		{"workflows", "1,000 workflows of 10 steps started in the same second: a step's start after its parents' end, the master's CPU per step", (*bench).workflowsScenario},
		{"tasktypes", "nats and sql tasks firing every second on one worker beside HTTP ones: start lag and CPU per 1,000 runs", (*bench).taskTypesScenario},
		{"scale", "list pages and the dashboard with 100,000 tasks, 1,000,000 runs and 1,000,000 pending delayed tasks", (*bench).scaleScenario},
	}
}

func main() {
	if runRole() {
		return
	}
	var o options
	flag.BoolVar(&o.Short, "short", false, "small sizes, one run: proves every scenario works; figures are not judged")
	flag.StringVar(&o.Postgres, "pg", os.Getenv("SM_TEST_PG_DSN"), "PostgreSQL URL, e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable (a database smbench_<unix time>_<random> is created and dropped; those an earlier run left are dropped at the start); default $SM_TEST_PG_DSN")
	flag.StringVar(&o.MySQL, "mysql", os.Getenv("SM_TEST_MYSQL_DSN"), "MariaDB/MySQL DSN, e.g. root@tcp(127.0.0.1:3306)/test (a database smbench_<unix time>_<random> is created and dropped; those an earlier run left are dropped at the start); default $SM_TEST_MYSQL_DSN")
	galera := flag.String("galera", os.Getenv(envGaleraDSNs), "the three nodes of a running Galera cluster, comma-separated go-sql-driver DSNs, e.g. root@tcp(127.0.0.1:3311)/,root@tcp(127.0.0.1:3312)/,root@tcp(127.0.0.1:3313)/ (a database smbench_<unix time>_<random> is created through the first and dropped; masters of the claim and failover rows use different nodes); default $"+envGaleraDSNs)
	flag.IntVar(&o.Runs, "runs", 0, "runs per figure, the median is reported (default 3, 1 with -short)")
	flag.StringVar(&o.Only, "only", "", "comma-separated scenarios to run: sweep,detect,lag,ingest,render,rss,failover,delayed,burst,burstdelayed,herd,bulk,scale,workflows")
	flag.StringVar(&o.Bin, "bin", "", "schedulemaster binary for the RSS scenario (default: go build into a temp dir)")
	flag.StringVar(&o.RestartBin, "restart-bin", "", "bulk scenario: binary of the restarted master, e.g. an earlier version's (default: the same binary)")
	flag.IntVar(&o.BulkN, "bulk-n", 0, "bulk scenario: number of tasks (default 100,000, 3,000 with -short)")
	flag.StringVar(&o.ScaleMySQL, "scale-mysql-db", "", "scale scenario: a MariaDB database (on the -mysql server) seeded on the first run, kept, and reused after; default a new one per run, dropped at the end")
	flag.StringVar(&o.ScaleDB, "scale-db", "", "scale scenario: a SQLite file seeded on the first run and reused after (the estate takes minutes to write); default a new one per run")
	flag.StringVar(&o.CPUProfile, "cpuprofile", "", "directory: write a CPU profile per scenario (<dir>/<scenario>.pprof)")
	flag.DurationVar(&o.LagFor, "lag-for", 0, "trigger-lag measurement window (default 60s, 5s with -short)")
	flag.BoolVar(&o.Verbose, "v", false, "print the warnings the engines log")
	flag.StringVar(&o.PeerDkron, "peer-dkron", "", "Dkron binary: run the side-by-side comparison with it (only that, unless -only names scenarios too)")
	flag.StringVar(&o.PeerN, "peer-n", "100,200,500", "with -peer-dkron: numbers of HTTP tasks firing every second")
	flag.DurationVar(&o.PeerFor, "peer-for", 30*time.Second, "with -peer-dkron: measurement window of each round")
	flag.Parse()
	o.Progress = os.Stderr
	var err error
	if o.Galera, err = parseGaleraDSNs(*galera); err != nil {
		fmt.Fprintln(os.Stderr, "smbench:", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := run(ctx, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "smbench:", err)
		os.Exit(2)
	}
	for _, r := range rows {
		if r.Verdict == Error {
			os.Exit(1)
		}
	}
}

// run runs the chosen scenarios and prints the table to out.
func run(ctx context.Context, o options, out io.Writer) ([]tableRow, error) {
	if o.Runs <= 0 {
		o.Runs = 3
		if o.Short {
			o.Runs = 1
		}
	}
	if o.LagFor <= 0 {
		o.LagFor = 60 * time.Second
		if o.Short {
			o.LagFor = 5 * time.Second
		}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if len(o.Galera) != 0 && len(o.Galera) != 3 {
		return nil, fmt.Errorf("-galera: want the DSNs of the three nodes of one cluster; got %d", len(o.Galera))
	}
	want := map[string]bool{}
	for _, s := range strings.Split(o.Only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	list := scenarios()
	if o.PeerDkron != "" {
		list = append(list, peerScenario())
		want[peerScenario().name] = true
	}
	known := map[string]bool{}
	for _, s := range list {
		known[s.name] = true
	}
	for s := range want {
		if !known[s] {
			return nil, fmt.Errorf("-only: unknown scenario %q", s)
		}
	}
	tmp, err := os.MkdirTemp("", "smbench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	b := &bench{opt: o, tmp: tmp, began: time.Now()}
	if o.CPUProfile != "" {
		if err := os.MkdirAll(o.CPUProfile, 0o755); err != nil {
			return nil, err
		}
	}
	raiseNoFile()

	mode := "full"
	if o.Short {
		mode = "short (sizes scaled down; figures not judged)"
	}
	fmt.Fprintf(out, "smbench: %s, %s/%s, %d CPUs (%s), GOMAXPROCS %d, %s, mode %s, runs %d\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel(), runtime.GOMAXPROCS(0),
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), mode, o.Runs)

	var rows []tableRow
	start := time.Now()
	for _, s := range list {
		if len(want) > 0 && !want[s.name] {
			continue
		}
		if ctx.Err() != nil {
			return rows, ctx.Err()
		}
		fmt.Fprintf(o.Progress, "smbench: %s: %s ...\n", s.name, s.what)
		t0 := time.Now()
		got := b.profiled(ctx, s)
		if o.Short {
			for i := range got {
				if got[i].Verdict == Pass || got[i].Verdict == Miss {
					got[i].Verdict = Info
				}
			}
		}
		for _, r := range got {
			fmt.Fprintf(o.Progress, "  %-58s %s  [%s]\n", r.Scenario, r.Figure, r.Verdict)
		}
		fmt.Fprintf(o.Progress, "smbench: %s done in %s\n", s.name, time.Since(t0).Round(time.Second))
		for _, r := range got {
			rows = append(rows, tableRow{r, s.name})
		}
		runtime.GC()
		debug.FreeOSMemory()
	}
	printTable(out, rows)
	fmt.Fprintf(out, "\ntotal time %s\n", time.Since(start).Round(time.Second))
	return rows, nil
}

// profiled runs a scenario, under the CPU profiler when asked; a panic
// becomes an ERROR row.
func (b *bench) profiled(ctx context.Context, s scenario) (rows []row) {
	defer func() {
		if p := recover(); p != nil {
			rows = append(rows, row{s.name, fmt.Sprintf("panic: %v", p), "-", Error})
		}
	}()
	if b.opt.CPUProfile != "" {
		f, err := os.Create(filepath.Join(b.opt.CPUProfile, s.name+".pprof"))
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() {
				pprof.StopCPUProfile()
				f.Close()
			}()
		}
	}
	return s.run(b, ctx)
}

func printTable(out io.Writer, rows []tableRow) {
	tw := tabwriter.NewWriter(out, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, " scenario\t figure\t target\t verdict")
	fmt.Fprintln(tw, " --------\t ------\t ------\t -------")
	for _, r := range rows {
		fmt.Fprintf(tw, " %s\t %s\t %s\t %s\n", r.Scenario, r.Figure, r.Target, r.Verdict)
	}
	tw.Flush()
}

// errRow reports a scenario that could not be measured.
func errRow(scenario string, err error) row {
	return row{Scenario: scenario, Figure: "error: " + err.Error(), Target: "-", Verdict: Error}
}

// verdict is PASS when ok, else MISS.
func verdict(ok bool) string {
	if ok {
		return Pass
	}
	return Miss
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.opt.Progress, "    "+format+"\n", args...)
}

// say prints a line of smbench's own (not of a scenario's figures).
func (b *bench) say(format string, args ...any) {
	fmt.Fprintf(b.opt.Progress, "smbench: "+format+"\n", args...)
}

// pick returns full, or short in -short mode.
func (b *bench) pick(full, short int) int {
	if b.opt.Short {
		return short
	}
	return full
}

// settle frees memory between measurements so one does not pay for the last.
func settle() {
	runtime.GC()
	debug.FreeOSMemory()
}
