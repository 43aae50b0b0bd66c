package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/robfig/cron/v3"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// limiter bounds concurrent runs on the node (--maxc); its limit can change
// when the master sends a new configuration.
type limiter struct {
	mu   sync.Mutex
	n    int
	max  int
	wake chan struct{}
}

func newLimiter(max int) *limiter { return &limiter{max: max, wake: make(chan struct{})} }

func (l *limiter) setMax(max int) {
	l.mu.Lock()
	l.max = max
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
}

func (l *limiter) acquire(ctx context.Context) bool {
	for {
		l.mu.Lock()
		if l.n < l.max {
			l.n++
			l.mu.Unlock()
			return true
		}
		ch := l.wake
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

func (l *limiter) release() {
	l.mu.Lock()
	l.n--
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
}

// taskJob is one scheduled task: one gocron job. spec never changes once the
// job is scheduled (fire reads it without a lock); what start may update in
// place, the executor count and the paused flag, is atomic.
type taskJob struct {
	spec      protocol.TaskSpec
	jobID     uuid.UUID
	paused    atomic.Bool
	executors atomic.Int64
	shard     atomic.Pointer[[2]int] // broadcast shard index and total, updated in place like executors
	cron      cron.Schedule          // for cron tasks: to name the scheduled fire time
}

// current is the task's spec with its current executor count and paused flag.
func (tj *taskJob) current() protocol.TaskSpec {
	spec := tj.spec
	spec.Executors = int(tj.executors.Load())
	if sh := tj.shard.Load(); sh != nil {
		spec.ShardIndex, spec.ShardTotal = sh[0], sh[1]
	}
	spec.Paused = tj.paused.Load()
	return spec
}

// runner owns the gocron scheduler and the tasks on it.
type runner struct {
	log     *slog.Logger
	node    func() string
	sched   gocron.Scheduler
	limit   *limiter
	http    *http.Client
	reports *reporter
	claim   func(ctx context.Context, taskID string, fire time.Time) (bool, error)
	shell   bool
	backoff time.Duration // first retry delay; doubles per attempt

	overlap overlapGate // each task's runs in progress, for its overlap policy

	misfires      misfireLog    // fires no master could be reached to claim, for the misfire policy
	misfireWindow time.Duration // how long skip gathers misfires into one run; defaultMisfireWindow when 0

	mu   sync.Mutex
	jobs map[string]*taskJob
	ctx  context.Context // cancelled when the worker stops: running jobs end
}

// scheduledFire names the fire a run belongs to: the schedule's own time, not
// the local clock, so that every executor claims the same fire.
func (tj *taskJob) scheduledFire(now time.Time) time.Time {
	s := tj.spec.Schedule
	switch s.Kind {
	case protocol.ScheduleOnce:
		return s.At.UTC()
	case protocol.ScheduleInterval:
		return now.Round(time.Duration(s.Every)).UTC()
	case protocol.ScheduleCron:
		// The last schedule point at or before now (plus a little for a timer
		// firing early). Look back 2 s first: it is where the point is unless
		// the run started very late.
		for _, back := range []time.Duration{2 * time.Second, 5 * time.Minute} {
			t := tj.cron.Next(now.Add(-back).Truncate(time.Second).Add(-time.Nanosecond))
			last := time.Time{}
			for !t.After(now.Add(200*time.Millisecond)) && !t.IsZero() {
				last = t
				t = tj.cron.Next(t)
			}
			if !last.IsZero() {
				return last.UTC()
			}
		}
	}
	return now.Truncate(time.Second).UTC()
}

// definition builds the gocron job definition and options of a task.
func (r *runner) definition(tj *taskJob, now time.Time) (gocron.JobDefinition, []gocron.JobOption, error) {
	d := &tj.spec.TaskDef
	var opts []gocron.JobOption
	var def gocron.JobDefinition
	switch d.Schedule.Kind {
	case protocol.ScheduleCron:
		loc, err := protocol.LoadTimezone(d.Timezone)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: timezone %v", protocol.ErrInvalid, err)
		}
		sch, err := protocol.ParseCronIn(d.Schedule.Cron, loc)
		if err != nil {
			return nil, nil, err
		}
		tj.cron = sch
		def = gocron.CronJob(d.Schedule.Cron, protocol.CronHasSeconds(d.Schedule.Cron))
		// gocron runs the very schedule the master shows (NextFire), time
		// zone and DST rules included, rather than parsing the text again.
		opts = append(opts, gocron.WithCronImplementation(cronImpl{sch}))
		if d.StartAt != nil && d.StartAt.After(now) {
			opts = append(opts, gocron.WithStartAt(gocron.WithStartDateTime(*d.StartAt)))
		}
	case protocol.ScheduleInterval:
		every := time.Duration(d.Schedule.Every)
		def = gocron.DurationJob(every)
		// Align the first fire to a multiple of the interval since the epoch so
		// that every executor fires (and claims) the same instants.
		from := now
		if d.StartAt != nil && d.StartAt.After(from) {
			from = *d.StartAt
		}
		first := from.Truncate(every).Add(every)
		opts = append(opts, gocron.WithStartAt(gocron.WithStartDateTime(first)))
	case protocol.ScheduleOnce:
		if d.Schedule.At.Before(now) {
			return nil, nil, fmt.Errorf("%w: one-time schedule at %s has passed", protocol.ErrInvalid, d.Schedule.At.UTC().Format(time.RFC3339))
		}
		def = gocron.OneTimeJob(gocron.OneTimeJobStartDateTime(*d.Schedule.At))
	default:
		return nil, nil, fmt.Errorf("%w: schedule kind %q", protocol.ErrInvalid, d.Schedule.Kind)
	}
	if d.EndAt != nil {
		opts = append(opts, gocron.WithStopAt(gocron.WithStopDateTime(*d.EndAt)))
	}
	opts = append(opts,
		gocron.WithName(d.ID),
		gocron.WithTags(d.ID),
		gocron.WithEventListeners(gocron.BeforeJobRunsSkipIfBeforeFuncErrors(func(uuid.UUID, string) error {
			if tj.paused.Load() {
				return errPaused
			}
			return nil
		})),
	)
	return def, opts, nil
}

var errPaused = errors.New("paused")

// cronImpl hands gocron a schedule parsed by protocol.ParseCronIn.
type cronImpl struct{ s cron.Schedule }

// IsValid accepts what ParseCronIn accepted if it fires again after now.
func (c cronImpl) IsValid(_ string, _ *time.Location, now time.Time) error {
	if c.s.Next(now).IsZero() {
		return gocron.ErrCronJobInvalid
	}
	return nil
}

// Next is the first fire strictly after lastRun.
func (c cronImpl) Next(lastRun time.Time) time.Time { return c.s.Next(lastRun) }

// start schedules a task, or updates it in place when it is already scheduled
// (starting a started task is fine).
func (r *runner) start(spec protocol.TaskSpec) error {
	spec.Normalize()
	if err := spec.Validate(time.Now()); err != nil {
		return fmt.Errorf("task %s: %w", spec.ID, err)
	}
	if spec.ID == "" {
		return fmt.Errorf("%w: task id is required", protocol.ErrInvalid)
	}
	if spec.Type == protocol.TaskShell && !r.shell {
		return ErrShellRefused
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.jobs[spec.ID]; ok {
		if reflect.DeepEqual(old.spec.TaskDef, spec.TaskDef) {
			old.executors.Store(int64(spec.Executors))
			old.shard.Store(&[2]int{spec.ShardIndex, spec.ShardTotal})
			old.paused.Store(spec.Paused)
			return nil
		}
		if err := r.sched.RemoveJob(old.jobID); err != nil && !errors.Is(err, gocron.ErrJobNotFound) {
			return fmt.Errorf("worker: replace task %s: %w", spec.ID, err)
		}
		delete(r.jobs, spec.ID)
	}
	tj := &taskJob{spec: spec}
	tj.paused.Store(spec.Paused)
	tj.executors.Store(int64(spec.Executors))
	tj.shard.Store(&[2]int{spec.ShardIndex, spec.ShardTotal})
	def, opts, err := r.definition(tj, time.Now())
	if err != nil {
		return err
	}
	job, err := r.sched.NewJob(def, gocron.NewTask(func() { r.fire(tj) }), opts...)
	if err != nil {
		return fmt.Errorf("worker: schedule task %s: %w", spec.ID, err)
	}
	tj.jobID = job.ID()
	r.jobs[spec.ID] = tj
	r.log.Info("task scheduled", "task", spec.ID, "title", spec.Title, "paused", spec.Paused, "executors", spec.Executors)
	return nil
}

// stop removes a task's job; stopping an unknown task is fine.
func (r *runner) stop(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if tj, ok := r.jobs[id]; ok {
		_ = r.sched.RemoveJob(tj.jobID)
		delete(r.jobs, id)
		r.log.Info("task stopped", "task", id)
	}
}

// setPaused pauses or resumes a task: the job stays, its runs are skipped.
func (r *runner) setPaused(id string, paused bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	tj, ok := r.jobs[id]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTask, id)
	}
	tj.paused.Store(paused)
	r.log.Info("task paused state", "task", id, "paused", paused)
	return nil
}

