// Misfires of tasks with no running executor: the fires due while every
// executor of a running task was offline, disabled or gone ran nowhere. The
// master accounts for them by the task's misfire policy, so none is lost
// silently. (Fires an executor could not claim because no master answered
// are the worker's to record.)

package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// ActorScheduler names the master accounting for missed fires in the event log.
const ActorScheduler = "scheduler"

// maxMisfireCount bounds the fires counted for one window: beyond it the
// record says "at least".
const maxMisfireCount = 1_000_000

// misfireAccountant is the duty that accounts for the fires of tasks with no
// running executor (see account); mu serialises its passes in this process.
type misfireAccountant struct {
	db       bun.IDB
	identity string        // the master recording the skipped runs
	window   time.Duration // Config.MisfireWindow
	events   *eventLog
	log      *slog.Logger
	locks    *keyedMutex
	getTask  func(ctx context.Context, id string) (*Task, error)
	runOnce  func(ctx context.Context, t *Task, catchUp *protocol.CatchUp) ([]string, error)
	mu       sync.Mutex
}

// AccountMisfires runs one pass of the misfire duty now (see
// misfireAccountant.account): the leader runs it after every sweep, and any
// master right after it changes a node's status.
func (tk *Tasks) AccountMisfires(ctx context.Context) MisfireResult {
	return tk.m.misfires.account(ctx)
}

// MisfireResult counts what one AccountMisfires did.
type MisfireResult struct {
	Opened, Skipped, CaughtUp int
}

// account looks at the tasks with no running executor and at those
// whose outage it has not finished accounting for. A running task whose
// executors all stopped running gets an outage window, opened when the last
// of them stopped (tasks.misfire_accounted_until). Its fires are counted by
// the task's schedule (time zone, DST, start and end window included) and,
// by its misfire policy:
//
//   - skip (the default): one skipped run per window, scheduled at the first
//     missed fire, saying why with the count and the window. While the
//     outage lasts a window is recorded every Config.MisfireWindow, so a long
//     outage shows up; the rest when an executor runs again (or the task is
//     stopped or paused).
//   - run_once: one catch-up run, sent by the task's routing to a running
//     executor as soon as one runs again, and an event saying what it stands
//     for.
//
// Moving the window is a conditional update in the transaction that records
// the run, so two masters never account for one window twice. The leader runs
// it after every sweep, and any master right after it changes a node's status.
func (a *misfireAccountant) account(ctx context.Context) MisfireResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	var res MisfireResult
	rows, err := store.MisfireTasks(ctx, a.db, nil)
	if err != nil {
		a.log.Error("misfires: load tasks", "err", err)
		return res
	}
	// One line per pass for each condition, with a count and a few task
	// ids, however many tasks it concerns: when workers stop, thousands of
	// tasks lose their executors in the same pass.
	var opened, failed []string
	var firstErr error
	for i := range rows {
		if ctx.Err() != nil {
			break
		}
		before := res.Opened
		if err := a.accountTask(ctx, &rows[i], time.Now().UTC(), &res); err != nil && !errors.Is(err, store.ErrConflict) {
			failed = append(failed, rows[i].ID)
			if firstErr == nil {
				firstErr = err
			}
		}
		if res.Opened > before {
			opened = append(opened, rows[i].ID)
		}
	}
	if len(opened) > 0 {
		a.log.Warn("tasks have no running executor: their fires are missed until one runs",
			"tasks", len(opened), "sample", sampleIDs(opened))
	}
	if len(failed) > 0 {
		a.log.Error("misfires: account tasks", "tasks", len(failed), "sample", sampleIDs(failed), "first_err", firstErr)
	}
	return res
}

// logSample is how many ids a line about many tasks names.
const logSample = 5

// sampleIDs names the first logSample of ids, and how many more there are.
func sampleIDs(ids []string) string {
	if len(ids) <= logSample {
		return strings.Join(ids, ",")
	}
	return strings.Join(ids[:logSample], ",") + fmt.Sprintf(" and %d more", len(ids)-logSample)
}

