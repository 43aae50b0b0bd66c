package master

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// DefaultUnrunClaimMargin is how long past a claimed fire's timeout the
// leader waits for its winner's report before it records the fire as a
// misfire: reports are delivered within a second or two, and one that comes
// later still replaces the record.
const DefaultUnrunClaimMargin = 15 * time.Second

// Bounds of the unrun-claim watch: claims read per pass, and claims kept in
// memory while their deadline is ahead (past it the reading stops moving on,
// so memory stays bounded and nothing is skipped).
const (
	unrunClaimPage  = 1000
	unrunClaimWatch = 20_000
)

// unrunClaimLookback is how far back a new leader starts reading claims: the
// longest task timeout plus the margin, so that no claim decided under the
// previous leader goes unseen.
const unrunClaimLookback = protocol.MaxTimeout + time.Hour

// unrunClaims is the leader's watch over won claims whose winner never runs
// the fire: a node that claims fires and drops them (a bug, a worker that
// dies between the claim and the run without going offline, a node claiming
// on purpose) would otherwise make fires vanish with no record. Each claim
// names the id its winner's first report will carry; a claim whose run is
// still missing when the fire's timeout plus the margin has passed is
// recorded as a skipped run under that id, naming the node. A report that
// arrives after all replaces the record.
type unrunClaims struct {
	db     bun.IDB
	log    *slog.Logger
	events *eventLog
	margin time.Duration

	mu sync.Mutex
	// cursor: every claim up to it has been read.
	cursor store.ClaimCursor
	// watch: claims read whose run has not come yet, by run id.
	watch map[string]unrunClaim
}

type unrunClaim struct {
	claim store.UnreportedClaim
	due   time.Time
}

// reset forgets what was read: a master that leads again may have missed
// claims recorded by another leader meanwhile.
func (u *unrunClaims) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.cursor = store.ClaimCursor{}
	u.watch = nil
}

// pass reads the claims decided since the last pass and records those whose
// run did not come in time; it returns how many it recorded.
func (u *unrunClaims) pass(ctx context.Context, now time.Time) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.watch == nil {
		u.watch = map[string]unrunClaim{}
		u.cursor = store.ClaimCursor{FireAt: now.Add(-unrunClaimLookback)}
	}
	// Read new claims, a page at a time, while there is room to watch them.
	until := now.Add(-u.margin)
	for len(u.watch) < unrunClaimWatch {
		page, err := store.UnreportedClaims(ctx, u.db, u.cursor, until, unrunClaimPage)
		if err != nil {
			return 0, err
		}
		for _, c := range page {
			u.watch[c.RunID] = unrunClaim{claim: c, due: c.FireAt.Add(claimTimeout(c.Spec) + u.margin)}
			u.cursor = store.ClaimCursor{FireAt: c.FireAt, TaskID: c.TaskID}
		}
		if len(page) < unrunClaimPage {
			u.cursor = store.ClaimCursor{FireAt: until, TaskID: "\uffff"}
			break
		}
	}
	var due []string
	for id, w := range u.watch {
		if !w.due.After(now) {
			due = append(due, id)
		}
	}
	if len(due) == 0 {
		return 0, nil
	}
	found, err := store.RunsExist(ctx, u.db, due)
	if err != nil {
		return 0, err
	}
	var runs []store.Run
	for _, id := range due {
		w := u.watch[id]
		if found[id] {
			delete(u.watch, id)
			continue
		}
		still, err := store.ClaimStillUnreported(ctx, u.db, w.claim)
		if err != nil {
			return 0, err
		}
		if !still {
			delete(u.watch, id) // claimed again under another id, or reported since
			continue
		}
		runs = append(runs, unrunClaimRun(w.claim, w.due.Sub(w.claim.FireAt), now))
	}
	if len(runs) == 0 {
		return 0, nil
	}
	stored, err := store.InsertRuns(ctx, u.db, runs)
	if err != nil {
		return 0, fmt.Errorf("master: record unrun claims: %w", err)
	}
	for _, r := range runs {
		delete(u.watch, r.ID) // stored now, or reported meanwhile
	}
	for _, r := range stored {
		u.log.Warn("claimed fire not run: recorded as a misfire", "task", r.TaskID, "fire", r.ScheduledAt, "node", r.Node, "run", r.ID)
		u.events.record(WithActor(ctx, ActorScheduler), "task.misfire", store.TargetTask, r.TaskID, nil, r.Output)
	}
	return len(stored), nil
}

// claimTimeout is the timeout of the task whose definition is spec (the
// default when it cannot be read).
func claimTimeout(spec string) time.Duration {
	var def protocol.TaskDef
	if err := json.Unmarshal([]byte(spec), &def); err != nil || def.Timeout <= 0 {
		return protocol.DefaultTimeout
	}
	return time.Duration(def.Timeout)
}

// unrunClaimRun is the skipped run that stands for a claimed fire whose
// winner reported no run within waited.
func unrunClaimRun(c store.UnreportedClaim, waited time.Duration, now time.Time) store.Run {
	out := fmt.Sprintf("misfire: node %s won the claim of the fire at %s but reported no run for it within %s (the task's timeout plus a margin); no other executor ran it. A report that arrives later replaces this record.",
		c.Node, c.FireAt.Format(time.RFC3339), waited.Round(time.Second))
	return store.Run{ID: c.RunID, TaskID: c.TaskID, Node: c.Node, ScheduledAt: c.FireAt, StartedAt: now.UTC(), EndedAt: now.UTC(),
		Result: protocol.ResultSkipped, Attempt: store.UnrunClaimAttempt, Output: out}
}
