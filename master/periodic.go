package master

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
)

// periodic runs one duty's pass every interval on its own gocron scheduler,
// one pass at a time (a pass that overruns delays the next instead of
// piling up). The interval can change while it runs.
type periodic struct {
	name  string
	pass  func()
	first time.Duration // delay of the first pass; 0 runs it at once
	log   *slog.Logger

	mu    sync.Mutex
	sched gocron.Scheduler
	job   gocron.Job
	every time.Duration
}

// newPeriodic builds a duty that runs pass every interval once started, the
// first time after first (0: at once).
func newPeriodic(name string, every, first time.Duration, pass func(), log *slog.Logger) *periodic {
	return &periodic{name: name, pass: pass, first: first, every: every, log: log}
}

func (p *periodic) options() []gocron.JobOption {
	start := gocron.WithStartImmediately()
	if p.first > 0 {
		start = gocron.WithStartDateTime(time.Now().Add(p.first))
	}
	return []gocron.JobOption{gocron.WithName(p.name), gocron.WithSingletonMode(gocron.LimitModeReschedule), gocron.WithStartAt(start)}
}

// Start begins the passes.
func (p *periodic) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	sched, err := gocron.NewScheduler()
	if err != nil {
		return fmt.Errorf("master: %s scheduler: %w", p.name, err)
	}
	job, err := sched.NewJob(gocron.DurationJob(p.every), gocron.NewTask(p.pass), p.options()...)
	if err != nil {
		return fmt.Errorf("master: %s job: %w", p.name, err)
	}
	sched.Start()
	p.sched, p.job = sched, job
	return nil
}

// Stop ends the passes and waits for one in progress. It is safe before
// Start and more than once.
func (p *periodic) Stop() {
	p.mu.Lock()
	sched := p.sched
	p.sched, p.job = nil, nil
	p.mu.Unlock()
	if sched == nil {
		return
	}
	if err := sched.Shutdown(); err != nil {
		p.log.Error("stop "+p.name, "err", err)
	}
}

// Reschedule runs the passes every every from now on; the next pass comes at
// once. It does nothing when the interval is unchanged or the duty stopped.
func (p *periodic) Reschedule(every time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if every == p.every || p.sched == nil {
		p.every = every
		return
	}
	p.every = every
	nj, err := p.sched.Update(p.job.ID(), gocron.DurationJob(every), gocron.NewTask(p.pass),
		gocron.WithName(p.name), gocron.WithSingletonMode(gocron.LimitModeReschedule), gocron.WithStartAt(gocron.WithStartImmediately()))
	if err != nil {
		p.log.Error("reschedule "+p.name, "err", err)
		return
	}
	p.job = nj
	p.log.Info(p.name+" rescheduled", "interval", every)
}
