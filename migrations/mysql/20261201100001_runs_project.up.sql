-- Runs carry their project (their task's or delayed task's, moved with a
-- task that moves), so a project's run list reads its own index in started_at
-- order instead of looking up every task and delayed task of the project.
-- Runs of projects other than default are the only ones rewritten.
ALTER TABLE runs ADD COLUMN project_id BIGINT NOT NULL DEFAULT 1;
--bun:split
UPDATE runs SET project_id = COALESCE(
    (SELECT t.project_id FROM tasks t WHERE t.id = runs.task_id),
    (SELECT d.project_id FROM delayed_tasks d WHERE d.id = runs.delayed_id),
    1)
WHERE task_id IN (SELECT id FROM tasks WHERE project_id <> 1)
   OR delayed_id IN (SELECT id FROM delayed_tasks WHERE project_id <> 1);
--bun:split
CREATE INDEX idx_runs_project_started ON runs (project_id, started_at, id);
--bun:split
CREATE INDEX idx_runs_project_result_started ON runs (project_id, result, started_at, id);
