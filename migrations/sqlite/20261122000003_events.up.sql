CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at TIMESTAMP NOT NULL,
    actor VARCHAR(128) NOT NULL,
    action VARCHAR(64) NOT NULL,
    target_type VARCHAR(16) NOT NULL,
    target VARCHAR(255) NOT NULL DEFAULT '',
    outcome VARCHAR(8) NOT NULL,
    detail VARCHAR(1000) NOT NULL DEFAULT ''
);
--bun:split
CREATE INDEX idx_events_at ON events (at);
--bun:split
CREATE INDEX idx_events_target ON events (target_type, target);
