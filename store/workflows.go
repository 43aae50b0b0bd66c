package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Workflow is a workflow row: tasks of one project joined into a DAG of
// steps. Definition holds the engine's JSON of it (steps and edges), so the
// store does not depend on the engine's types.
type Workflow struct {
	bun.BaseModel `bun:"table:workflows"`

	ID         string `bun:"id,pk"`
	ProjectID  int64  `bun:"project_id"`
	Title      string `bun:"title"`
	Key        string `bun:"wkey"`
	Definition string `bun:"definition"`
	Version    int    `bun:"version"`
	// NextFire is the schedule's next fire (nil: manual only, or none
	// left); Paused stops the schedule.
	NextFire  *time.Time `bun:"next_fire"`
	Paused    bool       `bun:"paused"`
	CreatedBy string     `bun:"created_by"`
	CreatedAt time.Time  `bun:"created_at"`
	UpdatedAt time.Time  `bun:"updated_at"`
}

// Workflow run statuses.
const (
	WorkflowRunning   = "running"
	WorkflowSuccess   = "success"
	WorkflowFailed    = "failed"
	WorkflowCancelled = "cancelled"
	WorkflowTimeout   = "timeout"
	// WorkflowQueued is a run that waits to start: a fire queued behind a
	// run in progress (overlap queue), or a backfill's run beyond its
	// concurrency.
	WorkflowQueued = "queued"
	// WorkflowSkipped is a fire recorded without a run (overlap skip, a
	// misfire); its note says why.
	WorkflowSkipped = "skipped"
)

// WorkflowRun is one run of a workflow, with a copy of the definition it
// runs (a later edit does not change a run in progress) and its params.
type WorkflowRun struct {
	bun.BaseModel `bun:"table:workflow_runs"`

	ID          string    `bun:"id,pk"`
	WorkflowID  string    `bun:"workflow_id"`
	ProjectID   int64     `bun:"project_id"`
	Status      string    `bun:"status"`
	LogicalTime time.Time `bun:"logical_time"`
	StartedAt   time.Time `bun:"started_at"`
	EndedAt     time.Time `bun:"ended_at,nullzero"`
	StartedBy   string    `bun:"started_by"`
	// Trigger is what started it: manual, api, rerun, schedule or backfill.
	Trigger string `bun:"trigger_kind"`
	// RerunOf names the run this one runs again (its failed steps and
	// what follows them); empty for the others.
	RerunOf string `bun:"rerun_of"`
	// Note says why a run was skipped or queued.
	Note string `bun:"note"`
	// BackfillID names the backfill that made the run.
	BackfillID string    `bun:"backfill_id"`
	Definition string    `bun:"definition"`
	Params     string    `bun:"params"`
	UpdatedAt  time.Time `bun:"updated_at"`
}

// Workflow step states. A step is pending until its parents have ended;
// dispatched once a master has chosen the id of its run and sends it;
// running once its worker said it started; then it ends as its run did
// (success, failed, timeout, killed, lost), or skipped when it could not
// run (its conditions cannot hold, or the workflow run was cancelled).
const (
	StepPending    = "pending"
	StepDispatched = "dispatched"
	StepRunning    = "running"
	StepSuccess    = "success"
	StepFailed     = "failed"
	StepTimeout    = "timeout"
	StepKilled     = "killed"
	StepLost       = "lost"
	StepSkipped    = "skipped"
)

// StepEnded reports whether a step state is final.
func StepEnded(state string) bool {
	switch state {
	case StepPending, StepDispatched, StepRunning:
		return false
	}
	return true
}

