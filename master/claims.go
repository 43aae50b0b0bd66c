package master

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/uptrace/bun"
)

// claimPoll is how often a lower-ranked claimant looks for a better-ranked
// claim while it waits: short, so a loser learns the winner within a few
// milliseconds of its insert.
const claimPoll = 4 * time.Millisecond

// Bounds of a claim, so that a node holding the cluster key and its own
// secret cannot claim fires that are not due and so suppress them for the
// other executors: a claim names a fire its task's schedule really produces,
// at most MaxClaimAge behind the master's clock (a catch-up after a long
// outage) and not ahead of it by more than ClaimSkew plus what the master
// holds (ClaimHold): a node can hold no fire that is not about due.
const MaxClaimAge = 30 * 24 * time.Hour

// ClaimSkew is how early, by the master's clock, a fire may be decided: the
// clock skew between a worker and the master that costs nothing. Only the
// top-ranked executor wins that early; the others wait until the fire is due
// by the master's clock, plus their rank's grace. A claim of a fire further
// ahead is held by the master for up to ClaimHold (a worker whose clock runs
// a little fast) or refused as too early with the time to come back (the
// worker retries within its claim timeout); it is never decided early, so
// neither an early claimant nor a fast clock can take a fire from the
// executor ranked for it.
const ClaimSkew = 2 * time.Second

// ClaimHold is how long the master holds a claim that came too early before
// deciding it, rather than refusing it.
const ClaimHold = time.Second

// claimWriteWait bounds a claim's insert when its request has no deadline of
// its own.
const claimWriteWait = 10 * time.Second

// maxClaimWait caps a claimant's wait whatever its rank: well inside the
// worker's 5 s claim timeout, so a task with many executors, the best of
// them dead, still runs (ranks past the cap race, and the key decides).
const maxClaimWait = 2 * time.Second

// claimer decides the claims of fires: one winner per fire, by the ranking
// every master computes, among the executors of real fires only.
type claimer struct {
	db      bun.IDB
	log     *slog.Logger
	life    *lifecycle
	metrics *Metrics
	// grace is Config.ClaimGrace: how long a claimant ranked r waits, times
	// r, for a better-ranked one.
	grace time.Duration
}

// Claim decides a worker's claim of a fire (see claimer.claim).
func (m *Master) Claim(ctx context.Context, node *store.Node, req protocol.ClaimRequest) (protocol.ClaimResponse, error) {
	return m.claims.claim(ctx, node, req)
}

