package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun/dialect"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// workflowRunner moves workflow runs on: it sends each step whose parents
// have ended once (a conditional update picks the one master that sends
// it), records the steps' runs as their reports come, and ends the runs.
// Reports move a run on at once, on the master that stores them; the
// leader's reconcile pass, every second, catches up what no report says
// (a run lost with its worker, a master that died between choosing a
// step's run and sending it, a run's timeout).
type workflowRunner struct {
	m   *Master
	log *slog.Logger
	// reconciler runs reconcile every second.
	reconciler *periodic
	// stepSlots bounds the step reports being acted upon at once.
	stepSlots chan struct{}
	// passes counts the reconcile passes (one at a time: periodic).
	passes int
}

// How many workflow runs a master moves on at once as their steps' reports
// come: on SQLite a few (writes take turns, and each connection past the
// idle ones is opened anew, parsing the schema); on a database server more,
// as its round trips, not this process's CPU, bound the pace.
const (
	stepWorkersSQLite = 4
	stepWorkersServer = 24
)

func newWorkflowRunner(m *Master) *workflowRunner {
	workers := stepWorkersServer
	if m.st.DB.Dialect().Name() == dialect.SQLite {
		workers = stepWorkersSQLite
	}
	r := &workflowRunner{m: m, log: m.log, stepSlots: make(chan struct{}, workers)}
	r.reconciler = newPeriodic("workflow-reconcile", time.Second, time.Second, r.reconcilePass, m.log)
	return r
}

// reconcilePass is one pass of the reconcile duty, on the leader only.
func (r *workflowRunner) reconcilePass() {
	done, ok := r.m.life.track()
	if !ok {
		return
	}
	defer done()
	if !r.m.IsLeader() {
		return
	}
	ctx := WithActor(r.m.life.ctx, ActorScheduler)
	ids, err := store.WorkflowRunsIn(ctx, r.m.st.DB, store.WorkflowRunning, reconcileRuns)
	if err != nil {
		r.log.Warn("workflow runs not reconciled", "err", err)
		return
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		if err := r.reconcile(ctx, id); err != nil {
			r.log.Warn("workflow run not reconciled", "run", id, "err", err)
		}
	}
	// What waits is started when a run ends; this pass catches up what
	// that missed (a master that died between), every few seconds.
	if r.passes++; r.passes%promoteEvery == 0 {
		r.promotePass(ctx)
	}
}

// promoteEvery is how many reconcile passes (seconds) apart the leader
// looks for queued runs to start.
const promoteEvery = 5

// reconcile brings a run in progress up to date with what the database
// says of its steps' runs, then moves it on.
func (r *workflowRunner) reconcile(ctx context.Context, id string) error {
	db := r.m.st.DB
	run, steps, err := store.GetWorkflowRun(ctx, db, id)
	if err != nil {
		return err
	}
	if run.Status != store.WorkflowRunning {
		return nil
	}
	var def WorkflowDef
	if err := json.Unmarshal([]byte(run.Definition), &def); err != nil {
		return err
	}
	if t := time.Duration(def.Timeout); t > 0 && time.Since(run.StartedAt) > t {
		if ended, err := store.EndWorkflowRun(ctx, db, id, store.WorkflowTimeout); err != nil || !ended {
			return err
		}
		r.log.Info("workflow run timed out", "run", id, "timeout", t)
		r.stopSteps(ctx, id, fmt.Sprintf("the workflow run's timeout of %s passed", t))
		r.ended(ctx, run)
		return nil
	}
	for i := range steps {
		st := &steps[i]
		if st.State != store.StepDispatched && st.State != store.StepRunning {
			continue
		}
		if st.Node == store.BroadcastNode {
			if err := r.reconcileShards(ctx, run, &def, st); err != nil {
				return err
			}
			continue
		}
		latest, err := store.LatestStepRun(ctx, db, id, st.Name, store.AvoidList(st.AvoidNodes))
		switch {
		case errors.Is(err, store.ErrNotFound):
			if st.State == store.StepDispatched && time.Since(st.UpdatedAt) > resendAfter {
				r.resend(ctx, run, &def, st)
			}
			continue
		case err != nil:
			return err
		}
		if err := r.record(ctx, latest); err != nil {
			return err
		}
	}
	if err := store.TouchWorkflowRun(ctx, db, id); err != nil {
		return err
	}
	r.advance(ctx, id)
	return nil
}

