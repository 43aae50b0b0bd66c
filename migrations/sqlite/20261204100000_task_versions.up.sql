-- Task versions: every save of a task is a numbered, immutable copy of its
-- definition (the task's own fields, executors, selector, keepers and
-- children as JSON, secrets included so a restore brings them back; the
-- engine never answers them), with who saved it, when, from where (console,
-- api, apply, bulk, restore) and an optional note. tasks.version is the
-- number of the definition in force; tasks from before versions start at 1
-- with no copy until their first save.
ALTER TABLE tasks ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
--bun:split
CREATE TABLE task_versions (
    task_id VARCHAR(36) NOT NULL,
    version INTEGER NOT NULL,
    title VARCHAR(200) NOT NULL,
    definition TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    created_by VARCHAR(200) NOT NULL DEFAULT '',
    via VARCHAR(16) NOT NULL DEFAULT '',
    note VARCHAR(1000) NOT NULL DEFAULT '',
    PRIMARY KEY (task_id, version)
);
