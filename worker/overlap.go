package worker

import (
	"fmt"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// overlapGate applies each task's overlap policy (protocol.OverlapAllow, Skip,
// Queue) on this node. It is keyed by task id, not by scheduled job, so that
// editing a task (which replaces its job) does not forget a run in progress.
// The decision is local: with several executors, the node that won the claim
// of a fire decides, knowing only its own runs.
type overlapGate struct {
	mu    sync.Mutex
	tasks map[string]*runState // only tasks with a run in progress
	free  []*runState          // states of ended runs, for reuse: a fire allocates none
}

// maxFreeRunStates bounds the ended run states kept for reuse.
const maxFreeRunStates = 4096

// runState is one task's runs in progress on this node.
type runState struct {
	running int         // runs in progress: more than one only under allow
	current runID       // report id of the attempt most recently started
	waiting *queuedFire // under queue: the one fire waiting for running to reach 0
}

// queuedFire is a fire to run: waiting for the previous run of its task to
// end, waiting in the node's queue for a concurrency slot (its wait field
// is its place there: a record, not a goroutine), or running.
type queuedFire struct {
	spec   protocol.TaskSpec
	fire   time.Time
	manual bool
	// catchUp, for a catch-up run, is what it stands for (nil otherwise).
	catchUp *catchUp
	id      runID     // report id of its first attempt
	tmpl    *taskPrep // the task's prepared HTTP request, if any
	// wf names the workflow run and step of a step's run (nil otherwise):
	// its reports say them.
	wf *stepRef

	// Set once it starts (begin):
	r       *runner
	attempt int             // the attempt running or waiting for its slot
	cur     runID           // that attempt's report id
	done    *sync.WaitGroup // told when it and the fires queued behind it have ended (nil: nobody waits)
	wait    waiter          // its place in the node's queue for a slot
}

// newQueuedFire is a fire to run, from the runner's pool of ended fires:
// the body of a schedule's job starts hundreds of runs at once, and
// allocating their state then made it wait on the garbage collector.
func (r *runner) newQueuedFire(spec *protocol.TaskSpec, fire time.Time, manual bool, id runID, tmpl *taskPrep) *queuedFire {
	q, _ := r.queued.Get().(*queuedFire)
	if q == nil {
		q = new(queuedFire)
	}
	*q = queuedFire{spec: *spec, fire: fire, manual: manual, id: id, tmpl: tmpl}
	return q
}

// release returns an ended fire to the pool; nothing may use it after.
func (r *runner) release(q *queuedFire) {
	*q = queuedFire{}
	r.queued.Put(q)
}

// run runs a fire under its task's overlap policy, then any fire that queued
// behind it, and returns when they have ended (a fire queued behind another
// run returns at once). A run, retries included, ends before a queued fire
// starts.
func (r *runner) run(spec protocol.TaskSpec, fire time.Time, manual bool) {
	var done sync.WaitGroup
	done.Add(1)
	r.runQueued(r.newQueuedFire(&spec, fire, manual, r.newRunID(), nil), &done)
	done.Wait()
}

// catchUp is what a catch-up run stands for: n missed fires from first to
// last (more: the count stopped at its bound).
type catchUp struct {
	n           int
	first, last time.Time
	more        bool
}

// runCatchUp starts one catch-up run for the missed fires c, scheduled at the
// first of them; its reports carry the count (RunReport.Covers) and say it
// in their output's first line. done (nil: none) is told when it has ended.
func (r *runner) runCatchUp(spec protocol.TaskSpec, c catchUp, id runID, done *sync.WaitGroup) {
	q := r.newQueuedFire(&spec, c.first, false, id, nil)
	q.catchUp = &c
	r.runQueued(q, done)
}

// runAs starts a scheduled fire whose first report carries id, the one its
// claim named; done (nil: none) is told when it has ended.
func (r *runner) runAs(spec protocol.TaskSpec, fire time.Time, id runID, tmpl *taskPrep, done *sync.WaitGroup) {
	r.runQueued(r.newQueuedFire(&spec, fire, false, id, tmpl), done)
}

// runQueued starts q under its task's overlap policy, without waiting for
// it: done (nil: none) is told when it has ended, or at once when it was
// not admitted (queued behind the run in progress, which then runs it, or
// skipped).
func (r *runner) runQueued(q *queuedFire, done *sync.WaitGroup) {
	if !r.admit(q) {
		if done != nil {
			done.Done()
		}
		return
	}
	r.begin(q, done)
	if q := r.step(q); q != nil {
		go r.runSlot(q, time.Now())
	}
}

// begin marks admitted fire q as executing, its first attempt next; done
// (nil: none) is told when it has ended.
func (r *runner) begin(q *queuedFire, done *sync.WaitGroup) {
	r.active.add(1)
	q.r, q.attempt, q.cur, q.done = r, 1, q.id, done
}

// fireEnded ends fire q, its last attempt reported, and returns the fire
// queued behind it, begun and needing a slot (nil: none; q's waiter is then
// told). Stale queued fires are recorded skipped here.
func (r *runner) fireEnded(q *queuedFire) *queuedFire {
	r.active.add(-1)
	id, done := q.spec.ID, q.done
	r.release(q)
	for q = r.finish(id); q != nil; q = r.finish(id) {
		if why := r.stale(q); why != "" {
			r.reports.add(skippedReport(r.node(), q, why))
			r.release(q)
			continue
		}
		r.begin(q, done)
		return q
	}
	if done != nil {
		done.Done()
	}
	return nil
}

// admit decides whether q starts now. When it does not, the fire is either
// queued (it will run from the loop of the run in progress) or recorded as a
// skipped run here and released.
func (r *runner) admit(q *queuedFire) bool {
	g := &r.overlap
	g.mu.Lock()
	ok, why := g.admitLocked(q)
	g.mu.Unlock()
	if why != "" {
		r.skip(q, why)
	}
	return ok
}

// admitAll is admit for the fires of one schedule at once, under one lock:
// the runs of a fire that end early then do not hold up the others' start.
// It returns the fires that start now, in place of qs.
func (r *runner) admitAll(qs []*queuedFire) []*queuedFire {
	g := &r.overlap
	start := qs[:0]
	var skipped []*queuedFire
	var whys []string
	g.mu.Lock()
	for _, q := range qs {
		ok, why := g.admitLocked(q)
		switch {
		case ok:
			start = append(start, q)
		case why != "":
			skipped, whys = append(skipped, q), append(whys, why)
		}
	}
	g.mu.Unlock()
	for i, q := range skipped {
		r.skip(q, whys[i])
	}
	return start
}

// skip records a fire that was not admitted, and releases it.
func (r *runner) skip(q *queuedFire, why string) {
	r.reports.add(skippedReport(r.node(), q, why))
	r.release(q)
}

// admitLocked decides for q: start it now (ok), queue it (neither), or skip
// it (why says why).
func (g *overlapGate) admitLocked(q *queuedFire) (ok bool, why string) {
	if g.tasks == nil {
		g.tasks = map[string]*runState{}
	}
	st := g.tasks[q.spec.ID]
	if st == nil {
		if n := len(g.free); n > 0 {
			st, g.free = g.free[n-1], g.free[:n-1]
		} else {
			st = &runState{}
		}
		g.tasks[q.spec.ID] = st
	}
	switch {
	case st.running == 0 || (q.spec.Overlap != protocol.OverlapSkip && q.spec.Overlap != protocol.OverlapQueue):
		st.running++
		st.current = q.id
		return true, ""
	case q.spec.Overlap == protocol.OverlapQueue && st.waiting == nil:
		st.waiting = q
		return false, ""
	case q.spec.Overlap == protocol.OverlapQueue:
		return false, fmt.Sprintf("skipped: the previous run (id %s) was still running and a fire (scheduled at %s) was already queued behind it",
			st.current, st.waiting.fire.Format(time.RFC3339))
	}
	return false, fmt.Sprintf("skipped: the previous run (id %s) was still running", st.current)
}

// attemptStarted names the attempt now running, which a skipped fire quotes.
func (r *runner) attemptStarted(taskID string, id runID) {
	g := &r.overlap
	g.mu.Lock()
	if st := g.tasks[taskID]; st != nil {
		st.current = id
	}
	g.mu.Unlock()
}

// finish ends one run of a task and returns the queued fire to run next, if
// this was the last run in progress.
func (r *runner) finish(taskID string) *queuedFire {
	g := &r.overlap
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.tasks[taskID]
	st.running--
	if st.running > 0 {
		return nil
	}
	q := st.waiting
	if q == nil {
		delete(g.tasks, taskID)
		if len(g.free) < maxFreeRunStates {
			*st = runState{}
			g.free = append(g.free, st)
		}
		return nil
	}
	st.waiting = nil
	st.running = 1
	st.current = q.id
	return q
}

// stale says why a queued fire must not run any more: the worker is stopping
// (draining: it finishes the runs in progress, starts no other), or the task
// was stopped or paused while the fire waited. "" means run it.
func (r *runner) stale(q *queuedFire) string {
	if r.ctx.Err() != nil || r.draining.Load() {
		return "skipped: the worker stopped while this fire was queued behind the previous run"
	}
	if q.manual {
		return ""
	}
	spec, ok := r.get(q.spec.ID)
	switch {
	case !ok:
		return "skipped: the task was stopped on this node while this fire was queued behind the previous run"
	case spec.Paused:
		return "skipped: the task was paused while this fire was queued behind the previous run"
	}
	return ""
}

// skippedReport records a fire that did not run.
func skippedReport(node string, q *queuedFire, why string) protocol.RunReport {
	now := time.Now().UTC()
	return protocol.RunReport{ID: q.id.String(), TaskID: q.spec.ID, Node: node, ScheduledAt: q.fire, StartedAt: now, EndedAt: now,
		Result: protocol.ResultSkipped, Attempt: 1, Output: why, Manual: q.manual, TaskVersion: q.spec.Version,
		WorkflowRun: q.wf.run(), WorkflowStep: q.wf.step()}
}