// stepsReported records the stored runs of workflow steps of one batch
// and moves their workflow runs on: each workflow run once, after all its
// steps' reports of the batch (siblings that ended together start their
// common child in one pass), and a few workflow runs at a time across all
// batches, so that a burst of reports waits its turn instead of opening a
// database connection per step (each new SQLite connection parses the
// schema) or queueing hundreds of goroutines on the pool. The run ingest
// calls it after the commit.
func (r *workflowRunner) stepsReported(ctx context.Context, runs []store.Run) {
	groups := map[string][]store.Run{}
	var order []string
	for _, run := range runs {
		if _, seen := groups[run.WorkflowRun]; !seen {
			order = append(order, run.WorkflowRun)
		}
		groups[run.WorkflowRun] = append(groups[run.WorkflowRun], run)
	}
	var wg sync.WaitGroup
	for _, id := range order {
		select {
		case r.stepSlots <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return // the reconcile pass catches up
		}
		wg.Go(func() {
			defer func() { <-r.stepSlots }()
			r.stepsOfRunReported(ctx, id, groups[id])
		})
	}
	wg.Wait()
}

// stepsOfRunReported records the stored runs of steps of one workflow run
// and, when one ended, moves the workflow run on.
func (r *workflowRunner) stepsOfRunReported(ctx context.Context, id string, runs []store.Run) {
	ended := false
	for i := range runs {
		if err := r.record(ctx, &runs[i]); err != nil {
			r.log.Warn("workflow step's run not recorded; the reconcile pass will", "run", runs[i].ID, "workflow_run", id, "err", err)
			return
		}
		ended = ended || protocol.Result(runs[i].Result).Ended()
	}
	if ended {
		r.advance(ctx, id)
	}
}

// record moves a step as its run (an attempt) says: running while it runs
// or will be retried, else ended as it ended.
func (r *workflowRunner) record(ctx context.Context, run *store.Run) error {
	st := &store.WorkflowStep{RunID: run.WorkflowRun, Name: run.WorkflowStep, TaskRun: run.ID, Node: run.Node, Attempt: run.Attempt,
		State: store.StepRunning}
	res := protocol.Result(run.Result)
	if res == protocol.Result(store.ResultLost) {
		return r.lost(ctx, run.WorkflowRun, run.WorkflowStep, run.TaskID, run.Node, stepOutput(run.Output))
	}
	if res.Ended() {
		final := res.Succeeded() || res == protocol.ResultKilled || !res.Retryable()
		if !final {
			retries, err := r.retriesOf(ctx, run)
			if err != nil {
				return err
			}
			final = run.Attempt > retries
		}
		if final {
			st.State, st.Output, st.EndedAt = stepStateOf(res), stepOutput(run.Output), run.EndedAt
		}
	}
	ok, err := store.SetStep(ctx, r.m.st.DB, st, store.StepDispatched, store.StepRunning)
	if err != nil || ok {
		return err
	}
	// Not moved: the step ended already, or it is a broadcast step whose
	// shard this run is.
	return r.recordShard(ctx, run, st)
}

// lost records that node lost a step's run (its worker went offline or
// restarted during it, or before it was reported): the step is sent again
// to another node while its task has retries left, else it ends lost. A
// node that lost the step before says nothing new.
func (r *workflowRunner) lost(ctx context.Context, runID, name, taskID, node, output string) error {
	db := r.m.st.DB
	st, err := store.GetStep(ctx, db, runID, name)
	if err != nil {
		return err
	}
	if store.StepEnded(st.State) || st.State == store.StepPending || slices.Contains(store.AvoidList(st.AvoidNodes), node) {
		return nil
	}
	if st.Node == store.BroadcastNode {
		// A shard is not sent elsewhere: every executor runs its own.
		return r.recordShard(ctx, &store.Run{WorkflowRun: runID, WorkflowStep: name, Node: node},
			&store.WorkflowStep{RunID: runID, Name: name, State: store.StepLost, Output: output})
	}
	retries, err := r.retriesOf(ctx, &store.Run{TaskID: taskID})
	if err != nil {
		return err
	}
	if st.Redispatches < retries {
		why := fmt.Sprintf("node %s lost the step's run; sent again to another node (%d of %d retries)", node, st.Redispatches+1, retries)
		ok, err := store.RequeueStep(ctx, db, st, node, why)
		if ok {
			r.log.Info("workflow step lost with its node; sent again", "run", runID, "step", name, "node", node)
		}
		return err
	}
	final := &store.WorkflowStep{RunID: runID, Name: name, State: store.StepLost, Node: node, Output: output}
	_, err = store.SetStep(ctx, db, final, store.StepDispatched, store.StepRunning)
	return err
}

