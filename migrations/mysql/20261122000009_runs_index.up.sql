-- Runs across tasks (the Runs page and GET /api/v1/runs) filter by node, by
-- result, by task and result, always newest first: each filter reads its
-- index in started_at order and stops after a page.
CREATE INDEX idx_runs_node_started ON runs (node, started_at);
--bun:split
CREATE INDEX idx_runs_result_started ON runs (result, started_at);
--bun:split
CREATE INDEX idx_runs_task_result_started ON runs (task_id, result, started_at);
--bun:split
-- Health history of the nodes: the leader records one sample per node a
-- minute (and every failure), kept for a day.
CREATE TABLE node_health (
    id BIGINT AUTO_INCREMENT PRIMARY KEY,
    node VARCHAR(64) NOT NULL,
    at DATETIME(6) NOT NULL,
    latency_ms INT NOT NULL DEFAULT 0,
    ok BOOLEAN NOT NULL DEFAULT TRUE,
    reason VARCHAR(255) NOT NULL DEFAULT '',
    KEY idx_node_health_node_at (node, at),
    KEY idx_node_health_at (at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
