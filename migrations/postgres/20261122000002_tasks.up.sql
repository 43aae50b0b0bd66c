CREATE TABLE tasks (
    id VARCHAR(36) NOT NULL PRIMARY KEY,
    title VARCHAR(200) NOT NULL,
    type VARCHAR(16) NOT NULL,
    status INTEGER NOT NULL DEFAULT 0,
    spec TEXT NOT NULL,
    keepers TEXT NOT NULL DEFAULT '[]',
    children TEXT NOT NULL DEFAULT '[]',
    last_run_at TIMESTAMP(6) NULL,
    last_result VARCHAR(16) NOT NULL DEFAULT '',
    run_count BIGINT NOT NULL DEFAULT 0,
    created_by VARCHAR(64) NOT NULL DEFAULT '',
    created_at TIMESTAMP(6) NOT NULL,
    updated_at TIMESTAMP(6) NOT NULL
);
--bun:split
CREATE INDEX idx_tasks_status ON tasks (status);
--bun:split
CREATE TABLE task_executors (
    task_id VARCHAR(36) NOT NULL,
    node VARCHAR(64) NOT NULL,
    PRIMARY KEY (task_id, node)
);
--bun:split
CREATE INDEX idx_task_executors_node ON task_executors (node);
--bun:split
CREATE TABLE runs (
    id VARCHAR(64) NOT NULL PRIMARY KEY,
    task_id VARCHAR(36) NOT NULL,
    node VARCHAR(64) NOT NULL,
    scheduled_at TIMESTAMP(6) NOT NULL,
    started_at TIMESTAMP(6) NOT NULL,
    ended_at TIMESTAMP(6) NOT NULL,
    duration_ms BIGINT NOT NULL DEFAULT 0,
    result VARCHAR(16) NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    http_status INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER NULL,
    output TEXT NOT NULL,
    manual BOOLEAN NOT NULL DEFAULT FALSE,
    created_at TIMESTAMP(6) NOT NULL
);
--bun:split
-- The runs indexes end with id: pages are ordered by started_at, then id,
-- which InnoDB's secondary indexes hold implicitly and PostgreSQL's do not.
CREATE INDEX idx_runs_task_started ON runs (task_id, started_at, id);
--bun:split
CREATE INDEX idx_runs_started ON runs (started_at, id);
