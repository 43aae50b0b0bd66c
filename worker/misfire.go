package worker

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// defaultMisfireWindow is how long consecutive misfires of a task under
// protocol.MisfireSkip are gathered into one skipped run while the master
// stays unreachable: an outage of hours leaves a few records, not thousands.
const defaultMisfireWindow = 10 * time.Minute

// misfireLog holds, per task, the fires this node could not claim because no
// master answered: a multi-executor fire may run only once claimed, so these
// fires ran nowhere unless another executor reached a master.
type misfireLog struct {
	mu    sync.Mutex
	tasks map[string]*missed
}

// missed is one task's window of consecutive misfires.
type missed struct {
	spec  protocol.TaskSpec // the task as of its last misfire
	first time.Time         // scheduled time of the first missed fire
	last  time.Time         // scheduled time of the latest one
	count int
	err   string // why the latest claim failed
	// early: the master refused the latest claim as too early for its
	// clock (this node's clock is fast), rather than being unreachable.
	early bool
}

// misfired records a fire whose claim could not be made. Under skip, a window
// that has lasted its length is recorded as a skipped run at once, so that a
// long outage is visible before it ends.
func (r *runner) misfired(spec protocol.TaskSpec, fire time.Time, err error) {
	l := &r.misfires
	l.mu.Lock()
	if l.tasks == nil {
		l.tasks = map[string]*missed{}
	}
	m := l.tasks[spec.ID]
	if m == nil {
		m = &missed{first: fire, last: fire}
		l.tasks[spec.ID] = m
	}
	// Claims of consecutive fires run at once and may fail in any order:
	// the window spans the earliest and the latest (a record once read
	// "2 fires from :06 to :05").
	if fire.Before(m.first) {
		m.first = fire
	}
	if fire.After(m.last) {
		m.last = fire
	}
	m.spec, m.err, m.early = spec, err.Error(), errors.Is(err, errClaimTooEarly)
	m.count++
	window := r.misfireWindow
	if window <= 0 {
		window = defaultMisfireWindow
	}
	flush := spec.Misfire != protocol.MisfireRunOnce && m.last.Sub(m.first) >= window
	if flush {
		delete(l.tasks, spec.ID)
	}
	l.mu.Unlock()
	if flush {
		r.reports.add(misfireReport(r.node(), m, r.newRunID()))
	}
}

// claimed ends a task's misfire window now that a claim reached a master. The
// first missed fire is claimed too, so that among several executors that all
// missed it only one records the window (skip) or runs the catch-up
// (run_once); a fire another executor did run is not caught up. It returns at
// once: the catch-up must not delay the fire that was just claimed.
func (r *runner) claimed(taskID string) {
	l := &r.misfires
	l.mu.Lock()
	m := l.tasks[taskID]
	delete(l.tasks, taskID)
	l.mu.Unlock()
	if m == nil {
		return
	}
	go func() {
		// The record it makes, a catch-up run or a skipped one, is the
		// fire's report: it carries the claim's run id.
		id := r.newRunID()
		won, err := r.claim(r.ctx, taskID, m.first, id)
		if err != nil {
			// The master went away again: the window goes on.
			r.reopen(m)
			return
		}
		if !won {
			return
		}
		if m.spec.Misfire == protocol.MisfireRunOnce {
			r.log.Info("misfire: catch-up run", "task", taskID, "first_missed", m.first, "missed", m.count)
			r.runCatchUp(m.spec, catchUp{n: m.count, first: m.first, last: m.last}, id, nil)
			return
		}
		r.reports.add(misfireReport(r.node(), m, id))
	}()
}

// reopen puts back a window whose end could not be claimed, merged with any
// misfires recorded since.
func (r *runner) reopen(m *missed) {
	l := &r.misfires
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.tasks[m.spec.ID]; n != nil {
		n.first = m.first
		n.count += m.count
		return
	}
	l.tasks[m.spec.ID] = m
}

// misfireReport is the skipped run that stands for a window of misfires.
func misfireReport(node string, m *missed, id runID) protocol.RunReport {
	why := fmt.Sprintf("misfire: no master reachable to claim this fire (%s)", m.err)
	switch {
	case m.early && m.count > 1:
		why = fmt.Sprintf("misfire: the master refused the claims of %d fires from %s to %s as too early for its clock: this node's clock is ahead of the master's (%s)",
			m.count, m.first.Format(time.RFC3339), m.last.Format(time.RFC3339), m.err)
	case m.early:
		why = fmt.Sprintf("misfire: the master refused the claim of this fire as too early for its clock: this node's clock is ahead of the master's (%s)", m.err)
	case m.count > 1:
		why = fmt.Sprintf("misfire: no master reachable to claim %d fires from %s to %s (%s)",
			m.count, m.first.Format(time.RFC3339), m.last.Format(time.RFC3339), m.err)
	}
	q := &queuedFire{spec: m.spec, fire: m.first, id: id}
	return skippedReport(node, q, why)
}
