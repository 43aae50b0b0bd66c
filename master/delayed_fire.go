// Firing delayed tasks: only the leader does it. It keeps a timer to the
// earliest next_at in the database (re-armed by its own creations, and by a
// modest poll for other masters' ones), claims due tasks in batches with one
// conditional, fenced update per worker, sends them to workers concurrently,
// and gives up sendings whose run never came back (the worker died) so that
// another worker takes them. Every state is in the database: a restarted or
// new leader resumes where the last one stopped.

package master

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// sender runs the sendings of claimed tasks: each waits for its time, then
// joins its worker's batch (delayed_batch.go); a batch is one call in one of
// Concurrency slots. Outstanding bounds the claimed tasks not yet sent, so a
// flood of due tasks is claimed as fast as it is sent, yet far enough ahead
// (sendAhead batches of claims) that a burst due at one instant is claimed
// before it is due rather than while it is sent.
type sender struct {
	wg          sync.WaitGroup
	slots       chan struct{}
	outstanding chan struct{}
	batches     batches
}

// sendAhead is how many claim batches may wait to be sent.
const sendAhead = 32

// delayedLoop is the leader's duty for delayed tasks; every master runs it,
// and it acts only while its master leads.
func (svc *DelayedTasks) delayedLoop(ctx context.Context) {
	cfg := svc.delayedCfg()
	ctx = WithActor(ctx, ActorDelayed)
	snd := &sender{slots: make(chan struct{}, cfg.Concurrency), outstanding: make(chan struct{}, sendAhead*cfg.Batch)}
	defer snd.wg.Wait()
	poll := time.NewTicker(cfg.Poll)
	defer poll.Stop()
	timer := time.NewTimer(0)
	defer timer.Stop()
	var epoch int64
	var leaderSince, lastPrune time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-poll.C:
		case <-svc.delayedWake():
		}
		svc.armed.Store(0)
		fence := svc.lease.fence()
		if fence == nil {
			epoch = 0
			continue
		}
		if fence.Epoch != epoch {
			// A new leader waits before giving sendings up: their reports may
			// be on their way (workers keep them while no master answers).
			epoch, leaderSince = fence.Epoch, time.Now()
		}
		progress := svc.fireDue(ctx, cfg, fence, snd)
		reassignFrom := leaderSince.Add(cfg.ReportGrace)
		if !time.Now().Before(reassignFrom) {
			progress = svc.reassignOverdue(ctx, cfg, fence) || progress
		}
		if time.Since(lastPrune) >= time.Hour {
			lastPrune = time.Now()
			svc.pruneDelayed(ctx)
		}
		wake, ok, err := svc.nextDelayedWake(ctx, cfg, reassignFrom)
		if err != nil {
			if ctx.Err() == nil {
				svc.log.Error("delayed tasks: read the next due time", "err", err)
			}
			continue
		}
		wait := time.Until(wake)
		if wait <= 0 && !progress {
			// Due but nothing moved (the lease is being lost, the database
			// refuses): not again at once.
			wait = cfg.Resend
		}
		if ok && wait < cfg.Poll {
			svc.armed.Store(time.Now().Add(wait).UnixNano())
			timer.Reset(max(wait, 0))
		}
	}
}

// nextDelayedWake is when the loop has something to do next: claim the next
// pending task (a lookahead before its time), or look at the earliest
// report deadline (not before reassignFrom).
func (svc *DelayedTasks) nextDelayedWake(ctx context.Context, cfg DelayedConfig, reassignFrom time.Time) (time.Time, bool, error) {
	pending, pok, err := store.NextDelayedAt(ctx, svc.db, store.DelayedPending)
	if err != nil {
		return time.Time{}, false, err
	}
	running, rok, err := store.NextDelayedAt(ctx, svc.db, store.DelayedRunning)
	if err != nil {
		return time.Time{}, false, err
	}
	if rok && running.Before(reassignFrom) {
		running = reassignFrom
	}
	if pok {
		pending = pending.Add(-svc.crowdLookahead(ctx, cfg, pending))
	}
	switch {
	case pok && rok && running.Before(pending):
		return running, true, nil
	case pok:
		return pending, true, nil
	}
	return running, rok, nil
}

// maxCrowdLookahead bounds how early a crowd of tasks due together is
// claimed (a claimed task can no longer be cancelled).
const maxCrowdLookahead = 10 * time.Second