// WorkflowStep is one step of a workflow run.
type WorkflowStep struct {
	bun.BaseModel `bun:"table:workflow_steps"`

	RunID  string `bun:"run_id,pk"`
	Name   string `bun:"name,pk"`
	TaskID string `bun:"task_id"`
	State  string `bun:"state"`
	// DispatchID is the id of the step's first run, chosen by the master
	// that dispatched it: sending it again never starts a second run.
	DispatchID string `bun:"dispatch_id"`
	// TaskRun is the id of the step's latest run (its last attempt).
	TaskRun string `bun:"task_run"`
	Node    string `bun:"node"`
	Attempt int    `bun:"attempt"`
	// Output is the end of the step's output (at most 4 KiB): what its
	// children may use.
	Output string `bun:"output"`
	// Redispatches counts the sends again after a run lost with its node;
	// AvoidNodes lists those nodes (",a,b,"): their late reports no longer
	// move the step, and it is not sent to them again.
	Redispatches int       `bun:"redispatches"`
	AvoidNodes   string    `bun:"avoid_nodes"`
	StartedAt    time.Time `bun:"started_at,nullzero"`
	EndedAt      time.Time `bun:"ended_at,nullzero"`
	UpdatedAt    time.Time `bun:"updated_at"`
}

// CreateWorkflow inserts a workflow.
func CreateWorkflow(ctx context.Context, db bun.IDB, w *Workflow) error {
	now := time.Now().UTC()
	w.CreatedAt, w.UpdatedAt = now, now
	w.NextFire = fireTimePtr(w.NextFire)
	if w.Version == 0 {
		w.Version = 1
	}
	if _, err := db.NewInsert().Model(w).Exec(ctx); err != nil {
		return fmt.Errorf("store: create workflow: %w", err)
	}
	return nil
}

// UpdateWorkflow saves w's title, key and definition as version w.Version,
// if its stored version is still from (ErrConflict otherwise).
func UpdateWorkflow(ctx context.Context, db bun.IDB, w *Workflow, from int) error {
	w.UpdatedAt = time.Now().UTC()
	w.NextFire = fireTimePtr(w.NextFire)
	res, err := db.NewUpdate().Model(w).Column("title", "wkey", "definition", "version", "next_fire", "updated_at").
		WherePK().Where("version = ?", from).Exec(ctx)
	if err := affected(res, err); err != nil {
		return fmt.Errorf("store: update workflow %s: %w", w.ID, err)
	}
	return nil
}

// GetWorkflow reads a workflow.
func GetWorkflow(ctx context.Context, db bun.IDB, id string) (*Workflow, error) {
	w := new(Workflow)
	if err := db.NewSelect().Model(w).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: workflow %s: %w", id, notFound(err))
	}
	return w, nil
}

// WorkflowWithKey reads the workflow of a project with a key.
func WorkflowWithKey(ctx context.Context, db bun.IDB, project int64, key string) (*Workflow, error) {
	w := new(Workflow)
	if err := db.NewSelect().Model(w).Column("id", "title").Where("project_id = ?", project).Where("wkey = ?", key).
		Limit(1).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: workflow with key %s: %w", key, notFound(err))
	}
	return w, nil
}

// ListWorkflows lists the workflows of the given projects (all when nil),
// by title, at most limit.
func ListWorkflows(ctx context.Context, db bun.IDB, projects []int64, limit int) ([]Workflow, error) {
	var out []Workflow
	q := db.NewSelect().Model(&out).OrderExpr("title, id").Limit(int64(limit))
	if projects != nil {
		if len(projects) == 0 {
			return nil, nil
		}
		q = q.Where("project_id IN (?)", bun.In(projects))
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: list workflows: %w", err)
	}
	return out, nil
}

// DeleteWorkflow deletes a workflow; its runs stay readable.
func DeleteWorkflow(ctx context.Context, db bun.IDB, id string) error {
	res, err := db.NewDelete().Model((*Workflow)(nil)).Where("id = ?", id).Exec(ctx)
	if err := affected(res, err); err != nil {
		return fmt.Errorf("store: delete workflow %s: %w", id, err)
	}
	return nil
}

