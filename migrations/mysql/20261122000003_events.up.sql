CREATE TABLE events (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at DATETIME(6) NOT NULL,
    actor VARCHAR(128) NOT NULL,
    action VARCHAR(64) NOT NULL,
    target_type VARCHAR(16) NOT NULL,
    target VARCHAR(255) NOT NULL DEFAULT '',
    outcome VARCHAR(8) NOT NULL,
    detail VARCHAR(1000) NOT NULL DEFAULT '',
    KEY idx_events_at (at),
    KEY idx_events_target (target_type, target)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
