-- Node and user names are unique case-insensitively (names are ASCII).
CREATE UNIQUE INDEX uq_nodes_name_ci ON nodes (lower(name));
--bun:split
CREATE UNIQUE INDEX uq_users_username_ci ON users (lower(username));
--bun:split
-- node_key: the hex Ed25519 public key a worker proved on its first
-- registration (trust on first use); empty until then or after Reset identity.
ALTER TABLE nodes ADD COLUMN node_key VARCHAR(128) NOT NULL DEFAULT '';
--bun:split
-- binary_output: the output held NUL or invalid UTF-8, made visible as U+FFFD.
ALTER TABLE runs ADD COLUMN binary_output BOOLEAN NOT NULL DEFAULT FALSE;
--bun:split
-- Server-side sessions, so logout, disable, password and role changes end them.
CREATE TABLE sessions (
    id VARCHAR(64) NOT NULL PRIMARY KEY,
    username VARCHAR(64) NOT NULL,
    created_at TIMESTAMP(6) NOT NULL,
    expires_at TIMESTAMP(6) NOT NULL
);
--bun:split
CREATE INDEX idx_sessions_username ON sessions (username);
--bun:split
-- run_grants: a node was sent a task to run once (run now, child runs), so
-- its reports of that task are accepted although it is not an executor.
CREATE TABLE run_grants (
    task_id VARCHAR(36) NOT NULL,
    node VARCHAR(64) NOT NULL,
    created_at TIMESTAMP(6) NOT NULL,
    PRIMARY KEY (task_id, node)
);