// claim decides whether node runs the given fire of a task. The decision lives
// in the database alone, so any master can answer any executor and two masters
// never disagree: the task's running executors are ranked by RankClaimants
// (the same pure function on every master); the top-ranked claimant inserts
// its claim at once, a claimant ranked r waits until the fire is due by the
// master's clock plus r x ClaimGrace for a better-ranked claim to appear and
// inserts itself only if none did. A fire is never decided more than
// ClaimSkew before its time. The
// primary key of the claims table makes the first insert the only winner, and
// the answer names it. An executor that is not running is never ranked, so a
// dead one never holds a fire; one that died undetected delays it by at most
// one grace per rank.
func (c *claimer) claim(ctx context.Context, node *store.Node, req protocol.ClaimRequest) (resp protocol.ClaimResponse, err error) {
	defer func(start time.Time) { c.metrics.claim(start, claimResult(resp), err) }(time.Now())
	if req.TaskID == "" || req.FireAt.IsZero() {
		return protocol.ClaimResponse{}, Errorf(KindInvalid, "task_id and fire_at are required")
	}
	if !isRunID(req.TaskID, maxTaskIDLen) {
		return protocol.ClaimResponse{}, Errorf(KindInvalid, "task_id must be 1-%d letters, digits, '.', '_', ':' or '-'", maxTaskIDLen)
	}
	if req.RunID != "" && !isRunID(req.RunID, maxRunIDLen) {
		return protocol.ClaimResponse{}, Errorf(KindInvalid, "run_id must be 1-%d letters, digits, '.', '_', ':' or '-'", maxRunIDLen)
	}
	// Counted as background work, so Stop waits for the claim's database
	// writes before the store closes.
	done, ok := c.life.track()
	if !ok {
		return protocol.ClaimResponse{}, Errorf(KindState, "the master is stopping")
	}
	defer done()
	fire := req.FireAt.UTC()
	t, err := store.GetTask(ctx, c.db, req.TaskID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return protocol.ClaimResponse{}, fmt.Errorf("master: claim: %w", err)
	}
	// Only an executor of the task may claim its fires (an unknown task has none).
	if t == nil || !slices.Contains(t.Members(), node.Name) {
		return protocol.ClaimResponse{}, c.refuseClaim(node.Name, req.TaskID, fire, Errorf(KindForbidden, "node %s does not execute task %s", node.Name, req.TaskID))
	}
	if err := c.checkClaimFire(ctx, node.Name, t, fire, time.Now()); err != nil {
		return protocol.ClaimResponse{}, c.refuseClaim(node.Name, t.ID, fire, err)
	}
	if err := c.holdEarly(ctx, fire); err != nil {
		return protocol.ClaimResponse{}, err
	}
	// A fire decided already (the winner's claim came first) is answered at once.
	held, err := store.GetFireClaim(ctx, c.db, t.ID, fire)
	if err != nil {
		return claimAnswer(node.Name, "", err)
	}
	if held != nil {
		if held.Node == node.Name && req.RunID != "" && held.RunID != req.RunID {
			// The winner claims its fire again under another run id: it
			// never heard that it won (so did not run it) and reports
			// the fire now under this one (a misfire record, a catch-up).
			err = store.SetClaimRun(ctx, c.db, t.ID, fire, node.Name, req.RunID)
		}
		return claimAnswer(node.Name, held.Node, err)
	}
	if t.Status != store.TaskRunning {
		return protocol.ClaimResponse{}, nil // paused or stopped: nobody runs this fire
	}
	running, err := store.RunningNodesNamed(ctx, c.db, t.Members())
	if err != nil {
		return protocol.ClaimResponse{}, fmt.Errorf("master: claim: %w", err)
	}
	cands := make([]Candidate, 0, len(running))
	for _, n := range running {
		if n.Type == store.TypeWorker {
			cands = append(cands, Candidate{Name: n.Name, Weight: n.Priority, Since: n.CreatedAt})
		}
	}
	route, err := c.claimRoute(ctx, t, fire)
	if err != nil {
		return protocol.ClaimResponse{}, fmt.Errorf("master: claim: %w", err)
	}
	rank := slices.IndexFunc(RankRoute(route, cands), func(c Candidate) bool { return c.Name == node.Name })
	if rank < 0 {
		return protocol.ClaimResponse{}, nil // not running here: it never wins a fire
	}
	if rank > 0 {
		// Ranked by the fire's time, not the request's: a lower-ranked
		// claimant that comes early (a fast clock, or a node claiming ahead
		// on purpose) still waits for the ranked one to claim at the fire's
		// time, plus its grace.
		deadline := laterOf(time.Now(), fire).Add(min(time.Duration(rank)*c.grace, maxClaimWait))
		if dl, ok := ctx.Deadline(); ok && deadline.After(dl.Add(-claimWriteReserve)) {
			// Past the request's deadline the ranks race, as past maxClaimWait.
			deadline = dl.Add(-claimWriteReserve)
		}
		winner, err := c.awaitClaim(ctx, t.ID, fire, deadline)
		if err != nil || winner != "" {
			return claimAnswer(node.Name, winner, err)
		}
	}
	// The write must not be torn by a request that goes away: it is short.
	// It keeps the request's deadline, though (the handlers' cluster
	// deadline), so that a hung database answers the claim in time.
	wait := claimWriteWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	wctx, cancel := c.life.detached(ctx, wait)
	defer cancel()
	winner, err := store.ClaimFire(wctx, c.db, t.ID, fire, node.Name, req.RunID)
	return claimAnswer(node.Name, winner, err)
}

// claimWriteReserve is what a claim keeps of its request's deadline for its
// insert after waiting for better-ranked claimants.
const claimWriteReserve = 300 * time.Millisecond

// holdEarly waits until fire is no more than ClaimSkew ahead of the master's
// clock; checkClaimFire refused what would need more than ClaimHold.
func (c *claimer) holdEarly(ctx context.Context, fire time.Time) error {
	wait := time.Until(fire.Add(-ClaimSkew))
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.life.ctx.Done():
		return Errorf(KindState, "the master is stopping")
	}
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// busyWindow is how far back least_busy routing counts a node's claims: the
// master does not know which runs are still going, so recent claims stand in.
const busyWindow = time.Minute

// claimRoute reads what the task's routing strategy ranks a fire by.
func (c *claimer) claimRoute(ctx context.Context, t *store.Task, fire time.Time) (Route, error) {
	var def protocol.TaskDef
	if err := json.Unmarshal([]byte(t.Spec), &def); err != nil {
		return Route{}, fmt.Errorf("task %s: stored definition: %w", t.ID, err)
	}
	r := Route{Strategy: def.Routing, TaskID: t.ID, Fire: fire}
	var err error
	switch def.Routing {
	case protocol.RoutingRoundRobin:
		r.Last, err = store.LastClaimWinner(ctx, c.db, t.ID, fire)
	case protocol.RoutingLeastBusy:
		r.Busy, err = store.ClaimCountsSince(ctx, c.db, time.Now().Add(-busyWindow))
	case protocol.RoutingHash:
		r.Key = def.Params[def.RoutingKey]
	}
	return r, err
}

