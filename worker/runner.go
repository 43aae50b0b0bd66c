package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/robfig/cron/v3"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// taskJob is one scheduled task, a member of the fireGroup of its schedule.
// spec never changes once the task is scheduled (fire reads it without a
// lock); what start may update in place, the executor count and the paused
// flag, is atomic.
type taskJob struct {
	spec      protocol.TaskSpec
	jobID     uuid.UUID // the gocron job of its group
	paused    atomic.Bool
	executors atomic.Int64
	shard     atomic.Pointer[[2]int] // broadcast shard index and total, updated in place like executors
	// version is the definition's version, updated in place like executors:
	// a save that changed nothing the worker runs (its executors, a note)
	// is still a new version, and the runs after it report that one.
	version atomic.Int64
	plan    protocol.Plan // its schedule with its own start_at: names and counts its fires
	group   *fireGroup
	idx     int       // position in group.tasks, under group.mu
	since   time.Time // when it joined its group: earlier fires are not its own
	// lastFire is the scheduled time (UnixNano) of the last fire this node
	// handled (started, or skipped because paused), saved for the misfire
	// count after a restart (fires.go).
	lastFire atomic.Int64
	httpReq  *taskPrep // the task's request when it is the same at every fire (exec.go); nil: built per run
}

// current is the task's spec with its current executor count and paused flag.
func (tj *taskJob) current() protocol.TaskSpec {
	spec := tj.spec
	spec.Executors = int(tj.executors.Load())
	if sh := tj.shard.Load(); sh != nil {
		spec.ShardIndex, spec.ShardTotal = sh[0], sh[1]
	}
	spec.Paused = tj.paused.Load()
	spec.Version = int(tj.version.Load())
	return spec
}

// scheduleKey is everything in a task definition that decides its fire
// times. Tasks with equal keys fire at the same instants and share one gocron
// job (a fireGroup).
type scheduleKey struct {
	kind    string
	cron    string
	every   time.Duration
	phase   time.Duration // a spread interval's offset (protocol.IntervalPhase)
	at      int64         // UnixNano of a one-time schedule
	tz      string        // cron only: interval and one-time fires are instants
	startAt int64         // UnixNano; 0 when unset or passed
	endAt   int64
}

// String names the schedule (the gocron job's name).
func (k scheduleKey) String() string {
	switch k.kind {
	case protocol.ScheduleCron:
		return "cron " + k.cron + " " + k.tz
	case protocol.ScheduleInterval:
		if k.phase > 0 {
			return "every " + k.every.String() + " +" + k.phase.String()
		}
		return "every " + k.every.String()
	}
	return k.kind + " " + time.Unix(0, k.at).UTC().Format(time.RFC3339)
}

// keyOf is the schedule key of d, whose plan is plan, started at now. A
// start_at that has passed changes nothing any more (interval fires are
// aligned to the epoch plus the task's phase, cron fires to the wall clock),
// so such tasks share the group of those without. The cron expression is the
// plan's, H forms expanded: two tasks with "H * * * *" fire apart. Spread
// intervals take one of at most 3600 phases per length, which bounds the
// groups.
func keyOf(d *protocol.TaskDef, plan *protocol.Plan, now time.Time) scheduleKey {
	k := scheduleKey{kind: d.Schedule.Kind}
	switch d.Schedule.Kind {
	case protocol.ScheduleCron:
		k.cron, k.tz = plan.CronExpr(), d.Timezone
	case protocol.ScheduleInterval:
		k.every, k.phase = time.Duration(d.Schedule.Every), plan.Phase()
	case protocol.ScheduleOnce:
		if d.Schedule.At != nil {
			k.at = d.Schedule.At.UnixNano()
		}
	}
	if d.StartAt != nil && d.StartAt.After(now) {
		k.startAt = d.StartAt.UnixNano()
	}
	if d.EndAt != nil {
		k.endAt = d.EndAt.UnixNano()
	}
	return k
}