// defaultClaimCost is the claim time per task assumed before one is
// measured.
const defaultClaimCost = 100 * time.Microsecond

// crowdLookahead is how long before next (the earliest pending task's time)
// the loop starts claiming: the configured lookahead, or longer when more
// tasks are due soon after next than the lookahead leaves time to claim, at
// twice the measured cost of a claim (up to maxCrowdLookahead). Claims go
// a batch at a time while the sendings already claimed leave at their time,
// so 10,000 tasks due at one instant were claimed, on MariaDB, until seconds
// after it. The crowd is counted only when next is near.
func (svc *DelayedTasks) crowdLookahead(ctx context.Context, cfg DelayedConfig, next time.Time) time.Duration {
	la := cfg.Lookahead
	if time.Until(next) < cfg.Poll+maxCrowdLookahead {
		per := 2 * svc.claimCostNow()
		limit := int(maxCrowdLookahead/per) + 1
		n, err := store.CountDueDelayed(ctx, svc.db, next.Add(maxCrowdLookahead), limit)
		switch {
		case err != nil:
			svc.log.Warn("delayed tasks: count the tasks due soon; claiming them at the usual lookahead", "err", err)
		case time.Duration(n)*per > la:
			la = min(time.Duration(n)*per, maxCrowdLookahead)
		}
	}
	svc.lookahead.Store(int64(la))
	return la
}

// currentLookahead is the lookahead crowdLookahead last chose, or the
// configured one.
func (svc *DelayedTasks) currentLookahead(cfg DelayedConfig) time.Duration {
	return max(time.Duration(svc.lookahead.Load()), cfg.Lookahead)
}

// claimCostNow is the measured claim time per task, or the default.
func (svc *DelayedTasks) claimCostNow() time.Duration {
	if c := svc.claimCost.Load(); c > 0 {
		return time.Duration(c)
	}
	return defaultClaimCost
}

// measureClaim folds a claim of n tasks that took d into the average cost
// per task (a quarter weight for the newest).
func (svc *DelayedTasks) measureClaim(d time.Duration, n int) {
	per := int64(d) / int64(n)
	old := svc.claimCost.Load()
	if old > 0 {
		per = (3*old + per) / 4
	}
	svc.claimCost.Store(max(per, 1))
}

// fireDue claims and sends every task due within the lookahead, batch after
// batch while batches are full and move. It reports whether any task moved.
func (svc *DelayedTasks) fireDue(ctx context.Context, cfg DelayedConfig, fence *store.Fence, snd *sender) bool {
	progress := false
	for ctx.Err() == nil {
		due, claimed, deferred, err := svc.fireBatch(ctx, cfg, fence, snd)
		if err != nil {
			if ctx.Err() == nil {
				svc.log.Error("delayed tasks: fire", "err", err)
			}
			return progress
		}
		progress = progress || claimed > 0 || deferred > 0
		// Deferrals alone do not loop here: the next cycle takes the next
		// batch, so tasks that cannot be sent are looked at once per Resend.
		if due < cfg.Batch || claimed == 0 {
			return progress
		}
	}
	return progress
}

// sending is one claimed task on its way to a worker at its time; first
// says it was never sent before.
type sending struct {
	row   store.DelayedTask
	node  store.Node
	at    time.Time
	first bool
}