// accountTask opens, records or closes one task's outage window.
func (a *misfireAccountant) accountTask(ctx context.Context, row *store.MisfireTask, now time.Time, res *MisfireResult) error {
	var def protocol.TaskDef
	if err := json.Unmarshal([]byte(row.Spec), &def); err != nil {
		return fmt.Errorf("stored definition: %w", err)
	}
	def.ID = row.ID
	running := row.Status == store.TaskRunning
	stranded := running && row.Running == 0
	from := row.AccountedUntil.Time
	if row.AccountedUntil.IsZero() {
		if !stranded {
			return nil
		}
		// The outage began when the last executor stopped running, or when the
		// task last changed status (a task resumed while stranded), whichever
		// is later; now for a task left with no executor at all (its last one
		// deleted: the deletion's own pass gets here). Whole seconds: fires
		// are, and every database keeps them.
		from = now
		if !row.StrandedSince.IsZero() {
			from = row.UpdatedAt
			if row.StrandedSince.Time.After(from) {
				from = row.StrandedSince.Time
			}
		}
		// The executor may have died before the master saw it go (its
		// down_since is its last good probe): fires after that with a run
		// record ran, so the window starts after the latest of them.
		if !row.LastFire.IsZero() && !row.LastFire.Time.Before(from) {
			from = row.LastFire.Time // Fires counts strictly after it
		}
		if from.After(now) {
			from = now
		}
		from = from.Truncate(time.Second)
		if err := store.OpenMisfireWindow(ctx, a.db, row.ID, from); err != nil {
			return err
		}
		res.Opened++ // logged once for the pass, by account
	}
	// The window ends now while the outage lasts, else when it ended: the
	// first executor running again, or the task stopped or paused.
	end := now
	if !running && row.UpdatedAt.Before(end) {
		end = row.UpdatedAt
	}
	if !stranded && running && !row.RunnableSince.IsZero() && row.RunnableSince.Time.Before(end) {
		end = row.RunnableSince.Time
	}
	if end.Before(from) {
		end = from
	}
	// A stored schedule that does not read is the zero Plan: no fires.
	plan, _ := protocol.NewPlan(&def)
	fc := plan.Fires(from, end, maxMisfireCount)
	n, first, last := fc.N, fc.First, fc.Last
	if stranded {
		if def.Misfire == protocol.MisfireRunOnce || n == 0 || now.Sub(from) < a.window {
			return nil
		}
		// A long outage: record this window, keep the outage open after it.
		next := last.Truncate(time.Second)
		if next.Before(last) {
			next = next.Add(time.Second)
		}
		if err := a.recordMisfires(ctx, row.ID, from, next, n, first, last, "no running executor (all offline, disabled or deleted)"); err != nil {
			return err
		}
		res.Skipped++
		return nil
	}
	// The outage is over.
	if n == 0 {
		return store.MoveMisfireWindow(ctx, a.db, row.ID, from, time.Time{})
	}
	if running && def.Misfire == protocol.MisfireRunOnce {
		if err := a.catchUp(ctx, row.ID, from, n, first, last); err != nil {
			return err
		}
		res.CaughtUp++
		return nil
	}
	why := "no running executor (all offline, disabled or deleted)"
	if !running {
		why += "; the task was " + row.Status.String() + " before a catch-up could run"
	}
	if err := a.recordMisfires(ctx, row.ID, from, time.Time{}, n, first, last, why); err != nil {
		return err
	}
	res.Skipped++
	return nil
}

// misfireText says which fires did not run and why.
func misfireText(n int, first, last time.Time, why string) string {
	count := fmt.Sprintf("%d fires", n)
	if n >= maxMisfireCount {
		count = fmt.Sprintf("at least %d fires", n)
	}
	if n == 1 {
		return fmt.Sprintf("misfire: the fire at %s did not run: %s", first.UTC().Format(time.RFC3339), why)
	}
	return fmt.Sprintf("misfire: %s from %s to %s did not run: %s", count,
		first.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339), why)
}

// recordMisfires records n missed fires as one skipped run, scheduled at the
// first, and moves the window from from to to (zero: closes it) in the same
// transaction: a window another master recorded meanwhile is not recorded
// again (ErrConflict).
func (a *misfireAccountant) recordMisfires(ctx context.Context, taskID string, from, to time.Time, n int, first, last time.Time, why string) error {
	now := time.Now().UTC()
	out := misfireText(n, first, last, why)
	run := store.Run{ID: uuid.NewString(), TaskID: taskID, Node: a.identity, ScheduledAt: first.UTC(),
		StartedAt: now, EndedAt: now, Result: protocol.ResultSkipped, Attempt: 1, Output: out}
	err := a.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := store.MoveMisfireWindow(ctx, tx, taskID, from, to); err != nil {
			return err
		}
		_, err := store.InsertRuns(ctx, tx, []store.Run{run})
		return err
	})
	if err != nil {
		return err
	}
	a.log.Warn("misfires recorded as a skipped run", "task", taskID, "fires", n, "first", first, "last", last)
	a.events.record(WithActor(ctx, ActorScheduler), "task.misfire", store.TargetTask, taskID, nil, out)
	return nil
}

// catchUp closes the window and sends the task to run once, by its routing.
// If the run cannot be sent the window is put back, so the next pass tries
// again.
func (a *misfireAccountant) catchUp(ctx context.Context, taskID string, from time.Time, n int, first, last time.Time) error {
	if err := store.MoveMisfireWindow(ctx, a.db, taskID, from, time.Time{}); err != nil {
		return err
	}
	detail := misfireText(n, first, last, "no running executor (all offline, disabled or deleted)")
	sent, err := func() ([]string, error) {
		defer a.locks.lock("task:" + taskID)()
		t, err := a.getTask(ctx, taskID)
		if err != nil {
			return nil, err
		}
		if t.Status != store.TaskRunning {
			return nil, Errorf(KindState, "task %s is %s; no catch-up run", taskID, t.Status)
		}
		return a.runOnce(ctx, t, &protocol.CatchUp{Fires: n, First: first.UTC(), Last: last.UTC()})
	}()
	if err != nil {
		if rerr := store.OpenMisfireWindow(ctx, a.db, taskID, from); rerr != nil && !errors.Is(rerr, store.ErrConflict) {
			a.log.Error("misfires: reopen the window after a failed catch-up", "task", taskID, "err", rerr)
		}
		// Logged, not an event: it is tried again at every pass until it works.
		return fmt.Errorf("catch-up run not sent, tried again at the next pass: %w", err)
	}
	a.log.Info("misfire: catch-up run sent", "task", taskID, "fires", n, "node", sent)
	a.events.record(WithActor(ctx, ActorScheduler), "task.misfire", store.TargetTask, taskID, nil,
		fmt.Sprintf("%s; one catch-up run sent to %s", detail, strings.Join(sent, ", ")))
	return nil
}
