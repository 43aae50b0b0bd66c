-- Projects: tasks, delayed tasks, API tokens and events belong to one (runs
-- through their task or delayed task). Everything from before projects is
-- in project 1, "default", whose pools are every pool ("*") so nothing that
-- ran before stops running. Project names are lower case
-- (checked by the engine), so the unique key is case-insensitive. pools: the label selectors a cluster admin
-- allowed the project, one per line. webhook_url: the project's own
-- failure webhook, besides the cluster's.
CREATE TABLE projects (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name VARCHAR(64) NOT NULL UNIQUE,
    description VARCHAR(1000) NOT NULL DEFAULT '',
    pools VARCHAR(4000) NOT NULL DEFAULT '',
    webhook_url VARCHAR(2048) NOT NULL DEFAULT '',
    created_by VARCHAR(64) NOT NULL DEFAULT '',
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
--bun:split
INSERT INTO projects (id, name, description, pools, created_by, created_at, updated_at)
VALUES (1, 'default', 'Everything created before projects, and what names no project.', '*', 'system', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP);
--bun:split
CREATE TABLE project_members (
    project_id INTEGER NOT NULL,
    username VARCHAR(64) NOT NULL,
    role VARCHAR(16) NOT NULL,
    added_by VARCHAR(64) NOT NULL DEFAULT '',
    added_at TIMESTAMP NOT NULL,
    PRIMARY KEY (project_id, username)
);
--bun:split
CREATE INDEX idx_project_members_user ON project_members (username);
--bun:split
ALTER TABLE tasks ADD COLUMN project_id INTEGER NOT NULL DEFAULT 1;
--bun:split
CREATE INDEX idx_tasks_project ON tasks (project_id, created_at);
--bun:split
ALTER TABLE delayed_tasks ADD COLUMN project_id INTEGER NOT NULL DEFAULT 1;
--bun:split
CREATE INDEX idx_delayed_tasks_project ON delayed_tasks (project_id, created_at);
--bun:split
ALTER TABLE api_tokens ADD COLUMN project_id INTEGER NULL;
--bun:split
ALTER TABLE api_tokens ADD COLUMN role VARCHAR(16) NOT NULL DEFAULT '';
--bun:split
ALTER TABLE events ADD COLUMN project_id INTEGER NULL;
--bun:split
CREATE INDEX idx_events_project ON events (project_id, id);
