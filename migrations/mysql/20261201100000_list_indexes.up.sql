-- The console's and the API's lists read in their sort order and stop after
-- a page, whatever the estate's size, and count (up to 10,000) from the same
-- index without reading the rows (a title search reads the index only):
-- tasks newest first, of a project or of every one, or of one status;
-- delayed tasks newest first, of a project, by status or by topic (ties of
-- one creation instant by id: a batch creates thousands at once); the event
-- log by actor.
DROP INDEX idx_tasks_project ON tasks;
--bun:split
CREATE INDEX idx_tasks_project ON tasks (project_id, created_at, id, status, title);
--bun:split
CREATE INDEX idx_tasks_created ON tasks (created_at, id, status, title);
--bun:split
CREATE INDEX idx_tasks_status_created ON tasks (status, created_at, id);
--bun:split
DROP INDEX idx_delayed_tasks_project ON delayed_tasks;
--bun:split
CREATE INDEX idx_delayed_tasks_project ON delayed_tasks (project_id, created_at, id);
--bun:split
-- The delayed list's counts by status of a project read this index only.
CREATE INDEX idx_delayed_tasks_project_status ON delayed_tasks (project_id, status);
--bun:split
CREATE INDEX idx_delayed_tasks_status_created ON delayed_tasks (status, created_at, id);
--bun:split
CREATE INDEX idx_delayed_tasks_topic_created ON delayed_tasks (topic, created_at, id);
--bun:split
CREATE INDEX idx_events_actor_at ON events (actor, at);
