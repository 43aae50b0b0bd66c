-- The claims by fire time: the leader reads the won claims whose winner
-- reported no run a page at a time in fire order (and the retention deletes
-- old claims by fire time), without scanning the whole table.
CREATE INDEX idx_locks_fire_at ON locks (fire_at, task_id);
