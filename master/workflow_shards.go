package master

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// ShardRun is one run of a broadcast step: on which node, in which state,
// and the run of its task.
type ShardRun struct {
	Node      string     `json:"node"`
	State     string     `json:"state"`
	Run       string     `json:"run,omitempty"`
	Attempt   int        `json:"attempt,omitempty"`
	StartedAt *time.Time `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
}

// dispatchBroadcast sends a ready step of a broadcast task to every
// running executor: one shard each, created with the step's dispatch (one
// master does), then sent. A shard that cannot be sent fails; it reports
// true when the step ended so.
func (r *workflowRunner) dispatchBroadcast(ctx context.Context, run *store.WorkflowRun, def *WorkflowDef, s *WorkflowStep,
	steps []store.WorkflowStep, t *Task, nodes []*store.Node) bool {
	db := r.m.st.DB
	shards := make([]store.WorkflowShard, len(nodes))
	for i, n := range nodes {
		shards[i] = store.WorkflowShard{Node: n.Name, DispatchID: uuid.NewString(), TaskRun: ""}
	}
	var ok bool
	err := store.RetryTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		var err error
		ok, err = store.DispatchBroadcast(ctx, tx, run.ID, s.Name, shards)
		return err
	})
	if err != nil || !ok {
		if err != nil {
			r.log.Warn("broadcast step not dispatched", "run", run.ID, "step", s.Name, "err", err)
		}
		return false // another master sends it
	}
	ended := false
	for i, n := range nodes {
		err := r.send(ctx, run, def, s, steps, t, n, shards[i].DispatchID)
		var se *protocol.StatusError
		if err != nil && (errors.As(err, &se) || KindOf(err) == KindInvalid) {
			failed := &store.WorkflowStep{RunID: run.ID, Name: s.Name, State: store.StepFailed, Output: "not started: " + Message(err)}
			if err := r.recordShard(ctx, &store.Run{WorkflowRun: run.ID, WorkflowStep: s.Name, Node: n.Name}, failed); err != nil {
				r.log.Warn("shard not failed", "run", run.ID, "step", s.Name, "node", n.Name, "err", err)
			}
			ended = true
		} else if err != nil {
			r.log.Warn("shard sent with no answer; sent again to the same node later", "run", run.ID, "step", s.Name,
				"node", n.Name, "err", err)
		}
	}
	return ended
}

// recordShard moves the shard of run's node as st (the step's state as
// the run says) and, once every shard ended, ends the broadcast step:
// success when all succeeded, else failed, its output counting them.
func (r *workflowRunner) recordShard(ctx context.Context, run *store.Run, st *store.WorkflowStep) error {
	db := r.m.st.DB
	sh := &store.WorkflowShard{RunID: run.WorkflowRun, Step: run.WorkflowStep, Node: run.Node, State: st.State,
		TaskRun: run.ID, Attempt: run.Attempt, Output: st.Output, EndedAt: st.EndedAt}
	ok, err := store.SetShard(ctx, db, sh, store.StepDispatched, store.StepRunning)
	if err != nil || !ok {
		return err // no such shard (an ordinary step that ended), or it ended already
	}
	if !store.StepEnded(sh.State) {
		up := &store.WorkflowStep{RunID: run.WorkflowRun, Name: run.WorkflowStep, State: store.StepRunning}
		_, err := store.SetStep(ctx, db, up, store.StepDispatched)
		return err
	}
	shards, err := store.ShardsOf(ctx, db, run.WorkflowRun, run.WorkflowStep)
	if err != nil {
		return err
	}
	counts := map[string]int{}
	for _, x := range shards {
		if !store.StepEnded(x.State) {
			return nil // others still run
		}
		counts[x.State]++
	}
	state := store.StepSuccess
	if counts[store.StepSuccess] != len(shards) {
		state = store.StepFailed
	}
	var parts []string
	for _, k := range []string{store.StepSuccess, store.StepFailed, store.StepTimeout, store.StepKilled, store.StepLost} {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	end := &store.WorkflowStep{RunID: run.WorkflowRun, Name: run.WorkflowStep, State: state,
		Output: fmt.Sprintf("%d shards: %s", len(shards), strings.Join(parts, ", "))}
	_, err = store.SetStep(ctx, db, end, store.StepDispatched, store.StepRunning)
	return err
}

// reconcileShards brings a broadcast step's shards up to date with the
// database's runs; a shard sent but not reported for a while is sent again
// to its node, or lost when that node stopped.
func (r *workflowRunner) reconcileShards(ctx context.Context, run *store.WorkflowRun, def *WorkflowDef, st *store.WorkflowStep) error {
	db := r.m.st.DB
	shards, err := store.ShardsOf(ctx, db, run.ID, st.Name)
	if err != nil {
		return err
	}
	for _, sh := range shards {
		if store.StepEnded(sh.State) {
			continue
		}
		latest, err := store.LatestShardRun(ctx, db, run.ID, st.Name, sh.Node)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if sh.State == store.StepDispatched && time.Since(sh.UpdatedAt) > resendAfter {
				r.resendShard(ctx, run, def, st, &sh)
			}
			continue
		case err != nil:
			return err
		}
		if err := r.record(ctx, latest); err != nil {
			return err
		}
	}
	return nil
}

// resendShard sends a shard again to its node, which starts it only if the
// first sending did not arrive; a shard whose node stopped is lost.
func (r *workflowRunner) resendShard(ctx context.Context, run *store.WorkflowRun, def *WorkflowDef, st *store.WorkflowStep, sh *store.WorkflowShard) {
	db := r.m.st.DB
	s := def.step(st.Name)
	node, err := store.GetNode(ctx, db, sh.Node)
	if err != nil || node.Status != store.StatusRunning || s == nil {
		lost := &store.WorkflowStep{RunID: run.ID, Name: st.Name, State: store.StepLost,
			Output: fmt.Sprintf("lost: node %s stopped before the shard's run was reported", sh.Node)}
		if err := r.recordShard(ctx, &store.Run{WorkflowRun: run.ID, WorkflowStep: st.Name, Node: sh.Node}, lost); err != nil {
			r.log.Warn("shard not marked lost", "run", run.ID, "step", st.Name, "node", sh.Node, "err", err)
		}
		return
	}
	if err := r.sendAgain(ctx, run, def, s, st.TaskID, node, sh.DispatchID); err != nil {
		r.log.Warn("shard not sent again; tried again later", "run", run.ID, "step", st.Name, "node", sh.Node, "err", err)
		return
	}
	again := &store.WorkflowShard{RunID: run.ID, Step: st.Name, Node: sh.Node, State: store.StepDispatched}
	_, _ = store.SetShard(ctx, db, again, store.StepDispatched)
}

// stopShards kills a broadcast step's shards in progress and records them
// killed.
func (r *workflowRunner) stopShards(ctx context.Context, id, step, why string) {
	db := r.m.st.DB
	shards, err := store.ShardsOf(ctx, db, id, step)
	if err != nil {
		r.log.Warn("shards not stopped", "run", id, "step", step, "err", err)
		return
	}
	for _, sh := range shards {
		if store.StepEnded(sh.State) {
			continue
		}
		if n, err := store.GetNode(ctx, db, sh.Node); err == nil && sh.TaskRun != "" {
			kctx, cancel := context.WithTimeout(ctx, liveCallTimeout)
			if err := r.m.client.KillRun(kctx, n, sh.TaskRun, ActorFrom(ctx)); err != nil && !isRunNotInProgress(err) {
				r.log.Warn("shard's run not killed", "run", id, "step", step, "node", sh.Node, "err", err)
			}
			cancel()
		}
		killed := &store.WorkflowShard{RunID: id, Step: step, Node: sh.Node, State: store.StepKilled, Output: "killed: " + why}
		if _, err := store.SetShard(ctx, db, killed, store.StepDispatched, store.StepRunning); err != nil {
			r.log.Warn("shard not marked killed", "run", id, "step", step, "node", sh.Node, "err", err)
		}
	}
}