// fireGroup is the one gocron job of every task sharing a schedule: at each
// fire its body names the scheduled time once and starts each task's run in
// its own goroutine. gocron then hands out one job per schedule, not one per
// task, which is what kept the trigger lag far above the timer floor.
type fireGroup struct {
	key   scheduleKey
	plan  protocol.Plan // of its first task: the same fires as every member's after the group began
	jobID uuid.UUID

	mu    sync.Mutex
	tasks []*taskJob // members, in no particular order
	snap  []*taskJob // immutable copy the body iterates; nil after a change
}

// next is the group's first fire after t (zero: none).
func (g *fireGroup) next(t time.Time) time.Time {
	next, _ := g.plan.Next(t)
	return next
}

// snapshot is the current members; it is copied at most once per change.
func (g *fireGroup) snapshot() []*taskJob {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.snap == nil {
		g.snap = slices.Clone(g.tasks)
	}
	return g.snap
}

func (g *fireGroup) join(tj *taskJob) {
	g.mu.Lock()
	tj.group, tj.idx, tj.jobID = g, len(g.tasks), g.jobID
	g.tasks = append(g.tasks, tj)
	g.snap = nil
	g.mu.Unlock()
}

// replace puts tj in old's place.
func (g *fireGroup) replace(old, tj *taskJob) {
	g.mu.Lock()
	defer g.mu.Unlock()
	tj.group, tj.jobID = g, g.jobID
	if old.idx < len(g.tasks) && g.tasks[old.idx] == old {
		tj.idx = old.idx
		g.tasks[old.idx] = tj
	} else {
		tj.idx = len(g.tasks)
		g.tasks = append(g.tasks, tj)
	}
	g.snap = nil
}

// leave removes tj and reports whether the group is now empty.
func (g *fireGroup) leave(tj *taskJob) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	last := len(g.tasks) - 1
	if tj.idx <= last && g.tasks[tj.idx] == tj {
		g.tasks[tj.idx] = g.tasks[last]
		g.tasks[tj.idx].idx = tj.idx
		g.tasks[last] = nil
		g.tasks = g.tasks[:last]
		g.snap = nil
	}
	return len(g.tasks) == 0
}

// runner owns the gocron scheduler and the tasks on it.
type runner struct {
	// now is the worker's clock (Config.Now; nil: time.Now), read for the
	// fire a scheduled job stands for and the time a task starts from.
	now     func() time.Time
	log     *slog.Logger
	node    func() string
	sched   gocron.Scheduler
	limit   *limiter
	http    *http.Client
	execs   *executor.Registry // the task types it runs; see registry
	execsMu sync.Mutex
	reports *reporter
	// claim asks a master whether this node runs a fire; run is the report
	// id its first report will carry, kept with the claim (see
	// protocol.ClaimRequest.RunID).
	claim   func(ctx context.Context, taskID string, fire time.Time, run runID) (bool, error)
	shell   bool
	backoff time.Duration // first retry delay; doubles per attempt

	overlap overlapGate  // each task's runs in progress, for its overlap policy
	live    liveRuns     // every attempt in progress, for its output and kill
	pgroups *shellGroups // shell commands in progress, listed in the data dir

	misfires      misfireLog    // fires no master could be reached to claim, for the misfire policy
	unclaimed     streak        // the same, for the log: once per outage with a count
	misfireWindow time.Duration // how long skip gathers misfires into one run; defaultMisfireWindow when 0

	ids    runIDs         // run report ids
	steps  stepRunsSeen   // first-attempt ids of the workflow steps' runs started here
	queued sync.Pool      // *queuedFire of ended runs, for reuse
	fires  lastFires      // the last fire of each task, kept across restarts (fires.go)
	bg     sync.WaitGroup // catch-up runs after a restart, waited for like scheduled runs

	// retrying holds the fires waiting for their next attempt's delay, a
	// timer each; stopWatch arranges, once, that the worker's stop ends
	// them and the fires queued for a slot (stopWaits, execute.go).
	retrying  retryWaits
	stopWatch sync.Once

	// draining is set when the worker stops: no new fire is taken and the
	// fires queued behind a run are recorded skipped; the runs in progress
	// go on until the drain timeout.
	draining atomic.Bool
	active   activeRuns // fires being executed, which a drain waits for
	// stopNote says, in a killed run's output, why the worker's stop
	// cancelled it.
	stopNote string

	mu     sync.Mutex
	jobs   map[string]*taskJob
	groups map[scheduleKey]*fireGroup
	missed map[missedKey]missedCount // while tasks come back after a restart (fires.go)
	ctx    context.Context           // cancelled when the worker's drain ends: running jobs end
}