// fireBatch claims up to one batch of tasks due within the lookahead, each
// for a running worker picked by weight among its executors (any running
// worker when it names none), and has each sent at its time. It returns how
// many tasks were due, how many it claimed and how many it deferred for want
// of a running worker.
func (svc *DelayedTasks) fireBatch(ctx context.Context, cfg DelayedConfig, fence *store.Fence, snd *sender) (due, claimed, deferred int, err error) {
	now := time.Now()
	until := now.Add(svc.currentLookahead(cfg))
	rows, err := store.DueDelayed(ctx, svc.db, until, cfg.Batch)
	if err != nil || len(rows) == 0 {
		return 0, 0, 0, err
	}

	nodes, err := store.ListNodesByStatus(ctx, svc.db, store.StatusRunning)
	if err != nil {
		return 0, 0, 0, err
	}
	workers := map[string]store.Node{}
	var all []Candidate
	labels := map[string]protocol.Labels{}
	for _, n := range nodes {
		if n.Type == store.TypeWorker {
			workers[n.Name] = n
			all = append(all, Candidate{Name: n.Name, Weight: n.Priority, Since: n.CreatedAt})
			labels[n.Name] = NodeLabels(&n)
		}
	}
	sels := selectorSet{}
	groups := map[string][]string{}
	sendAt := map[string]time.Time{}
	first := map[string]bool{}
	stuck := map[string][]string{} // why → ids
	for _, d := range rows {
		cands := all
		var named []string
		if d.Executors != "" && d.Executors != "[]" {
			_ = json.Unmarshal([]byte(d.Executors), &named)
		}
		if len(named) > 0 || d.Selector != "" {
			// Its named executors and the running workers its selector
			// selects now.
			cands = nil
			for _, c := range all {
				if slices.Contains(named, c.Name) || (d.Selector != "" && sels.matches(d.Selector, labels[c.Name])) {
					cands = append(cands, c)
				}
			}
		}
		pick, ok := PickWeighted(cands, svc.cfg.RandN)
		if !ok {
			why := "no running worker to send it to"
			switch {
			case len(named) > 0 && d.Selector != "":
				why = "none of its executors (" + strings.Join(named, ", ") + ") is running and its selector " + d.Selector + " selects no running worker"
			case len(named) > 0:
				why = "none of its executors (" + strings.Join(named, ", ") + ") is running"
			case d.Selector != "":
				why = "its selector " + d.Selector + " selects no running worker"
			}
			stuck[why] = append(stuck[why], d.ID)
			continue
		}
		groups[pick.Name] = append(groups[pick.Name], d.ID)
		sendAt[d.ID], first[d.ID] = d.NextAt, d.FiredAt.IsZero()
	}
	for why, ids := range stuck {
		// Not lost: looked at again shortly, and marked late if it comes to that.
		n, err := store.DeferDelayed(ctx, svc.db, ids, now.Add(cfg.Resend), why, fence)
		if err != nil {
			return 0, 0, 0, err
		}
		deferred += n
		svc.log.Warn("delayed tasks due but not sendable; trying again shortly", "tasks", len(ids), "why", why, "in", cfg.Resend)
	}
	if len(groups) == 0 {
		return len(rows), 0, deferred, nil
	}
	claim := newClaimToken()
	deadline := until.Add(cfg.Timeout + cfg.ReportGrace)
	var won []store.DelayedTask
	unlock := svc.delayedWriteLock()
	err = svc.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var ids []string
		names := make([]string, 0, len(groups))
		for n := range groups {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if _, err := store.ClaimDelayed(ctx, tx, groups[n], n, claim, now, until, deadline, now.Add(-cfg.LateAfter), fence); err != nil {
				return err
			}
			ids = append(ids, groups[n]...)
		}
		var err error
		if won, err = store.ClaimedDelayed(ctx, tx, ids, claim); err != nil {
			return err
		}
		ds := make([]store.DelayedDispatch, len(won))
		for i, w := range won {
			ds[i] = store.DelayedDispatch{DelayedID: w.ID, Seq: w.Dispatches, Attempt: w.Attempts + 1, Node: w.Node,
				BootID: workers[w.Node].BootID, SentAt: now.UTC()}
		}
		return store.AddDelayedDispatches(ctx, tx, ds)
	})
	unlock()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("claim delayed tasks: %w", err)
	}
	if len(won) >= cfg.Batch/2 {
		// The claim's own cost, before any wait for the sendings.
		svc.measureClaim(time.Since(now), len(won))
	}
	sort.Slice(won, func(i, j int) bool { return sendAt[won[i].ID].Before(sendAt[won[j].ID]) })
	for i, w := range won {
		s := sending{row: w, node: workers[w.Node], at: sendAt[w.ID], first: first[w.ID]}
		select {
		case snd.outstanding <- struct{}{}:
		case <-ctx.Done():
			for _, rest := range won[i:] {
				svc.unclaim(ctx, sending{row: rest, at: sendAt[rest.ID], first: first[rest.ID]})
			}
			return len(rows), len(won), deferred, nil
		}
		snd.wg.Add(1)
		go func() {
			defer func() { <-snd.outstanding; snd.wg.Done() }()
			svc.sendAtItsTime(ctx, cfg, snd, s)
		}()
	}
	if len(won) > 0 {
		svc.log.Debug("delayed tasks claimed", "tasks", len(won))
	}
	return len(rows), len(won), deferred, nil
}

