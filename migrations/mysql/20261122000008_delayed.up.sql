-- Delayed tasks: one-shot HTTP callbacks created by other applications.
-- next_at is when the leader looks at the item next: its fire time while
-- pending, its report deadline while running. pending_key is set while the
-- item is pending or running (a hash of source_app, topic, content_key) and
-- NULL once it is finished: the unique key makes creation idempotent without
-- a partial index, which MySQL lacks. claim marks the rows one fire batch won.
CREATE TABLE delayed_tasks (
    id VARCHAR(32) NOT NULL PRIMARY KEY,
    source_app VARCHAR(64) NOT NULL,
    topic VARCHAR(128) NOT NULL,
    content_key VARCHAR(255) NOT NULL,
    pending_key VARCHAR(64) NULL,
    status VARCHAR(16) NOT NULL,
    due_at DATETIME(6) NOT NULL,
    next_at DATETIME(6) NOT NULL,
    notify_url VARCHAR(2048) NOT NULL,
    notify_body MEDIUMTEXT NOT NULL,
    content_type VARCHAR(128) NOT NULL,
    retries INT NOT NULL DEFAULT 0,
    attempts INT NOT NULL DEFAULT 0,
    dispatches INT NOT NULL DEFAULT 0,
    executors TEXT NOT NULL,
    keepers TEXT NOT NULL,
    node VARCHAR(64) NOT NULL DEFAULT '',
    claim VARCHAR(32) NOT NULL DEFAULT '',
    late BOOLEAN NOT NULL DEFAULT FALSE,
    last_error VARCHAR(1000) NOT NULL DEFAULT '',
    created_by VARCHAR(64) NOT NULL DEFAULT '',
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    fired_at DATETIME(6) NULL,
    dispatched_at DATETIME(6) NULL,
    finished_at DATETIME(6) NULL,
    UNIQUE KEY uq_delayed_tasks_pending (pending_key),
    KEY idx_delayed_tasks_status_next (status, next_at),
    KEY idx_delayed_tasks_lookup (source_app, topic, content_key),
    KEY idx_delayed_tasks_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--bun:split
-- One row per sending of a delayed task to a worker: which node may report
-- the run of which sending (the report names the task <id>:<seq>).
CREATE TABLE delayed_dispatches (
    delayed_id VARCHAR(32) NOT NULL,
    seq INT NOT NULL,
    attempt INT NOT NULL,
    node VARCHAR(64) NOT NULL,
    boot_id VARCHAR(64) NOT NULL DEFAULT '',
    sent_at DATETIME(6) NOT NULL,
    outcome VARCHAR(16) NOT NULL DEFAULT '',
    PRIMARY KEY (delayed_id, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--bun:split
-- Runs of a delayed task name it here (task_id holds the same id); NULL for
-- the runs of tasks.
ALTER TABLE runs ADD COLUMN delayed_id VARCHAR(32) NULL, ADD KEY idx_runs_delayed (delayed_id, started_at);