// scheduledFire names the fire a run belongs to: the schedule's own time, not
// the local clock, so that every executor claims the same fire.
func (tj *taskJob) scheduledFire(now time.Time) time.Time { return tj.plan.FireOf(now) }

// definition builds the gocron job definition and options of a schedule
// group from the definition of its first task and its plan.
func (r *runner) definition(d *protocol.TaskDef, plan *protocol.Plan, now time.Time) (gocron.JobDefinition, []gocron.JobOption, error) {
	var opts []gocron.JobOption
	var def gocron.JobDefinition
	// gocron fires first at a start time itself, then by the schedule: start
	// it at the plan's first fire, never at start_at (no fire of the plan).
	first, ok := plan.Next(now)
	if !ok && d.Schedule.Kind != protocol.ScheduleOnce {
		return nil, nil, fmt.Errorf("%w: never fires between start_at and end_at", protocol.ErrInvalid)
	}
	switch d.Schedule.Kind {
	case protocol.ScheduleCron:
		def = gocron.CronJob(plan.CronExpr(), protocol.CronHasSeconds(plan.CronExpr()))
		// gocron runs the very schedule the master shows (the plan's), time
		// zone and DST rules included, rather than parsing the text again.
		opts = append(opts, gocron.WithCronImplementation(cronImpl{plan.Cron()}))
		if d.StartAt != nil && d.StartAt.After(now) {
			opts = append(opts, gocron.WithStartAt(gocron.WithStartDateTime(first)))
		}
	case protocol.ScheduleInterval:
		def = gocron.DurationJob(time.Duration(d.Schedule.Every))
		// The first fire is a multiple of the interval plus the task's
		// phase, so that every executor fires (and claims) the same instants.
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
		// end_at itself may fire; gocron runs nothing at or after its stop
		// time, so it stops just after.
		opts = append(opts, gocron.WithStopAt(gocron.WithStopDateTime(d.EndAt.Add(time.Nanosecond))))
	}
	return def, opts, nil
}

// cronImpl hands gocron the cron schedule of a protocol.Plan.
type cronImpl struct{ s cron.Schedule }

// IsValid accepts what NewPlan accepted if it fires again after now.
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
	took, err := r.startSpec(spec)
	if took {
		r.forgetMissed()
		r.writeFires(false)
	}
	return err
}

// forgetMissed drops the missed-fire counts kept while tasks came back.
func (r *runner) forgetMissed() {
	r.mu.Lock()
	r.missed = nil
	r.mu.Unlock()
}

