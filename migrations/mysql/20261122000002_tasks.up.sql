CREATE TABLE tasks (
    id VARCHAR(36) NOT NULL PRIMARY KEY,
    title VARCHAR(200) NOT NULL,
    type VARCHAR(16) NOT NULL,
    status INT NOT NULL DEFAULT 0,
    spec MEDIUMTEXT NOT NULL,
    keepers TEXT NOT NULL,
    children TEXT NOT NULL,
    last_run_at DATETIME(6) NULL,
    last_result VARCHAR(16) NOT NULL DEFAULT '',
    run_count BIGINT NOT NULL DEFAULT 0,
    created_by VARCHAR(64) NOT NULL DEFAULT '',
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    KEY idx_tasks_status (status)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--bun:split
CREATE TABLE task_executors (
    task_id VARCHAR(36) NOT NULL,
    node VARCHAR(64) NOT NULL,
    PRIMARY KEY (task_id, node),
    KEY idx_task_executors_node (node)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--bun:split
CREATE TABLE runs (
    id VARCHAR(64) NOT NULL PRIMARY KEY,
    task_id VARCHAR(36) NOT NULL,
    node VARCHAR(64) NOT NULL,
    scheduled_at DATETIME(6) NOT NULL,
    started_at DATETIME(6) NOT NULL,
    ended_at DATETIME(6) NOT NULL,
    duration_ms BIGINT NOT NULL DEFAULT 0,
    result VARCHAR(16) NOT NULL,
    attempt INT NOT NULL DEFAULT 1,
    http_status INT NOT NULL DEFAULT 0,
    exit_code INT NULL,
    output MEDIUMTEXT NOT NULL,
    manual BOOLEAN NOT NULL DEFAULT FALSE,
    created_at DATETIME(6) NOT NULL,
    KEY idx_runs_task_started (task_id, started_at),
    KEY idx_runs_started (started_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
