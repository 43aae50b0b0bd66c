CREATE TABLE nodes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name VARCHAR(64) NOT NULL UNIQUE,
    type VARCHAR(16) NOT NULL DEFAULT 'worker',
    machine_name VARCHAR(255) NOT NULL DEFAULT '',
    protocol VARCHAR(8) NOT NULL DEFAULT 'http',
    host VARCHAR(255) NOT NULL,
    secret VARCHAR(128) NOT NULL DEFAULT '',
    status INTEGER NOT NULL DEFAULT 0,
    desired_status INTEGER NOT NULL DEFAULT 0,
    priority INTEGER NOT NULL DEFAULT 1,
    max_concurrency INTEGER NOT NULL DEFAULT 0,
    last_seen TIMESTAMP NULL,
    failures INTEGER NOT NULL DEFAULT 0,
    boot_id VARCHAR(64) NOT NULL DEFAULT '',
    mode VARCHAR(16) NOT NULL DEFAULT 'manual',
    reason VARCHAR(512) NOT NULL DEFAULT '',
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
--bun:split
CREATE INDEX idx_nodes_status ON nodes (status);
--bun:split
CREATE TABLE users (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    username VARCHAR(64) NOT NULL UNIQUE,
    password_hash VARCHAR(255) NOT NULL,
    role VARCHAR(16) NOT NULL DEFAULT 'admin',
    disabled BOOLEAN NOT NULL DEFAULT 0,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
--bun:split
CREATE TABLE settings (
    name VARCHAR(64) PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
--bun:split
CREATE TABLE api_tokens (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name VARCHAR(64) NOT NULL,
    token_hash VARCHAR(64) NOT NULL UNIQUE,
    created_by VARCHAR(64) NOT NULL,
    created_at TIMESTAMP NOT NULL,
    last_used_at TIMESTAMP NULL,
    revoked_at TIMESTAMP NULL
);
--bun:split
CREATE TABLE locks (
    task_id VARCHAR(64) NOT NULL,
    fire_at TIMESTAMP NOT NULL,
    node VARCHAR(64) NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (task_id, fire_at)
);
--bun:split
CREATE INDEX idx_locks_node ON locks (node);
