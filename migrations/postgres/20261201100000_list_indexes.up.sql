-- The console's and the API's lists read in their sort order and stop after
-- a page, whatever the estate's size: the task list newest first, the
-- delayed list newest first by status or by topic, the event log by actor.
CREATE INDEX idx_tasks_created ON tasks (created_at, id);
--bun:split
CREATE INDEX idx_delayed_tasks_status_created ON delayed_tasks (status, created_at, id);
--bun:split
CREATE INDEX idx_delayed_tasks_topic_created ON delayed_tasks (topic, created_at, id);
--bun:split
CREATE INDEX idx_events_actor_at ON events (actor, at);