// CreateWorkflowRun inserts a run and its steps (pending unless a state is
// given: a rerun's steps that succeeded before); run it in a transaction.
func CreateWorkflowRun(ctx context.Context, db bun.IDB, r *WorkflowRun, steps []WorkflowStep) error {
	now := time.Now().UTC()
	r.StartedAt, r.UpdatedAt = now, now
	if _, err := db.NewInsert().Model(r).Exec(ctx); err != nil {
		return fmt.Errorf("store: create workflow run: %w", err)
	}
	for i := range steps {
		steps[i].RunID, steps[i].UpdatedAt = r.ID, now
		if steps[i].State == "" {
			steps[i].State = StepPending
		}
	}
	for start := 0; start < len(steps); start += 200 {
		chunk := steps[start:min(start+200, len(steps))]
		if _, err := db.NewInsert().Model(&chunk).Exec(ctx); err != nil {
			return fmt.Errorf("store: create workflow steps: %w", err)
		}
	}
	return nil
}

// GetWorkflowRun reads a run and its steps, by name.
func GetWorkflowRun(ctx context.Context, db bun.IDB, id string) (*WorkflowRun, []WorkflowStep, error) {
	r := new(WorkflowRun)
	if err := db.NewSelect().Model(r).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, nil, fmt.Errorf("store: workflow run %s: %w", id, notFound(err))
	}
	var steps []WorkflowStep
	if err := db.NewSelect().Model(&steps).Where("run_id = ?", id).OrderExpr("name").Scan(ctx); err != nil {
		return nil, nil, fmt.Errorf("store: steps of workflow run %s: %w", id, err)
	}
	return r, steps, nil
}

// ListWorkflowRuns lists a workflow's runs, newest first, at most limit.
func ListWorkflowRuns(ctx context.Context, db bun.IDB, workflowID string, limit int) ([]WorkflowRun, error) {
	var out []WorkflowRun
	if err := db.NewSelect().Model(&out).ExcludeColumn("definition", "params").Where("workflow_id = ?", workflowID).
		OrderExpr("started_at DESC, id DESC").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: runs of workflow %s: %w", workflowID, err)
	}
	return out, nil
}

// WorkflowRunsIn lists the ids of runs in status, least recently updated
// first, at most limit: the runs a reconciling master looks at.
func WorkflowRunsIn(ctx context.Context, db bun.IDB, status string, limit int) ([]string, error) {
	var ids []string
	if err := db.NewSelect().Model((*WorkflowRun)(nil)).Column("id").Where("status = ?", status).
		OrderExpr("updated_at, id").Limit(int64(limit)).Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("store: workflow runs %s: %w", status, err)
	}
	return ids, nil
}

// DispatchStep moves a pending step to dispatched with the id its run will
// have and the node it goes to. False when another master dispatched or
// skipped it first.
func DispatchStep(ctx context.Context, db bun.IDB, runID, name, dispatchID, node string) (bool, error) {
	now := time.Now().UTC()
	res, err := db.NewUpdate().Model((*WorkflowStep)(nil)).
		Set("state = ?", StepDispatched).Set("dispatch_id = ?", dispatchID).Set("task_run = ?", dispatchID).Set("node = ?", node).
		Set("started_at = ?", now).Set("updated_at = ?", now).
		Where("run_id = ?", runID).Where("name = ?", name).Where("state = ?", StepPending).Exec(ctx)
	return changed(res, err, "dispatch step")
}

// SetStep moves a step from one of the states in from to state, with its
// run's id, node, attempt and output when given; false when it was in
// none of them (another master moved it first).
func SetStep(ctx context.Context, db bun.IDB, s *WorkflowStep, from ...string) (bool, error) {
	s.UpdatedAt = time.Now().UTC()
	cols := []string{"state", "updated_at"}
	if s.TaskRun != "" {
		cols = append(cols, "task_run", "node", "attempt")
	}
	if StepEnded(s.State) {
		cols = append(cols, "output", "ended_at")
		if s.EndedAt.IsZero() {
			s.EndedAt = s.UpdatedAt
		}
	}
	q := db.NewUpdate().Model(s).Column(cols...).WherePK().Where("state IN (?)", bun.In(from))
	if s.Node != "" {
		// A late report from a node that lost the step moves it no more,
		// and a shard's report moves its shard, not its broadcast step.
		q = q.Where("avoid_nodes NOT LIKE ? ESCAPE '!'", "%,"+likeEscape(s.Node)+",%").Where("node <> ?", BroadcastNode)
	}
	res, err := q.Exec(ctx)
	return changed(res, err, "set step")
}

