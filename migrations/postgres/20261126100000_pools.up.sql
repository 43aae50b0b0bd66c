-- Worker pools: labels a worker declares (labels) and labels an admin set
-- on its node (admin_labels, which win), both JSON objects; a task's and a
-- delayed task's label selector (its executors are the named nodes plus the
-- running workers it selects at fire time); pools an admin approved, whose
-- new members join without per-node approval.
ALTER TABLE nodes ADD COLUMN labels VARCHAR(2400) NOT NULL DEFAULT '{}';
--bun:split
ALTER TABLE nodes ADD COLUMN admin_labels VARCHAR(2400) NOT NULL DEFAULT '{}';
--bun:split
ALTER TABLE tasks ADD COLUMN selector VARCHAR(1024) NOT NULL DEFAULT '';
--bun:split
ALTER TABLE delayed_tasks ADD COLUMN selector VARCHAR(1024) NOT NULL DEFAULT '';
--bun:split
CREATE TABLE pool_approvals (
    label VARCHAR(200) NOT NULL PRIMARY KEY,
    created_by VARCHAR(64) NOT NULL DEFAULT '',
    created_at TIMESTAMP(6) NOT NULL
);
--bun:split
ALTER TABLE task_executors ADD COLUMN selected BOOLEAN NOT NULL DEFAULT FALSE;