// sendAtItsTime waits for a claimed task's time, then sends it in its
// worker's batch. Stopped before that, it gives the task back untouched.
func (svc *DelayedTasks) sendAtItsTime(ctx context.Context, cfg DelayedConfig, snd *sender, s sending) {
	if wait := time.Until(s.at); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			svc.unclaim(ctx, s)
			return
		case <-t.C:
		}
	}
	if ctx.Err() != nil {
		svc.unclaim(ctx, s)
		return
	}
	svc.send(ctx, cfg, snd, s)
}

// unclaim gives a claimed task that was never sent back to pending as it
// was, when the master stops: the next leader sends it at its time instead
// of waiting for the report deadline.
func (svc *DelayedTasks) unclaim(ctx context.Context, s sending) {
	// It runs because ctx ended (Stop), so it must outlive ctx; it is bounded
	// to 5 s and runs in delayedLoop's goroutines, which Stop waits for.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	w := &s.row
	if fence := svc.lease.fence(); fence != nil {
		err := store.UnclaimDelayed(ctx, svc.db, w.ID, w.Dispatches, s.at, s.first, fence)
		if err == nil {
			err = store.SetDispatchOutcome(ctx, svc.db, w.ID, w.Dispatches, "unsent")
		}
		if err != nil && !errors.Is(err, store.ErrConflict) {
			svc.log.Error("delayed task: give an unsent task back", "delayed", w.ID, "err", err)
		}
	}
}

// inTx runs fn in a transaction, again when it failed only because of a
// concurrent one or a database node briefly unable to commit (store.RetryTx).
func (svc *DelayedTasks) inTx(ctx context.Context, fn func(context.Context, bun.Tx) error) error {
	return store.RetryTx(ctx, svc.db, fn)
}

func newClaimToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// send gives one claimed task to its worker. A worker that certainly did
// not take it (refused, or not reachable at all) gives the task back to
// pending at once, the same attempt, for another pick; when the outcome is
// unknown (no answer in time) the task waits for its run or its deadline,
// so that it is never sent twice for one sending that may have run.
func (svc *DelayedTasks) send(ctx context.Context, cfg DelayedConfig, snd *sender, s sending) {
	w := &s.row
	spec := delayedSpec(w, w.Dispatches, w.Attempts+1, cfg.Timeout, time.Now())
	err := svc.sendBatched(ctx, snd, s.node, spec)
	if err == nil {
		return
	}
	if errors.Is(err, errStoppedUnsent) {
		svc.unclaim(ctx, s) // it never left: the next leader sends it
		return
	}
	if ctx.Err() != nil || !notSent(err) {
		svc.log.Warn("delayed task: sending not confirmed; waiting for its run or its deadline", "delayed", w.ID, "node", w.Node, "err", err)
		return
	}
	why := "sending to node " + w.Node + " failed: " + Message(err)
	svc.log.Warn("delayed task not taken by its worker; another pick follows", "delayed", w.ID, "node", w.Node, "err", err)
	svc.giveBack(ctx, cfg, w, "refused", why, svc.lease.fence())
}

// notSent reports whether a failed sending certainly did not reach the
// worker's run: it answered with an error, or no connection was made.
func notSent(err error) bool {
	var se *protocol.StatusError
	var ce *protocol.CallError
	var oe *net.OpError
	switch {
	case errors.As(err, &se):
		return true
	case errors.As(err, &ce) && ce.Op == protocol.OpRequest:
		return true
	case errors.As(err, &ce) && ce.Op == protocol.OpSend && errors.As(err, &oe) && oe.Op == "dial":
		return true
	}
	return false
}

// giveBack returns a running task whose current sending did not run to
// pending (the same attempt), to be sent again shortly; past the sending
// bound it fails instead. It reports whether it changed the task.
func (svc *DelayedTasks) giveBack(ctx context.Context, cfg DelayedConfig, w *store.DelayedTask, outcome, why string, fence *store.Fence) bool {
	if fence == nil {
		return false // no longer the leader: the new one looks at it at its deadline
	}
	var err error
	if w.Dispatches >= MaxDelayedDispatches {
		err = store.FinishDelayed(ctx, svc.db, w.ID, w.Dispatches, w.Attempts, store.DelayedFailed,
			fmt.Sprintf("gave up after %d sendings; the last: %s", w.Dispatches, why), time.Now())
		if err == nil {
			svc.delayedFailed(ctx, w.ID, nil)
		}
	} else {
		err = store.RetryDelayed(ctx, svc.db, w.ID, w.Dispatches, w.Attempts, w.Attempts, time.Now().Add(cfg.Resend), why, fence)
	}
	if err != nil {
		if !errors.Is(err, store.ErrConflict) && ctx.Err() == nil {
			svc.log.Error("delayed task: give a sending back", "delayed", w.ID, "err", err)
		}
		return false // its run came meanwhile, or another leader took over
	}
	if err := store.SetDispatchOutcome(ctx, svc.db, w.ID, w.Dispatches, outcome); err != nil && ctx.Err() == nil {
		svc.log.Error("delayed task: record a sending's outcome", "delayed", w.ID, "err", err)
	}
	svc.pokeDelayed(time.Now().Add(cfg.Resend))
	return true
}