// startSpec is start; took says it took the task's last fire from the
// previous process (FiresFile must then be written before that process's
// file can mislead a next one).
func (r *runner) startSpec(spec protocol.TaskSpec) (took bool, err error) {
	spec.Normalize()
	now := r.clock()
	if err := spec.Validate(now); err != nil {
		return false, fmt.Errorf("task %s: %w", spec.ID, err)
	}
	if spec.ID == "" {
		return false, fmt.Errorf("%w: task id is required", protocol.ErrInvalid)
	}
	if err := checkRunnable(r.registry(), &spec); err != nil {
		return false, err
	}
	plan, err := protocol.NewPlan(&spec.TaskDef)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs == nil {
		r.jobs = map[string]*taskJob{}
	}
	if r.groups == nil {
		r.groups = map[scheduleKey]*fireGroup{}
	}
	old, replacing := r.jobs[spec.ID]
	if replacing {
		if reflect.DeepEqual(old.spec.TaskDef, spec.TaskDef) {
			old.executors.Store(int64(spec.Executors))
			old.shard.Store(&[2]int{spec.ShardIndex, spec.ShardTotal})
			old.paused.Store(spec.Paused)
			old.version.Store(int64(spec.Version))
			return false, nil
		}
	}
	tj := &taskJob{spec: spec, plan: plan, since: now, httpReq: prepareTask(&spec)}
	tj.paused.Store(spec.Paused)
	tj.version.Store(int64(spec.Version))
	tj.executors.Store(int64(spec.Executors))
	tj.shard.Store(&[2]int{spec.ShardIndex, spec.ShardTotal})
	key := keyOf(&spec.TaskDef, &plan, now)
	g := r.groups[key]
	if g == nil {
		if g, err = r.newGroup(key, &spec.TaskDef, &plan, now); err != nil {
			return false, fmt.Errorf("worker: schedule task %s: %w", spec.ID, err)
		}
	}
	switch {
	case replacing && old.group == g:
		// Same schedule: the new definition takes the old one's place in
		// one step, so no fire runs both or neither, and the group (its
		// gocron job, the only member) is never left empty and removed.
		tj.lastFire.Store(old.lastFire.Load())
		g.replace(old, tj)
	case replacing:
		tj.lastFire.Store(old.lastFire.Load())
		if err := r.leaveLocked(old); err != nil {
			return false, fmt.Errorf("worker: replace task %s: %w", spec.ID, err)
		}
		g.join(tj)
	default:
		g.join(tj)
	}
	r.jobs[spec.ID] = tj
	if !replacing {
		took = r.restarted(tj, now)
	}
	r.log.Info("task scheduled", "task", spec.ID, "title", spec.Title, "paused", spec.Paused, "executors", spec.Executors)
	return took, nil
}

// newGroup schedules the gocron job of a schedule not scheduled yet.
func (r *runner) newGroup(key scheduleKey, d *protocol.TaskDef, plan *protocol.Plan, now time.Time) (*fireGroup, error) {
	def, opts, err := r.definition(d, plan, now)
	if err != nil {
		return nil, err
	}
	g := &fireGroup{key: key, plan: *plan}
	opts = append(opts, gocron.WithName(key.String()))
	job, err := r.sched.NewJob(def, gocron.NewTask(func() { r.fireGroup(g) }), opts...)
	if err != nil {
		return nil, err
	}
	g.jobID = job.ID()
	r.groups[key] = g
	return g, nil
}

// leaveLocked takes a task out of its group and removes the group's job when
// it was the last member.
func (r *runner) leaveLocked(tj *taskJob) error {
	g := tj.group
	if g == nil || !g.leave(tj) {
		return nil
	}
	delete(r.groups, g.key)
	if err := r.sched.RemoveJob(g.jobID); err != nil && !errors.Is(err, gocron.ErrJobNotFound) {
		return err
	}
	return nil
}

// fireGroup is the gocron job body of a schedule. It names the fire once and
// starts every member's run, then waits for them, so that stopping the
// scheduler waits for runs as it did for one job per task. The runs that
// need no claim are admitted (overlap policy) and given the free
// concurrency slots in one step each; those that got one start together,
// each in its goroutine, once all their goroutines exist: a run's start does
// not wait behind the work (requests, reports) of the runs started before it
// in the same fire. The others join the node's queue for a slot, in order,
// as records: a herd of fires costs no goroutine per waiting run.
func (r *runner) fireGroup(g *fireGroup) {
	r.fireGroupAt(g, g.plan.FireOf(r.clock()))
}

