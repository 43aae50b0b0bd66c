package master

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/schedulemaster-go/schedulemaster/buildinfo"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Metrics are the master's Prometheus metrics, in a registry of their own
// (never the global default one). Build them with NewMetrics, give them to
// New through Config.Metrics and serve Handler. Every method is safe on a nil
// *Metrics, which records nothing: a master without metrics pays nothing.
type Metrics struct {
	reg *prometheus.Registry

	firesClaimed  prometheus.Counter
	claims        *prometheus.CounterVec
	claimSeconds  prometheus.Histogram
	runs          *prometheus.CounterVec
	runSeconds    *prometheus.HistogramVec
	probeSeconds  prometheus.Histogram
	probeFailures prometheus.Counter
}

// Claim outcomes, the label of sm_master_claims_total.
const (
	claimWon   = "won"   // the asking executor runs the fire
	claimLost  = "lost"  // another executor claimed it first
	claimNone  = "none"  // nobody runs it (task paused or stopped, executor not running)
	claimError = "error" // refused or failed
)

// runResults are the results a run may carry; their series exist from the
// start, at 0, so that rate() and alerts see the first run. killed is what a
// run killed by an admin records.
var runResults = []string{store.ResultSuccess, store.ResultFailed, store.ResultTimeout, store.ResultSkipped, store.ResultKilled}

// NewMetrics builds the master's metrics with the Go runtime and process
// collectors. The collectors that read a master's state (node counts, leader
// flag, database pool) are added when New is given the metrics.
func NewMetrics() *Metrics {
	x := &Metrics{
		reg: prometheus.NewRegistry(),
		firesClaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sm_master_fires_claimed_total",
			Help: "Fires this master gave to an executor (claims won).",
		}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sm_master_claims_total",
			Help: "Claim requests answered by this master, by outcome: won, lost, none (nobody runs the fire) or error.",
		}, []string{"outcome"}),
		claimSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sm_master_claim_duration_seconds",
			Help:    "Time to decide a claim, the wait of lower-ranked executors included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sm_master_runs_ingested_total",
			Help: "Run reports stored by this master (duplicates not counted), by result.",
		}, []string{"result"}),
		runSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sm_master_run_duration_seconds",
			Help:    "Duration of the runs stored by this master, by result.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"result"}),
		probeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sm_master_probe_duration_seconds",
			Help:    "Latency of the leader's health probes of workers, failed ones included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		probeFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sm_master_probe_failures_total",
			Help: "Health probes of workers that failed (no answer, error, wrong identity).",
		}),
	}
	for _, o := range []string{claimWon, claimLost, claimNone, claimError} {
		x.claims.WithLabelValues(o)
	}
	for _, r := range runResults {
		x.runs.WithLabelValues(r)
		x.runSeconds.WithLabelValues(r)
	}
	x.reg.MustRegister(x.firesClaimed, x.claims, x.claimSeconds, x.runs, x.runSeconds, x.probeSeconds, x.probeFailures,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge())
	return x
}

// buildInfoGauge is sm_build_info: always 1, with the running build in its
// labels (version, commit, go_version), so that dashboards show which
// version each process runs and alerts see a mixed-version cluster. The
// worker serves the same metric.
func buildInfoGauge() prometheus.Collector {
	b := buildinfo.Get()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "sm_build_info",
		Help:        "Always 1; the labels say which build of ScheduleMaster this process runs.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "go_version": b.GoVersion},
	}, func() float64 { return 1 })
}

// Handler serves the metrics in the Prometheus text format. A collector that
// fails (the database down) leaves its metrics out; the others are served.
func (x *Metrics) Handler(log *slog.Logger) http.Handler {
	if x == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(x.reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      x.reg,
	})
}

// Registry is where the master's metrics live; tests gather from it.
func (x *Metrics) Registry() *prometheus.Registry {
	if x == nil {
		return nil
	}
	return x.reg
}

// attach adds the collectors that read m at scrape time. A second master
// given the same metrics keeps the first one's collectors.
func (x *Metrics) attach(m *Master) {
	if x == nil {
		return
	}
	for _, c := range []prometheus.Collector{
		&nodeStatusCollector{m: m, desc: prometheus.NewDesc("sm_master_nodes",
			"Nodes by type and status (offline, idle, running), read from the database at scrape time.",
			[]string{"type", "status"}, nil)},
		&clockSkewCollector{m: m, desc: prometheus.NewDesc("sm_node_clock_skew_seconds",
			"How far each worker's clock is ahead of the master's (negative: behind), as last measured at its registration or health probe; workers that are not offline and sent their time. Beyond 1 s the node is flagged.",
			[]string{"node"}, nil)},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sm_master_leader",
			Help: "1 while this master holds the cluster lease (it sweeps health and prunes), else 0.",
		}, func() float64 {
			if m.IsLeader() {
				return 1
			}
			return 0
		}),
		collectors.NewDBStatsCollector(m.st.DB.DB, "schedulemaster"),
	} {
		if err := x.reg.Register(c); err != nil {
			m.log.Warn("metrics: collector not registered", "err", err)
		}
	}
}

// claim records one claim decision that took since start.
func (x *Metrics) claim(start time.Time, resp claimResult, err error) {
	if x == nil {
		return
	}
	x.claimSeconds.Observe(time.Since(start).Seconds())
	outcome := claimNone
	switch {
	case err != nil:
		outcome = claimError
	case resp.Won:
		outcome = claimWon
		x.firesClaimed.Inc()
	case resp.Winner != "":
		outcome = claimLost
	}
	x.claims.WithLabelValues(outcome).Inc()
}

// claimResult is what claim needs of a claim answer.
type claimResult struct {
	Won    bool
	Winner string
}

// runsIngested records the finished runs a batch stored (not its
// duplicates). The ingest calls it with the runs it stored.
func (x *Metrics) runsIngested(runs []store.Run) {
	if x == nil {
		return
	}
	for i := range runs {
		if !protocol.Result(runs[i].Result).Ended() {
			continue // in progress: counted when it ends
		}
		x.runs.WithLabelValues(runs[i].Result).Inc()
		x.runSeconds.WithLabelValues(runs[i].Result).Observe(float64(runs[i].DurationMS) / 1000)
	}
}

// probe records one health probe of a worker.
func (x *Metrics) probe(took time.Duration, err error) {
	if x == nil {
		return
	}
	x.probeSeconds.Observe(took.Seconds())
	if err != nil {
		x.probeFailures.Inc()
	}
}

// nodeStatusCollector counts the nodes by type and status with one grouped
// query on the indexed status column at each scrape.
type nodeStatusCollector struct {
	m    *Master
	desc *prometheus.Desc
}

func (c *nodeStatusCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *nodeStatusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(c.m.life.ctx, 5*time.Second)
	defer cancel()
	counts, err := store.CountNodesByTypeStatus(ctx, c.m.st.DB)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, typ := range []string{store.TypeMaster, store.TypeWorker} {
		for _, s := range store.NodeStatuses {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[typ][s]), typ, s.String())
		}
	}
}

// clockSkewCollector reads the workers' measured clock skews from the
// database at each scrape, so every master serves the leader's measures.
type clockSkewCollector struct {
	m    *Master
	desc *prometheus.Desc
}

func (c *clockSkewCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *clockSkewCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(c.m.life.ctx, 5*time.Second)
	defer cancel()
	skews, err := store.ClockSkews(ctx, c.m.st.DB)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for name, ms := range skews {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(ms)/1000, name)
	}
}

// Metrics returns the metrics the master was given, nil when none.
func (m *Master) Metrics() *Metrics { return m.metrics }
