-- A project's delayed tasks of one topic (and status): the page in creation
-- order and its count (up to 10,000) read this index only. Without it
-- MariaDB counted a topic's pending tasks by fetching each row (540 ms for
-- 10,000). One node's tasks need nothing here: InnoDB's secondary indexes
-- hold the primary key, so both lookups of the node filter read indexes.
CREATE INDEX idx_delayed_tasks_project_topic ON delayed_tasks (project_id, topic, status, created_at, id);
