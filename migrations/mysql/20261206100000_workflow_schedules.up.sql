-- Workflow schedules: next_fire is the schedule's next fire the leader
-- starts a run for (NULL: manual only, or no fire left); the leader moves
-- it on by a conditional update in the transaction that creates the run,
-- so a fire starts one run whichever master does it. paused stops the
-- schedule (runs may still be started by hand).
ALTER TABLE workflows ADD COLUMN next_fire DATETIME(6) NULL;
--bun:split
ALTER TABLE workflows ADD COLUMN paused BOOLEAN NOT NULL DEFAULT FALSE;
--bun:split
CREATE INDEX idx_workflows_next_fire ON workflows (next_fire);
--bun:split
-- A run may wait (queued: the overlap policy queue, or a backfill's runs
-- beyond its concurrency) or be recorded skipped (overlap skip, a
-- misfire); note says why. backfill_id names the backfill that made it.
ALTER TABLE workflow_runs ADD COLUMN note VARCHAR(500) NOT NULL DEFAULT '';
--bun:split
ALTER TABLE workflow_runs ADD COLUMN backfill_id VARCHAR(36) NOT NULL DEFAULT '';
--bun:split
CREATE INDEX idx_workflow_runs_backfill ON workflow_runs (backfill_id, status);
--bun:split
-- A backfill: a workflow (or one task, as a one-step run) run for every
-- fire of its schedule in a past window, at most max_concurrent at once.
-- Its runs are made queued when it is created; the leader starts them.
CREATE TABLE backfills (
    id VARCHAR(36) NOT NULL PRIMARY KEY,
    project_id BIGINT NOT NULL,
    workflow_id VARCHAR(36) NOT NULL DEFAULT '',
    task_id VARCHAR(36) NOT NULL DEFAULT '',
    title VARCHAR(200) NOT NULL DEFAULT '',
    window_from DATETIME(6) NOT NULL,
    window_to DATETIME(6) NOT NULL,
    max_concurrent INTEGER NOT NULL,
    newest_first BOOLEAN NOT NULL DEFAULT FALSE,
    state VARCHAR(16) NOT NULL,
    total INTEGER NOT NULL,
    created_by VARCHAR(200) NOT NULL DEFAULT '',
    created_at DATETIME(6) NOT NULL,
    ended_at DATETIME(6) NULL,
    updated_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--bun:split
CREATE INDEX idx_backfills_state ON backfills (state);
--bun:split
-- A step whose run was lost with its worker is sent again, as many times
-- as its task's retries, to another node: redispatches counts the sends
-- again, avoid_nodes lists the nodes that lost it (",a,b,"), whose late
-- reports no longer move the step.
ALTER TABLE workflow_steps ADD COLUMN redispatches INTEGER NOT NULL DEFAULT 0;
--bun:split
ALTER TABLE workflow_steps ADD COLUMN avoid_nodes VARCHAR(1000) NOT NULL DEFAULT '';
--bun:split
-- The shards of a broadcast step: one run per running executor, each
-- recorded (its node, its run, its state); the step ends once all have.
CREATE TABLE workflow_shards (
    run_id VARCHAR(36) NOT NULL,
    step VARCHAR(64) NOT NULL,
    node VARCHAR(64) NOT NULL,
    state VARCHAR(16) NOT NULL,
    dispatch_id VARCHAR(36) NOT NULL,
    task_run VARCHAR(64) NOT NULL DEFAULT '',
    attempt INTEGER NOT NULL DEFAULT 0,
    output MEDIUMTEXT NOT NULL,
    started_at DATETIME(6) NULL,
    ended_at DATETIME(6) NULL,
    updated_at DATETIME(6) NOT NULL,
    PRIMARY KEY (run_id, step, node)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--bun:split
-- Every saved definition of a workflow, as task_versions keeps a task's:
-- history, what changed, restore.
CREATE TABLE workflow_versions (
    workflow_id VARCHAR(36) NOT NULL,
    version INTEGER NOT NULL,
    title VARCHAR(200) NOT NULL,
    definition MEDIUMTEXT NOT NULL,
    created_at DATETIME(6) NOT NULL,
    created_by VARCHAR(200) NOT NULL DEFAULT '',
    via VARCHAR(16) NOT NULL DEFAULT '',
    note VARCHAR(4000) NOT NULL DEFAULT '',
    PRIMARY KEY (workflow_id, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