// replace makes the scheduled set equal to specs; it returns the tasks that failed.
func (r *runner) replace(specs []protocol.TaskSpec) error {
	want := map[string]bool{}
	var errs []string
	for _, s := range specs {
		want[s.ID] = true
		if err := r.start(s); err != nil {
			errs = append(errs, err.Error())
		}
	}
	r.mu.Lock()
	var drop []string
	for id := range r.jobs {
		if !want[id] {
			drop = append(drop, id)
		}
	}
	r.mu.Unlock()
	for _, id := range drop {
		r.stop(id)
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return fmt.Errorf("worker: %d task(s) not scheduled: %s", len(errs), strings.Join(errs, "; "))
	}
	return nil
}

// clear removes every task.
func (r *runner) clear() {
	r.mu.Lock()
	ids := make([]string, 0, len(r.jobs))
	for id := range r.jobs {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	for _, id := range ids {
		r.stop(id)
	}
}

func (r *runner) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.jobs)
}

func (r *runner) get(id string) (protocol.TaskSpec, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tj, ok := r.jobs[id]
	if !ok {
		return protocol.TaskSpec{}, false
	}
	return tj.current(), true
}

// fire is the gocron job body: claim the fire when several executors share
// the task, then run it with retries.
func (r *runner) fire(tj *taskJob) {
	now := time.Now()
	fire := tj.scheduledFire(now)
	spec := tj.current()
	if spec.Routing == protocol.RoutingBroadcast {
		spec = sharded(spec) // every executor runs every fire: no claim
	} else if spec.Executors > 1 {
		won, err := r.claim(r.ctx, spec.ID, fire)
		if err != nil {
			r.log.Warn("fire not claimed: master unreachable; another executor may run it", "task", spec.ID, "fire", fire, "err", err)
			r.misfired(spec, fire, err)
			return
		}
		r.claimed(spec.ID)
		if !won {
			return
		}
	}
	r.run(spec, fire, false)
}

