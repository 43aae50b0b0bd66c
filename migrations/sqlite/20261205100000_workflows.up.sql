-- Workflows: tasks of one project joined into a DAG of named steps (the
-- definition, as JSON: steps, each naming a task and the steps it waits for
-- with a condition on each edge). A run of a workflow is a workflow_runs
-- row with a copy of the definition it runs, and one workflow_steps row per
-- step: the step's state moves only by conditional updates, so a step is
-- dispatched once whichever master does it.
CREATE TABLE workflows (
    id VARCHAR(36) NOT NULL PRIMARY KEY,
    project_id INTEGER NOT NULL,
    title VARCHAR(200) NOT NULL,
    wkey VARCHAR(100) NOT NULL DEFAULT '',
    definition TEXT NOT NULL,
    version INTEGER NOT NULL DEFAULT 1,
    created_by VARCHAR(200) NOT NULL DEFAULT '',
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
--bun:split
CREATE INDEX idx_workflows_project ON workflows (project_id, title);
--bun:split
CREATE TABLE workflow_runs (
    id VARCHAR(36) NOT NULL PRIMARY KEY,
    workflow_id VARCHAR(36) NOT NULL,
    project_id INTEGER NOT NULL,
    status VARCHAR(16) NOT NULL,
    logical_time TIMESTAMP NOT NULL,
    started_at TIMESTAMP NOT NULL,
    ended_at TIMESTAMP NULL,
    started_by VARCHAR(200) NOT NULL DEFAULT '',
    trigger_kind VARCHAR(16) NOT NULL DEFAULT '',
    definition TEXT NOT NULL,
    params TEXT NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
--bun:split
CREATE INDEX idx_workflow_runs_workflow ON workflow_runs (workflow_id, started_at);
--bun:split
CREATE INDEX idx_workflow_runs_status ON workflow_runs (status, updated_at);
--bun:split
CREATE TABLE workflow_steps (
    run_id VARCHAR(36) NOT NULL,
    name VARCHAR(64) NOT NULL,
    task_id VARCHAR(36) NOT NULL,
    state VARCHAR(16) NOT NULL,
    dispatch_id VARCHAR(36) NOT NULL DEFAULT '',
    task_run VARCHAR(64) NOT NULL DEFAULT '',
    node VARCHAR(64) NOT NULL DEFAULT '',
    attempt INTEGER NOT NULL DEFAULT 0,
    output TEXT NOT NULL,
    started_at TIMESTAMP NULL,
    ended_at TIMESTAMP NULL,
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, name)
);
--bun:split
-- The runs of workflow steps name their workflow run and step.
ALTER TABLE runs ADD COLUMN workflow_run VARCHAR(36) NOT NULL DEFAULT '';
--bun:split
ALTER TABLE runs ADD COLUMN workflow_step VARCHAR(64) NOT NULL DEFAULT '';
--bun:split
CREATE INDEX idx_runs_workflow ON runs (workflow_run, workflow_step);