// likeEscape escapes LIKE's wildcards (and its escape, '!') in s.
func likeEscape(s string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(s)
}

// AvoidList is the list of nodes of a step's AvoidNodes.
func AvoidList(avoid string) []string {
	var out []string
	for _, n := range strings.Split(avoid, ",") {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// GetStep reads one step of a workflow run.
func GetStep(ctx context.Context, db bun.IDB, runID, name string) (*WorkflowStep, error) {
	st := new(WorkflowStep)
	if err := db.NewSelect().Model(st).Where("run_id = ?", runID).Where("name = ?", name).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: step %s of %s: %w", name, runID, notFound(err))
	}
	return st, nil
}

// RequeueStep makes a step whose run node lost pending again, to be sent to
// another node: it counts the send again and adds node to the nodes it
// avoids. False when the step moved meanwhile (ended, or requeued by
// another master: st is the step as read).
func RequeueStep(ctx context.Context, db bun.IDB, st *WorkflowStep, node, why string) (bool, error) {
	avoid := st.AvoidNodes
	if avoid == "" {
		avoid = ","
	}
	if !strings.Contains(avoid, ","+node+",") {
		avoid += node + ","
	}
	now := time.Now().UTC()
	res, err := db.NewUpdate().Model((*WorkflowStep)(nil)).Set("state = ?", StepPending).
		Set("redispatches = ?", st.Redispatches+1).Set("avoid_nodes = ?", avoid).Set("dispatch_id = ''").
		Set("node = ''").Set("output = ?", why).Set("updated_at = ?", now).
		Where("run_id = ?", st.RunID).Where("name = ?", st.Name).Where("redispatches = ?", st.Redispatches).
		Where("state IN (?)", bun.In([]string{StepDispatched, StepRunning})).Exec(ctx)
	return changed(res, err, "requeue step")
}

// EndWorkflowRun sets a running run's final status (or, from the statuses
// in from when given, a queued one's); false when it was in none of them.
func EndWorkflowRun(ctx context.Context, db bun.IDB, id, status string, from ...string) (bool, error) {
	now := time.Now().UTC()
	if len(from) == 0 {
		from = []string{WorkflowRunning}
	}
	res, err := db.NewUpdate().Model((*WorkflowRun)(nil)).Set("status = ?", status).Set("ended_at = ?", now).
		Set("updated_at = ?", now).Where("id = ?", id).Where("status IN (?)", bun.In(from)).Exec(ctx)
	return changed(res, err, "end workflow run")
}

// TouchWorkflowRun marks a run as looked at now, so that reconciling goes
// round the runs in progress.
func TouchWorkflowRun(ctx context.Context, db bun.IDB, id string) error {
	if _, err := db.NewUpdate().Model((*WorkflowRun)(nil)).Set("updated_at = ?", time.Now().UTC()).
		Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("store: touch workflow run %s: %w", id, err)
	}
	return nil
}

// LatestStepRun is the latest run (last attempt) of a workflow run's step
// on a node it does not avoid, ErrNotFound when it has none yet.
func LatestStepRun(ctx context.Context, db bun.IDB, runID, step string, avoid []string) (*Run, error) {
	r := new(Run)
	q := db.NewSelect().Model(r).Where("workflow_run = ?", runID).Where("workflow_step = ?", step)
	if len(avoid) > 0 {
		q = q.Where("node NOT IN (?)", bun.In(avoid)) // runs of nodes that lost the step are past
	}
	if err := q.OrderExpr("attempt DESC, started_at DESC").Limit(1).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: run of step %s of %s: %w", step, runID, notFound(err))
	}
	return r, nil
}

// changed turns a conditional update's outcome into whether it changed a
// row.
func changed(res sql.Result, err error, what string) (bool, error) {
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return false, nil
		}
		return false, fmt.Errorf("store: %s: %w", what, err)
	}
	return true, nil
}