// runOnce runs a task now, outside its schedule, without a claim.
func (r *runner) runOnce(spec protocol.TaskSpec) {
	go r.run(spec, time.Now().UTC(), true)
}

// execute runs attempts until one succeeds or the retries are used up, with
// exponentially growing delays, and reports every attempt. id is the report
// id of the first attempt.
func (r *runner) execute(spec protocol.TaskSpec, fire time.Time, manual bool, id string) {
	for attempt := 1; attempt <= spec.Retries+1; attempt++ {
		if attempt > 1 {
			id = uuid.NewString()
			r.attemptStarted(spec.ID, id)
		}
		rep := r.attempt(&spec.TaskDef, fire, attempt, manual, id)
		r.reports.add(rep)
		if rep.Result == protocol.ResultSuccess || attempt > spec.Retries {
			return
		}
		delay := r.backoff << (attempt - 1)
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// attempt runs one execution within the node's concurrency bound and timeout.
func (r *runner) attempt(def *protocol.TaskDef, fire time.Time, attempt int, manual bool, id string) protocol.RunReport {
	timeout := time.Duration(def.Timeout)
	rep := protocol.RunReport{ID: id, TaskID: def.ID, Node: r.node(), ScheduledAt: fire, Attempt: attempt, Manual: manual}
	wait, cancelWait := context.WithTimeout(r.ctx, timeout)
	ok := r.limit.acquire(wait)
	cancelWait()
	if !ok {
		now := time.Now().UTC()
		rep.StartedAt, rep.EndedAt, rep.Result = now, now, protocol.ResultSkipped
		rep.Output = fmt.Sprintf("skipped: the node was at its max concurrency for the whole timeout of %s", timeout)
		return rep
	}
	defer r.limit.release()
	ctx, cancel := context.WithTimeout(r.ctx, timeout)
	defer cancel()
	rep.StartedAt = time.Now().UTC()
	var o outcome
	switch def.Type {
	case protocol.TaskHTTP:
		o = runHTTP(ctx, r.http, def)
	case protocol.TaskShell:
		if !r.shell {
			o = outcome{result: protocol.ResultFailed, output: ErrShellRefused.Error()}
		} else {
			o = runShell(ctx, def)
		}
	default:
		o = outcome{result: protocol.ResultFailed, output: "unknown task type " + def.Type}
	}
	rep.EndedAt = time.Now().UTC()
	rep.DurationMS = rep.EndedAt.Sub(rep.StartedAt).Milliseconds()
	rep.Result, rep.HTTPStatus, rep.ExitCode = o.result, o.httpStatus, o.exitCode
	// Notes added to the output (errors, timeouts) may quote odd bytes too.
	out, binary := protocol.SanitizeOutput(o.output)
	rep.Output, rep.BinaryOutput = out, binary || o.binary
	return rep
}
