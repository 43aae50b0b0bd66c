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
    id INTEGER PRIMARY KEY,
    node VARCHAR(64) NOT NULL,
    at TIMESTAMP NOT NULL,
    latency_ms INTEGER NOT NULL DEFAULT 0,
    ok BOOLEAN NOT NULL DEFAULT 1,
    reason VARCHAR(255) NOT NULL DEFAULT ''
);
--bun:split
CREATE INDEX idx_node_health_node_at ON node_health (node, at);
--bun:split
CREATE INDEX idx_node_health_at ON node_health (at);
