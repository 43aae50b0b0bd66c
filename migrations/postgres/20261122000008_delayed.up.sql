-- Delayed tasks: one-shot HTTP callbacks created by other applications.
-- next_at is when the leader looks at the item next: its fire time while
-- pending, its report deadline while running. pending_key is set while the
-- item is pending or running (a hash of source_app, topic, content_key) and
-- NULL once it is finished: the unique key makes creation idempotent the same
-- way as on MySQL, which lacks partial indexes. claim marks the rows one fire
-- batch won.
CREATE TABLE delayed_tasks (
    id VARCHAR(32) NOT NULL PRIMARY KEY,
    source_app VARCHAR(64) NOT NULL,
    topic VARCHAR(128) NOT NULL,
    content_key VARCHAR(255) NOT NULL,
    pending_key VARCHAR(64) NULL,
    status VARCHAR(16) NOT NULL,
    due_at TIMESTAMP(6) NOT NULL,
    next_at TIMESTAMP(6) NOT NULL,
    notify_url VARCHAR(2048) NOT NULL,
    notify_body TEXT NOT NULL,
    content_type VARCHAR(128) NOT NULL,
    retries INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    dispatches INTEGER NOT NULL DEFAULT 0,
    executors TEXT NOT NULL DEFAULT '[]',
    keepers TEXT NOT NULL DEFAULT '[]',
    node VARCHAR(64) NOT NULL DEFAULT '',
    claim VARCHAR(32) NOT NULL DEFAULT '',
    late BOOLEAN NOT NULL DEFAULT FALSE,
    last_error VARCHAR(1000) NOT NULL DEFAULT '',
    created_by VARCHAR(64) NOT NULL DEFAULT '',
    created_at TIMESTAMP(6) NOT NULL,
    updated_at TIMESTAMP(6) NOT NULL,
    fired_at TIMESTAMP(6) NULL,
    dispatched_at TIMESTAMP(6) NULL,
    finished_at TIMESTAMP(6) NULL,
    CONSTRAINT uq_delayed_tasks_pending UNIQUE (pending_key)
);
--bun:split
CREATE INDEX idx_delayed_tasks_status_next ON delayed_tasks (status, next_at);
--bun:split
CREATE INDEX idx_delayed_tasks_lookup ON delayed_tasks (source_app, topic, content_key);
--bun:split
CREATE INDEX idx_delayed_tasks_created ON delayed_tasks (created_at);
--bun:split
-- One row per sending of a delayed task to a worker: which node may report
-- the run of which sending (the report names the task <id>:<seq>).
CREATE TABLE delayed_dispatches (
    delayed_id VARCHAR(32) NOT NULL,
    seq INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    node VARCHAR(64) NOT NULL,
    boot_id VARCHAR(64) NOT NULL DEFAULT '',
    sent_at TIMESTAMP(6) NOT NULL,
    outcome VARCHAR(16) NOT NULL DEFAULT '',
    PRIMARY KEY (delayed_id, seq)
);
--bun:split
-- Runs of a delayed task name it here (task_id holds the same id); NULL for
-- the runs of tasks.
ALTER TABLE runs ADD COLUMN delayed_id VARCHAR(32) NULL;
--bun:split
CREATE INDEX idx_runs_delayed ON runs (delayed_id, started_at, id);
