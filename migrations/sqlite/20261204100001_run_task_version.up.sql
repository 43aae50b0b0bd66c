-- task_version: the version of the task's definition the run ran (task_versions); 0 when unknown:
-- a delayed task's run, or a run from before versions.
ALTER TABLE runs ADD COLUMN task_version INTEGER NOT NULL DEFAULT 0;