// retriesOf is how many retries the run's task has (0 for a task gone).
func (r *workflowRunner) retriesOf(ctx context.Context, run *store.Run) (int, error) {
	t, err := store.GetTask(ctx, r.m.st.DB, run.TaskID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	dt, err := decodeTask(t)
	if err != nil {
		return 0, err
	}
	return dt.Retries, nil
}

// stepStateOf is the final state of a step whose run ended as res; a run
// skipped (no slot for the whole timeout, the node stopping) failed the
// step.
func stepStateOf(res protocol.Result) string {
	switch res {
	case protocol.ResultSuccess:
		return store.StepSuccess
	case protocol.ResultTimeout:
		return store.StepTimeout
	case protocol.ResultKilled:
		return store.StepKilled
	case protocol.Result(store.ResultLost):
		return store.StepLost
	}
	return store.StepFailed
}

// stepOutput is the end of a run's output a step keeps for its children:
// at most maxStepOutput bytes, from a character boundary.
func stepOutput(out string) string { return out[tailStart(out, maxStepOutput):] }

// Readiness of a pending step.
const (
	stepWaits = iota
	stepReady
	stepNever
)

// readiness says whether a pending step runs now, waits, or never runs:
// each parent must have ended as its edge says (a skipped parent lets only
// an always edge through); one parent that ended otherwise is enough to
// know it never runs.
func readiness(s *WorkflowStep, states map[string]string) int {
	out := stepReady
	for _, e := range s.After {
		p := states[e.Step]
		if !store.StepEnded(p) {
			out = stepWaits
			continue
		}
		if !edgeHolds(e.On, p) {
			return stepNever
		}
	}
	return out
}

// edgeHolds reports whether a parent that ended in state lets its child
// through an edge on condition on.
func edgeHolds(on, state string) bool {
	switch on {
	case OnAlways:
		return true
	case OnFailure:
		return state != store.StepSuccess && state != store.StepSkipped
	}
	return state == store.StepSuccess
}

// advance moves a run on: it skips the pending steps that can never run,
// sends those whose parents have ended, and ends the run once every step
// has. Every change is conditional, so masters advancing the same run at
// once send each step once.
func (r *workflowRunner) advance(ctx context.Context, id string) {
	db := r.m.st.DB
	// A skip can make other steps ready or skipped: go round again, at
	// most once per step.
	for range MaxWorkflowSteps + 1 {
		run, steps, err := store.GetWorkflowRun(ctx, db, id)
		if err != nil {
			r.log.Warn("workflow run not moved on; the reconcile pass will", "run", id, "err", err)
			return
		}
		if run.Status != store.WorkflowRunning {
			return
		}
		var def WorkflowDef
		if err := json.Unmarshal([]byte(run.Definition), &def); err != nil {
			r.log.Error("workflow run's definition unreadable", "run", id, "err", err)
			return
		}
		states := make(map[string]string, len(steps))
		for _, st := range steps {
			states[st.Name] = st.State
		}
		changed, ended := false, true
		for i := range def.Steps {
			s := &def.Steps[i]
			if !store.StepEnded(states[s.Name]) {
				ended = false
			}
			if states[s.Name] != store.StepPending {
				continue
			}
			switch readiness(s, states) {
			case stepNever:
				skip := &store.WorkflowStep{RunID: id, Name: s.Name, State: store.StepSkipped,
					Output: "skipped: the conditions on its parents can no longer hold"}
				ok, err := store.SetStep(ctx, db, skip, store.StepPending)
				if err != nil {
					r.log.Warn("workflow step not skipped", "run", id, "step", s.Name, "err", err)
					return
				}
				changed = changed || ok
			case stepReady:
				// A step that could not be sent failed: its children may
				// be decided now.
				changed = r.dispatch(ctx, run, &def, s, steps) || changed
			}
		}
		if ended {
			r.finish(ctx, run, steps)
			return
		}
		if !changed {
			return
		}
	}
}

// finish ends a run whose steps have all ended: failed when one failed,
// timed out, was killed or lost, else success.
func (r *workflowRunner) finish(ctx context.Context, run *store.WorkflowRun, steps []store.WorkflowStep) {
	status := store.WorkflowSuccess
	for _, st := range steps {
		if st.State != store.StepSuccess && st.State != store.StepSkipped {
			status = store.WorkflowFailed
		}
	}
	ended, err := store.EndWorkflowRun(ctx, r.m.st.DB, run.ID, status)
	if err != nil {
		r.log.Warn("workflow run not ended; the reconcile pass will", "run", run.ID, "err", err)
		return
	}
	if ended {
		r.log.Info("workflow run ended", "run", run.ID, "workflow", run.WorkflowID, "status", status)
		r.m.events.record(withEventProject(ctx, run.ProjectID), "workflow.end", store.TargetWorkflow, run.WorkflowID, nil,
			fmt.Sprintf("run %s ended %s", run.ID, status))
		r.ended(ctx, run)
	}
}

// ended starts what waited for a run that just ended: the next run of its
// backfill, or the run queued behind it (overlap policy queue).
func (r *workflowRunner) ended(ctx context.Context, run *store.WorkflowRun) {
	switch {
	case run.BackfillID != "":
		r.promote(ctx, "", run.BackfillID)
	case run.WorkflowID != "" && strings.Contains(run.Definition, `"overlap":"queue"`):
		// The definition is the engine's own JSON: a queue policy reads so.
		r.promote(ctx, run.WorkflowID, "")
	}
}

// dispatch sends a ready step: it picks the node, makes the step
// dispatched with the id its run will have (only one master does), then
// sends the run. A step that cannot be sent (no node, the node refused
// it) fails, naming why, and dispatch reports true; a call whose outcome
// is unknown (no answer) leaves it dispatched, for the reconcile pass to
// send again to the same node, which starts it only once.
func (r *workflowRunner) dispatch(ctx context.Context, run *store.WorkflowRun, def *WorkflowDef, s *WorkflowStep, steps []store.WorkflowStep) bool {
	db := r.m.st.DB
	fail := func(why string, from string) bool {
		st := &store.WorkflowStep{RunID: run.ID, Name: s.Name, State: store.StepFailed, Output: "not started: " + why}
		ok, err := store.SetStep(ctx, db, st, from)
		if err != nil {
			r.log.Warn("workflow step not failed", "run", run.ID, "step", s.Name, "err", err)
		}
		return ok
	}
	var avoid []string
	for i := range steps {
		if steps[i].Name == s.Name {
			avoid = store.AvoidList(steps[i].AvoidNodes)
		}
	}
	t, nodes, err := r.pick(ctx, s.Task, avoid)
	if err != nil {
		return fail(Message(err), store.StepPending)
	}
	if t.Routing == protocol.RoutingBroadcast {
		return r.dispatchBroadcast(ctx, run, def, s, steps, t, nodes)
	}
	node := nodes[0]
	dispatchID := uuid.NewString()
	ok, err := store.DispatchStep(ctx, db, run.ID, s.Name, dispatchID, node.Name)
	if err != nil || !ok {
		if err != nil {
			r.log.Warn("workflow step not dispatched", "run", run.ID, "step", s.Name, "err", err)
		}
		return false // another master sends it
	}
	err = r.send(ctx, run, def, s, steps, t, node, dispatchID)
	var se *protocol.StatusError
	switch {
	case err == nil:
		return false
	case errors.As(err, &se) || KindOf(err) == KindInvalid:
		return fail(Message(err), store.StepDispatched) // this master's dispatch: no other sends it
	default:
		r.log.Warn("workflow step sent with no answer; sent again to the same node later", "run", run.ID, "step", s.Name,
			"node", node.Name, "err", err)
		return false
	}
}

// pick reads a step's task and picks the running node its run goes to
// (every running executor for a task with broadcast routing).
func (r *workflowRunner) pick(ctx context.Context, taskID string, avoid []string) (*Task, []*store.Node, error) {
	row, err := store.GetTask(ctx, r.m.st.DB, taskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, Errorf(KindNotFound, "task %s no longer exists", taskID)
	}
	if err != nil {
		return nil, nil, err
	}
	if row.Status == store.TaskDeleted {
		return nil, nil, Errorf(KindNotFound, "task %s was deleted", taskID)
	}
	t, err := decodeTask(row)
	if err != nil {
		return nil, nil, err
	}
	nodes, err := r.m.tasks.runningExecutors(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	// Nodes that lost this step's run before are not sent it again.
	nodes = slices.DeleteFunc(nodes, func(n store.Node) bool { return slices.Contains(avoid, n.Name) })
	picks, err := r.m.tasks.pickRunOnce(ctx, t, nodes)
	if err != nil {
		return nil, nil, err
	}
	if len(picks) == 0 {
		return nil, nil, Errorf(KindState, "no running worker for task %s (%s)", taskID, t.executorsText())
	}
	return t, picks, nil
}

// send sends a dispatched step's run to its node.
func (r *workflowRunner) send(ctx context.Context, run *store.WorkflowRun, def *WorkflowDef, s *WorkflowStep, steps []store.WorkflowStep,
	t *Task, node *store.Node, dispatchID string) error {
	params, err := r.stepParams(run, def, s, steps)
	if err != nil {
		return err
	}
	// The node's report of this run is accepted even if it stops being an
	// executor meanwhile.
	if err := store.AddRunGrant(ctx, r.m.st.DB, t.ID, node.Name); err != nil {
		return err
	}
	spec := t.specFor(node.Name, []string{node.Name})
	if s.Timeout > 0 {
		spec.Timeout = s.Timeout
	}
	ref := &protocol.WorkflowRef{Run: run.ID, Step: s.Name, RunID: dispatchID, Params: params}
	if err := r.m.client.TaskRunStep(ctx, node, spec, ref); err != nil {
		return err
	}
	r.log.Info("workflow step sent", "run", run.ID, "step", s.Name, "task", t.ID, "node", node.Name, "id", dispatchID)
	return nil
}

// resend sends a dispatched step again to the node it was sent to, which
// starts it only if the first sending did not arrive; a step whose node is
// no longer running is lost.
func (r *workflowRunner) resend(ctx context.Context, run *store.WorkflowRun, def *WorkflowDef, st *store.WorkflowStep) {
	s := def.step(st.Name)
	node, err := store.GetNode(ctx, r.m.st.DB, st.Node)
	if err != nil || node.Status != store.StatusRunning || s == nil {
		why := fmt.Sprintf("lost: node %s stopped before the step's run was reported", st.Node)
		if err := r.lost(ctx, run.ID, st.Name, st.TaskID, st.Node, why); err != nil {
			r.log.Warn("workflow step not marked lost", "run", run.ID, "step", st.Name, "err", err)
		}
		return
	}
	if err := r.sendAgain(ctx, run, def, s, st.TaskID, node, st.DispatchID); err != nil {
		r.log.Warn("workflow step not sent again; tried again later", "run", run.ID, "step", st.Name, "err", err)
		return
	}
	// Sent again: wait again before the next sending.
	again := &store.WorkflowStep{RunID: run.ID, Name: st.Name, State: store.StepDispatched}
	_, _ = store.SetStep(ctx, r.m.st.DB, again, store.StepDispatched)
}

// sendAgain sends a dispatched step's run (or a shard's) again to node,
// under the id it was first sent with, reading its task and the run's
// steps as they are now.
func (r *workflowRunner) sendAgain(ctx context.Context, run *store.WorkflowRun, def *WorkflowDef, s *WorkflowStep,
	taskID string, node *store.Node, dispatchID string) error {
	row, err := store.GetTask(ctx, r.m.st.DB, taskID)
	if err != nil {
		return err
	}
	t, err := decodeTask(row)
	if err != nil {
		return err
	}
	_, steps, err := store.GetWorkflowRun(ctx, r.m.st.DB, run.ID)
	if err != nil {
		return err
	}
	return r.send(ctx, run, def, s, steps, t, node, dispatchID)
}

// stepParams are the params a step's run gets on top of its task's: the
// workflow's (run) params, the step's own with its parents' results put
// in, and WORKFLOW_TIME and WORKFLOW_RUN_ID.
func (r *workflowRunner) stepParams(run *store.WorkflowRun, def *WorkflowDef, s *WorkflowStep, steps []store.WorkflowStep) (map[string]string, error) {
	out := map[string]string{}
	if run.Params != "" {
		if err := json.Unmarshal([]byte(run.Params), &out); err != nil {
			return nil, fmt.Errorf("master: workflow run %s: params: %w", run.ID, err)
		}
	}
	outputs := make(map[string]string, len(steps))
	for _, st := range steps {
		outputs[st.Name] = st.Output
	}
	for k, v := range s.Params {
		expanded, err := expandStepRefs(v, s, outputs)
		if err != nil {
			return nil, err
		}
		out[k] = expanded
	}
	loc, err := protocol.LoadTimezone(def.Timezone)
	if err != nil {
		loc = time.UTC // a zone that went away since the save: say the time in UTC
	}
	out["WORKFLOW_TIME"] = run.LogicalTime.In(loc).Format(time.RFC3339)
	out["WORKFLOW_RUN_ID"] = run.ID
	return out, nil
}

// expandStepRefs puts a step's parents' results into a param value:
// {{steps.NAME.output}} is the last line of the parent's output,
// {{steps.NAME.json.FIELD}} a field of its output read as a JSON object.
// Only parents may be named; a value is bounded to 4 KiB.
func expandStepRefs(v string, s *WorkflowStep, outputs map[string]string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(v, "{{steps.")
		if i < 0 {
			b.WriteString(v)
			break
		}
		j := strings.Index(v[i:], "}}")
		if j < 0 {
			b.WriteString(v)
			break
		}
		b.WriteString(v[:i])
		ref := v[i+len("{{steps.") : i+j]
		v = v[i+j+2:]
		name, what, _ := strings.Cut(ref, ".")
		parent := false
		for _, e := range s.After {
			parent = parent || e.Step == name
		}
		if !parent {
			return "", Errorf(KindInvalid, "step %s: {{steps.%s}} names no parent of it", s.Name, ref)
		}
		out := outputs[name]
		switch {
		case what == "output":
			out = strings.TrimRight(out, "\r\n")
			if k := strings.LastIndexByte(out, '\n'); k >= 0 {
				out = out[k+1:]
			}
			b.WriteString(out)
		case strings.HasPrefix(what, "json."):
			var obj map[string]any
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &obj); err != nil {
				return "", Errorf(KindInvalid, "step %s: the output of step %s is not a JSON object", s.Name, name)
			}
			field, ok := obj[strings.TrimPrefix(what, "json.")]
			if !ok {
				return "", Errorf(KindInvalid, "step %s: the output of step %s has no field %q", s.Name, name, strings.TrimPrefix(what, "json."))
			}
			if str, isStr := field.(string); isStr {
				b.WriteString(str)
			} else {
				js, _ := json.Marshal(field)
				b.Write(js)
			}
		default:
			return "", Errorf(KindInvalid, "step %s: {{steps.%s}}: use {{steps.NAME.output}} or {{steps.NAME.json.FIELD}}", s.Name, ref)
		}
		if b.Len() > maxStepOutput {
			return "", Errorf(KindInvalid, "step %s: a param is longer than %d bytes with its parents' results", s.Name, maxStepOutput)
		}
	}
	return b.String(), nil
}