// fireGroupAt is fireGroup for the fire named fire.
func (r *runner) fireGroupAt(g *fireGroup, fire time.Time) {
	if r.draining.Load() {
		return // the worker stops: its schedules are being removed, no fire is taken
	}
	var wg sync.WaitGroup
	lag := time.Since(fire) // the trigger lag of this fire, the same for all its tasks
	members := g.snapshot()
	fires := make([]*queuedFire, 0, len(members))
	for _, tj := range members {
		if fire.Before(tj.since) {
			continue // due before the task joined: a job of its own would not have fired it
		}
		if fire.UnixNano() > tj.lastFire.Load() {
			tj.lastFire.Store(fire.UnixNano())
		}
		if tj.paused.Load() {
			continue
		}
		r.reports.metrics.fired(lag)
		spec := tj.current()
		if spec.Routing != protocol.RoutingBroadcast && spec.Executors > 1 {
			wg.Add(1)
			go r.fireAt(tj, fire, &wg) // the claim is a call to the master
			continue
		}
		if spec.Routing == protocol.RoutingBroadcast {
			spec = sharded(spec)
		}
		fires = append(fires, r.newQueuedFire(&spec, fire, false, r.newRunID(), tj.httpReq))
	}
	if len(fires) > 0 {
		fires = r.admitAll(fires)
		held := r.limit.tryAcquireN(len(fires))
		// The runs start together when the gate opens: none works (and
		// takes CPU from this loop) before every one is ready to go.
		start := &gate{open: make(chan struct{})}
		for i, q := range fires {
			wg.Add(1)
			r.begin(q, &wg)
			if i < held {
				go r.runMember(q, start)
			}
		}
		start.at = time.Now()
		close(start.open)
		// The rest wait for a slot in the node's queue (or, under
		// at_capacity skip, are recorded skipped now).
		for _, q := range fires[held:] {
			if q := r.step(q); q != nil {
				go r.runSlot(q, time.Now())
			}
		}
	}
	r.fires.touch()
	wg.Wait()
}

// gate starts the runs of one fire together, at when it opens.
type gate struct {
	open chan struct{}
	at   time.Time // written before open is closed
}

// runMember runs a fire that holds its slot once start opens.
func (r *runner) runMember(q *queuedFire, start *gate) {
	<-start.open
	r.runSlot(q, start.at)
}

// stop removes a task and forgets its last fire: a task stopped on purpose
// has no missed fires to catch up when it is started again.
func (r *runner) stop(id string) {
	r.remove(id, false)
}