// reassignOverdue looks at the running tasks whose report deadline passed:
// one whose worker is gone (offline, disabled, deleted or restarted) or
// that waited longer than LostAfter goes back to pending for another worker,
// the same attempt; one whose worker still runs gets more time.
func (svc *DelayedTasks) reassignOverdue(ctx context.Context, cfg DelayedConfig, fence *store.Fence) (progress bool) {
	for ctx.Err() == nil {
		now := time.Now()
		over, err := store.OverdueDelayed(ctx, svc.db, now, cfg.Batch)
		if err != nil {
			if ctx.Err() == nil {
				svc.log.Error("delayed tasks: find overdue sendings", "err", err)
			}
			return progress
		}
		if len(over) == 0 {
			return progress
		}
		nodes, err := store.ListNodes(ctx, svc.db)
		if err != nil {
			svc.log.Error("delayed tasks: list nodes", "err", err)
			return progress
		}
		byName := map[string]store.Node{}
		for _, n := range nodes {
			byName[n.Name] = n
		}
		ids := make([]string, len(over))
		for i := range over {
			ids[i] = over[i].ID
		}
		sent, err := store.DispatchesOf(ctx, svc.db, "", ids)
		if err != nil {
			svc.log.Error("delayed tasks: read sendings", "err", err)
			return progress
		}
		for i := range over {
			o := &over[i]
			d := sent[o.ID][o.Dispatches]
			n, exists := byName[o.Node]
			var why string
			switch {
			case !exists:
				why = "node " + o.Node + " was deleted"
			case n.Status != store.StatusRunning:
				why = "node " + o.Node + " is " + n.Status.String()
			case d.BootID != "" && n.BootID != d.BootID:
				why = "node " + o.Node + " restarted"
			case now.Sub(o.DispatchedAt) >= cfg.LostAfter:
				why = "node " + o.Node + " runs but never reported"
			}
			if why == "" {
				next := o.DispatchedAt.Add(cfg.LostAfter)
				if later := now.Add(cfg.ReportGrace); later.Before(next) {
					next = later
				}
				err := store.ExtendDelayed(ctx, svc.db, o.ID, o.Dispatches, next, fence)
				if err == nil {
					progress = true
				} else if !errors.Is(err, store.ErrConflict) {
					svc.log.Error("delayed tasks: extend a sending's deadline", "delayed", o.ID, "err", err)
				}
				continue
			}
			why = fmt.Sprintf("%s and no run came back within %s of the sending; sent to another worker",
				why, now.Sub(o.DispatchedAt).Round(time.Second))
			if svc.giveBack(ctx, cfg, o, "lost", why, fence) {
				progress = true
				svc.log.Warn("delayed task reassigned", "delayed", o.ID, "node", o.Node, "why", why)
				svc.events.record(ctx, "delayed.reassign", store.TargetDelayed, o.ID, nil, why)
			}
		}
		if len(over) < cfg.Batch || !progress {
			return progress
		}
	}
	return progress
}

// pruneDelayed deletes finished delayed tasks older than the run retention.
func (svc *DelayedTasks) pruneDelayed(ctx context.Context) {
	days := svc.settings.inForce().RunRetentionDays
	if days <= 0 {
		return
	}
	cutoff := time.Now().AddDate(0, 0, -days)
	total := 0
	for ctx.Err() == nil {
		n, err := store.DeleteFinishedDelayedBefore(ctx, svc.db, cutoff, 1000)
		total += n
		if err != nil {
			svc.log.Error("delayed tasks: retention", "err", err)
			break
		}
		if n < 1000 {
			break
		}
	}
	if total > 0 {
		svc.log.Info("delayed tasks: old finished tasks deleted", "tasks", total, "older_than_days", days)
	}
}
