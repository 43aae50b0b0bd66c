package views

// WorkflowsVM is the Workflows page: the workflows one may read.
type WorkflowsVM struct {
	Layout LayoutVM
	Flash  *Flash
	Items  []WorkflowRow
}

// WorkflowRow is one workflow in the list.
type WorkflowRow struct {
	ID, Title, Key, Project string
	Steps                   int
	Updated                 string
}

// WorkflowVM is one workflow's page: its steps, their graph and its runs.
type WorkflowVM struct {
	Layout  LayoutVM
	Flash   *Flash
	ID      string
	Title   string
	Key     string
	Project string
	Version int
	Steps   []WorkflowStepRow
	Graph   DAG
	Runs    []WorkflowRunRow
	// CanRun offers Run now (project operators).
	CanRun bool
}

// WorkflowStepRow is one step of a definition.
type WorkflowStepRow struct {
	Name      string
	TaskID    string
	TaskTitle string // "" when the task is gone
	// After lists what it waits for: "extract", "load (failure)".
	After []string
}

// WorkflowRunRow is one run in a workflow's list of runs.
type WorkflowRunRow struct {
	ID, Status, StartedAt, EndedAt, Trigger, StartedBy string
}

// WorkflowRunVM is one workflow run's page. Its live part polls LiveURL
// every second while the run is in progress.
type WorkflowRunVM struct {
	Layout      LayoutVM
	Flash       *Flash
	ID          string
	WorkflowID  string
	Title       string
	Status      string
	LogicalTime string
	StartedAt   string
	EndedAt     string
	StartedBy   string
	Trigger     string
	RerunOf     string
	Steps       []StepRunRow
	Graph       DAG
	InProgress  bool
	LiveURL     string
	// CanCancel and CanRerun offer Cancel (a run in progress) and Rerun
	// failed (an ended run that did not succeed) to project operators.
	CanCancel bool
	CanRerun  bool
}

// StepRunRow is one step of a workflow run.
type StepRunRow struct {
	Name, State, TaskID, Run, Node string
	Attempt                        int
	StartedAt, EndedAt             string
}
