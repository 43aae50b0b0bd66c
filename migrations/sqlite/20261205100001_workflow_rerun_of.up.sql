-- rerun_of: the workflow run a run runs again (Rerun failed: its steps that did not succeed
-- and what follows them); empty for the others.
ALTER TABLE workflow_runs ADD COLUMN rerun_of VARCHAR(36) NOT NULL DEFAULT '';
