package worker

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/schedulemaster-go/schedulemaster/buildinfo"
	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// metrics are the worker's Prometheus metrics, in a registry of their own
// (never the global default one). Every method is safe on a nil *metrics.
// They live with the reporter, made with it, because most of what they count
// passes through it: every finished run is reported, and the report queue and
// journal are its own.
type metrics struct {
	reg        *prometheus.Registry
	fires      prometheus.Counter
	lag        prometheus.Histogram
	runs       *prometheus.CounterVec
	runSeconds *prometheus.HistogramVec
}

// runResults are the results a run may carry; their series exist from the
// start, at 0.
var runResults = []string{protocol.ResultSuccess, protocol.ResultFailed, protocol.ResultTimeout, protocol.ResultSkipped, protocol.ResultKilled}

// newMetrics builds the worker's metrics; stats reads the report queue and
// journal at scrape time.
func newMetrics(stats func() ReportStats) *metrics {
	x := &metrics{
		reg: prometheus.NewRegistry(),
		fires: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sm_worker_fires_total",
			Help: "Scheduled fires this worker ran (after winning the claim when the task has several executors).",
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sm_worker_trigger_lag_seconds",
			Help:    "Time from a fire's scheduled instant to the start of its run (claim included).",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sm_worker_runs_total",
			Help: "Runs this worker finished and reported (each attempt counts), by result.",
		}, []string{"result"}),
		runSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sm_worker_run_duration_seconds",
			Help:    "Duration of the runs this worker finished, by result.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"result"}),
	}
	for _, r := range runResults {
		x.runs.WithLabelValues(r)
		x.runSeconds.WithLabelValues(r)
	}
	x.reg.MustRegister(x.fires, x.lag, x.runs, x.runSeconds,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sm_worker_report_queue",
			Help: "Run reports waiting in memory for delivery to the master.",
		}, func() float64 { return float64(stats().Pending) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sm_worker_report_spool_bytes",
			Help: "Bytes of run reports in the journal (runs.spool) not yet delivered to the master.",
		}, func() float64 { return float64(stats().UnsentBytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sm_worker_report_journal_bytes",
			Help: "Size of the run journal (runs.spool); it is emptied once all of it is delivered.",
		}, func() float64 { return float64(stats().JournalBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sm_worker_reports_dropped_total",
			Help: "Run reports the master refused; they are never sent again.",
		}, func() float64 { return float64(stats().Dropped) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sm_worker_reports_overflow_total",
			Help: "Run reports not kept because the journal (or, without one, the queue) was full.",
		}, func() float64 { return float64(stats().Overflow) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfoGauge(),
	)
	return x
}

// watchLimiter adds the gauges of the node's concurrency limiter: the runs
// holding a slot and the fires waiting for one (a herd shows here first).
func (x *metrics) watchLimiter(l *limiter) {
	x.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sm_worker_runs_waiting",
			Help: "Fires waiting for a concurrency slot (--maxc) in the node's queue.",
		}, func() float64 { return float64(l.waiting()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sm_worker_slots_held",
			Help: "Concurrency slots held by runs now (at most --maxc).",
		}, func() float64 { return float64(l.held()) }),
	)
}

// buildInfoGauge is sm_build_info, the same metric as the master's: always
// 1, with the running build in its labels.
func buildInfoGauge() prometheus.Collector {
	b := buildinfo.Get()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "sm_build_info",
		Help:        "Always 1; the labels say which build of ScheduleMaster this process runs.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "go_version": b.GoVersion},
	}, func() float64 { return 1 })
}

// fired records a scheduled fire this worker runs, lag after its instant.
func (x *metrics) fired(lag time.Duration) {
	if x == nil {
		return
	}
	x.fires.Inc()
	x.lag.Observe(max(lag, 0).Seconds())
}

// ran records a finished run (one attempt) and how long it took.
func (x *metrics) ran(result string, d time.Duration) {
	if x == nil {
		return
	}
	x.runs.WithLabelValues(result).Inc()
	x.runSeconds.WithLabelValues(result).Observe(d.Seconds())
}

// handler serves the metrics in the Prometheus text format.
func (x *metrics) handler() http.Handler {
	if x == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(x.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Registry: x.reg})
}

// MetricsHandler serves w's Prometheus metrics. The worker API serves it at
// GET /metrics behind sm_secret; --metrics-listen serves it on an address of
// its own without it.
func MetricsHandler(w *Worker) http.Handler { return w.reports.metrics.handler() }