// awaitClaim polls for the claim of a fire until deadline; "" means none came.
func (c *claimer) awaitClaim(ctx context.Context, taskID string, fire, deadline time.Time) (string, error) {
	tick := time.NewTicker(claimPoll)
	defer tick.Stop()
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return "", nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-c.life.ctx.Done():
			return "", Errorf(KindState, "the master is stopping")
		case <-tick.C:
		case <-time.After(left):
		}
		winner, err := store.FireClaimWinner(ctx, c.db, taskID, fire)
		if err != nil || winner != "" {
			return winner, err
		}
	}
}

func claimAnswer(node, winner string, err error) (protocol.ClaimResponse, error) {
	if err != nil {
		return protocol.ClaimResponse{}, fmt.Errorf("master: claim: %w", err)
	}
	return protocol.ClaimResponse{Won: winner == node, Winner: winner}, nil
}

// RankClaimants orders the candidates of one fire by weighted rendezvous
// hashing, best first: each gets the score -ln(u)/weight, u in (0, 1) from a
// hash of task id, fire time and node name, and the lowest score ranks first.
// The first place thus goes to a candidate with probability weight / total
// weight, independently per fire, and every master computes the same order
// with no shared state and no random source. Weight 0 (or less) scores +Inf:
// such a candidate ranks after every positive weight, so it runs a fire only
// when all of those failed to claim it within their grace (a standby), or
// when every candidate has weight 0 (then the order is uniform by hash).
func RankClaimants(taskID string, fire time.Time, cands []Candidate) []Candidate {
	type scored struct {
		c     Candidate
		score float64
		u     float64
	}
	fireKey := strconv.FormatInt(fire.UTC().UnixNano(), 10)
	s := make([]scored, len(cands))
	for i, c := range cands {
		u := rendezvousU(taskID, fireKey, c.Name)
		score := math.Inf(1)
		if c.Weight > 0 {
			score = -math.Log(u) / float64(c.Weight)
		}
		s[i] = scored{c: c, score: score, u: u}
	}
	slices.SortStableFunc(s, func(a, b scored) int {
		if a.score != b.score {
			if a.score < b.score {
				return -1
			}
			return 1
		}
		// Equal scores (weight 0): the hash alone orders them, then the name.
		if a.u != b.u {
			if a.u < b.u {
				return -1
			}
			return 1
		}
		if a.c.Name < b.c.Name {
			return -1
		}
		if a.c.Name > b.c.Name {
			return 1
		}
		return 0
	})
	out := make([]Candidate, len(s))
	for i := range s {
		out[i] = s[i].c
	}
	return out
}

// rendezvousU maps (task, fire, node) to a uniform number in (0, 1).
func rendezvousU(taskID, fireKey, node string) float64 {
	h := sha256.New()
	h.Write([]byte(taskID))
	h.Write([]byte{0})
	h.Write([]byte(fireKey))
	h.Write([]byte{0})
	h.Write([]byte(node))
	var sum [sha256.Size]byte
	x := binary.BigEndian.Uint64(h.Sum(sum[:0]))
	// 53 bits, shifted half a step off zero so -ln(u) is finite.
	return (float64(x>>11) + 0.5) / (1 << 53)
}

// refuseClaim logs a refused claim with the node and the reason and returns
// the refusal.
func (c *claimer) refuseClaim(node, taskID string, fire time.Time, err error) error {
	if KindOf(err) != 0 {
		c.log.Warn("claim refused", "node", node, "task", taskID, "fire_at", fire, "reason", Message(err))
	}
	return err
}

// checkClaimFire refuses a claim of a fire that is not a real, due fire of t
// (see ClaimSkew).
func (c *claimer) checkClaimFire(ctx context.Context, node string, t *store.Task, fire, now time.Time) error {
	if fire.Before(now.Add(-MaxClaimAge)) {
		return Errorf(KindInvalid, "fire_at %s is more than %s in the past", fire.Format(time.RFC3339Nano), MaxClaimAge)
	}
	if ahead := fire.Sub(now); ahead > ClaimSkew+ClaimHold {
		return &Error{Kind: KindTooEarly, RetryAfter: ahead - ClaimSkew,
			Msg: fmt.Sprintf("fire_at %s is %s ahead of the master's clock: a fire is claimed at its time, at most %s early (is this node's clock fast?)",
				fire.Format(time.RFC3339Nano), ahead.Round(time.Millisecond), ClaimSkew)}
	}
	var def protocol.TaskDef
	if err := json.Unmarshal([]byte(t.Spec), &def); err != nil {
		return fmt.Errorf("master: claim: task %s: %w", t.ID, err)
	}
	if plan, err := protocol.NewPlan(&def); err != nil || !plan.IsFire(fire) {
		return Errorf(KindInvalid, "fire_at %s is not a fire of task %s's schedule", fire.Format(time.RFC3339Nano), t.ID)
	}
	return nil
}