// remove takes a task off the schedule. With keep, its last fire is kept for
// the misfire count when the next process starts it again (the worker
// process stops, the task should still run); else it is forgotten.
func (r *runner) remove(id string, keep bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tj, ok := r.jobs[id]
	if ok {
		if err := r.leaveLocked(tj); err != nil {
			r.log.Warn("remove task's schedule", "task", id, "err", err)
		}
		delete(r.jobs, id)
		r.log.Info("task stopped", "task", id)
	}
	if keep && ok {
		r.fires.keep(tj)
	} else {
		r.fires.forget(id)
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
	want := make(map[string]bool, len(specs))
	took, errs := r.startAll(specs, want)
	r.prune(want, took)
	return notScheduled(errs)
}

// startAll schedules specs, each on its own, adding their ids to want. took
// says one of them took its last fire from the previous process; errs says
// which failed and why.
func (r *runner) startAll(specs []protocol.TaskSpec, want map[string]bool) (took bool, errs []string) {
	for _, s := range specs {
		want[s.ID] = true
		t, err := r.startSpec(s)
		if err != nil {
			errs = append(errs, err.Error())
		}
		took = took || t
	}
	return took, errs
}

// prune drops the scheduled tasks want does not hold: the master sent every
// task of this node. With took the fires file is written (see startSpec).
func (r *runner) prune(want map[string]bool, took bool) {
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
	// The last fires of tasks the master no longer gives us are of no use.
	r.fires.retain(want)
	if took {
		r.forgetMissed()
		r.writeFires(false)
	}
}

// notScheduled sums up the tasks that could not be scheduled, nil for none.
func notScheduled(errs []string) error {
	if len(errs) == 0 {
		return nil
	}
	sort.Strings(errs)
	return fmt.Errorf("worker: %d task(s) not scheduled: %s", len(errs), strings.Join(errs, "; "))
}

// clear removes every task. With keep (the process stops), their last fires
// are kept for the next process: fires due until it schedules them again are
// misfires. A master stopping this node's scheduling (keep false) decides
// that on purpose, like stopping a task.
func (r *runner) clear(keep bool) {
	r.mu.Lock()
	ids := make([]string, 0, len(r.jobs))
	for id := range r.jobs {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	for _, id := range ids {
		r.remove(id, keep)
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

// fire runs one fire of a task now, named by the clock, and returns when it
// has ended (tests fire tasks this way; the scheduler goes through
// fireGroup).
func (r *runner) fire(tj *taskJob) {
	var done sync.WaitGroup
	done.Add(1)
	r.fireAt(tj, tj.scheduledFire(r.clock()), &done)
	done.Wait()
}

// fireAt is one task's part of a fire: claim the fire when several executors
// share the task, then start it; done is told when it has ended.
func (r *runner) fireAt(tj *taskJob, fire time.Time, done *sync.WaitGroup) {
	spec, id, ok := r.claimFire(tj, fire)
	if !ok {
		if done != nil {
			done.Done()
		}
		return
	}
	r.runAs(spec, fire, id, tj.httpReq, done)
}

// claimFire decides whether this node runs tj's fire: with several
// executors (not broadcast), by a claim to the master. It returns the spec
// to run and the report id of its first attempt.
func (r *runner) claimFire(tj *taskJob, fire time.Time) (protocol.TaskSpec, runID, bool) {
	if r.draining.Load() {
		return protocol.TaskSpec{}, runID{}, false // no claim once the worker drains: another executor takes it
	}
	spec := tj.current()
	id := r.newRunID()
	if spec.Routing == protocol.RoutingBroadcast {
		return sharded(spec), id, true // every executor runs every fire: no claim
	}
	if spec.Executors <= 1 {
		return spec, id, true
	}
	won, err := r.claim(r.ctx, spec.ID, fire, id)
	if err != nil {
		if log, n := r.unclaimed.hit(time.Now()); log {
			msg := "fires not claimed: no master reachable; another executor may run them (logged again every 5m, and when claims get through)"
			if errors.Is(err, errClaimTooEarly) {
				msg = "fires not claimed: this node's clock is ahead of the master's, which refuses claims of fires that are not yet due; another executor may run them (logged again every 5m, and when claims get through)"
			}
			r.log.Warn(msg, "task", spec.ID, "fire", fire, "unclaimed_so_far", n, "err", err)
		}
		r.misfired(spec, fire, err)
		return spec, id, false
	}
	if ended, n, since := r.unclaimed.end(); ended {
		r.log.Info("fires are claimed again", "unclaimed_fires", n, "since", since)
	}
	r.claimed(spec.ID)
	return spec, id, won
}

// waitBackground waits, at most until ctx ends, for the catch-up runs.
func (r *runner) waitBackground(ctx context.Context) error {
	done := make(chan struct{})
	go func() { r.bg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runOnce runs a task now, outside its schedule, without a claim. It does
// not wait for the run: a run that finds the node full waits in its queue.
func (r *runner) runOnce(spec protocol.TaskSpec, c *protocol.CatchUp) {
	r.runOnceAs(spec, c, r.newRunID(), nil)
}

// runOnceAs is runOnce with the id of its first attempt and, for a
// workflow step, the step it is.
func (r *runner) runOnceAs(spec protocol.TaskSpec, c *protocol.CatchUp, id runID, wf *stepRef) {
	q := r.newQueuedFire(&spec, r.clock().UTC(), true, id, nil)
	q.wf = wf
	if c != nil {
		// A catch-up run the master sends: a run now that stands for the
		// missed fires c.
		q.catchUp = &catchUp{n: c.Fires, first: c.First, last: c.Last, more: c.More}
	}
	r.runQueued(q, nil)
}

// attempt runs one execution in the concurrency slot it holds (taken at at),
// within its timeout, and frees the slot; tmpl, if any, is the task's
// prepared HTTP request.
func (r *runner) attempt(spec *protocol.TaskSpec, wf *stepRef, fire time.Time, attempt int, manual bool, id runID, at time.Time, tmpl *taskPrep) protocol.RunReport {
	defer r.limit.release()
	def := &spec.TaskDef
	timeout := time.Duration(def.Timeout)
	rep := protocol.RunReport{ID: id.String(), TaskID: def.ID, Node: r.node(), ScheduledAt: fire, Attempt: attempt, Manual: manual,
		TaskVersion: spec.Version, WorkflowRun: wf.run(), WorkflowStep: wf.step()}
	ctx, cancel := context.WithTimeout(r.ctx, timeout)
	defer cancel()
	rep.StartedAt = at.UTC()
	if tmpl == nil {
		tmpl = prepareTask(spec) // a run outside the schedule (run once)
	}
	var scrub *protocol.Scrubber
	if tmpl != nil {
		scrub = tmpl.scrub
	}
	ex, ok := r.registry().Get(def.Type)
	var out *tailBuffer // the output an executor writes, readable while it runs
	if ok && def.Type != protocol.TaskHTTP {
		out = &tailBuffer{max: protocol.MaxOutputBytes, scrub: scrub}
	}
	lr := r.live.add(id, &rep, def, out, cancel, scrub)
	var o outcome
	if !ok {
		o = outcome{result: protocol.ResultFailed, output: typeRefused(r.registry(), def.Type).Error()}
	} else {
		t := &executor.Task{Def: def, Conn: spec.Connection, Timeout: timeout, Prepared: tmpl,
			Started: func(pgid int) func() { return r.pgroups.record(pgid, &rep) }}
		var w io.Writer = io.Discard
		if out != nil {
			w = out
		}
		res := ex.Run(ctx, t, w)
		o = outcome{result: res.Result, httpStatus: res.HTTPStatus, exitCode: res.ExitCode, output: res.Output, binary: res.Binary}
		if out != nil {
			text, binary := out.Output()
			o.output, o.binary = text+res.Output, o.binary || binary
		}
	}
	if killed, by := r.live.done(lr); killed {
		// Whatever the cancelled request or command ended with, it ended
		// because it was killed.
		o.result = protocol.ResultKilled
		o.output += "\n[killed by " + by + "]"
	} else if o.result != protocol.ResultSuccess && errors.Is(ctx.Err(), context.Canceled) && r.ctx.Err() != nil {
		// The worker's stop cancelled it (its drain timeout passed): say so,
		// rather than "failed: context canceled".
		o.result = protocol.ResultKilled
		o.output += "\n[killed: " + r.stopNote + "]"
	}
	rep.EndedAt = time.Now().UTC()
	rep.DurationMS = rep.EndedAt.Sub(rep.StartedAt).Milliseconds()
	rep.Result, rep.HTTPStatus, rep.ExitCode = o.result, o.httpStatus, o.exitCode
	// Notes added to the output (errors, timeouts) may quote odd bytes too.
	text, binary := protocol.SanitizeOutput(o.output)
	// Secret values are masked in all of it: the answer, the shell's output
	// and the errors of the HTTP client or the shell, which quote URLs.
	text = scrub.Scrub(text)
	rep.Output, rep.BinaryOutput = text, binary || o.binary
	return rep
}

// clock reads the worker's clock (runner.now, else the real one).
func (r *runner) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// registry is the executors of the runner's task types: those New made, or
// HTTP and (when r.shell) shell for a runner made without them.
func (r *runner) registry() *executor.Registry {
	r.execsMu.Lock()
	defer r.execsMu.Unlock()
	if r.execs == nil {
		r.execs, _ = newRegistry(r.http, r.shell, nil, r.log)
	}
	return r.execs
}