// stopSteps ends the steps of a run that ended early (cancelled, timed
// out): those not sent are skipped, those in progress killed on their node.
func (r *workflowRunner) stopSteps(ctx context.Context, id, why string) {
	db := r.m.st.DB
	_, steps, err := store.GetWorkflowRun(ctx, db, id)
	if err != nil {
		r.log.Warn("workflow steps not stopped", "run", id, "err", err)
		return
	}
	for i := range steps {
		st := &steps[i]
		switch st.State {
		case store.StepPending:
			skip := &store.WorkflowStep{RunID: id, Name: st.Name, State: store.StepSkipped, Output: "skipped: " + why}
			if _, err := store.SetStep(ctx, db, skip, store.StepPending); err != nil {
				r.log.Warn("workflow step not skipped", "run", id, "step", st.Name, "err", err)
			}
		case store.StepDispatched, store.StepRunning:
			if st.Node == store.BroadcastNode {
				r.stopShards(ctx, id, st.Name, why)
			}
			if n, err := store.GetNode(ctx, db, st.Node); err == nil && st.TaskRun != "" {
				kctx, cancel := context.WithTimeout(ctx, liveCallTimeout)
				if err := r.m.client.KillRun(kctx, n, st.TaskRun, ActorFrom(ctx)); err != nil && !isRunNotInProgress(err) {
					r.log.Warn("workflow step's run not killed", "run", id, "step", st.Name, "task_run", st.TaskRun, "err", err)
				}
				cancel()
			}
			killed := &store.WorkflowStep{RunID: id, Name: st.Name, State: store.StepKilled, Output: "killed: " + why}
			if _, err := store.SetStep(ctx, db, killed, store.StepDispatched, store.StepRunning); err != nil {
				r.log.Warn("workflow step not marked killed", "run", id, "step", st.Name, "err", err)
			}
		}
	}
}
